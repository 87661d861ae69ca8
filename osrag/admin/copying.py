"""Copying an alias's visible chunks from one concrete index into another, for a reindex.

Two ways: a server-side ``_reindex`` when the model stays (vectors are kept), or a
scan + re-embed + bulk write in Python when it changes. Both copy only what readers
can see (the hidden list is applied to the source). Ingests that overlapped the
copy are caught up: every document written into the source since the copy began whose
visible versions differ in the target is copied again.

Apart from ``reindex`` (which plans, locks, verifies and switches) because this is the
part that moves data; the job around it decides when and whether to switch.
"""

from __future__ import annotations

import datetime as dt
import time
from collections.abc import Callable, Iterator, Sequence
from typing import Any

from osrag.connection import Cluster
from osrag.embedding import Embedder
from osrag.errors import BulkIndexError, IndexStateError
from osrag.mlcommons.pipelines import EMBED_INPUT_FIELD
from osrag.names import content_hash, state_index, utcnow, visibility_filter
from osrag.records import embedding_text
from osrag.store import bulk, locking
from osrag.store.alias import ensure_ingest_pipeline
from osrag.store.versions import visible_values

#: The two copy methods (``ReindexPlan.method``).
SERVER_SIDE = "server-side _reindex"
#: How often a server-side copy's task is asked how far it has got.
TASK_POLL_S = 0.5
REEMBED = "re-embed in Python"
#: How long a reindex waits, before its switch, for ingest batches still writing into the old index.
WRITERS_WAIT_S = 600.0
#: Catch-up rounds before the switch is refused (new batches see the lock and stop, so one or two do).
CATCH_UP_ROUNDS = 5


