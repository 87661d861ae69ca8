"""The admin commands: install (and roles), reindex, rollback, cleanup, status."""

from __future__ import annotations

import sys
from typing import Any

import click

from osrag.cli.common import echo_json
from osrag.settings import load_settings


@click.command()
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
    the alias; see osrag.admin.roles for what each may do.
    """
    from osrag.admin.roles import parse_groups
    from osrag.store.alias import AliasStore

    if not roles and (dls_groups or dls_groups_from_index or map_users):
        raise click.UsageError("--dls-groups, --dls-groups-from-index and --map-user go with --roles")
    if roles and check:
        raise click.UsageError("--check only reports drift; it does not take --roles")
    groups = parse_groups(dls_groups)
    s = load_settings()
    if embedding_model:
        s = s.model_copy(update={"embedding_model": embedding_model})
    admin = AliasStore(s)
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
        click.echo(s.embedding_choice.line("embedding model"))
    click.echo(f"installed templates and pipelines for {s.alias} -> {result['index']}")
    if roles:
        from osrag.admin.roles import install_roles

        report = install_roles(admin.cluster, s.alias, groups, dls_groups_from_index, map_users)
        for name, outcome in report.roles.items():
            click.echo(f"role {name}: {outcome}")
        for role, user in report.mapped:
            click.echo(f"mapped user {user} to role {role}")
        if dls_groups_from_index and not report.groups:
            click.echo(f"no ACL groups in {s.alias}: no DLS roles")


@click.command()
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
    from osrag.admin.reindex import Reindexer
    from osrag.progress import Progress
    from osrag.templates import TEMPLATE_VERSION

    if abort and (dry_run or embedding_model):
        raise click.UsageError("--abort takes no --dry-run or --embedding-model")
    r = Reindexer(load_settings())
    if abort:
        released = r.abort()
        if as_json:
            echo_json({"aborted": released is not None, "lock": released})
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
            echo_json(plan.as_dict())
            return
        click.echo(f"alias {plan.alias}: {plan.source} ({plan.source_model}, dim {plan.source_dimension})")
        click.echo(
            f"  -> new index from template v{TEMPLATE_VERSION} "
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
    bar_format = "{l_bar}{bar}| {n_fmt}/{total_fmt} chunks [{elapsed}{postfix}]"
    with Progress("chunk", quiet=as_json, bar_format=bar_format, postfix="copying") as bar:
        plan = r.run(embedding_model, progress=bar.update_to)
    if as_json:
        echo_json(plan.as_dict())
    else:
        click.echo(
            f"alias {plan.alias} now -> {plan.target} ({plan.method}, {plan.chunks} chunks); "
            f"previous {plan.source} kept for `osrag rollback`"
        )


@click.command()
@click.option(
    "--force",
    is_flag=True,
    help="Roll back even when documents were added, changed or deleted since the switch (they are "
    "then served as in the previous index).",
)
@click.option(
    "--forward",
    is_flag=True,
    help="Allow landing on a NEWER index (undoing an earlier rollback) or skipping over an index.",
)
def rollback(force: bool, forward: bool) -> None:
    """Point the alias back to the previous index; not when readers would then see other documents
    (unless --force). Says which index it lands on (its age and documents) and, unless --forward,
    lands only on the index made just before the live one."""
    from osrag.admin.reindex import Reindexer

    s = load_settings()
    r = Reindexer(s)
    current = r.admin.require_index()
    previous = r.admin.meta(current).previous_index
    rows = {row["index"]: row for row in r.indices()}
    if previous and not forward:
        refusal = rollback_refusal(current, previous, [row["index"] for row in rows.values()])
        if refusal:
            raise click.UsageError(f"{refusal}; add --forward if that is meant")
    current, previous = r.rollback(force=force)
    click.echo(
        f"alias {s.alias}: {current} -> {previous} (now live: {_index_line(rows.get(previous))}; "
        f"was: {_index_line(rows.get(current))})"
    )
    if r.last_rollback.total:
        click.echo(
            f"forced: {r.last_rollback.total} document(s) now as in {previous}: {r.last_rollback.describe()}"
        )


def rollback_refusal(current: str, previous: str, oldest_first: list[str]) -> str | None:
    """Why a rollback from ``current`` to ``previous`` would not land on the index made just
    before ``current`` (None when it would): ``oldest_first`` is the alias's indices by creation.
    After one rollback the index rolled away from is recorded as "previous", so a second one
    would go forward to it; an index made between the two would be skipped over silently."""
    if current not in oldest_first or previous not in oldest_first:
        return None  # not ours to order (made by another version of osrag): the library decides
    at, to = oldest_first.index(current), oldest_first.index(previous)
    if to > at:
        return (
            f"{previous} is newer than the live {current}: the alias was rolled back already, and "
            "this would roll it forward again"
        )
    if to < at - 1:
        skipped = ", ".join(oldest_first[to + 1 : at])
        return f"{previous} is older than {skipped}, made after it; rolling back would skip over it"
    return None


def _index_line(row: dict[str, Any] | None) -> str:
    """An index's age and document count from its ``_cat/indices`` row."""
    if not row:
        return "unknown"
    import time

    created = int(row.get("creation.date") or 0) / 1000
    when = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime(created)) if created else "unknown date"
    return f"created {when}, {row.get('docs.count', '?')} docs"


