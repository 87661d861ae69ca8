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
from osrag.errors import InvalidSetting, OsragError
from osrag.settings import Settings, load_settings


def _settings() -> Settings:
    """Settings from the environment; a bad value is one ``InvalidSetting`` line (exit 2)."""
    return load_settings()


def _echo_json(data: Any) -> None:
    click.echo(json.dumps(data, ensure_ascii=False, indent=2, default=str))


@click.group()
@click.version_option(__version__, prog_name="osrag")
def cli() -> None:
    """osrag: hybrid (BM25 + kNN, RRF) retrieval for Russian RAG on OpenSearch."""


# ---------------------------------------------------------------------------- dev
@cli.group()
def dev() -> None:
    """Local OpenSearch with k-NN and neural-search (no Docker): one node per version, secured, or a cluster."""


_version_opt = click.option(
    "--version",
    "version",
    default=None,
    help="OpenSearch version (default OSRAG_DEV_OPENSEARCH_VERSION); each has its own dirs and ports.",
)
_security_opt = click.option(
    "--security", is_flag=True, help="The secured node: TLS with a local CA, basic auth (port 9202)."
)
_nodes_opt = click.option(
    "--nodes", type=click.IntRange(1, 9), default=1, show_default=True, help="More than 1: a local cluster."
)


def _devnode(version: str | None = None, security: bool = False, nodes: int = 1) -> Any:
    from osrag.devnode import DevCluster, DevNode

    log = lambda m: click.echo(f"osrag dev: {m}", err=True)  # noqa: E731
    if nodes > 1:
        if security:
            raise click.ClickException("--security with --nodes > 1 is not supported")
        return DevCluster(_settings(), log=log, version=version, nodes=nodes)
    return DevNode(_settings(), log=log, version=version, security=security)


def _print_node(st: Any, as_json: bool) -> None:
    if as_json:
        _echo_json(st.as_dict())
        return
    if hasattr(st, "nodes"):
        click.echo(
            f"cluster {st.cluster_name}: {st.health or 'unreachable'}, {st.number_of_nodes} node(s) joined"
        )
        for n in st.nodes:
            state = "up" if n.running else "down"
            click.echo(f"  {n.name}  {n.url}  pid {n.pid or '-'}  {state}  {n.health or ''}".rstrip())
        return
    if not st.running:
        click.echo(f"OpenSearch at {st.url}: not running ({st.detail})")
    else:
        owner = f"pid {st.pid}" if st.started_by_osrag else "not started by osrag"
        click.echo(f"OpenSearch {st.version} at {st.url}: {st.health} ({owner})")
        click.echo(f"plugins: {', '.join(st.plugins) or '(none)'}")
    if st.ca_certs:
        click.echo(f"CA file: {st.ca_certs}")
        click.echo(f"admin user: {st.user} (password in {st.password_file})")


@dev.command("up")
@_version_opt
@_security_opt
@_nodes_opt
@click.option("--json", "as_json", is_flag=True, help="Machine-readable status.")
def dev_up(version: str | None, security: bool, nodes: int, as_json: bool) -> None:
    """Fetch (once), install and start the node(s); reuse what is already running."""
    _print_node(_devnode(version, security, nodes).up(), as_json)


@dev.command("down")
@_version_opt
@_security_opt
@_nodes_opt
def dev_down(version: str | None, security: bool, nodes: int) -> None:
    """Stop exactly the node(s) this launcher started (by their pid files)."""
    stopped = _devnode(version, security, nodes).down()
    if nodes > 1:
        click.echo(
            f"stopped node(s) {', '.join(map(str, stopped))}"
            if stopped
            else "no node of the cluster was running"
        )
    else:
        click.echo("stopped" if stopped else "no node started by osrag is running")


@dev.command("status")
@_version_opt
@_security_opt
@_nodes_opt
@click.option("--json", "as_json", is_flag=True)
def dev_status(version: str | None, security: bool, nodes: int, as_json: bool) -> None:
    """Version, plugins and health (a cluster: every node); exit 1 when nothing runs."""
    st = _devnode(version, security, nodes).status()
    _print_node(st, as_json)
    if not st.running:
        sys.exit(1)


