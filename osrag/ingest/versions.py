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
* While a writer holds the alias's write lock (``osrag.admin.locking.WriteLock``), every update
  of ``hidden`` is fenced by it: a writer that lost the lock changes nothing.
* An ``_id`` over 512 bytes is a hash of the full id (``bounded_id``), kept in ``full_id``.

Apart from ``indexing`` (which reads, chunks and embeds documents and hands them
over in batches) because this is the one place that knows the stored shape of a
chunk (``chunk_source``) and the order of writes that keeps readers consistent.
"""

from __future__ import annotations

import datetime as dt
import hashlib
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from osrag.admin.locking import FENCE, FENCE_END, WriteLock, WriteLost, describe_writer, read_writer
from osrag.chunking import Chunk, Document
from osrag.connection import Cluster
from osrag.ingest import bulk
from osrag.ingest.context import embedding_text
from osrag.ingest.convert import TEXT_FORMATS
from osrag.ingest.frontmatter import acl_groups
from osrag.ingest.sync import FileStamp
from osrag.names import HIDDEN_ID, content_hash, state_index, utcnow, visibility_filter

#: OpenSearch refuses a document ``_id`` over 512 bytes (and with it the whole bulk request).
MAX_ID_BYTES = 512
#: Hidden keys changed by one update at most (a terms lookup reads at most 65,536 of them).
MAX_KEYS_PER_FLIP = 5000


@dataclass
class PreparedDoc:
    """A chunked document on its way into the store (vectors attached once embedded)."""

    doc: Document
    path: str
    version_key: str
    chunks: list[Chunk]
    vectors: Any = None  # one embedding per chunk
    stamp: FileStamp | None = (
        None  # the file it was read from (osrag.ingest.sync); None for in-memory documents
    )
    contexts: list[str] | None = None  # one context per chunk (osrag.ingest.context); None: no context


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
        #: then fenced by it (``osrag.admin.locking``), so a writer that lost it changes nothing.
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

    def write(self, index: str, todo: Sequence[PreparedDoc], current: dict[str, set[str]]) -> BatchOutcome:
        """Write embedded documents hidden, refresh, then show them in one flip (module doc).

        ``current``: the visible versions read before (``visible_versions``), hidden by the flip."""
        outcome = self.write_hidden(index, todo)
        self.flip(index, todo, current, outcome)
        return outcome

    def write_hidden(self, index: str, todo: Sequence[PreparedDoc]) -> BatchOutcome:
        """The write stage: hide the new version keys, stream their chunks, refresh. Readers see
        nothing of it until ``flip``."""
        self.hide(add=[p.version_key for p in todo])
        outcome = self._bulk(index, todo, utcnow().isoformat())
        self.cluster.call("refresh", self.cluster.client.indices.refresh, index=index)
        return outcome

    def flip(
        self, index: str, todo: Sequence[PreparedDoc], current: dict[str, set[str]], outcome: BatchOutcome
    ) -> None:
        """The flip stage: one update shows every fully written version and hides the ones it
        replaces; then the replaced and the failed versions' chunks are deleted."""
        ok = [p for p in todo if p.version_key not in outcome.failed]
        old_keys = sorted({k for p in ok for k in current.get(p.doc.doc_id, set()) if k != p.version_key})
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
        """Embedded text (``osrag.ingest.context.embedding_text``: context and chunk text) -> its stored
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

    def _bulk(self, index: str, todo: Sequence[PreparedDoc], now: str) -> BatchOutcome:
        """Stream the chunks; the documents with failed items, by version key, and those items."""
        key_of: dict[str, str] = {}  # _id -> version key, for failed items (ids may be hashes)

        def actions() -> Iterator[dict[str, Any]]:
            for p in todo:
                contexts = p.contexts or [""] * len(p.chunks)
                for c, vector, context in zip(p.chunks, p.vectors, contexts):
                    action = chunk_action(index, p.doc, c, p.version_key, vector, now, p.stamp, context)
                    key_of[action["_id"]] = p.version_key
                    yield action

        failed: dict[str, str] = {}
        items = bulk.write(self.cluster, actions(), "bulk write")
        for item in items:
            info = bulk.item_info(item)
            key = key_of.get(str(info.get("_id", "")), str(info.get("_id", "")).rsplit(":", 1)[0])
            why = bulk.reason(info.get("error"))
            failed.setdefault(key, f"bulk write failed: {info.get('status')} {why}")
        return BatchOutcome(failed, items)


def version_key(doc_id: str, version: str) -> str:
    """The key every chunk of one version of a document carries: ``{doc_id}@{version}``."""
    return f"{doc_id}@{version}"


def document_version(
    doc: Document,
    strategy: str,
    config: Any,
    model_name: str,
    stamp: FileStamp | None = None,
    context_recipe: str = "",
) -> str:
    """The version's hash: the document's text, metadata and the settings that shape its chunks
    (``strategy``, the chunking ``config``, the model) -- and, for a file, its stamp, so the stored
    stamp always belongs to the version. Ingest and the benches key versions with it alike."""
    h = hashlib.sha256()
    h.update(doc.text.encode("utf-8"))
    h.update(repr(sorted((k, str(v)) for k, v in doc.metadata.items())).encode("utf-8"))
    h.update(repr((strategy, config, model_name, doc.title, doc.source)).encode("utf-8"))
    h.update(repr(sorted(doc.variables.items())).encode("utf-8"))  # they change the chunk text
    if stamp is not None:
        h.update(repr((stamp.collection, stamp.origin, stamp.file_hash)).encode("utf-8"))
        if stamp.root_id:  # the same bytes from another root are another version (its owner changes)
            h.update(f"root={stamp.root_id}".encode())
    if context_recipe:  # the contexts change what is embedded (none adds nothing)
        h.update(f"context={context_recipe}".encode())
    return h.hexdigest()[:16]


def chunk_action(
    index: str,
    doc: Document,
    c: Chunk,
    version_key: str,
    vector: Any,
    now: str,
    stamp: FileStamp | None = None,
    context: str = "",
) -> dict[str, Any]:
    """The bulk action that writes one chunk (``chunk_source``) under ``{version_key}:{ordinal}``,
    bounded to the ``_id`` limit (``bounded_id``; the full id is then kept in ``full_id``)."""
    full = f"{version_key}:{c.ordinal}"
    _id = bounded_id(full)
    src = chunk_source(doc, c, version_key, vector, now, stamp, context)
    if _id != full:
        src["full_id"] = full
    return {"_op_type": "index", "_index": index, "_id": _id, "_source": src}


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


def chunk_source(
    doc: Document,
    c: Chunk,
    version_key: str,
    vector: Any,
    now: str,
    stamp: FileStamp | None = None,
    context: str = "",
) -> dict[str, Any]:
    """The stored ``_source`` of one chunk (fields the strict mapping knows; None left out);
    a document read from a file also carries its ``collection``, ``origin`` and ``file_hash``
    (``osrag.ingest.sync``)."""
    md = doc.metadata
    acl = md.get("acl")
    # Converted files say where the chunk came from (page/slide/anchor); Markdown and text
    # files add no field, so an index built before these fields existed still takes them.
    fmt = md.get("format")
    locations = md.get("locations")
    where = locations.locate(c.start, c.end) if locations is not None else {}
    src: dict[str, Any] = {
        "chunk_id": c.chunk_id,
        "doc_id": doc.doc_id,
        "ordinal": c.ordinal,
        "section_id": c.section_id,
        "parent_section_id": c.parent_section_id,
        "kind": c.kind,
        "title": doc.title,
        "breadcrumb": " > ".join(c.heading_path),
        "heading_path": list(c.heading_path),
        "text": c.text,
        "context": context or None,  # osrag.ingest.context: embedded with the text, its own BM25 field
        "body": c.body,
        "start": c.start,
        "end": c.end,
        "version": version_key.rsplit("@", 1)[1],
        "version_key": version_key,
        "content_hash": content_hash(c.body or c.text),
        "source": doc.source,
        "category": md.get("category"),
        "tenant": md.get("tenant"),
        "acl": acl_groups(acl),  # a list from front matter, or "a, b" from an in-memory Document
        "archived": bool(md.get("archived", False)),
        "token_count": c.token_count,
        "updated_at": _date_or_none(md.get("updated_at")),
        "ingested_at": now,
        "embedding": [float(x) for x in vector],
        "source_format": fmt if fmt not in TEXT_FORMATS else None,
        **where,
    }
    if stamp is not None:
        src.update(collection=stamp.collection, origin=stamp.origin, file_hash=stamp.file_hash)
        if stamp.root_id:
            src["root_id"] = stamp.root_id
        if stamp.includes:
            src["includes"] = list(stamp.includes)
    # The read side (osrag.ingest.documents): front-matter keys osrag does not read, and the passage's
    # link -- the page URL (--base-url) with the chunk's heading anchor (Markdown chunks carry one).
    # (a converted file's own anchors come from its locations; its Markdown headings are not in the original)
    anchor = src.get("anchor") or (getattr(c, "anchor", None) if fmt in TEXT_FORMATS or fmt is None else None)
    if anchor and "anchor" not in src:
        src["anchor"] = anchor
    if md.get("meta"):
        src["meta"] = md["meta"]
    if md.get("url"):
        src["url"] = f"{md['url']}#{anchor}" if anchor else md["url"]
    return {k: v for k, v in src.items() if v is not None}


def _date_or_none(value: Any) -> str | None:
    if not value:
        return None
    try:
        return dt.date.fromisoformat(str(value)[:10]).isoformat()
    except ValueError:
        return None


def _same_source(stored: str, new: str) -> bool:
    """The same source: equal text, or two spellings (relative, absolute) of one existing file."""
    if stored == new:
        return True
    try:
        a, b = Path(stored), Path(new)
        return a.exists() and b.exists() and a.resolve() == b.resolve()
    except (OSError, ValueError):
        return False


__all__ = [
    "MAX_ID_BYTES",
    "BatchOutcome",
    "PreparedDoc",
    "VersionStore",
    "bounded_id",
    "chunk_action",
    "chunk_source",
    "document_version",
    "version_key",
    "visible_values",
]
