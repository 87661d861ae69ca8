"""``osrag ingest``: files and folders into the index behind the alias."""

from __future__ import annotations

import sys

import click

from osrag.cli.common import echo_json
from osrag.settings import load_settings


@click.command()
@click.argument("paths", nargs=-1, required=True, type=click.Path())
@click.option(
    "--strategy", type=click.Choice(["markdown", "text", "fixed"]), default="markdown", show_default=True
)
@click.option(
    "--collection",
    default=None,
    help="Collection name: doc ids are COLLECTION/relative/path (default: each root folder's own name).",
)
@click.option(
    "--replace", is_flag=True, help="Replace documents whose id is taken by a document from another source."
)
@click.option("--json", "as_json", is_flag=True, help="Print the summary as JSON.")
def ingest(
    paths: tuple[str, ...], strategy: str, collection: str | None, replace: bool, as_json: bool
) -> None:
    """Chunk, embed and index files or directories (.md, .txt; .pdf, .docx, .html, .pptx are
    converted to Markdown first). A document without a front-matter doc_id gets
    ``{collection}/{path relative to its root}``."""
    from osrag.documents import find_files
    from osrag.errors import WritesRefused
    from osrag.indexing import Ingester
    from osrag.progress import Progress

    s = load_settings()
    total = sum(1 for _ in find_files(paths))
    try:
        with Progress("doc", total=total, quiet=as_json) as bar:
            report = Ingester(s, strategy=strategy, replace=replace).ingest(
                paths, progress=lambda path, outcome: bar.advance(outcome), collection=collection
            )
    except WritesRefused as exc:  # a reindex started meanwhile: say exactly what was not written
        for path in exc.not_written:
            click.echo(f"not written: {path}", err=True)
        raise
    if as_json:
        echo_json(report.as_dict())
    else:
        for path, reason in report.failed:
            click.echo(f"failed: {path}: {reason}", err=True)
        click.echo(
            f"documents {report.documents}: indexed {report.indexed}, skipped {report.skipped} (unchanged), "
            f"failed {len(report.failed)} · chunks {report.chunks} · tokens {report.tokens} · "
            f"{report.seconds:.1f}s · {report.chunks_per_s:.1f} chunks/s · index {report.index}"
        )
    if report.failed:
        sys.exit(1)