@dev.command("stop-node")
@click.argument("n", type=int)
@_version_opt
@click.option("--nodes", type=click.IntRange(2, 9), default=3, show_default=True)
def dev_stop_node(n: int, version: str | None, nodes: int) -> None:
    """Stop node N (1-based) of the local cluster, for fault tests."""
    stopped = _devnode(version, False, nodes).stop_node(n)
    click.echo(f"node {n} stopped" if stopped else f"node {n} was not running")


@dev.command("start-node")
@click.argument("n", type=int)
@_version_opt
@click.option("--nodes", type=click.IntRange(2, 9), default=3, show_default=True)
@click.option("--json", "as_json", is_flag=True)
def dev_start_node(n: int, version: str | None, nodes: int, as_json: bool) -> None:
    """Start node N of the local cluster again and wait until it has rejoined."""
    _print_node(_devnode(version, False, nodes).start_node(n), as_json)


# ---------------------------------------------------------------------- install
@cli.command()
@click.option("--check", is_flag=True, help="Only report drift between files and cluster; exit 1 if any.")
@click.option(
    "--embedding-model",
    default=None,
    help="Model for a newly created index (default: OSRAG_EMBEDDING_MODEL).",
)
@click.option(
    "--roles",
    is_flag=True,
    help="Also create the alias's least-privilege roles (reader, writer, admin) via the security API.",
)
@click.option(
    "--dls-groups",
    default=None,
    metavar="G1,G2",
    help="With --roles: one document-level-security role per ACL group (public + that group's chunks).",
)
@click.option(
    "--dls-groups-from-index",
    is_flag=True,
    help="With --roles: a DLS role for every ACL group the alias's chunks name.",
)
@click.option(
    "--map-user",
    "map_users",
    multiple=True,
    metavar="ROLE=USER",
    help="With --roles: map USER to ROLE (reader, writer, admin, dls:GROUP or a full role name).",
)
def install(
    check: bool,
    embedding_model: str | None,
    roles: bool,
    dls_groups: str | None,
    dls_groups_from_index: bool,
    map_users: tuple[str, ...],
) -> None:
    """Install index templates and search pipelines; create the first index and alias.

    With --roles (run as a user allowed to use the security REST API) also the roles of
    the alias; see osrag.roles for what each may do.
    """
    from osrag.admin import Admin
    from osrag.roles import parse_groups

    if not roles and (dls_groups or dls_groups_from_index or map_users):
        raise click.UsageError("--dls-groups, --dls-groups-from-index and --map-user go with --roles")
    if roles and check:
        raise click.UsageError("--check only reports drift; it does not take --roles")
    groups = parse_groups(dls_groups)
    s = _settings()
    if embedding_model:
        s = s.model_copy(update={"embedding_model": embedding_model})
    admin = Admin(s)
    if check:
        drifts = admin.check()
        for d in drifts:
            click.echo(str(d))
        if drifts:
            sys.exit(1)
        click.echo(f"in sync: templates, pipelines and alias {s.alias}")
        return
    result = admin.install()
    if result["created_index"]:
        click.echo(f"created index {result['created_index']} behind alias {s.alias}")
    click.echo(f"installed templates and pipelines for {s.alias} -> {result['index']}")
    if roles:
        from osrag.roles import install_roles

        report = install_roles(admin.cluster, s.alias, groups, dls_groups_from_index, map_users)
        for name, outcome in report.roles.items():
            click.echo(f"role {name}: {outcome}")
        for role, user in report.mapped:
            click.echo(f"mapped user {user} to role {role}")
        if dls_groups_from_index and not report.groups:
            click.echo(f"no ACL groups in {s.alias}: no DLS roles")


@cli.command()
@click.argument("text")
@click.option(
    "--analyzer", "analyzers", multiple=True, help="Analyzer(s) to show (default: all osrag analyzers)."
)
@click.option("--json", "as_json", is_flag=True)
def analyze(text: str, analyzers: tuple[str, ...], as_json: bool) -> None:
    """Show the tokens the installed analyzers produce for TEXT."""
    from osrag.admin import Admin
    from osrag.names import ANALYZERS

    result = Admin(_settings()).analyze(text, analyzers or ANALYZERS)
    if as_json:
        _echo_json(result)
        return
    for name, toks in result.items():
        shown = " ".join(
            f"{t['token']}@{t['position']}" + (f"+{t['length']}" if "length" in t else "") for t in toks
        )
        click.echo(f"{name:>10}: {shown}")


