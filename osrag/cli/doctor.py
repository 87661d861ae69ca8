"""``osrag doctor``: one line per check with a fix hint; exit 1 when any check fails."""

from __future__ import annotations

import sys

import click

from osrag.cli.common import echo_json
from osrag.settings import load_settings


@click.command()
@click.option("--json", "as_json", is_flag=True, help="The checks as JSON (name, status, detail, hint).")
def doctor(as_json: bool) -> None:
    """Check the connection, auth, server, k-NN engines, install, model, analyzer, health and disk."""
    from osrag.admin.doctor import diagnose, exit_code, render

    checks = diagnose(load_settings())
    if as_json:
        echo_json([c.as_dict() for c in checks])
    else:
        render(checks, click.echo)
    sys.exit(exit_code(checks))
