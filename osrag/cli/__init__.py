"""The ``osrag`` command: a thin shell over the library API.

One module per group of commands: ``dev`` (a local node), ``admin`` (install, reindex,
rollback, cleanup, status), ``ingest``, ``read`` (search, section, analyze) and
``evaluate`` (demo, eval); this module assembles them and runs them.

Every ``OsragError`` becomes one line on stderr and a non-zero exit; tracebacks
are kept for bugs (``OSRAG_DEBUG=1`` shows them for osrag errors too).
"""

from __future__ import annotations

import os
import re
import sys

import click

from osrag import __version__
from osrag.cli import admin, dev, doctor, evaluate, ingest, mcp, model, read, serve, study
from osrag.errors import InvalidSetting, OsragError
from osrag.vocabulary import describe_fusion

_VERBOSE = re.compile(r"^(-v+|--verbose)$")


def _takes_value(command: click.Command | None, token: str) -> bool:
    """Whether ``token`` is an option of ``command`` that takes the next token as its value."""
    if command is None or not token.startswith("-") or "=" in token:
        return False
    for p in command.params:
        if isinstance(p, click.Option) and token in (*p.opts, *p.secondary_opts):
            return not p.is_flag and not p.count
    return False


def hoist_root_options(group: click.Group, args: list[str]) -> list[str]:
    """``-v``/``--verbose`` and ``--log-format`` given after the subcommand (``osrag search -v
    ...``), moved before it so the root group reads them; everything else stays in order. A
    token that is another option's value (``--tenant -v``) or follows ``--`` is left alone."""
    moved: list[str] = []
    kept: list[str] = []
    command: click.Command | None = None
    where: click.Command = group  # the (sub)command whose options are being read
    i = 0
    while i < len(args):
        tok = args[i]
        if tok == "--":
            kept.extend(args[i:])
            break
        if command is not None and _VERBOSE.match(tok):
            moved.append(tok)
        elif command is not None and (tok == "--log-format" or tok.startswith("--log-format=")):
            take = 1 if "=" in tok else 2
            moved.extend(args[i : i + take])
            i += take
            continue
        else:
            kept.append(tok)
            if _takes_value(where, tok) and i + 1 < len(args):
                kept.append(args[i + 1])
                i += 2
                continue
            if not tok.startswith("-") and isinstance(where, click.Group) and tok in where.commands:
                command = where = where.commands[tok]
        i += 1
    return moved + kept if command is not None else list(args)


class _Root(click.Group):
    """The root group; reads its own options wherever they are on the line (``hoist_root_options``)."""

    def parse_args(self, ctx: click.Context, args: list[str]) -> list[str]:
        return super().parse_args(ctx, hoist_root_options(self, args))


@click.group(
    cls=_Root,
    # Built from the shipped defaults (osrag.vocabulary), so it cannot name a fusion that does not ship.
    help=f"osrag: hybrid retrieval (BM25 + kNN, fused by {describe_fusion()} unless OSRAG_FUSION and "
    "OSRAG_FUSION_WEIGHTS say otherwise) for Russian RAG on OpenSearch.",
)
@click.version_option(__version__, prog_name="osrag")
@click.option("-v", "--verbose", count=True, help="Log to stderr: -v INFO (a record per search), -vv DEBUG.")
@click.option(
    "--log-format",
    type=click.Choice(["text", "json"]),
    default="text",
    show_default=True,
    help="Log records as text lines or one JSON object per line.",
)
@click.pass_context
def cli(ctx: click.Context, verbose: int, log_format: str) -> None:
    """The root group: logging, and a Serverless refusal before a command that cannot run there."""
    from osrag.capabilities import SERVERLESS_LACKS, refuse_on_serverless
    from osrag.observability import configure_cli_logging
    from osrag.settings import load_settings

    configure_cli_logging(verbose, log_format)
    command = ctx.invoked_subcommand or ""
    if command in (*SERVERLESS_LACKS, "install", "search", "section", "eval", "study"):
        refuse_on_serverless(load_settings(), command)  # one line naming what Serverless lacks


for _command in (
    dev.dev,
    admin.install,
    admin.reindex,
    admin.rollback,
    admin.cleanup,
    admin.status,
    doctor.doctor,
    admin.drop,
    admin.delete,
    ingest.ingest,
    read.analyze,
    read.search,
    read.section,
    evaluate.demo,
    evaluate.eval_cmd,
    study.study,
    serve.serve,
    mcp.mcp,
    model.model,
):
    cli.add_command(_command)


def main(argv: list[str] | None = None) -> None:
    try:
        cli.main(args=argv, prog_name="osrag", standalone_mode=False)
    except click.exceptions.Abort:
        click.echo("aborted", err=True)
        sys.exit(130)
    except click.UsageError as exc:  # a bad flag or argument: one line naming it, exit 2
        hint = f" (see '{exc.ctx.command_path} --help')" if exc.ctx is not None else ""
        click.echo(f"osrag: error: {exc.format_message()}{hint}", err=True)
        sys.exit(exc.exit_code)
    except click.ClickException as exc:
        exc.show()
        sys.exit(exc.exit_code)
    except InvalidSetting as exc:  # a bad OSRAG_* value: a usage error, like click's exit 2
        if os.environ.get("OSRAG_DEBUG"):
            raise
        click.echo(f"osrag: error: {exc}", err=True)
        sys.exit(2)
    except OsragError as exc:
        if os.environ.get("OSRAG_DEBUG"):
            raise
        click.echo(f"osrag: error: {exc}", err=True)
        sys.exit(1)
    except KeyboardInterrupt:
        click.echo("interrupted", err=True)
        sys.exit(130)
    sys.exit(0)


__all__ = ["cli", "main"]
