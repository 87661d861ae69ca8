"""Cluster administration: templates, pipelines, concrete indices behind the alias.

The alias (``settings.alias``) is what readers and writers use; behind it is one
concrete index named ``{alias}-{fingerprint}-{timestamp}``, where the
fingerprint hashes the embedding model, its dimension and the template content.
The index ``_meta.osrag`` records the model (name, dimension, prefixes), the
template version and fingerprint, the time of the last ingest, and a reindex
lock. Everything an admin sees here is installed from the JSON files in
``index_templates/`` and ``pipelines/``.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from osrag import templates
from osrag.connection import Cluster
from osrag.connection import translate_errors as translate
from osrag.embedding import Embedder, embedder_for
from osrag.errors import ConfigError, IndexStateError
from osrag.names import (
    ANALYZERS,
    PIPELINES,
    age_seconds,
    pipeline_name,
    state_index,
    template_name,
    utcnow,
    visibility_filter,
)
from osrag.settings import Settings


@dataclass
class Drift:
    name: str
    kind: str
    differences: list[str] = field(default_factory=list)

    def __str__(self) -> str:
        return f"{self.kind} {self.name}: " + "; ".join(self.differences)


class Admin:
    """Install and inspect what osrag keeps in the cluster for one alias."""

    def __init__(self, settings: Settings, cluster: Cluster | None = None) -> None:
        self.s = settings
        self.cluster = cluster or Cluster(settings)

    # ---- names ----------------------------------------------------------------
    @property
    def alias(self) -> str:
        return self.s.alias

    def pipeline_name(self, variant: str = "rrf") -> str:
        return pipeline_name(self.alias, variant)

    @property
    def template_name(self) -> str:
        return template_name(self.alias)

    # ---- desired state from files ------------------------------------------------
    def _params(self) -> dict[str, Any]:
        w = [float(x) for x in self.s.rrf_weights]
        return {
            "template_version": str(templates.TEMPLATE_VERSION),
            "template_version_int": templates.TEMPLATE_VERSION,
            "pipeline_version": templates.PIPELINE_VERSION,
            "alias": self.alias,
            "stemmer": self.s.stemmer,
            "shards": self.s.shards,
            "replicas": self.s.replicas,
            "ef_search": self.s.hnsw_ef_search,
            "rank_constant": self.s.rrf_rank_constant,
            "weights": w,
            # One alias's pattern "{alias}-*" also matches the indices of an alias that
            # extends it ("x-*" vs "x-light-*"); OpenSearch refuses two overlapping
            # templates of equal priority, and the longer (more specific) alias must win.
            "template_priority": 200 + len(self.alias),
        }

    def desired_components(self) -> dict[str, dict[str, Any]]:
        p = self._params()
        out: dict[str, dict[str, Any]] = {}
        for part in ("analysis",):
            doc = templates.load_template(f"osrag-{part}", p)
            out[f"{self.alias}-{part}"] = {
                "template": doc["template"],
                "version": templates.TEMPLATE_VERSION,
                "_meta": doc["_meta"],
            }
        return out

    def desired_index_template(self) -> dict[str, Any]:
        return templates.load_template("osrag-chunks", self._params())

    def desired_pipelines(self) -> dict[str, dict[str, Any]]:
        p = self._params()
        return {self.pipeline_name(v): templates.load_pipeline(f, p) for v, f in PIPELINES.items()}

    # ---- install ------------------------------------------------------------------
    def install(self, create_index: bool = True) -> dict[str, Any]:
        """Create or update templates and pipelines; create the first index + alias if none."""
        c = self.cluster
        client = c.client
        for name, body in self.desired_components().items():
            c.call(
                f"put component template {name}", client.cluster.put_component_template, name=name, body=body
            )
        c.call(
            f"put index template {self.template_name}",
            client.indices.put_index_template,
            name=self.template_name,
            body=self.desired_index_template(),
        )
        for name, body in self.desired_pipelines().items():
            c.call(
                f"put search pipeline {name}",
                client.transport.perform_request,
                "PUT",
                f"/_search/pipeline/{name}",
                body=body,
            )
        created = None
        if create_index and self.current_index() is None:
            created = self.create_index()
            self.point_alias(created)
        return {"alias": self.alias, "created_index": created, "index": self.current_index()}

    def check(self) -> list[Drift]:
        """What differs between the files and the cluster (empty when in sync)."""
        c = self.cluster
        client = c.client
        drifts: list[Drift] = []
        for name, body in self.desired_components().items():
            got = c.call(
                "get component template",
                client.transport.perform_request,
                "GET",
                f"/_component_template/{name}",
                params={"ignore": 404},
            )
            items = (got or {}).get("component_templates") or []
            if not items:
                drifts.append(Drift(name, "component template", ["missing in cluster"]))
                continue
            diffs = _compare(body, items[0]["component_template"])
            if diffs:
                drifts.append(Drift(name, "component template", diffs))
        got = c.call(
            "get index template",
            client.transport.perform_request,
            "GET",
            f"/_index_template/{self.template_name}",
            params={"ignore": 404},
        )
        items = (got or {}).get("index_templates") or []
        if not items:
            drifts.append(Drift(self.template_name, "index template", ["missing in cluster"]))
        else:
            diffs = _compare(self.desired_index_template(), items[0]["index_template"])
            if diffs:
                drifts.append(Drift(self.template_name, "index template", diffs))
        for name, body in self.desired_pipelines().items():
            got = c.call(
                "get search pipeline",
                client.transport.perform_request,
                "GET",
                f"/_search/pipeline/{name}",
                params={"ignore": 404},
            )
            if not got or name not in got:
                drifts.append(Drift(name, "search pipeline", ["missing in cluster"]))
                continue
            diffs = _compare(body, got[name])
            if diffs:
                drifts.append(Drift(name, "search pipeline", diffs))
        if self.current_index() is None:
            drifts.append(Drift(self.alias, "alias", ["no index behind the alias"]))
        return drifts

    # ---- indices --------------------------------------------------------------------
    def create_index(self, model_name: str | None = None, embedder: Embedder | None = None) -> str:
        """A new concrete index from the current template, pinned to one embedding model."""
        emb = embedder or embedder_for(self.s, model_name)
        dim = emb.dimension
        comps = self.desired_components()
        fp = templates.fingerprint(emb.model_name, dim, templates.TEMPLATE_VERSION, comps)
        now = utcnow()
        name = f"{self.alias}-{fp}-{now.strftime('%Y%m%d%H%M%S%f')[:-3]}"
        knn = templates.load_template(
            "knn-field",
            {
                "dimension": dim,
                "engine": self.s.knn_engine,
                "m": self.s.hnsw_m,
                "ef_construction": self.s.hnsw_ef_construction,
            },
        )
        meta = {
            "osrag": {
                "embedding_model": emb.model_name,
                "dimension": dim,
                "query_prefix": emb.query_prefix,
                "passage_prefix": emb.passage_prefix,
                "template_version": templates.TEMPLATE_VERSION,
                "fingerprint": fp,
                "stemmer": self.s.stemmer,
                "created_at": now.isoformat(),
                "last_ingest_at": None,
            }
        }
        body = {"mappings": {"_meta": meta, "properties": {"embedding": knn["embedding"]}}}
        self.cluster.call(f"create index {name}", self.cluster.client.indices.create, index=name, body=body)
        return name

    def current_index(self) -> str | None:
        """The concrete index the alias points to (None when there is no alias)."""
        client = self.cluster.client
        got = self.cluster.call("get alias", client.indices.get_alias, name=self.alias, ignore=404)
        names = [k for k in (got or {}) if k not in ("error", "status")]
        if len(names) > 1:
            raise IndexStateError(
                f"alias {self.alias} points to {len(names)} indices: {', '.join(sorted(names))}"
            )
        return names[0] if names else None

    def require_index(self) -> str:
        idx = self.current_index()
        if idx is None:
            raise IndexStateError(f"alias {self.alias} does not exist; run `osrag install` first")
        return idx

    def point_alias(self, index: str) -> None:
        """Move the alias to ``index`` in one atomic ``_aliases`` request."""
        actions: list[dict[str, Any]] = []
        old = self.current_index()
        if old and old != index:
            actions.append({"remove": {"index": old, "alias": self.alias}})
        actions.append({"add": {"index": index, "alias": self.alias, "is_write_index": True}})
        self.cluster.call(
            "update aliases", self.cluster.client.indices.update_aliases, body={"actions": actions}
        )

    def meta(self, index: str | None = None) -> dict[str, Any]:
        index = index or self.require_index()
        got = self.cluster.call("get mapping", self.cluster.client.indices.get_mapping, index=index)
        mapping = next(iter(got.values()))["mappings"]
        return dict((mapping.get("_meta") or {}).get("osrag") or {})

    def update_meta(self, index: str, **changes: Any) -> dict[str, Any]:
        """Read-modify-write of ``_meta.osrag`` (the whole ``_meta`` is replaced by the server)."""
        current = self.meta(index)
        current.update(changes)
        self.cluster.call(
            "update index meta",
            self.cluster.client.indices.put_mapping,
            index=index,
            body={"_meta": {"osrag": current}},
        )
        return current

    # ---- analysis -------------------------------------------------------------------------
    def analyze(self, text: str, analyzers: tuple[str, ...] = ANALYZERS) -> dict[str, list[dict[str, Any]]]:
        """Tokens each installed analyzer produces for ``text`` (admin's debugging view)."""
        index = self.require_index()
        out: dict[str, list[dict[str, Any]]] = {}
        for name in analyzers:
            got = self.cluster.call(
                f"analyze with {name}",
                self.cluster.client.indices.analyze,
                index=index,
                body={"analyzer": name, "text": text},
            )
            out[name] = [
                {
                    "token": t["token"],
                    "position": t["position"],
                    "start": t["start_offset"],
                    "end": t["end_offset"],
                    **({"length": t["positionLength"]} if t.get("positionLength", 1) > 1 else {}),
                }
                for t in got.get("tokens", [])
            ]
        return out

    def tokens(self, text: str, analyzer: str = "ru_index") -> list[str]:
        return [t["token"] for t in self.analyze(text, (analyzer,))[analyzer]]


def _flatten(node: Any, prefix: str = "") -> dict[str, str]:
    """Dotted paths to normalised leaf strings (the server returns settings as strings)."""
    out: dict[str, str] = {}
    if isinstance(node, dict):
        for k, v in node.items():
            out.update(_flatten(v, f"{prefix}.{k}" if prefix else str(k)))
    elif isinstance(node, list):
        out[prefix] = json.dumps([_norm_leaf(x) for x in node], ensure_ascii=False, sort_keys=True)
    else:
        out[prefix] = _norm_leaf(node)
    return out


def _norm_leaf(v: Any) -> Any:
    if isinstance(v, bool):
        return str(v).lower()
    if isinstance(v, float) and v.is_integer():
        return str(int(v))
    if isinstance(v, dict):
        return {k: _norm_leaf(x) for k, x in v.items()}
    if isinstance(v, list):
        return [_norm_leaf(x) for x in v]
    return str(v)


def _settings_key(path: str) -> str:
    # "template.settings.index.knn" and "template.settings.knn" mean the same thing.
    return path.replace(".settings.index.", ".settings.")


def _compare(desired: dict[str, Any], actual: dict[str, Any]) -> list[str]:
    want = {_settings_key(k): v for k, v in _flatten(desired).items()}
    have = {_settings_key(k): v for k, v in _flatten(actual).items()}
    diffs = []
    for path, value in sorted(want.items()):
        if path.startswith("_meta.notes"):
            continue
        if path not in have:
            diffs.append(f"{path} missing in cluster")
        elif have[path] != value:
            diffs.append(f"{path}: file {value!r} vs cluster {have[path]!r}")
    return diffs


# ============================================================== reindex, rollback, cleanup, status
@dataclass
class ReindexPlan:
    alias: str
    source: str
    target: str | None
    source_model: str
    target_model: str
    source_dimension: int | None
    target_dimension: int | None
    method: str  # "server-side _reindex" | "re-embed in Python"
    chunks: int
    documents: int
    stale_target: str | None = None
    #: State of a reindex lock found on the source: "live", "dead" or "unknown" (None: no lock).
    lock_state: str | None = None

    def as_dict(self) -> dict[str, Any]:
        return dict(self.__dict__)


def _lock_state(lock: dict[str, Any] | None) -> str:
    """Whether the process holding a reindex lock still runs.

    ``"live"``: it runs on this host. ``"dead"``: it does not (or the lock names no
    process, or it is this very process, whose run failed). ``"unknown"``: it ran on
    another host, which cannot be checked from here.
    """
    import os
    import socket

    if not lock:
        return "dead"
    host, pid = lock.get("host"), lock.get("pid")
    if host is None or not isinstance(pid, int):
        return "dead"
    if host != socket.gethostname():
        return "unknown"
    if pid == os.getpid():
        return "dead"
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return "dead"
    except PermissionError:
        return "live"
    try:  # a killed process whose parent has not reaped it yet still answers kill(pid, 0)
        with open(f"/proc/{pid}/stat", encoding="ascii", errors="replace") as fh:
            if fh.read().rsplit(")", 1)[-1].split()[0] in ("Z", "X"):
                return "dead"
    except OSError:
        pass
    return "live"


def _lock_is_live(lock: dict[str, Any]) -> bool:
    """A lock held by a process that is still running on this host."""
    return _lock_state(lock) == "live"


def _describe_lock(lock: dict[str, Any]) -> str:
    who = f"pid {lock.get('pid')} on {lock.get('host')}" if lock.get("host") else "an unknown process"
    return f"a reindex ({who}) into {lock.get('target')} has held the lock since {lock.get('since')}"


class Reindexer:
    """Zero-downtime moves of the corpus into a new concrete index.

    Readers keep using the alias on the old index until a verified new index is
    complete; the switch is one ``_aliases`` request. The old index stays for
    ``rollback``. While a reindex runs, ingest is refused (a lock in the old
    index's ``_meta``), so no write can land in the old index and be lost.
    """

    def __init__(self, settings: Settings, admin: Admin | None = None) -> None:
        self.s = settings
        self.admin = admin or Admin(settings)
        self.cluster = self.admin.cluster

    def _visible(self) -> list[dict[str, Any]]:
        """The visibility clause; none before the first ingest has created the state index
        (a terms lookup into a missing index fails the whole query, and nothing is hidden yet)."""
        exists = self.cluster.call(
            "check state index", self.cluster.client.indices.exists, index=state_index(self.s.alias)
        )
        return [visibility_filter(self.s.alias)] if exists else []

    def counts(self, index: str) -> tuple[int, int]:
        """(documents, chunks) readers can see in ``index``."""
        resp = self.cluster.call(
            "count",
            self.cluster.client.search,
            index=index,
            body={
                "size": 0,
                "track_total_hits": True,
                "query": {"bool": {"filter": self._visible()}},
                "aggs": {"docs": {"cardinality": {"field": "doc_id", "precision_threshold": 40000}}},
            },
        )
        return int(resp["aggregations"]["docs"]["value"]), int(resp["hits"]["total"]["value"])

    def plan(self, model_name: str | None = None) -> ReindexPlan:
        source = self.admin.require_index()
        meta = self.admin.meta(source)
        target_model = (
            model_name
            or self.s.embedding_model
            or meta.get("embedding_model")
            or self.s.effective_embedding_model
        )
        emb = embedder_for(self.s, target_model)
        same = target_model == meta.get("embedding_model") and emb.dimension == meta.get("dimension")
        docs, chunks = self.counts(source)
        lock = meta.get("reindex_lock") or {}
        return ReindexPlan(
            alias=self.s.alias,
            source=source,
            target=None,
            source_model=str(meta.get("embedding_model")),
            target_model=target_model,
            source_dimension=meta.get("dimension"),
            target_dimension=emb.dimension,
            method="server-side _reindex" if same else "re-embed in Python",
            chunks=chunks,
            documents=docs,
            stale_target=lock.get("target"),
            lock_state=_lock_state(lock) if lock else None,
        )

    def run(
        self, model_name: str | None = None, progress: Callable[[int, int], None] | None = None
    ) -> ReindexPlan:
        import os
        import socket

        plan = self.plan(model_name)
        source = plan.source
        meta = self.admin.meta(source)
        lock = meta.get("reindex_lock")
        if lock:
            state = _lock_state(lock)
            if state == "live":
                raise IndexStateError(f"{_describe_lock(lock)} and is still running")
            if state == "unknown":
                raise IndexStateError(
                    f"{_describe_lock(lock)}; whether it still runs cannot be checked from this host. "
                    "If it does not, `osrag reindex --abort` drops its half-built index and the lock"
                )
            # A killed run left a half-built index: it never had the alias, so drop it.
            self._drop_half_built(source, lock)
        emb = embedder_for(self.s, plan.target_model)
        target = self.admin.create_index(embedder=emb)
        plan.target = target
        self.admin.update_meta(
            source,
            reindex_lock={
                "target": target,
                "since": utcnow().isoformat(),
                "pid": os.getpid(),
                "host": socket.gethostname(),
            },
        )
        try:
            if plan.method == "server-side _reindex":
                self._server_side(source, target)
            else:
                self._reembed(source, target, emb, plan.chunks, progress)
            self.cluster.call("refresh", self.cluster.client.indices.refresh, index=target)
            self.verify(source, target)
            self.admin.update_meta(
                target,
                last_ingest_at=meta.get("last_ingest_at"),
                previous_index=source,
                reindexed_from=source,
            )
            held = self.admin.meta(source).get("reindex_lock") or {}
            if held.get("target") != target:
                raise IndexStateError(
                    f"the reindex lock on {source} was released or taken over while copying into {target} "
                    "(`osrag reindex --abort`?); alias not switched"
                )
        except BaseException:
            # Failed or interrupted (Ctrl-C) before the switch: readers never saw the new index.
            # Drop it and release the lock, so ingest is not refused until someone re-runs reindex.
            self._abandon(source, target)
            raise
        # Atomic switch: one _aliases request removes the old and adds the new.
        self.admin.point_alias(target)
        self.admin.update_meta(source, reindex_lock=None)
        return plan

    def _drop_half_built(self, source: str, lock: dict[str, Any]) -> str | None:
        stale = lock.get("target")
        if not stale or stale == source or stale == self.admin.current_index():
            return None
        self.cluster.call(
            "delete half-built index",
            self.cluster.client.indices.delete,
            index=stale,
            ignore_unavailable=True,
        )
        return str(stale)

    def _abandon(self, source: str, target: str) -> None:
        """Best effort: delete ``target`` and release the lock if it is still ours."""
        try:
            if self.admin.current_index() != target:
                self.cluster.call(
                    "delete abandoned index",
                    self.cluster.client.indices.delete,
                    index=target,
                    ignore_unavailable=True,
                )
            if (self.admin.meta(source).get("reindex_lock") or {}).get("target") == target:
                self.admin.update_meta(source, reindex_lock=None)
        except Exception:
            pass

    def abort(self) -> dict[str, Any] | None:
        """Drop the half-built index of a reindex that no longer runs, and release its lock.

        Returns the lock that was released (None when there was none). A reindex that
        still runs on this host is refused: stop it first.
        """
        source = self.admin.require_index()
        lock = self.admin.meta(source).get("reindex_lock")
        if not lock:
            return None
        if _lock_state(lock) == "live":
            raise IndexStateError(f"{_describe_lock(lock)} and is still running; stop it before aborting")
        self._drop_half_built(source, lock)
        self.admin.update_meta(source, reindex_lock=None)
        return dict(lock)

    def _server_side(self, source: str, target: str) -> None:
        body = {
            "source": {"index": source, "query": {"bool": {"filter": self._visible()}}},
            "dest": {"index": target},
        }
        resp = self.cluster.call(
            "_reindex",
            self.cluster.client.reindex,
            body=body,
            refresh=True,
            wait_for_completion=True,
            request_timeout=3600,
        )
        if resp.get("failures"):
            raise IndexStateError(f"_reindex into {target} failed: {resp['failures'][:3]}")

    def _reembed(
        self, source: str, target: str, emb: Embedder, total: int, progress: Callable[[int, int], None] | None
    ) -> None:
        from opensearchpy.helpers import scan, streaming_bulk

        client = self.cluster.client
        query = {"query": {"bool": {"filter": self._visible()}}, "_source": {"excludes": ["embedding"]}}
        done = 0
        failed: list[dict[str, Any]] = []

        def actions() -> Any:
            nonlocal done
            batch: list[dict[str, Any]] = []
            for hit in scan(client, index=source, query=query, size=200, preserve_order=False):
                batch.append(hit)
                if len(batch) >= 64:
                    yield from self._embed_batch(batch, target, emb)
                    done += len(batch)
                    batch = []
                    if progress:
                        progress(done, total)
            if batch:
                yield from self._embed_batch(batch, target, emb)
                done += len(batch)
                if progress:
                    progress(done, total)

        with translate(self.s.url, "re-embedding bulk"):
            for ok, item in streaming_bulk(
                client,
                actions(),
                chunk_size=self.s.bulk_chunk_size,
                max_retries=5,
                initial_backoff=1,
                raise_on_error=False,
                raise_on_exception=False,
            ):
                if not ok:
                    failed.append(item)
        if failed:
            from osrag.errors import BulkIndexError

            raise BulkIndexError(
                f"re-embedding into {target} left items unwritten; alias not switched", failed
            )

    @staticmethod
    def _embed_batch(batch: list[dict[str, Any]], target: str, emb: Embedder) -> Any:
        vecs = emb.encode_passages([h["_source"].get("text", "") for h in batch])
        for h, v in zip(batch, vecs):
            src = dict(h["_source"])
            src["embedding"] = [float(x) for x in v]
            yield {"_op_type": "index", "_index": target, "_id": h["_id"], "_source": src}

    def verify(self, source: str, target: str) -> None:
        """Counts match and a sample of queries finds results in the new index."""
        s_docs, s_chunks = self.counts(source)
        t_docs, t_chunks = self.counts(target)
        if (s_docs, s_chunks) != (t_docs, t_chunks):
            raise IndexStateError(
                f"verification failed: {target} has {t_docs} documents / {t_chunks} chunks, "
                f"{source} has {s_docs} / {s_chunks}; alias not switched"
            )
        if s_chunks == 0:
            return
        sample = self.cluster.call(
            "sample",
            self.cluster.client.search,
            index=source,
            body={"size": 5, "_source": ["title"], "sort": [{"chunk_id": "asc"}]},
        )
        for hit in sample["hits"]["hits"]:
            title = hit["_source"].get("title") or ""
            if not title.strip():
                continue
            got = self.cluster.call(
                "sample query",
                self.cluster.client.search,
                index=target,
                body={"size": 1, "query": {"match": {"title": title}}},
            )
            if not got["hits"]["hits"]:
                raise IndexStateError(
                    f"verification failed: query {title!r} finds nothing in {target}; alias not switched"
                )

    # ---- rollback and cleanup ---------------------------------------------------------
    def rollback(self) -> tuple[str, str]:
        current = self.admin.require_index()
        meta = self.admin.meta(current)
        lock = meta.get("reindex_lock")
        if lock and _lock_state(lock) != "dead":
            # Its switch would take the alias away from the index rolled back to.
            raise IndexStateError(f"{_describe_lock(lock)}; roll back once it has finished")
        previous = meta.get("previous_index")
        if not previous:
            raise IndexStateError(f"{current} records no previous index to roll back to")
        if not self.cluster.call("check index", self.cluster.client.indices.exists, index=previous):
            raise IndexStateError(f"previous index {previous} no longer exists (cleaned up?)")
        self.admin.point_alias(previous)
        self.admin.update_meta(previous, previous_index=current)
        return current, previous

    def indices(self) -> list[dict[str, Any]]:
        """Concrete indices of this alias, oldest first.

        Only names this alias's ``create_index`` makes (``{alias}-{fingerprint}-{timestamp}``):
        the pattern ``{alias}-*`` also matches the indices of an alias that extends this one
        (``x-light-…`` for ``x``), which must never be listed, let alone cleaned up, here.
        """
        import re

        own = re.compile(rf"^{re.escape(self.s.alias)}-[0-9a-f]{{10}}-[0-9]{{17}}$")
        rows = self.cluster.call(
            "cat indices",
            self.cluster.client.cat.indices,
            index=f"{self.s.alias}-*",
            format="json",
            h="index,creation.date,docs.count",
            params={"expand_wildcards": "all"},
        )
        rows = [r for r in rows if own.match(r["index"])]
        return sorted(rows, key=lambda r: int(r.get("creation.date") or 0))

    def cleanup(self, keep: int = 1) -> list[str]:
        """Delete old indices, keeping the newest ``keep`` besides the live one; never the live one,
        nor the index a reindex is building (a killed run's is dropped by the next run or ``--abort``)."""
        if keep < 0:
            raise ConfigError("--keep must be >= 0")
        current = self.admin.current_index()
        protected = {current} if current else set()
        if current:
            target = (self.admin.meta(current).get("reindex_lock") or {}).get("target")
            if target:
                protected.add(target)
        others = [r["index"] for r in self.indices() if r["index"] not in protected]
        doomed = others[: max(0, len(others) - keep)]
        for name in doomed:
            self.cluster.call("delete index", self.cluster.client.indices.delete, index=name)
        return doomed


def status(settings: Settings) -> dict[str, Any]:
    """Everything an admin asks first, in one dict (the CLI prints it)."""
    admin = Admin(settings)
    cluster = admin.cluster
    info = cluster.info()
    health = cluster.health()
    plugins = sorted({p["component"] for p in cluster.plugins()})
    out: dict[str, Any] = {
        "cluster": {
            "url": settings.url,
            "version": info.get("version", {}).get("number"),
            "health": health.get("status"),
            "plugins": plugins,
        },
        "alias": settings.alias,
        "index": None,
    }
    # The same keys whether or not the alias has an index (None where there is nothing to report).
    out.update(
        dict.fromkeys(
            (
                "embedding_model",
                "dimension",
                "documents",
                "chunks",
                "last_ingest_at",
                "last_ingest_age_s",
                "previous_index",
                "reindex_lock",
                "pipelines",
                "fusion",
            )
        )
    )
    index = admin.current_index()
    drifts = admin.check()
    out["drift"] = [str(d) for d in drifts]
    out["template_version"] = {"files": templates.TEMPLATE_VERSION}
    got = cluster.call(
        "get index template",
        cluster.client.transport.perform_request,
        "GET",
        f"/_index_template/{admin.template_name}",
        params={"ignore": 404},
    )
    items = (got or {}).get("index_templates") or []
    out["template_version"]["cluster"] = items[0]["index_template"].get("version") if items else None
    if index:
        meta = admin.meta(index)
        docs, chunks = Reindexer(settings, admin).counts(index)
        last = meta.get("last_ingest_at")
        age = age_seconds(last)
        lock = meta.get("reindex_lock")
        out.update(
            {
                "index": index,
                "embedding_model": meta.get("embedding_model"),
                "dimension": meta.get("dimension"),
                "documents": docs,
                "chunks": chunks,
                "last_ingest_at": last,
                "last_ingest_age_s": age,
                "previous_index": meta.get("previous_index"),
                "reindex_lock": {**lock, "state": _lock_state(lock)} if lock else None,
                "pipelines": {v: admin.pipeline_name(v) for v in PIPELINES},
                "fusion": settings.fusion,
            }
        )
    return out
