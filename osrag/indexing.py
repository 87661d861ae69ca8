"""Ingest: documents → chunks → embeddings → bulk writes, with atomic replacement.

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

Documents whose content hash (which also covers the chunking settings and the
model) matches the visible version are skipped. Memory stays flat: documents
are read, chunked, embedded and written in small batches, and bulk actions are
streamed. Bulk items rejected with 429 or failing on timeouts are retried with
backoff (``osrag.bulk``, the one retry policy ingest and reindex share); what
still fails is reported per item, never dropped.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from osrag import bulk, counting
from osrag.admin import Admin
from osrag.chunking import Chunk, ChunkingConfig, Document, chunk_document
from osrag.convert import TEXT_FORMATS
from osrag.documents import find_files, read_document
from osrag.embedding import Embedder, embedder_for, require_same_model
from osrag.errors import ConfigError, DocumentError, IndexStateError, WritesRefused
from osrag.frontmatter import acl_groups
from osrag.locking import describe, ensure_state_index, holder, read_lock, register_writer, unregister_writer
from osrag.names import HIDDEN_ID, content_hash, state_index, utcnow, visibility_filter
from osrag.settings import Settings


# ---------------------------------------------------------------- reading documents
@dataclass
class IngestReport:
    documents: int = 0
    indexed: int = 0
    skipped: int = 0
    chunks: int = 0
    tokens: int = 0
    failed: list[tuple[str, str]] = field(default_factory=list)
    failed_items: list[dict[str, Any]] = field(default_factory=list)
    seconds: float = 0.0
    embed_seconds: float = 0.0
    index: str = ""

    @property
    def chunks_per_s(self) -> float:
        return self.chunks / self.seconds if self.seconds > 0 else 0.0

    def summary(self) -> IngestSummary:
        """What the CLI prints: failures as path/reason records, failed items left out."""
        return IngestSummary(
            index=self.index,
            documents=self.documents,
            indexed=self.indexed,
            skipped=self.skipped,
            failed=len(self.failed),
            failures=[{"path": p, "reason": r} for p, r in self.failed],
            chunks=self.chunks,
            tokens=self.tokens,
            seconds=round(self.seconds, 3),
            embed_seconds=round(self.embed_seconds, 3),
            chunks_per_s=round(self.chunks_per_s, 1),
        )

    def as_dict(self) -> dict[str, Any]:
        return asdict(self.summary())


@dataclass(frozen=True)
class IngestSummary:
    """An ingest report as data (reports are dataclasses read out with ``dataclasses.asdict``)."""

    index: str
    documents: int
    indexed: int
    skipped: int
    failed: int
    failures: list[dict[str, str]]
    chunks: int
    tokens: int
    seconds: float
    embed_seconds: float
    chunks_per_s: float


@dataclass
class _Prepared:
    doc: Document
    path: str
    version_key: str
    chunks: list[Chunk]
    vectors: Any = None  # one embedding per chunk, attached by _embed_batch


# ---------------------------------------------------------------- the ingester
class Ingester:
    """Writes documents into the index behind the alias, one batch at a time."""

    def __init__(
        self,
        settings: Settings,
        admin: Admin | None = None,
        embedder: Embedder | None = None,
        strategy: str = "markdown",
        *,
        replace: bool = False,
    ) -> None:
        self.s = settings
        #: Replace a document whose stored source is another file (refused by default: two files, one id).
        self.replace = replace
        self.admin = admin or Admin(settings)
        self.cluster = self.admin.cluster
        self._embedder = embedder
        self.strategy = strategy
        self.config = ChunkingConfig(
            max_tokens=settings.chunk_max_tokens,
            min_tokens=settings.chunk_min_tokens,
            overlap=settings.chunk_overlap,
        )

    # -- setup
    def _prepare_target(self) -> tuple[str, Embedder]:
        index = self.admin.require_index()
        meta = self.admin.meta(index)
        lock = read_lock(self.cluster, self.s.alias)
        if lock:
            raise IndexStateError(
                f"a reindex into {lock.get('target')} has held the lock since {lock.get('since')}; "
                "ingest is refused so that no write is lost — retry when it finishes (or `osrag reindex --abort`)"
            )
        if self.s.embedding_model and self.s.embedding_model != meta.get("embedding_model"):
            raise ConfigError(
                f"OSRAG_EMBEDDING_MODEL={self.s.embedding_model!r} but index {index} is pinned to "
                f"{meta.get('embedding_model')!r}; run `osrag reindex` to change models"
            )
        emb = self._embedder or embedder_for(self.s, meta=meta)
        require_same_model(meta, emb)
        if not meta.get("content_hash"):
            # An index made before template v3: add the field so the strict mapping takes the
            # chunks. Its older chunks lack the hash, so readers collapse in Python there.
            self.cluster.call(
                "add content_hash mapping",
                self.cluster.client.indices.put_mapping,
                index=index,
                body={"properties": {"content_hash": {"type": "keyword"}}},
            )
        self._ensure_state()
        self._restore_refresh(index, meta)  # left off by an ingest that died
        return index, emb

    # -- refresh off during a large ingest
    def _refresh_off(self, index: str) -> None:
        """Stop periodic refreshes while a many-batch ingest writes (every batch refreshes
        explicitly before its flip, so readers lose nothing). The original value is recorded in
        ``_meta`` first, so a crash is repaired by the next ingest (``_restore_refresh``)."""
        client = self.cluster.client
        if not isinstance(self.admin.meta(index).get("saved_refresh_interval"), dict):
            got = self.cluster.call(
                "get refresh interval",
                client.indices.get_settings,
                index=index,
                name="index.refresh_interval",
            )
            value = next(iter(got.values()), {}).get("settings", {}).get("index", {}).get("refresh_interval")
            # Wrapped: the original may itself be None (the cluster default).
            self.admin.update_meta(index, saved_refresh_interval={"value": value})
        self.cluster.call(
            "disable refresh",
            client.indices.put_settings,
            index=index,
            body={"index": {"refresh_interval": "-1"}},
        )

    def _restore_refresh(self, index: str, meta: dict[str, Any] | None = None) -> None:
        """Put back the refresh interval recorded by ``_refresh_off`` (None: the default)."""
        saved = (self.admin.meta(index) if meta is None else meta).get("saved_refresh_interval")
        if not isinstance(saved, dict):
            return
        self.cluster.call(
            "restore refresh",
            self.cluster.client.indices.put_settings,
            index=index,
            body={"index": {"refresh_interval": saved.get("value")}},
        )
        self.admin.update_meta(index, saved_refresh_interval=None)

    def _ensure_state(self) -> None:
        ensure_state_index(self.cluster, self.s.alias, self.s.replicas)

    def _guarded(
        self, paths: Sequence[str], report: IngestReport, write: Callable[..., None], *args: Any
    ) -> None:
        """Write one batch only while no reindex holds the lock (``osrag.locking``): the batch
        registers as a writer, then reads the lock; a reindex that took it meanwhile stops the
        ingest loudly (``WritesRefused`` lists the batch) instead of writing into an index whose
        copy has begun. A batch that got in first is waited for and copied by the reindex."""
        record = holder()
        register_writer(self.cluster, self.s.alias, record)
        try:
            lock = read_lock(self.cluster, self.s.alias)
            if lock:
                raise WritesRefused(
                    f"{describe(lock)}: ingest stopped so that no write is lost; "
                    f"{len(paths)} document(s) of this batch not written: {', '.join(paths)}; later files "
                    f"were not read; {report.indexed} document(s) were written before. Run the same "
                    "`osrag ingest` again when the reindex has finished",
                    paths,
                )
            write(*args)
        finally:
            unregister_writer(self.cluster, self.s.alias, record["token"])

    def _hide(self, add: Sequence[str] = (), remove: Sequence[str] = ()) -> None:
        """One atomic scripted update of the hidden list."""
        client = self.cluster.client
        body = {
            "script": {
                "lang": "painless",
                "source": "if (ctx._source.keys == null) { ctx._source.keys = []; } "
                "ctx._source.keys.removeAll(params.remove); "
                "for (k in params.add) { if (!ctx._source.keys.contains(k)) { ctx._source.keys.add(k); } }",
                "params": {"add": list(add), "remove": list(remove)},
            },
            "upsert": {"keys": list(add)},
        }
        self.cluster.call(
            "update hidden versions",
            client.update,
            index=state_index(self.s.alias),
            id=HIDDEN_ID,
            body=body,
            refresh=True,
            retry_on_conflict=10,
        )

    # -- the main loop
    def ingest(
        self,
        paths: Iterable[str | Path],
        progress: Callable[[str, str], None] | None = None,
        collection: str | None = None,
    ) -> IngestReport:
        """Files and folders; ids are ``{collection}/{relative path}`` (``read_document``)."""
        if collection is not None and (not collection.strip() or any(ch.isspace() for ch in collection)):
            raise ConfigError(f"collection {collection!r} must be a name without spaces")
        max_bytes = int(self.s.max_file_mb * 1_000_000)

        def read() -> Iterator[tuple[str, Document | DocumentError]]:
            for path, root in find_files(paths):
                try:
                    yield str(path), read_document(path, root, max_bytes, collection)
                except DocumentError as exc:
                    yield str(path), exc

        return self._ingest(read(), progress)

    def ingest_documents(
        self, docs: Iterable[Document], progress: Callable[[str, str], None] | None = None
    ) -> IngestReport:
        """Documents built in memory (e.g. a BEIR corpus row each), on the same path as files."""
        return self._ingest(((d.source or d.doc_id, d) for d in docs), progress)

    def _ingest(
        self,
        items: Iterable[tuple[str, Document | DocumentError]],
        progress: Callable[[str, str], None] | None,
    ) -> IngestReport:
        started = time.perf_counter()
        index, emb = self._prepare_target()
        report = IngestReport(index=index)
        # One writer thread: batch N is written (bulk, refresh, flip) while batch N+1 is read,
        # chunked and embedded here. Batches are written one at a time, in order; at most two
        # are held in memory.
        writer = ThreadPoolExecutor(max_workers=1, thread_name_prefix="osrag-ingest")
        writing: tuple[Future[None], list[str]] | None = None
        batches = 0

        def wait_for_writes(also: Sequence[str] = ()) -> None:
            nonlocal writing
            if writing is None:
                return
            future, _ = writing
            writing = None
            try:
                future.result()  # the previous batch is written (its errors raise here)
            except WritesRefused as exc:
                if not also:
                    raise
                # The next batch was read and embedded meanwhile: it is not written either.
                raise WritesRefused(
                    f"{exc}; also not written (read meanwhile): {', '.join(also)}", [*exc.not_written, *also]
                ) from exc

        def flush(prepared: list[_Prepared]) -> None:
            nonlocal writing, batches
            todo, current = self._embed_batch(emb, prepared, report, progress)
            wait_for_writes([p.path for p in todo])
            if not todo:
                return
            batches += 1
            if batches == 2:  # a large ingest: periodic refreshes off until it ends
                self._refresh_off(index)
            paths = [p.path for p in todo]
            future = writer.submit(
                self._guarded, paths, report, self._write_batch, index, todo, current, report, progress
            )
            writing = (future, paths)

        try:
            self._read_loop(items, emb, report, progress, flush)
            wait_for_writes()
        finally:
            writer.shutdown(wait=True)  # no write outlives the ingest, even on an error
            if batches >= 2:
                self._restore_refresh(index)
        # Which tokenizer made the stored token_count values: a search reuses them only when
        # its budget tokenizer is the same one (osrag.counting).
        self.admin.update_meta(
            index, last_ingest_at=utcnow().isoformat(), token_counter=counting.model_counter(emb).identity()
        )
        report.seconds = time.perf_counter() - started
        return report

    def _read_loop(
        self,
        items: Iterable[tuple[str, Document | DocumentError]],
        emb: Embedder,
        report: IngestReport,
        progress: Callable[[str, str], None] | None,
        flush: Callable[[list[_Prepared]], None],
    ) -> None:
        """Read and chunk documents, handing batches to ``flush`` as they fill (by documents
        or by chunks, whichever limit comes first)."""
        count = emb.count_tokens
        batch: list[_Prepared] = []
        seen: set[str] = set()  # doc_ids taken by this ingest, across batches
        n_chunks = 0
        for path, doc_or_error in items:
            report.documents += 1
            try:
                if isinstance(doc_or_error, DocumentError):
                    raise doc_or_error
                doc = doc_or_error
                chunks = chunk_document(doc, self.strategy, self.config, count)
                if not chunks:
                    raise DocumentError(str(path), "no indexable text after chunking")
            except DocumentError as exc:
                report.failed.append((exc.path, exc.reason))
                _tick(progress, str(path), "failed")
                continue
            except Exception as exc:  # a chunker bug must not stop the batch
                report.failed.append((str(path), f"cannot chunk: {type(exc).__name__}: {exc}"))
                _tick(progress, str(path), "failed")
                continue
            if doc.doc_id in seen:
                # Two files, one doc_id: the second would silently replace the first (and the
                # two would replace each other on every later ingest). Refuse the second.
                report.failed.append((str(path), f"duplicate doc_id {doc.doc_id!r} in this ingest"))
                _tick(progress, str(path), "failed")
                continue
            seen.add(doc.doc_id)
            version = self._version(doc, emb)
            batch.append(_Prepared(doc, str(path), f"{doc.doc_id}@{version}", chunks))
            n_chunks += len(chunks)
            if len(batch) >= self.s.ingest_batch_docs or n_chunks >= self.s.ingest_batch_chunks:
                flush(batch)
                batch = []
                n_chunks = 0
        if batch:
            flush(batch)

    def _version(self, doc: Document, emb: Embedder) -> str:
        h = hashlib.sha256()
        h.update(doc.text.encode("utf-8"))
        h.update(repr(sorted((k, str(v)) for k, v in doc.metadata.items())).encode("utf-8"))
        h.update(repr((self.strategy, self.config, emb.model_name, doc.title, doc.source)).encode("utf-8"))
        return h.hexdigest()[:16]

    def _same_source_only(
        self, batch: list[_Prepared], report: IngestReport, progress: Callable[[str, str], None] | None
    ) -> list[_Prepared]:
        """Refuse (per file) a document whose id is taken by a document from another source,
        unless ``replace``: two files with one id would otherwise replace each other silently."""
        if self.replace or not batch:
            return batch
        stored = self.stored_sources([p.doc.doc_id for p in batch])
        keep: list[_Prepared] = []
        for p in batch:
            others = sorted(s for s in stored.get(p.doc.doc_id, set()) if not _same_source(s, p.doc.source))
            if others:
                report.failed.append(
                    (
                        p.path,
                        f"doc_id {p.doc.doc_id!r} is taken by {others[0]}; not replaced "
                        "(give another doc_id or collection, or --replace to replace it)",
                    )
                )
                _tick(progress, p.path, "failed")
            else:
                keep.append(p)
        return keep

    def stored_sources(self, doc_ids: Sequence[str]) -> dict[str, set[str]]:
        """doc_id → the sources of its visible chunks."""
        return self._visible_values(doc_ids, "source", "look up document sources")

    def visible_versions(self, doc_ids: Sequence[str]) -> dict[str, set[str]]:
        """doc_id → version keys readers currently see."""
        return self._visible_values(doc_ids, "version_key", "look up current versions")

    def _visible_values(self, doc_ids: Sequence[str], field: str, what: str) -> dict[str, set[str]]:
        """doc_id → the distinct values of ``field`` over its visible chunks (one aggregation)."""
        if not doc_ids:
            return {}
        resp = self.cluster.call(
            what,
            self.cluster.client.search,
            index=self.s.alias,
            body={
                "size": 0,
                "query": {
                    "bool": {
                        "filter": [{"terms": {"doc_id": list(doc_ids)}}, visibility_filter(self.s.alias)]
                    }
                },
                "aggs": {
                    "d": {
                        "terms": {"field": "doc_id", "size": len(doc_ids)},
                        "aggs": {"v": {"terms": {"field": field, "size": 10}}},
                    }
                },
            },
        )
        return {b["key"]: {v["key"] for v in b["v"]["buckets"]} for b in resp["aggregations"]["d"]["buckets"]}

    def _embed_batch(
        self,
        emb: Embedder,
        batch: list[_Prepared],
        report: IngestReport,
        progress: Callable[[str, str], None] | None,
    ) -> tuple[list[_Prepared], dict[str, set[str]]]:
        """Reads only: drop documents another source holds, skip those whose version is already
        the visible one, embed the rest's chunks (attached to each). Returns what to write and
        the visible versions."""
        batch = self._same_source_only(batch, report, progress)
        current = self.visible_versions([p.doc.doc_id for p in batch])
        todo: list[_Prepared] = []
        for p in batch:
            if current.get(p.doc.doc_id) == {p.version_key}:
                report.skipped += 1
                _tick(progress, p.path, "skipped")
            else:
                todo.append(p)
        if not todo:
            return todo, current
        t0 = time.perf_counter()
        texts = [c.text for p in todo for c in p.chunks]
        vectors = emb.encode_passages(texts)
        report.embed_seconds += time.perf_counter() - t0
        i = 0
        for p in todo:
            p.vectors = vectors[i : i + len(p.chunks)]
            i += len(p.chunks)
        return todo, current

    def _write_batch(
        self,
        index: str,
        todo: list[_Prepared],
        current: dict[str, set[str]],
        report: IngestReport,
        progress: Callable[[str, str], None] | None,
    ) -> None:
        """Write embedded documents hidden, refresh, then show them in one flip (module doc)."""

        new_keys = [p.version_key for p in todo]
        self._hide(add=new_keys)
        now = utcnow().isoformat()
        failed_keys = self._bulk(index, todo, now, report)
        self.cluster.call("refresh", self.cluster.client.indices.refresh, index=index)

        ok = [p for p in todo if p.version_key not in failed_keys]
        old_keys = sorted({k for p in ok for k in current.get(p.doc.doc_id, set()) if k != p.version_key})
        # The flip: one update shows every new version and hides every old one.
        self._hide(add=old_keys, remove=[p.version_key for p in ok])
        doomed = old_keys + sorted(failed_keys)
        if doomed:
            self._delete_versions(index, doomed)
            # Un-hide only keys with no chunk left: a key whose chunks survived the delete
            # (a shard failure, a conflict) must stay hidden, or its chunks would reappear
            # next to the new version. It is garbage then, but invisible garbage.
            left = self._stored_versions(index, doomed)
            gone = [k for k in doomed if k not in left]
            if gone:
                self._hide(remove=gone)
        for p in todo:
            if p.version_key in failed_keys:
                report.failed.append((p.path, failed_keys[p.version_key]))
                _tick(progress, p.path, "failed")
            else:
                report.indexed += 1
                report.chunks += len(p.chunks)
                report.tokens += sum(c.token_count for c in p.chunks)
                _tick(progress, p.path, "indexed")

    def _delete_versions(self, index: str, keys: Sequence[str]) -> None:
        self.cluster.call(
            "delete replaced chunks",
            self.cluster.client.delete_by_query,
            index=index,
            body={"query": {"terms": {"version_key": list(keys)}}},
            refresh=True,
            conflicts="proceed",
        )

    def _stored_versions(self, index: str, keys: Sequence[str]) -> set[str]:
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

    def _bulk(self, index: str, todo: list[_Prepared], now: str, report: IngestReport) -> dict[str, str]:
        """Stream the chunks; returns version_key → reason for documents with failed items."""

        def actions() -> Iterator[dict[str, Any]]:
            for p in todo:
                for c, vector in zip(p.chunks, p.vectors):
                    yield {
                        "_op_type": "index",
                        "_index": index,
                        "_id": f"{p.version_key}:{c.ordinal}",
                        "_source": chunk_source(p.doc, c, p.version_key, vector, now),
                    }

        failed: dict[str, str] = {}
        items = bulk.write(self.cluster, actions(), "bulk write")
        for item in items:
            info = bulk.item_info(item)
            key = str(info.get("_id", "")).rsplit(":", 1)[0]
            why = bulk.reason(info.get("error"))
            failed.setdefault(key, f"bulk write failed after retries: {info.get('status')} {why}")
        report.failed_items.extend(items)
        return failed


def chunk_source(doc: Document, c: Chunk, version_key: str, vector: Any, now: str) -> dict[str, Any]:
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


def _tick(progress: Callable[[str, str], None] | None, path: str, outcome: str) -> None:
    if progress is not None:
        progress(path, outcome)


__all__ = ["IngestReport", "Ingester"]
