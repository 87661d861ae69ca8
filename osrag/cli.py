"""The ``osrag`` command: a thin shell over the library API.

Every ``OsragError`` becomes one line on stderr and a non-zero exit; tracebacks
are kept for bugs (``OSRAG_DEBUG=1`` shows them for osrag errors too).
"""

from __future__ import annotations

import json
import os
import sys
from typing import Any

import click

from osrag import __version__
from osrag.errors import OsragError
from osrag.settings import Settings


def _settings() -> Settings:
    try:
        return Settings()
    except Exception as exc:  # pydantic ValidationError: name the field at fault
        from pydantic import ValidationError

        if isinstance(exc, ValidationError):
            first = exc.errors()[0]
            field = ".".join(str(p) for p in first.get("loc", ()))
            raise click.ClickException(f"invalid setting OSRAG_{field.upper()}: {first.get('msg')}") from exc
        raise


def _echo_json(data: Any) -> None:
    click.echo(json.dumps(data, ensure_ascii=False, indent=2, default=str))


@click.group()
@click.version_option(__version__, prog_name="osrag")
def cli() -> None:
    """osrag: hybrid (BM25 + kNN, RRF) retrieval for Russian RAG on OpenSearch."""


# ---------------------------------------------------------------------------- dev
@cli.group()
def dev() -> None:
    """A local single-node OpenSearch with k-NN and neural-search (no Docker)."""


def _devnode() -> Any:
    from osrag.devnode import DevNode

    return DevNode(_settings(), log=lambda m: click.echo(f"osrag dev: {m}", err=True))


def _print_node(st: Any, as_json: bool) -> None:
    if as_json:
        _echo_json(st.as_dict())
        return
    if not st.running:
        click.echo(f"OpenSearch at {st.url}: not running")
        return
    owner = f"pid {st.pid}" if st.started_by_osrag else "not started by osrag"
    click.echo(f"OpenSearch {st.version} at {st.url}: {st.health} ({owner})")
    click.echo(f"plugins: {', '.join(st.plugins) or '(none)'}")


@dev.command("up")
@click.option("--json", "as_json", is_flag=True, help="Machine-readable status.")
def dev_up(as_json: bool) -> None:
    """Fetch (once), install and start the node; reuse it if already running."""
    _print_node(_devnode().up(), as_json)


@dev.command("down")
def dev_down() -> None:
    """Stop the node this launcher started (by its pid file)."""
    stopped = _devnode().down()
    click.echo("stopped" if stopped else "no node started by osrag is running")


@dev.command("status")
@click.option("--json", "as_json", is_flag=True)
def dev_status(as_json: bool) -> None:
    """Version, plugins and health of the local node."""
    st = _devnode().status()
    _print_node(st, as_json)
    if not st.running:
        sys.exit(1)


def main(argv: list[str] | None = None) -> None:
    try:
        cli.main(args=argv, prog_name="osrag", standalone_mode=False)
    except click.exceptions.Abort:
        click.echo("aborted", err=True)
        sys.exit(130)
    except click.ClickException as exc:
        exc.show()
        sys.exit(exc.exit_code)
    except OsragError as exc:
        if os.environ.get("OSRAG_DEBUG"):
            raise
        click.echo(f"osrag: error: {exc}", err=True)
        sys.exit(1)
    except KeyboardInterrupt:
        click.echo("interrupted", err=True)
        sys.exit(130)
    sys.exit(0)


if __name__ == "__main__":  # pragma: no cover
    main()
