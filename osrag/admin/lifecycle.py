"""Lifecycle: removing documents from an alias, and removing an alias with all it owns.

* ``delete_documents`` (``osrag delete --doc ID | --collection NAME``): every stored version of
  the documents (the visible one and any hidden leftovers) is hidden in one update of the
  alias's hidden list, then deleted (``VersionStore.remove``): a reader sees each document
  whole until that update and not at all after it -- never part of it. Up to
  ``versions.MAX_KEYS_PER_FLIP`` versions disappear in one step; a larger collection in steps
  of that size, each document still whole or gone.
* ``plan_drop`` / ``drop`` (``osrag drop [ALIAS] --yes``): the alias's indices (the live one and
  those kept for rollback, by the names osrag gives them), its state index, its index and
  component templates and its search pipelines -- each only when nothing else uses it (an index
  template of another alias composed of this alias's component keeps the component; an index
  whose default search pipeline is one of these keeps the pipeline). Roles made by
  ``install --roles`` are left to the security admin.

Both are writers of the alias: they take its write lock (``osrag.store.locking.WriteLock``) and
register like an ingest batch, so they never interleave with an ingest or a reindex unseen.
"""

from __future__ import annotations

import logging
import re
from dataclasses import dataclass, field
from typing import Any

from osrag.connection import Cluster
from osrag.errors import ClusterError, IndexStateError
from osrag.mlcommons.pipelines import embed_pipeline_name, is_osrag_pipeline
from osrag.names import index_regex, pipeline_name, state_index, template_name
from osrag.settings import Settings
from osrag.store.alias import AliasStore
from osrag.store.locking import (
    WriteLock,
    describe,
    lock_state,
    read_lock,
)
from osrag.store.versions import VersionStore, guarded_remove
from osrag.vocabulary import PIPELINES

log = logging.getLogger(__name__)

#: Version keys read per page when collecting a collection's versions.
PAGE = 5000


# ---------------------------------------------------------------- removing documents
@dataclass(frozen=True)
class DeleteReport:
    alias: str
    index: str
    documents: list[str]  # doc_ids removed
    versions: int  # version keys removed (visible and hidden leftovers)
    kept_hidden: int = 0  # versions whose chunks survived the delete: hidden, never shown again


def delete_documents(
    settings: Settings,
    doc_ids: list[str] | None = None,
    collection: str | None = None,
    admin: AliasStore | None = None,
) -> DeleteReport:
    """Remove documents by id or a whole collection from the index behind the alias (module doc)."""
    if bool(doc_ids) == bool(collection):
        raise IndexStateError("name documents (--doc) or one collection (--collection), not both or neither")
    admin = admin or AliasStore(settings)
    cluster = admin.cluster
    index = admin.require_index()
    store = VersionStore(cluster, settings.alias)
    what = (
        f"osrag delete {'--collection ' + collection if collection else '--doc ' + ', '.join(doc_ids or [])}"
    )
    if collection:
        # The collection's own chunks, and those of an older ingest (no collection field) whose
        # default doc_id starts with it.
        query: dict[str, Any] = {
            "bool": {
                "should": [
                    {"term": {"collection": collection}},
                    {
                        "bool": {
                            "filter": [{"prefix": {"doc_id": f"{collection}/"}}],
                            "must_not": [{"exists": {"field": "collection"}}],
                        }
                    },
                ],
                "minimum_should_match": 1,
            }
        }
    else:
        query = {"terms": {"doc_id": list(doc_ids or [])}}
    with WriteLock(cluster, settings.alias, what[:300], settings.write_lock_wait_s) as lock:
        store.lock = lock
        try:
            found = _versions(cluster, index, query)
            keys = sorted({k for ks in found.values() for k in ks})
            left = guarded_remove(cluster, store, index, keys, what) if keys else []
        finally:
            store.lock = None
    return DeleteReport(settings.alias, index, sorted(found), len(keys), len(left))


