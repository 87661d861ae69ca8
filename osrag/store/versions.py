"""The versioned chunk store behind an alias: which versions readers see, and writing new ones.

How a re-ingested document replaces its chunks without a reader ever seeing a
mix of old and new chunks, or the document missing in between:

* Every chunk carries ``version_key = "{doc_id}@{content hash}"``; its ``_id``
  includes that key, so a new version never overwrites an old chunk in place.
* A tiny state index ``{alias}.state`` holds one document, ``hidden``, listing
  version keys readers must not see. Every osrag query filters them out on both
  heads (``visibility_filter``) with a terms lookup, which reads that document
  in real time.
* Re-ingesting doc D from v1 to v2: (1) add ``D@v2`` to ``hidden``; (2) bulk-write
  the v2 chunks and refresh — readers still see only v1; (3) in ONE scripted
  update of ``hidden``, remove ``D@v2`` and add ``D@v1`` — readers switch from all
  of v1 to all of v2 at once; (4) delete the v1 chunks and refresh; (5) drop
  ``D@v1`` from ``hidden`` once no v1 chunk is left stored (a key whose delete
  left chunks behind stays hidden). A document whose chunks failed to write is
  never flipped: its partial v2 chunks are deleted and v1 stays visible.
* A crash between steps leaves extra hidden chunks, never a visible mix; the next
  ingest of the document redoes the steps (the ``_id``s are deterministic).
* While a writer holds the alias's write lock (``osrag.store.locking.WriteLock``), every update
  of ``hidden`` is fenced by it: a writer that lost the lock changes nothing.
* An ``_id`` over 512 bytes is a hash of the full id (``bounded_id``), kept in ``full_id``.

Apart from ingest (which reads, chunks and embeds documents, builds each chunk's stored
``_source`` -- ``osrag.ingest.prepared`` -- and hands them over in batches) because this is the
one place that knows the order of writes that keeps readers consistent; a version to write is
anything with a key, a document id and its chunks' bulk actions (``VersionToWrite``).
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from osrag.chunking import Document
from osrag.connection import Cluster
from osrag.errors import IndexStateError
from osrag.names import HIDDEN_ID, state_index, utcnow, visibility_filter
from osrag.records import embedding_text
from osrag.store import bulk
from osrag.store.locking import (
    FENCE,
    FENCE_END,
    WriteLock,
    WriteLost,
    describe,
    describe_writer,
    holder,
    read_lock,
    read_writer,
    register_writer,
    unregister_writer,
)

#: OpenSearch refuses a document ``_id`` over 512 bytes (and with it the whole bulk request).
MAX_ID_BYTES = 512
#: Hidden keys changed by one update at most (a terms lookup reads at most 65,536 of them).
MAX_KEYS_PER_FLIP = 5000


class VersionToWrite(Protocol):
    """One version of a document as the store writes it (ingest's ``PreparedDoc``)."""

    version_key: str

    @property
    def doc_id(self) -> str: ...

    def actions(self, index: str, now: str) -> Iterator[dict[str, Any]]:
        """The bulk actions that write its chunks."""
        ...


@dataclass(frozen=True)
class BatchOutcome:
    """What a batch write left unwritten: documents by version key, and the bulk items themselves."""

    failed: dict[str, str] = field(default_factory=dict)  # version_key -> reason
    failed_items: list[dict[str, Any]] = field(default_factory=list)


class VersionStore:
    """The chunks of one alias as versions: reads of what readers see, and hidden writes + one flip."""

    def __init__(self, cluster: Cluster, alias: str) -> None:
        self.cluster = cluster
        self.alias = alias
        #: The alias's write lock while a writer holds it: every update of the hidden list is
        #: then fenced by it (``osrag.store.locking``), so a writer that lost it changes nothing.
        self.lock: WriteLock | None = None

    # -- reads
    def stored_sources(self, doc_ids: Sequence[str]) -> dict[str, set[str]]:
        """doc_id → the sources of its visible chunks."""
        return self._visible_values(doc_ids, "source", "look up document sources")

    def visible_versions(self, doc_ids: Sequence[str]) -> dict[str, set[str]]:
        """doc_id → version keys readers currently see."""
        return self._visible_values(doc_ids, "version_key", "look up current versions")

    def taken_by_others(self, docs: Sequence[Document]) -> dict[str, str]:
        """doc_id → a source other than the document's own whose visible chunks hold that id:
        two files with one id would otherwise replace each other silently."""
        stored = self.stored_sources([d.doc_id for d in docs])
        out: dict[str, str] = {}
        for d in docs:
            others = sorted(s for s in stored.get(d.doc_id, set()) if not _same_source(s, d.source))
            if others:
                out[d.doc_id] = others[0]
        return out

    def _visible_values(self, doc_ids: Sequence[str], field: str, what: str) -> dict[str, set[str]]:
        """Over the chunks readers of the alias see (the hidden list applied)."""
        return visible_values(self.cluster, self.alias, doc_ids, field, what, [visibility_filter(self.alias)])

    def stored_versions(self, index: str, keys: Sequence[str]) -> set[str]:
        """Which of ``keys`` still have chunks stored (hidden or not)."""
        resp = self.cluster.call(
            "check deleted chunks",
            self.cluster.client.search,
            index=index,
            body={
                "size": 0,
                "query": {"terms": {"version_key": list(keys)}},
                "aggs": {"k": {"terms": {"field": "version_key", "size": len(keys)}}},
            },
            params={"request_cache": "false"},
        )
        return {b["key"] for b in resp["aggregations"]["k"]["buckets"]}

    # -- writes
    def hide(self, add: Sequence[str] = (), remove: Sequence[str] = ()) -> None:
        """One atomic scripted update of the hidden list (fenced by the write lock when held)."""
        change = (
            "if (ctx._source.keys == null) { ctx._source.keys = []; } "
            "ctx._source.keys.removeAll(params.remove); "
            "for (k in params.add) { if (!ctx._source.keys.contains(k)) { ctx._source.keys.add(k); } }"
        )
        params: dict[str, Any] = {"add": list(add), "remove": list(remove)}
        body: dict[str, Any]
        if self.lock is None:
            body = {
                "script": {"lang": "painless", "source": change, "params": params},
                "upsert": {"keys": list(add)},
            }
        else:
            params.update(self.lock.fence_params())
            body = {"script": {"lang": "painless", "source": FENCE + change + FENCE_END, "params": params}}
        got = self.cluster.call(
            "update hidden versions",
            self.cluster.client.update,
            index=state_index(self.alias),
            id=HIDDEN_ID,
            body=body,
            refresh=True,
            retry_on_conflict=10,
        )
        if self.lock is not None and got.get("result") == "noop":
            other = read_writer(self.cluster, self.alias)
            raise WriteLost(
                f"the write lock of alias {self.alias} was lost"
                + (f" to {describe_writer(other)}" if other else "")
                + "; this writer changed nothing more (run it again)"
            )

    def write(self, index: str, todo: Sequence[VersionToWrite], current: dict[str, set[str]]) -> BatchOutcome:
        """Write embedded documents hidden, refresh, then show them in one flip (module doc).

        ``current``: the visible versions read before (``visible_versions``), hidden by the flip."""
        outcome = self.write_hidden(index, todo)
        self.flip(index, todo, current, outcome)
        return outcome

    def write_hidden(
        self, index: str, todo: Sequence[VersionToWrite], pipeline: str | None = None
    ) -> BatchOutcome:
        """The write stage: hide the new version keys, stream their chunks (through the ingest
        ``pipeline`` when the cluster embeds them), refresh. Readers see nothing of it until ``flip``."""
        self.hide(add=[p.version_key for p in todo])
        outcome = self._bulk(index, todo, utcnow().isoformat(), pipeline)
        self.cluster.call("refresh", self.cluster.client.indices.refresh, index=index)
        return outcome

    def flip(
        self, index: str, todo: Sequence[VersionToWrite], current: dict[str, set[str]], outcome: BatchOutcome
    ) -> None:
        """The flip stage: one update shows every fully written version and hides the ones it
        replaces; then the replaced and the failed versions' chunks are deleted."""
        ok = [p for p in todo if p.version_key not in outcome.failed]
        old_keys = sorted({k for p in ok for k in current.get(p.doc_id, set()) if k != p.version_key})
        # The flip: one update shows every new version and hides every old one.
        self.hide(add=old_keys, remove=[p.version_key for p in ok])
        doomed = old_keys + sorted(outcome.failed)
        if doomed:
            self.delete_versions(index, doomed)
            # Un-hide only keys with no chunk left: a key whose chunks survived the delete
            # (a shard failure, a conflict) must stay hidden, or its chunks would reappear
            # next to the new version. It is garbage then, but invisible garbage.
            left = self.stored_versions(index, doomed)
            gone = [k for k in doomed if k not in left]
            if gone:
                self.hide(remove=gone)

    def delete_versions(self, index: str, keys: Sequence[str]) -> None:
        self.cluster.call(
            "delete replaced chunks",
            self.cluster.client.delete_by_query,
            index=index,
            body={"query": {"terms": {"version_key": list(keys)}}},
            refresh=True,
            conflicts="proceed",
        )

    def remove(self, index: str, keys: Sequence[str]) -> list[str]:
        """Take whole versions out of sight, then out of the index: each group of up to
        ``MAX_KEYS_PER_FLIP`` keys disappears in one update of the hidden list (a reader sees a
        document whole or not at all), then its chunks are deleted. The keys still stored after
        the delete stay hidden; returned."""
        left_all: list[str] = []
        keys = sorted(set(keys))
        for i in range(0, len(keys), MAX_KEYS_PER_FLIP):
            part = keys[i : i + MAX_KEYS_PER_FLIP]
            self.hide(add=part)
            self.delete_versions(index, part)
            left = self.stored_versions(index, part)
            gone = [k for k in part if k not in left]
            if gone:
                self.hide(remove=gone)
            left_all.extend(sorted(left))
        return left_all

    def stored_vectors(self, index: str, keys: Sequence[str]) -> dict[str, Any]:
        """Embedded text (``osrag.records.embedding_text``: context and chunk text) -> its stored
        vector, over the chunks of versions ``keys``: a changed document re-embeds only chunks whose
        embedded text is new (the model is the index's own)."""
        if not keys:
            return {}
        resp = self.cluster.call(
            "read stored vectors",
            self.cluster.client.search,
            index=index,
            body={
                "size": 10_000,
                "_source": ["text", "context", "embedding"],
                "query": {"bool": {"filter": [{"terms": {"version_key": list(keys)}}]}},
            },
            params={"request_cache": "false"},
        )
        out: dict[str, Any] = {}
        for h in resp["hits"]["hits"]:
            src = h.get("_source") or {}
            if isinstance(src.get("text"), str) and src.get("embedding"):
                out[embedding_text(str(src.get("context") or ""), src["text"])] = src["embedding"]
        return out

    def _bulk(
        self, index: str, todo: Sequence[VersionToWrite], now: str, pipeline: str | None = None
    ) -> BatchOutcome:
        """Stream the chunks; the documents with failed items, by version key, and those items."""
        key_of: dict[str, str] = {}  # _id -> version key, for failed items (ids may be hashes)

        def actions() -> Iterator[dict[str, Any]]:
            for p in todo:
                for action in p.actions(index, now):
                    key_of[action["_id"]] = p.version_key
                    yield action

        failed: dict[str, str] = {}
        items = bulk.write(self.cluster, actions(), "bulk write", pipeline=pipeline)
        for item in items:
            info = bulk.item_info(item)
            key = key_of.get(str(info.get("_id", "")), str(info.get("_id", "")).rsplit(":", 1)[0])
            why = bulk.reason(info.get("error"))
            failed.setdefault(key, f"bulk write failed: {info.get('status')} {why}")
        return BatchOutcome(failed, items)


def version_key(doc_id: str, version: str) -> str:
    """The key every chunk of one version of a document carries: ``{doc_id}@{version}``."""
    return f"{doc_id}@{version}"


def bounded_id(full: str) -> str:
    """``full`` as a document ``_id`` within OpenSearch's 512-byte limit: itself when it fits,
    else ``~`` and the SHA-256 of it (the full id is then kept in the chunk's ``full_id``). A
    long path or ``doc_id`` thus fails nothing, and never its bulk request's other documents."""
    if len(full.encode("utf-8")) <= MAX_ID_BYTES:
        return full
    return "~" + hashlib.sha256(full.encode("utf-8")).hexdigest()


def visible_values(
    cluster: Cluster,
    index: str,
    doc_ids: Sequence[str],
    field: str,
    what: str,
    visible: Sequence[dict[str, Any]],
) -> dict[str, set[str]]:
    """doc_id → the distinct values of ``field`` over its chunks in ``index`` that pass ``visible``
    (one aggregation; ingest asks the alias, a reindex compares two concrete indices)."""
    if not doc_ids:
        return {}
    resp = cluster.call(
        what,
        cluster.client.search,
        index=index,
        body={
            "size": 0,
            "query": {"bool": {"filter": [{"terms": {"doc_id": list(doc_ids)}}, *visible]}},
            "aggs": {
                "d": {
                    "terms": {"field": "doc_id", "size": len(doc_ids)},
                    "aggs": {"v": {"terms": {"field": field, "size": 10}}},
                }
            },
        },
        params={"request_cache": "false"},
    )
    return {b["key"]: {v["key"] for v in b["v"]["buckets"]} for b in resp["aggregations"]["d"]["buckets"]}


def _same_source(stored: str, new: str) -> bool:
    """The same source: equal text, or two spellings (relative, absolute) of one existing file."""
    if stored == new:
        return True
    try:
        a, b = Path(stored), Path(new)
        return a.exists() and b.exists() and a.resolve() == b.resolve()
    except (OSError, ValueError):
        return False


def guarded_remove(
    cluster: Cluster, store: VersionStore, index: str, keys: list[str], what: str
) -> list[str]:
    """``store.remove`` as a registered writer: refused while a reindex holds its lock, and loud
    when one took it meanwhile (its copy may have carried the removed documents over)."""
    record = holder()
    register_writer(cluster, store.alias, record)
    try:
        lock = read_lock(cluster, store.alias)
        if lock:
            raise IndexStateError(
                f"{describe(lock)}: {what} refused; run it again when the reindex has finished"
            )
        left = store.remove(index, keys)
        lock = read_lock(cluster, store.alias)
        if lock:
            raise IndexStateError(
                f"{describe(lock)}, which began during {what}: the removed documents may be copied "
                "into its new index; run the same command again when the reindex has finished"
            )
        return left
    finally:
        unregister_writer(cluster, store.alias, record.token)


__all__ = [
    "MAX_ID_BYTES",
    "BatchOutcome",
    "VersionStore",
    "VersionToWrite",
    "bounded_id",
    "guarded_remove",
    "version_key",
    "visible_values",
]