# ----------------------------------------------------------------------- ingest
@cli.command()
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

    s = _settings()
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
        _echo_json(report.as_dict())
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


# ----------------------------------------------------------------------- search
def _parse_filter_options(items: tuple[str, ...]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for item in items:
        if "=" not in item:
            raise click.BadParameter(f"{item!r} is not key=value", param_hint="--filter")
        k, v = item.split("=", 1)
        out[k.strip()] = v.strip()
    return out


def _principal_options(f: Any) -> Any:
    """Who is asking (``osrag.access``): a read without one of these is refused (fail closed)."""
    for opt in reversed(
        [
            click.option("--group", "groups", multiple=True, help="An ACL group of the caller (repeatable)."),
            click.option("--tenant", default=None, help="The caller's tenant."),
            click.option("--public-only", is_flag=True, help="Public chunks only (no ACL groups)."),
            click.option(
                "--all-access",
                is_flag=True,
                help="Admin bypass: every chunk whatever its groups or tenant (said in the answer).",
            ),
        ]
    ):
        f = opt(f)
    return f


def _principal(groups: tuple[str, ...], tenant: str | None, public_only: bool, all_access: bool) -> Any:
    from osrag.access import make_principal

    return make_principal(groups, tenant, public_only, all_access)


@cli.command()
@click.argument("question")
@click.option("--budget", type=int, default=None, help="Token budget (default: OSRAG_BUDGET_TOKENS).")
@click.option(
    "--filter", "filters", multiple=True, help="key=value, e.g. category=promo, include_archived=true."
)
@click.option("--depth", type=int, default=None, help="Candidate depth for the hybrid query.")
@click.option("--no-rerank", is_flag=True, help="Skip the cross-encoder.")
@_principal_options
@click.option("--json", "as_json", is_flag=True)
def search(
    question: str,
    budget: int | None,
    filters: tuple[str, ...],
    depth: int | None,
    no_rerank: bool,
    groups: tuple[str, ...],
    tenant: str | None,
    public_only: bool,
    all_access: bool,
    as_json: bool,
) -> None:
    """Answer QUESTION with the minimal material that fits the token budget, from what the caller
    may see: give --group/--tenant, --public-only or --all-access."""
    from osrag.envelope import render_text
    from osrag.search import SearchClient

    env = SearchClient(_settings()).search(
        question,
        budget_tokens=budget,
        filters=_parse_filter_options(filters),
        depth=depth,
        rerank=False if no_rerank else None,
        principal=_principal(groups, tenant, public_only, all_access),
    )
    if as_json:
        click.echo(env.model_dump_json(indent=2))
    else:
        click.echo(render_text(env))


@cli.command()
@click.argument("section_id")
@click.option("--filter", "filters", multiple=True, help="key=value, e.g. include_archived=true.")
@_principal_options
@click.option("--json", "as_json", is_flag=True)
def section(
    section_id: str,
    filters: tuple[str, ...],
    groups: tuple[str, ...],
    tenant: str | None,
    public_only: bool,
    all_access: bool,
    as_json: bool,
) -> None:
    """Print a whole section (a passage's parent_section_id) in document order, filtered like a search."""
    from osrag.search import SearchClient

    parts = SearchClient(_settings()).section(
        section_id,
        principal=_principal(groups, tenant, public_only, all_access),
        filters=_parse_filter_options(filters),
    )
    if as_json:
        _echo_json([p.model_dump() for p in parts])
        return
    if not parts:
        click.echo(f"no chunks of section {section_id} visible to this caller")
        sys.exit(1)
    click.echo(" > ".join(parts[0].heading_path) + f"  ({parts[0].source})\n")
    for p in parts:
        click.echo(p.text.strip() + "\n")


# ------------------------------------------------------------------------ admin
@cli.command()
@click.option(
    "--embedding-model",
    default=None,
    help="Move the corpus to this model (default: OSRAG_EMBEDDING_MODEL, else the index's own).",
)
@click.option("--dry-run", is_flag=True, help="Show the plan and change nothing.")
@click.option(
    "--abort",
    is_flag=True,
    help="Drop the half-built index of a reindex that no longer runs and release its lock.",
)
@click.option("--json", "as_json", is_flag=True)
def reindex(embedding_model: str | None, dry_run: bool, abort: bool, as_json: bool) -> None:
    """Build a new index from the current template, verify it, switch the alias atomically."""
    from osrag.progress import Progress
    from osrag.reindex import Reindexer

    if abort and (dry_run or embedding_model):
        raise click.UsageError("--abort takes no --dry-run or --embedding-model")
    r = Reindexer(_settings())
    if abort:
        released = r.abort()
        if as_json:
            _echo_json({"aborted": released is not None, "lock": released})
        elif released is None:
            click.echo(f"no reindex lock on {r.admin.require_index()}: nothing to abort")
        else:
            click.echo(
                f"aborted the reindex into {released.get('target')}: its index is deleted and the lock "
                "released; ingest works again"
            )
        return
    if dry_run:
        plan = r.plan(embedding_model)
        if as_json:
            _echo_json(plan.as_dict())
            return
        click.echo(f"alias {plan.alias}: {plan.source} ({plan.source_model}, dim {plan.source_dimension})")
        click.echo(
            f"  -> new index from template v{__import__('osrag.templates').templates.TEMPLATE_VERSION} "
            f"with {plan.target_model} (dim {plan.target_dimension})"
        )
        click.echo(f"  method: {plan.method}; {plan.documents} documents, {plan.chunks} chunks to copy")
        if plan.stale_target and plan.lock_state == "live":
            click.echo(f"  a reindex into {plan.stale_target} is still running: a run now would be refused")
        elif plan.stale_target and plan.lock_state == "unknown":
            click.echo(
                f"  a reindex on another host holds the lock (into {plan.stale_target}): a run now would be "
                "refused; `osrag reindex --abort` if it no longer runs"
            )
        elif plan.stale_target:
            click.echo(f"  a killed earlier run left {plan.stale_target}: it will be deleted")
        click.echo(
            "  then: verify counts and sample queries, switch the alias in one request, keep the old index"
        )
        return
    with Progress("chunk", quiet=as_json) as bar:
        plan = r.run(embedding_model, progress=bar.update_to)
    if as_json:
        _echo_json(plan.as_dict())
    else:
        click.echo(
            f"alias {plan.alias} now -> {plan.target} ({plan.method}, {plan.chunks} chunks); "
            f"previous {plan.source} kept for `osrag rollback`"
        )


@cli.command()
def rollback() -> None:
    """Point the alias back to the previous index."""
    from osrag.reindex import Reindexer

    s = _settings()
    current, previous = Reindexer(s).rollback()
    click.echo(f"alias {s.alias}: {current} -> {previous}")


@cli.command()
@click.option(
    "--keep", type=int, default=1, show_default=True, help="Old indices to keep besides the live one."
)
def cleanup(keep: int) -> None:
    """Delete old indices of the alias; never the one it points to."""
    from osrag.reindex import Reindexer

    deleted = Reindexer(_settings()).cleanup(keep)
    click.echo("deleted: " + (", ".join(deleted) if deleted else "nothing"))


@cli.command()
@click.option("--json", "as_json", is_flag=True)
def status(as_json: bool) -> None:
    """Cluster, alias, index, model, counts, freshness and drift."""
    from osrag.status import status as get_status

    st = get_status(_settings())
    if as_json:
        _echo_json(st)
        return
    c = st["cluster"]
    click.echo(
        f"cluster: OpenSearch {c['version']} at {c['url']} · {c['health']} · plugins: {', '.join(c['plugins'])}"
    )
    caps = st["capabilities"]
    click.echo(f"server features in use: {', '.join(caps['in_use']) or 'none'} · fusion: {caps['fusion']}")
    for line in caps["adapted"]:
        click.echo(f"  adapted: {line}")
    lay = st["layout"]
    click.echo(
        f"shards/replicas: settings {lay['settings']['shards']}/{lay['settings']['replicas']}"
        + (f" · index {lay['index']['shards']}/{lay['index']['replicas']}" if lay["index"] else "")
    )
    if not st["index"]:
        click.echo(f"alias {st['alias']}: no index (run `osrag install`)")
    else:
        age = st["last_ingest_age_s"]
        click.echo(f"alias {st['alias']} -> {st['index']}")
        click.echo(f"model: {st['embedding_model']} (dim {st['dimension']}) · fusion: {st['fusion']}")
        click.echo(
            f"documents: {st['documents']} · chunks: {st['chunks']} · last ingest: "
            f"{st['last_ingest_at'] or 'never'}" + (f" ({age / 3600:.1f} h ago)" if age is not None else "")
        )
        if st["previous_index"]:
            click.echo(f"previous index (rollback): {st['previous_index']}")
        if st["reindex_lock"]:
            click.echo(f"reindex lock: {st['reindex_lock']}")
    tv = st["template_version"]
    click.echo(f"template version: files {tv['files']} · cluster {tv['cluster']}")
    click.echo("drift: " + ("none" if not st["drift"] else ""))
    for d in st["drift"]:
        click.echo(f"  {d}")


# ------------------------------------------------------------------------- demo
DEMO_QUESTION = "можно ли вернуть открытую пачку чая, если не понравился вкус?"


@cli.command()
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

    Runs offline: embeddings from navec:news-300d (built from the natasha
    package), no reranker (no trained cross-encoder is reachable offline).
    """
    from importlib import resources
    from pathlib import Path

    from osrag.access import PUBLIC
    from osrag.admin import Admin
    from osrag.devnode import DevNode
    from osrag.envelope import render_text
    from osrag.indexing import Ingester
    from osrag.search import SearchClient
    from osrag.settings import LOCAL_EMBEDDING_MODEL

    s = _settings()
    say = lambda m: click.echo(f"osrag demo: {m}", err=True)  # noqa: E731
    if s.url == DevNode(s).url:
        st = DevNode(s, log=say).up()
        say(f"OpenSearch {st.version} ready at {st.url} ({st.health}; plugins: {', '.join(st.plugins)})")
    s = s.model_copy(update={"embedding_model": s.embedding_model or LOCAL_EMBEDDING_MODEL, "rerank": False})
    admin = Admin(s)
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
@cli.command("eval")
@click.argument("golden", type=click.Path(exists=True, dir_okay=False), default="golden/golden.jsonl")
@click.option(
    "--dataset",
    "datasets",
    multiple=True,
    type=click.Path(exists=True, file_okay=False),
    help="A BEIR-layout directory (corpus.jsonl, queries.jsonl, qrels/*.tsv); repeatable.",
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
    help="Where to write results.json, REPORT.md and the PNGs (default: report/ beside the golden file).",
)
@click.option("--budget", type=int, default=1500, show_default=True, help="Budget of the stage-latency line.")
@click.option("--depth", type=int, default=40, show_default=True)
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
@click.option("--json", "as_json", is_flag=True)
def eval_cmd(
    golden: str,
    datasets: tuple[str, ...],
    corpus: str | None,
    out_dir: str | None,
    budget: int,
    depth: int,
    limit: int | None,
    stat_test: str,
    workers: int,
    as_json: bool,
) -> None:
    """Evaluate the golden set and any BEIR sets side by side: one report, every set."""
    from pathlib import Path

    from osrag import evaluation as ev
    from osrag.progress import Progress

    gp = Path(golden)
    cfg = ev.EvalConfig(
        golden=gp,
        corpus=Path(corpus) if corpus else None,
        datasets=tuple(Path(d) for d in datasets),
        out_dir=Path(out_dir) if out_dir else gp.parent / "report",
        budget=budget,
        depth=depth,
        limit=limit,
        stat_test=stat_test,
        workers=workers,
    )
    # Each log line is a finished step (an index built, a configuration scored, a set done): on a
    # terminal a bar counts them beneath the lines; elsewhere the lines alone, as before.
    with Progress("step", quiet=as_json) as bar:

        def log(message: str) -> None:
            bar.write(f"eval: {message}")
            bar.advance()

        report = ev.run(_settings(), cfg, log=log)
    if as_json:
        _echo_json(report)
    else:
        click.echo(ev.format_table(report))
        click.echo(f"written: {cfg.out_dir}/REPORT.md, results.json, recall_vs_budget_*.png")


def main(argv: list[str] | None = None) -> None:
    try:
        cli.main(args=argv, prog_name="osrag", standalone_mode=False)
    except click.exceptions.Abort:
        click.echo("aborted", err=True)
        sys.exit(130)
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


if __name__ == "__main__":  # pragma: no cover
    main()