def _versions(cluster: Cluster, index: str, query: dict[str, Any]) -> dict[str, set[str]]:
    """doc_id -> every version key stored for it (visible or hidden), by a paged composite aggregation."""
    out: dict[str, set[str]] = {}
    after: dict[str, Any] | None = None
    while True:
        comp: dict[str, Any] = {
            "size": PAGE,
            "sources": [{"d": {"terms": {"field": "doc_id"}}}, {"v": {"terms": {"field": "version_key"}}}],
        }
        if after:
            comp["after"] = after
        resp = cluster.call(
            "find documents to delete",
            cluster.client.search,
            index=index,
            body={"size": 0, "query": query, "aggs": {"k": {"composite": comp}}},
            params={"request_cache": "false"},
        )
        agg = resp["aggregations"]["k"]
        for b in agg["buckets"]:
            out.setdefault(b["key"]["d"], set()).add(b["key"]["v"])
        after = agg.get("after_key")
        if not after or len(agg["buckets"]) < PAGE:
            return out


# ---------------------------------------------------------------- dropping an alias
@dataclass
class DropPlan:
    """What ``osrag drop`` removes for one alias (and what it keeps, with why)."""

    alias: str
    indices: list[str] = field(default_factory=list)
    state_index: str | None = None
    index_templates: list[str] = field(default_factory=list)
    component_templates: list[str] = field(default_factory=list)
    pipelines: list[str] = field(default_factory=list)
    #: The ingest pipelines through which a cluster model embedded (``osrag.mlcommons.pipelines``).
    ingest_pipelines: list[str] = field(default_factory=list)
    kept: list[str] = field(default_factory=list)

    @property
    def empty(self) -> bool:
        return not (
            self.indices
            or self.state_index
            or self.index_templates
            or self.component_templates
            or self.pipelines
            or self.ingest_pipelines
        )

    def lines(self) -> list[str]:
        """One line per thing, as the CLI shows it."""
        out = [f"index {i}" for i in self.indices]
        out += [f"state index {self.state_index}"] if self.state_index else []
        out += [f"index template {t}" for t in self.index_templates]
        out += [f"component template {t}" for t in self.component_templates]
        out += [f"search pipeline {p}" for p in self.pipelines]
        out += [f"ingest pipeline {p}" for p in self.ingest_pipelines]
        return out


def plan_drop(settings: Settings, alias: str | None = None, admin: AliasStore | None = None) -> DropPlan:
    """What belongs to ``alias`` (default: the settings' alias) in the cluster; nothing is changed."""
    alias = alias or settings.alias
    s = settings if alias == settings.alias else settings.model_copy(update={"alias": alias})
    admin = admin or AliasStore(s)
    c = admin.cluster
    client = c.client
    plan = DropPlan(alias)
    own = re.compile(index_regex(alias))
    got = c.call(
        "list the alias's indices",
        client.indices.get,
        index=f"{alias}-*",
        expand_wildcards="all",
        ignore_unavailable=True,
        allow_no_indices=True,
    )
    names = {n for n in got if own.fullmatch(n)}
    current = admin.current_index()
    if current:
        names.add(current)
    plan.indices = sorted(names)
    if c.call("check state index", client.indices.exists, index=state_index(alias)):
        plan.state_index = state_index(alias)

    ours_t = template_name(alias)
    templates = c.call(
        "list index templates",
        client.transport.perform_request,
        "GET",
        "/_index_template",
        params={"ignore": 404},
    )
    others_compose: dict[str, str] = {}
    for t in (templates or {}).get("index_templates", []):
        if t["name"] == ours_t:
            plan.index_templates.append(ours_t)
            continue
        for comp in t["index_template"].get("composed_of", []):
            others_compose.setdefault(comp, t["name"])
    comp_name = f"{alias}-analysis"
    comps = c.call(
        "get component template",
        client.transport.perform_request,
        "GET",
        f"/_component_template/{comp_name}",
        params={"ignore": 404},
    )
    if comps and comps.get("component_templates"):
        if comp_name in others_compose:
            plan.kept.append(
                f"component template {comp_name}: used by index template {others_compose[comp_name]}"
            )
        else:
            plan.component_templates.append(comp_name)

    in_use = _default_pipelines(c, set(plan.indices))
    for variant in PIPELINES:
        name = pipeline_name(alias, variant)
        got_p = c.call(
            "get search pipeline",
            client.transport.perform_request,
            "GET",
            f"/_search/pipeline/{name}",
            params={"ignore": 404},
        )
        if not got_p or name not in got_p:
            continue
        if name in in_use:
            plan.kept.append(f"search pipeline {name}: default search pipeline of index {in_use[name]}")
        else:
            plan.pipelines.append(name)
    plan.ingest_pipelines = _embed_pipelines(c, alias)
    return plan