@click.command()
@click.option(
    "--keep", type=int, default=1, show_default=True, help="Old indices to keep besides the live one."
)
def cleanup(keep: int) -> None:
    """Delete old indices of the alias; never the one it points to."""
    from osrag.admin.reindex import Reindexer

    deleted = Reindexer(load_settings()).cleanup(keep)
    click.echo("deleted: " + (", ".join(deleted) if deleted else "nothing"))


@click.command()
@click.option("--json", "as_json", is_flag=True)
def status(as_json: bool) -> None:
    """Cluster, alias, index, model, counts, freshness and drift."""
    from osrag.admin.status import status as get_status

    st = get_status(load_settings())
    if as_json:
        echo_json(st)
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
        loc = st.get("model_location") or {}
        if loc.get("where", "client") != "client":
            state = loc.get("error") or f"{loc['model_id']}: {loc['state'].lower()}"
            click.echo(f"  runs in the {loc['where']} · {state}")
        click.echo(
            f"documents: {st['documents']} · chunks: {st['chunks']} · last ingest: "
            f"{st['last_ingest_at'] or 'never'}" + (f" ({age / 3600:.1f} h ago)" if age is not None else "")
        )
        if st["previous_index"]:
            click.echo(f"previous index (rollback): {st['previous_index']}")
        if st["reindex_lock"]:
            click.echo(f"reindex lock: {st['reindex_lock']}")
    models = st["models"]
    if not st["index"]:
        click.echo(models["embedding_source"])
    click.echo(models["reranker_source"])
    tv = st["template_version"]
    click.echo(f"template version: files {tv['files']} · cluster {tv['cluster']}")
    click.echo("drift: " + ("none" if not st["drift"] else ""))
    for d in st["drift"]:
        click.echo(f"  {d}")


@click.command()
@click.argument("alias", required=False)
@click.option("--yes", is_flag=True, help="Really remove; without it, only say what would be removed.")
@click.option("--json", "as_json", is_flag=True)
def drop(alias: str | None, yes: bool, as_json: bool) -> None:
    """Remove ALIAS (default OSRAG_ALIAS) and what only it uses: its indices, state, templates, pipelines."""
    from dataclasses import asdict

    from osrag.admin.lifecycle import drop as run_drop
    from osrag.admin.lifecycle import plan_drop

    s = load_settings()
    plan = plan_drop(s, alias)
    if plan.empty:
        if as_json:
            echo_json({**asdict(plan), "removed": False})
        else:
            click.echo(f"alias {plan.alias}: nothing to remove")
        return
    if not yes:
        if as_json:
            echo_json({**asdict(plan), "removed": False})
        else:
            click.echo(f"osrag drop {plan.alias} would remove:", err=True)
            for line in plan.lines():
                click.echo(f"  {line}", err=True)
            for line in plan.kept:
                click.echo(f"  kept: {line}", err=True)
            click.echo("refused: nothing removed; run again with --yes to remove the above", err=True)
        sys.exit(1)
    run_drop(s, plan)
    if as_json:
        echo_json({**asdict(plan), "removed": True})
        return
    for line in plan.lines():
        click.echo(f"removed {line}")
    for line in plan.kept:
        click.echo(f"kept {line}")


@click.command()
@click.option("--doc", "doc_ids", multiple=True, metavar="ID", help="A document id (repeatable).")
@click.option("--collection", default=None, metavar="NAME", help="Every document of this collection.")
@click.option("--json", "as_json", is_flag=True)
def delete(doc_ids: tuple[str, ...], collection: str | None, as_json: bool) -> None:
    """Remove documents from the alias atomically: each is seen whole until it is gone."""
    from dataclasses import asdict

    from osrag.admin.lifecycle import delete_documents

    if bool(doc_ids) == bool(collection):
        raise click.UsageError("give --doc ID (repeatable) or --collection NAME")
    s = load_settings()
    report = delete_documents(s, list(doc_ids) or None, collection)
    if as_json:
        echo_json(asdict(report))
    else:
        click.echo(
            f"alias {report.alias}: removed {len(report.documents)} document(s) "
            f"({report.versions} version(s)) from {report.index}"
            + (
                f"; {report.kept_hidden} version(s) kept hidden (chunks not deleted)"
                if report.kept_hidden
                else ""
            )
        )
    missing = sorted(set(doc_ids) - set(report.documents))
    if missing or (collection and not report.documents):
        what = f"collection {collection}" if collection else ", ".join(missing)
        click.echo(f"not found in alias {report.alias}: {what}", err=True)
        sys.exit(1)
