"""Ingest: documents → chunks → embeddings → batch writes, with atomic replacement.

The orchestration of the write side: files are read into documents (``osrag.documents``),
chunked (``osrag.chunking``) and embedded here, in small batches; each batch is written by
``osrag.versions.VersionStore`` (hidden writes, then one flip, so a re-ingested document
replaces its chunks without a reader ever seeing a mix) on one writer thread, while the next
batch is read and embedded. Every batch first checks the reindex lock (``osrag.locking``).

Documents whose content hash (which also covers the chunking settings and the
model) matches the visible version are skipped. Memory stays flat: documents
are read, chunked, embedded and written in small batches, and bulk actions are
streamed. Bulk items rejected with 429 or failing on timeouts are retried with
backoff (``osrag.bulk``, the one retry policy ingest and reindex share); what
still fails is reported per item, never dropped.
"""

from __future__ import annotations

import hashlib
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from osrag import counting
from osrag.admin import Admin
from osrag.chunking import ChunkingConfig, Document, chunk_document
from osrag.documents import find_files, read_document
from osrag.embedding import Embedder, embedder_for, require_same_model
from osrag.errors import ConfigError, DocumentError, IndexStateError, WritesRefused
from osrag.locking import describe, ensure_state_index, holder, read_lock, register_writer, unregister_writer
from osrag.names import utcnow
from osrag.settings import Settings
from osrag.versions import PreparedDoc, VersionStore, chunk_source


# ---------------------------------------------------------------- the report
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
        store: VersionStore | None = None,
    ) -> None:
        self.s = settings
        #: Replace a document whose stored source is another file (refused by default: two files, one id).
        self.replace = replace
        self.admin = admin or Admin(settings)
        self.cluster = self.admin.cluster
        #: Where batches are written (hidden writes, one flip): ``osrag.versions``.
        self.store = store or VersionStore(self.cluster, settings.alias)
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

        def flush(prepared: list[PreparedDoc]) -> None:
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
        flush: Callable[[list[PreparedDoc]], None],
    ) -> None:
        """Read and chunk documents, handing batches to ``flush`` as they fill (by documents
        or by chunks, whichever limit comes first)."""
        count = emb.count_tokens
        batch: list[PreparedDoc] = []
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
            batch.append(PreparedDoc(doc, str(path), f"{doc.doc_id}@{version}", chunks))
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
        self, batch: list[PreparedDoc], report: IngestReport, progress: Callable[[str, str], None] | None
    ) -> list[PreparedDoc]:
        """Refuse (per file) a document whose id is taken by a document from another source,
        unless ``replace``: two files with one id would otherwise replace each other silently."""
        if self.replace or not batch:
            return batch
        taken = self.store.taken_by_others([p.doc for p in batch])
        keep: list[PreparedDoc] = []
        for p in batch:
            other = taken.get(p.doc.doc_id)
            if other is not None:
                report.failed.append(
                    (
                        p.path,
                        f"doc_id {p.doc.doc_id!r} is taken by {other}; not replaced "
                        "(give another doc_id or collection, or --replace to replace it)",
                    )
                )
                _tick(progress, p.path, "failed")
            else:
                keep.append(p)
        return keep

    def _embed_batch(
        self,
        emb: Embedder,
        batch: list[PreparedDoc],
        report: IngestReport,
        progress: Callable[[str, str], None] | None,
    ) -> tuple[list[PreparedDoc], dict[str, set[str]]]:
        """Reads only: drop documents another source holds, skip those whose version is already
        the visible one, embed the rest's chunks (attached to each). Returns what to write and
        the visible versions."""
        batch = self._same_source_only(batch, report, progress)
        current = self.store.visible_versions([p.doc.doc_id for p in batch])
        todo: list[PreparedDoc] = []
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
        todo: list[PreparedDoc],
        current: dict[str, set[str]],
        report: IngestReport,
        progress: Callable[[str, str], None] | None,
    ) -> None:
        """Write one embedded batch (``VersionStore.write``: hidden, refresh, one flip) and
        count each document as indexed or failed."""
        outcome = self.store.write(index, todo, current)
        report.failed_items.extend(outcome.failed_items)
        for p in todo:
            if p.version_key in outcome.failed:
                report.failed.append((p.path, outcome.failed[p.version_key]))
                _tick(progress, p.path, "failed")
            else:
                report.indexed += 1
                report.chunks += len(p.chunks)
                report.tokens += sum(c.token_count for c in p.chunks)
                _tick(progress, p.path, "indexed")


def _tick(progress: Callable[[str, str], None] | None, path: str, outcome: str) -> None:
    if progress is not None:
        progress(path, outcome)


# Re-exported: callers (bench, tests) read files and build chunk sources through this module.
__all__ = ["IngestReport", "IngestSummary", "Ingester", "chunk_source", "find_files", "read_document"]