def _embed_pipelines(cluster: Cluster, alias: str) -> list[str]:
    """The alias's ingest pipelines (``{alias}-embed-{model id}``, osrag's by their description);
    not those of an alias whose name extends this one's (``{alias}-embed-x-embed-{id}``)."""
    prefix = embed_pipeline_name(alias, "")
    got = cluster.call(
        "list ingest pipelines",
        cluster.client.transport.perform_request,
        "GET",
        f"/_ingest/pipeline/{prefix}*",
        params={"ignore": 404},
    )
    return sorted(
        name
        for name, body in (got or {}).items()
        if name.startswith(prefix)
        and "-embed-" not in name[len(prefix) :]
        and is_osrag_pipeline(body if isinstance(body, dict) else None)
    )


def _default_pipelines(cluster: Cluster, dropping: set[str]) -> dict[str, str]:
    """pipeline -> an index (not being dropped) whose default search pipeline it is."""
    try:
        got = cluster.call(
            "read default search pipelines",
            cluster.client.indices.get_settings,
            index="_all",
            name="index.search.default_pipeline",
            expand_wildcards="all",
        )
    except ClusterError as exc:  # a role without that right: osrag sends its pipelines per request
        log.info("could not read default search pipelines (%s); osrag's are named for their alias", exc)
        return {}
    out: dict[str, str] = {}
    for index, body in (got or {}).items():
        name = (((body.get("settings") or {}).get("index") or {}).get("search") or {}).get("default_pipeline")
        if name and index not in dropping:
            out.setdefault(name, index)
    return out


def drop(settings: Settings, plan: DropPlan, admin: AliasStore | None = None) -> DropPlan:
    """Remove what ``plan`` lists, after taking the alias's write lock (an ingest, delete or
    prune running is waited for, bounded) and refusing while a reindex runs. Returns the plan."""
    s = settings if plan.alias == settings.alias else settings.model_copy(update={"alias": plan.alias})
    admin = admin or AliasStore(s)
    c = admin.cluster
    client = c.client
    lock = read_lock(c, plan.alias) if plan.state_index else None
    if lock and lock_state(lock) != "dead":
        raise IndexStateError(f"{describe(lock)}: drop refused; wait for it or `osrag reindex --abort`")
    writer = (
        WriteLock(c, plan.alias, f"osrag drop {plan.alias}", s.write_lock_wait_s)
        if plan.state_index
        else None
    )
    if writer is not None:
        writer.acquire()
    try:
        if plan.indices:
            c.call(
                "delete indices", client.indices.delete, index=",".join(plan.indices), ignore_unavailable=True
            )
        if plan.state_index:
            if writer is not None:
                writer.abandon()  # the lock goes with the index; a release would re-create it
            c.call(
                "delete state index", client.indices.delete, index=plan.state_index, ignore_unavailable=True
            )
        # The index template goes before the component template it is composed of.
        for t in plan.index_templates:
            c.call(f"delete index template {t}", client.indices.delete_index_template, name=t, ignore=404)
        for t in plan.component_templates:
            c.call(
                f"delete component template {t}", client.cluster.delete_component_template, name=t, ignore=404
            )
        for p in plan.ingest_pipelines:
            c.call(f"delete ingest pipeline {p}", client.ingest.delete_pipeline, id=p, ignore=404)
        for p in plan.pipelines:
            c.call(
                f"delete search pipeline {p}",
                client.transport.perform_request,
                "DELETE",
                f"/_search/pipeline/{p}",
                params={"ignore": 404},
            )
    finally:
        if writer is not None:
            writer.release()  # nothing to do once abandoned (the state index is gone)
    return plan


__all__ = ["DeleteReport", "DropPlan", "delete_documents", "drop", "plan_drop"]
