"""``osrag ingest``: files and folders into the index behind the alias."""

from __future__ import annotations

import os
import sys
from pathlib import Path

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
@click.option(
    "--prune",
    is_flag=True,
    help="Afterwards remove the collection's documents whose file is no longer under these folders.",
)
@click.option(
    "--rules",
    "rules_file",
    type=click.Path(dir_okay=False),
    default=None,
    help="Rules file (metadata and exclusion by path, vars); default: osrag.yaml at each root, if any.",
)
@click.option(
    "--var", "variables", multiple=True, metavar="NAME=VALUE", help="A variable's value (repeatable)."
)
@click.option(
    "--base-url",
    default=None,
    help="Each passage gets url = BASE_URL/page/path#anchor (the page path without its suffix).",
)
@click.option(
    "--follow-symlinks", is_flag=True, help="Follow symlinks that leave the ingest root (loops are cut)."
)
@click.option("--strict", is_flag=True, help="Exit 1 when a file is skipped (no text, a FIFO...), too.")
@click.option("--json", "as_json", is_flag=True, help="Print the summary as JSON.")
def ingest(
    paths: tuple[str, ...],
    strategy: str,
    collection: str | None,
    replace: bool,
    prune: bool,
    rules_file: str | None,
    variables: tuple[str, ...],
    base_url: str | None,
    follow_symlinks: bool,
    strict: bool,
    as_json: bool,
) -> None:
    """Chunk, embed and index files or directories (.md, .txt; .pdf, .docx, .html, .pptx are
    converted to Markdown first). A document without a front-matter doc_id gets
    ``{collection}/{path relative to its root}``. Files without text are skipped with their
    reason (exit 0 unless --strict); a file that cannot be read fails alone (exit 1)."""
    from osrag.errors import WritesRefused
    from osrag.ingest.documents import ReadOptions
    from osrag.ingest.indexing import Ingester
    from osrag.ingest.rules import load_rules, parse_var, rules_at
    from osrag.ingest.walking import walk
    from osrag.progress import IngestBar

    missing = [p for p in paths if not os.path.lexists(p)]
    if missing:  # before the settings, the model and the cluster: nothing to ingest is said first
        raise click.UsageError(f"no such file or folder: {', '.join(missing)}")
    s = load_settings()
    options = ReadOptions(
        max_bytes=s.max_file_bytes,
        collection=collection,
        follow_symlinks=follow_symlinks,
        rules=load_rules(Path(rules_file)) if rules_file else None,
        variables=dict(parse_var(v) for v in variables),
        base_url=_base_url(base_url),
    )
    total = sum(
        1
        for _ in walk(
            paths,
            follow_symlinks=follow_symlinks,
            rules_for=lambda root: options.rules if options.rules is not None else rules_at(root),
        )
    )
    try:
        with IngestBar(total, quiet=as_json) as bar:
            ingester = Ingester(s, strategy=strategy, replace=replace)
            if bar.enabled:  # embedding in slices only when someone watches the bar move
                ingester.on_embedded = bar.embedded
            report = ingester.ingest(paths, progress=bar.outcome, prune=prune, options=options)
    except WritesRefused as exc:  # a reindex started meanwhile: say exactly what was not written
        for path in exc.not_written:
            click.echo(f"not written: {path}", err=True)
        raise
    summary = report.summary()
    if as_json:
        echo_json(report.as_dict())
    else:
        for path, reason in report.skips:
            click.echo(f"skipped: {path}: {reason}", err=True)
        for path, reason in report.failed:
            click.echo(f"failed: {path}: {reason}", err=True)
        for line in _reading_lines(summary.excluded, summary.rules, summary.meta_keys, summary.meta_too_long):
            click.echo(line)
        for kind, n in sorted(summary.notes.items(), key=lambda kv: (-kv[1], kv[0])):
            click.echo(f"reader notes: {kind} x{n}", err=True)
            for ex in summary.note_examples:
                if ex["kind"] == kind:
                    click.echo(f"  {ex['path']}: {ex['note']}", err=True)
        click.echo(
            f"documents {report.documents}: indexed {report.indexed}, skipped {report.skipped} (unchanged)"
            f" + {len(report.skips)} (no text or not a file), failed {len(report.failed)} · "
            f"chunks {report.chunks} · tokens {report.tokens} · "
            f"{report.seconds:.1f}s · {report.chunks_per_s:.1f} chunks/s · index {report.index}"
            + (f" · pruned {len(report.pruned)}" if prune else "")
            + (f" · withdrawn {len(report.withdrawn)} (see failed/skipped)" if report.withdrawn else "")
        )
    if report.failed or (strict and report.skips):
        if strict and report.skips and not as_json:
            click.echo(f"--strict: {len(report.skips)} file(s) skipped", err=True)
        sys.exit(1)


def _base_url(raw: str | None) -> str | None:
    """``--base-url`` as given, or a usage error when it is not an http(s) URL."""
    if raw is None:
        return None
    from urllib.parse import urlsplit

    parts = urlsplit(raw.strip())
    if parts.scheme not in ("http", "https") or not parts.netloc:
        raise click.BadParameter(f"{raw!r} is not an http(s):// URL", param_hint="--base-url")
    return raw.strip()


def _reading_lines(
    excluded: dict[str, int], rules: dict[str, int], meta_keys: dict[str, int], too_long: dict[str, int]
) -> list[str]:
    """What reading noticed, once per ingest: exclusions, rules applied, front-matter keys kept."""
    out = []
    if excluded:
        out.append("excluded by rules: " + ", ".join(f"{g} ({n})" for g, n in sorted(excluded.items())))
    if rules:
        out.append("rules applied: " + ", ".join(f"{r} ({n} file(s))" for r, n in rules.items()))
    if meta_keys:
        shown = ", ".join(f"{k} ({n})" for k, n in sorted(meta_keys.items(), key=lambda kv: (-kv[1], kv[0])))
        out.append(f"front-matter keys kept as meta.KEY (not read by osrag): {shown}")
    if too_long:
        out.append(
            "meta values too long to store: " + ", ".join(f"{k} ({n})" for k, n in sorted(too_long.items()))
        )
    return out