class IndexCopier:
    """Moves the visible chunks of ``alias`` between its concrete indices."""

    def __init__(self, cluster: Cluster, alias: str) -> None:
        self.cluster = cluster
        self.alias = alias

    def visible(self) -> list[dict[str, Any]]:
        """The visibility clause; none before the first ingest has created the state index
        (a terms lookup into a missing index fails the whole query, and nothing is hidden yet)."""
        exists = self.cluster.call(
            "check state index", self.cluster.client.indices.exists, index=state_index(self.alias)
        )
        return [visibility_filter(self.alias)] if exists else []

    def counts(self, index: str) -> tuple[int, int]:
        """(documents, chunks) readers can see in ``index``."""
        resp = self.cluster.call(
            "count",
            self.cluster.client.search,
            index=index,
            body={
                "size": 0,
                "track_total_hits": True,
                "query": {"bool": {"filter": self.visible()}},
                "aggs": {"docs": {"cardinality": {"field": "doc_id", "precision_threshold": 40000}}},
            },
        )
        return int(resp["aggregations"]["docs"]["value"]), int(resp["hits"]["total"]["value"])

    def copy(
        self,
        source: str,
        target: str,
        emb: Embedder,
        method: str,
        total: int = 0,
        progress: Callable[[int, int], None] | None = None,
        only: list[dict[str, Any]] | None = None,
    ) -> None:
        """Copy the visible chunks of ``source`` (those matching ``only``, if given) by ``method``."""
        if method == SERVER_SIDE:
            self._server_side(source, target, only, progress)
        else:
            self._reembed(source, target, emb, total, progress, only)

    # ---- catching up with ingests that overlapped the copy --------------------------------
    def catch_up(self, source: str, target: str, emb: Embedder, method: str, since: dt.datetime) -> int:
        """Copy again every document an ingest wrote into ``source`` since ``since`` whose visible
        versions differ in ``target``; returns how many. Waits for batches still writing first
        (they registered before the lock); refuses the switch when writes keep coming."""
        deadline = time.monotonic() + WRITERS_WAIT_S
        mark = since - dt.timedelta(seconds=locking.CLOCK_MARGIN_S)
        copied: set[str] = set()
        for _ in range(CATCH_UP_ROUNDS):
            self._wait_for_writers(source, deadline)
            next_mark = utcnow() - dt.timedelta(seconds=locking.CLOCK_MARGIN_S)
            stale = self._differing(source, target, self._written_since(source, mark))
            if not stale:
                return len(copied)
            self._recopy(source, target, emb, method, stale)
            copied.update(stale)
            mark = next_mark
        raise IndexStateError(
            f"ingests kept writing into {source} during the reindex ({len(copied)} document(s) copied "
            f"again in {CATCH_UP_ROUNDS} rounds); alias not switched"
        )

    def _wait_for_writers(self, source: str, deadline: float) -> None:
        while True:
            live = []
            for w in locking.writers(self.cluster, self.alias):
                if locking.writer_alive(w):
                    live.append(w)
                else:  # killed mid-batch: its chunks stay hidden; it will never leave by itself
                    locking.unregister_writer(self.cluster, self.alias, w.token)
            if not live:
                return
            if time.monotonic() > deadline:
                who = ", ".join(w.who() for w in live[:3])
                raise IndexStateError(
                    f"{len(live)} ingest batch(es) still writing into {source} ({who}); alias not switched"
                )
            time.sleep(0.5)

    def _written_since(self, index: str, mark: dt.datetime) -> list[str]:
        """doc_ids with chunks (visible or not) ingested into ``index`` at or after ``mark``."""
        out: list[str] = []
        after: dict[str, Any] | None = None
        while True:
            comp: dict[str, Any] = {"size": 1000, "sources": [{"d": {"terms": {"field": "doc_id"}}}]}
            if after:
                comp["after"] = after
            resp = self.cluster.call(
                "documents written during the reindex",
                self.cluster.client.search,
                index=index,
                body={
                    "size": 0,
                    "query": {"range": {"ingested_at": {"gte": mark.isoformat()}}},
                    "aggs": {"docs": {"composite": comp}},
                },
                params={"request_cache": "false"},
            )
            agg = resp["aggregations"]["docs"]
            out += [b["key"]["d"] for b in agg["buckets"]]
            after = agg.get("after_key")
            if not agg["buckets"] or not after:
                return out

    def _versions(self, index: str, doc_ids: Sequence[str]) -> dict[str, set[str]]:
        return visible_values(self.cluster, index, doc_ids, "version_key", "compare versions", self.visible())

    def _differing(self, source: str, target: str, doc_ids: Sequence[str]) -> list[str]:
        out: list[str] = []
        for i in range(0, len(doc_ids), 1000):
            part = list(doc_ids[i : i + 1000])
            a, b = self._versions(source, part), self._versions(target, part)
            out += [d for d in part if a.get(d, set()) != b.get(d, set())]
        return out

    def _recopy(self, source: str, target: str, emb: Embedder, method: str, doc_ids: Sequence[str]) -> None:
        """Replace ``doc_ids`` in ``target`` by their visible chunks in ``source``."""
        for i in range(0, len(doc_ids), 1000):
            only = [{"terms": {"doc_id": list(doc_ids[i : i + 1000])}}]
            self.cluster.call(
                "drop stale copies",
                self.cluster.client.delete_by_query,
                index=target,
                body={"query": {"bool": {"filter": only}}},
                refresh=True,
                conflicts="proceed",
            )
            self.copy(source, target, emb, method, only=only)
        self.cluster.call("refresh", self.cluster.client.indices.refresh, index=target)

    # ---- the two methods ------------------------------------------------------------------
    def _server_side(
        self,
        source: str,
        target: str,
        only: list[dict[str, Any]] | None = None,
        progress: Callable[[int, int], None] | None = None,
    ) -> None:
        body = {
            "source": {"index": source, "query": {"bool": {"filter": [*self.visible(), *(only or [])]}}},
            "dest": {"index": target},
        }
        # Started as a task and polled, so the bar moves with what the cluster has written (a copy of
        # millions of chunks takes minutes) and no single request has to outlive the copy.
        started = self.cluster.call(
            "_reindex",
            self.cluster.client.reindex,
            body=body,
            refresh=True,
            wait_for_completion=False,
        )
        resp = self._await_copy(str(started["task"]), target, progress)
        if resp.get("failures"):
            raise IndexStateError(f"_reindex into {target} failed: {resp['failures'][:3]}")

    def _await_copy(
        self, task: str, target: str, progress: Callable[[int, int], None] | None
    ) -> dict[str, Any]:
        """The server-side copy's ``response`` once its task has ended; meanwhile ``progress`` hears
        how many of its chunks are written."""
        while True:
            info = self.cluster.call("_reindex task", self.cluster.client.tasks.get, task_id=task)
            status = (info.get("task") or {}).get("status") or {}
            total = int(status.get("total") or 0)
            if progress is not None and total:
                done = sum(int(status.get(k) or 0) for k in ("created", "updated", "deleted", "noops"))
                progress(min(done, total), total)
            if info.get("completed"):
                if info.get("error"):
                    error = info["error"]
                    why = error.get("reason") or error.get("type") if isinstance(error, dict) else error
                    raise IndexStateError(f"_reindex into {target} failed: {why}")
                return dict(info.get("response") or {})
            time.sleep(TASK_POLL_S)

    def _reembed(
        self,
        source: str,
        target: str,
        emb: Embedder,
        total: int,
        progress: Callable[[int, int], None] | None,
        only: list[dict[str, Any]] | None = None,
    ) -> None:
        from opensearchpy.helpers import scan

        client = self.cluster.client
        query = {
            "query": {"bool": {"filter": [*self.visible(), *(only or [])]}},
            "_source": {"excludes": ["embedding"]},
        }
        done = 0
        # A local model in the cluster embeds the copies itself, through the alias's ingest pipeline.
        model_id = emb.ingest_pipeline_model()
        pipeline = ensure_ingest_pipeline(self.cluster, self.alias, model_id) if model_id else None

        def actions() -> Any:
            nonlocal done
            batch: list[dict[str, Any]] = []
            for hit in scan(client, index=source, query=query, size=200, preserve_order=False):
                batch.append(hit)
                if len(batch) >= 64:
                    yield from reembedded(batch, target, emb, in_cluster=pipeline is not None)
                    done += len(batch)
                    batch = []
                    if progress:
                        progress(done, total)
            if batch:
                yield from reembedded(batch, target, emb, in_cluster=pipeline is not None)
                done += len(batch)
                if progress:
                    progress(done, total)

        failed = bulk.write(self.cluster, actions(), "re-embedding bulk", pipeline=pipeline)
        if failed:
            raise BulkIndexError(
                f"re-embedding into {target} left items unwritten; alias not switched", failed
            )


def reembedded(
    batch: list[dict[str, Any]], target: str, emb: Embedder, *, in_cluster: bool = False
) -> Iterator[dict[str, Any]]:
    """Index actions for ``target``: the hits' sources with new embeddings (and ``content_hash``);
    ``in_cluster``: with the text to embed instead, for the ingest pipeline the bulk names."""
    # What ingest embedded: the chunk's context (osrag.ingest.context) with its text.
    texts = [
        embedding_text(str(h["_source"].get("context") or ""), h["_source"].get("text", "")) for h in batch
    ]
    vecs: Any = [None] * len(batch) if in_cluster else emb.encode_passages(texts)
    for h, v, text in zip(batch, vecs, texts):
        src = dict(h["_source"])
        if in_cluster:
            src.pop("embedding", None)
            src[EMBED_INPUT_FIELD] = text
        else:
            src["embedding"] = [float(x) for x in v]
        src["content_hash"] = content_hash(str(src.get("body") or src.get("text", "")))
        yield {"_op_type": "index", "_index": target, "_id": h["_id"], "_source": src}


__all__ = ["CATCH_UP_ROUNDS", "REEMBED", "SERVER_SIDE", "WRITERS_WAIT_S", "IndexCopier", "reembedded"]
