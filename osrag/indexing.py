"""Ingest: documents → chunks → embeddings → batch writes, with atomic replacement.

The orchestration of the write side: files are read into documents (``osrag.documents``),
chunked (``osrag.chunking``) and embedded here, in small batches; each batch is written by
``osrag.versions.VersionStore`` (hidden writes, then one flip, so a re-ingested document
replaces its chunks without a reader ever seeing a mix) on one writer thread, while the next
batch is read and embedded. Every batch first checks the reindex lock (``osrag.locking``).

A file whose bytes (with the files it includes and the settings that shape its chunks) are
those its stored document was written from is skipped before it is read (``osrag.sync``);
documents whose content hash (which also covers the chunking settings and the model)
matches the visible version are skipped after reading. A changed document's chunks whose
text is unchanged keep their stored vectors. The whole ingest holds the alias's write lock
(``osrag.locking.WriteLock``): writers of one alias take turns, and every flip is fenced. Memory stays flat: documents
are read, chunked, embedded and written in small batches, and bulk actions are
streamed. Bulk items rejected with 429 or failing on timeouts are retried with
backoff (``osrag.bulk``, the one retry policy ingest and reindex share); what
still fails is reported per item, never dropped.
"""

from __future__ import annotations

import functools
import hashlib
import logging
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from osrag import counting, observability
from osrag.admin import Admin
from osrag.chunking import ChunkingConfig, Document, chunk_document
from osrag.chunking.dialects import note_kind
from osrag.chunking.model import MAX_CHARS_PER_TOKEN
from osrag.context import CONTEXT_PROPERTIES, Contextualizer, contextualizer_for, embedding_text
from osrag.documents import (
    READ_PROPERTIES,
    ReadOptions,
    ReadReport,
    collection_of,
    display_path,
    find_files,
    guard_chunks,
    read_document,
    read_tree,
)
from osrag.embedding import Embedder, embedder_for, require_same_model
from osrag.errors import ConfigError, DocumentError, DocumentSkipped, IndexStateError, WritesRefused
from osrag.lifecycle import guarded_remove
from osrag.locking import (
    WriteLock,
    describe,
    ensure_state_index,
    holder,
    read_lock,
    register_writer,
    unregister_writer,
)
from osrag.names import utcnow, visibility_filter
from osrag.rules import Rules
from osrag.settings import Settings
from osrag.sync import (
    SYNC_PROPERTIES,
    FileStamp,
    StoredFile,
    Unchanged,
    bytes_digest,
    origin_of,
    recipe,
    stamp_file,
    stored_files,
    unchanged,
    with_includes,
)
from osrag.versions import PreparedDoc, VersionStore, chunk_source

log = logging.getLogger(__name__)

#: A doc_id longer than this is a per-file error (ids beyond 512 bytes are hashed into the
#: ``_id``; a keyword holds at most 32,766 bytes, and the id travels in every version key).
MAX_DOC_ID_BYTES = 4096
#: Token counts remembered per ingest (pieces of text; bounded memory).
COUNT_CACHE = 16_384


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
    #: Chunks whose vector was reused from the document's previous version (same text).
    reused_vectors: int = 0
    #: Documents removed by ``--prune`` (their file is gone, or now gives another doc_id).
    pruned: list[str] = field(default_factory=list)
    #: Inputs left out by design, with the reason (``DocumentSkipped``: no text, not a regular file).
    skips: list[tuple[str, str]] = field(default_factory=list)
    #: What reading the files noticed (rules applied, exclusions, front-matter keys kept as meta).
    reading: ReadReport = field(default_factory=ReadReport)
    #: What the Markdown reader noted per file (include not found, cycle, unknown variable, unclosed fence).
    notes: list[tuple[str, str]] = field(default_factory=list)

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
            reused_vectors=self.reused_vectors,
            pruned=len(self.pruned),
            pruned_docs=list(self.pruned),
            skips=[{"path": p, "reason": r} for p, r in self.skips],
            excluded=dict(self.reading.excluded),
            rules=dict(self.reading.rules),
            meta_keys=dict(self.reading.meta_keys),
            meta_too_long=dict(self.reading.meta_too_long),
            notes=_note_counts(self.notes),
            note_examples=_note_examples(self.notes),
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
    reused_vectors: int = 0
    pruned: int = 0
    pruned_docs: list[str] = field(default_factory=list)
    skips: list[dict[str, str]] = field(default_factory=list)
    #: exclusion glob -> files/folders it left out; rule -> files it set metadata on
    excluded: dict[str, int] = field(default_factory=dict)
    rules: dict[str, int] = field(default_factory=dict)
    #: front-matter keys osrag does not read, kept as meta.KEY -> files carrying them
    meta_keys: dict[str, int] = field(default_factory=dict)
    meta_too_long: dict[str, int] = field(default_factory=dict)
    #: reader notes: kind -> count, and the first few of each kind as path/note records
    notes: dict[str, int] = field(default_factory=dict)
    note_examples: list[dict[str, str]] = field(default_factory=list)


#: Reader notes shown per kind in a summary (all are counted).
NOTE_EXAMPLES = 3


def _note_counts(notes: list[tuple[str, str]]) -> dict[str, int]:
    counts: dict[str, int] = {}
    for _, note in notes:
        kind = note_kind(note)
        counts[kind] = counts.get(kind, 0) + 1
    return counts


def _note_examples(notes: list[tuple[str, str]]) -> list[dict[str, str]]:
    shown: dict[str, int] = {}
    out: list[dict[str, str]] = []
    for path, note in notes:
        kind = note_kind(note)
        if shown.get(kind, 0) < NOTE_EXAMPLES:
            shown[kind] = shown.get(kind, 0) + 1
            out.append({"kind": kind, "path": path, "note": note})
    return out


@dataclass(frozen=True)
class Item:
    """One input of the read loop: a document read (or its error), or a file skipped unread
    because its bytes are the stored ones (``doc`` None)."""

    path: str
    doc: Document | DocumentError | None
    stamp: FileStamp | None = None
    doc_id: str | None = None  # a skipped file: the doc_id its stored document has


class _Model:
    """The embedder, loaded on first use: an unchanged re-ingest never loads a model."""

    def __init__(self, ingester: Ingester, meta: dict[str, Any]) -> None:
        self._ingester = ingester
        self._meta = meta
        self._emb: Embedder | None = ingester._embedder
        self._counter: Callable[[str], int] | None = None
        if self._emb is not None:
            require_same_model(meta, self._emb)

    @property
    def name(self) -> str:
        return str(self._emb.model_name if self._emb is not None else self._meta.get("embedding_model"))

    @property
    def loaded(self) -> Embedder | None:
        return self._emb

    def counter(self) -> Callable[[str], int]:
        """The model's token counter, remembering its answers for this ingest: the chunker
        counts many pieces more than once (a third of the calls on the dev docs tree), and
        each count is a tokenizer run."""
        if self._counter is None:
            self._counter = functools.lru_cache(maxsize=COUNT_CACHE)(self.get().count_tokens)
        return self._counter

    def get(self) -> Embedder:
        if self._emb is None:
            emb = embedder_for(self._ingester.s, meta=self._meta)
            require_same_model(self._meta, emb)
            self._emb = emb
        return self._emb


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
        contextualizer: Contextualizer | None = None,
    ) -> None:
        self.s = settings
        #: The context each chunk is embedded and BM25-indexed with (``osrag.context``).
        self.contextualizer = contextualizer if contextualizer is not None else contextualizer_for(settings)
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
    def _prepare_target(self) -> tuple[str, dict[str, Any]]:
        index = self.admin.require_index()
        got = self.cluster.call("get mapping", self.cluster.client.indices.get_mapping, index=index)
        mapping = next(iter(got.values()))["mappings"]
        meta = dict((mapping.get("_meta") or {}).get("osrag") or {})
        lock = read_lock(self.cluster, self.s.alias)
        if lock:
            raise IndexStateError(
                f"a reindex into {lock.target} has held the lock since {lock.since}; "
                "ingest is refused so that no write is lost — retry when it finishes (or `osrag reindex --abort`)"
            )
        if self.s.embedding_model and self.s.embedding_model != meta.get("embedding_model"):
            raise ConfigError(
                f"OSRAG_EMBEDDING_MODEL={self.s.embedding_model!r} but index {index} is pinned to "
                f"{meta.get('embedding_model')!r}; run `osrag reindex` to change models"
            )
        if meta.get("embedding_model") is None:
            raise IndexStateError(f"index {index} has no osrag _meta (not created by osrag?)")
        # Fields an index made by an older osrag lacks (the strict mapping would refuse the chunks):
        # content_hash (template v3; its older chunks lack it, readers collapse in Python there)
        # the sync fields (osrag.sync) and the read side's meta/url (osrag.documents).
        have = mapping.get("properties") or {}
        wanted = {"content_hash": {"type": "keyword"}, **SYNC_PROPERTIES, **READ_PROPERTIES}
        if self.contextualizer.recipe:
            wanted.update(CONTEXT_PROPERTIES)
        missing = {k: v for k, v in wanted.items() if k not in have}
        if missing:
            self.cluster.call(
                "add mapping fields",
                self.cluster.client.indices.put_mapping,
                index=index,
                body={"properties": missing},
            )
        self._ensure_state()
        self._restore_refresh(index, meta)  # left off by an ingest that died
        return index, meta

    # -- refresh off during a large ingest
    def _refresh_off(self, index: str) -> None:
        """Stop periodic refreshes while a many-batch ingest writes (every batch refreshes
        explicitly before its flip, so readers lose nothing). The original value is recorded in
        ``_meta`` first, so a crash is repaired by the next ingest (``_restore_refresh``)."""
        client = self.cluster.client
        if not isinstance(self.admin.meta(index).saved_refresh_interval, dict):
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
        saved = self.admin.meta(index).saved_refresh_interval if meta is None else meta.get("saved_refresh_interval")
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
            unregister_writer(self.cluster, self.s.alias, record.token)

    # -- the main loop
    def ingest(
        self,
        paths: Iterable[str | Path],
        progress: Callable[[str, str], None] | None = None,
        collection: str | None = None,
        *,
        prune: bool = False,
        options: ReadOptions | None = None,
        read_report: ReadReport | None = None,
    ) -> IngestReport:
        """Files and folders, read by ``osrag.documents.read_tree`` with ``options`` (rules file,
        variables, base URL; ``collection`` when no options are given); ids are
        ``{collection}/{relative path}``. What reading noticed goes to ``read_report``.

        A file whose bytes (and the settings that shape its chunks) are the ones stored is
        skipped before it is parsed (``osrag.sync``). ``prune``: afterwards, remove the
        documents of the collections written here whose file was not found (or now gives
        another doc_id); only folders may be pruned."""
        if options is None:
            options = ReadOptions(max_bytes=self.s.max_file_bytes, collection=collection)
        collection = options.collection
        if collection is not None and (not collection.strip() or any(ch.isspace() for ch in collection)):
            raise ConfigError(f"collection {collection!r} must be a name without spaces")
        paths = list(paths)
        if prune:
            not_dirs = [str(p) for p in paths if not Path(p).is_dir()]
            if not_dirs:
                raise ConfigError(
                    f"--prune needs folders (what is not found in them is removed); not a folder: {not_dirs[0]}"
                )
        sync = _Sync(self, options, read_report if read_report is not None else ReadReport())
        report = self._ingest(
            sync.items(paths), progress, f"ingest of {', '.join(map(str, paths))}"[:300], sync, prune
        )
        report.reading = sync.read_report
        return report

    def ingest_documents(
        self, docs: Iterable[Document], progress: Callable[[str, str], None] | None = None
    ) -> IngestReport:
        """Documents built in memory (e.g. a BEIR corpus row each), on the same path as files."""
        return self._ingest((Item(d.source or d.doc_id, d) for d in docs), progress, "ingest of documents")

    @observability.traced("osrag.ingest")
    def _ingest(
        self,
        items: Iterable[Item],
        progress: Callable[[str, str], None] | None,
        what: str,
        sync: _Sync | None = None,
        prune: bool = False,
    ) -> IngestReport:
        started = time.perf_counter()
        index, meta = self._prepare_target()
        model = _Model(self, meta)
        report = IngestReport(index=index)
        # One writer of the alias at a time (osrag.locking.WriteLock): two ingests of the same
        # documents would both read the same current version and both show their own.
        with WriteLock(self.cluster, self.s.alias, f"osrag {what}", self.s.write_lock_wait_s) as lock:
            self.store.lock = lock
            try:
                if sync is not None:
                    sync.begin(index, model.name)
                self._write_all(index, model, items, report, progress)
                if sync is not None and prune:
                    report.pruned = sync.prune(index)
            finally:
                self.store.lock = None
        # Which tokenizer made the stored token_count values: a search reuses them only when
        # its budget tokenizer is the same one (osrag.counting).
        # An ingest that changed nothing (every file unchanged) leaves _meta alone: the index's
        # last ingest stays its last change (readers' caches keyed on it stay valid), and an
        # unchanged re-ingest costs no cluster-state update.
        if report.indexed or report.pruned or report.failed_items:
            changes: dict[str, Any] = {"last_ingest_at": utcnow().isoformat()}
            if model.loaded is not None:
                changes["token_counter"] = counting.model_counter(model.loaded).identity()
            self.admin.update_meta(index, **changes)
        report.seconds = time.perf_counter() - started
        observability.log_ingest(report)
        return report

    def _write_all(
        self,
        index: str,
        model: _Model,
        items: Iterable[Item],
        report: IngestReport,
        progress: Callable[[str, str], None] | None,
    ) -> None:
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
            todo, current = self._embed_batch(index, model, prepared, report, progress)
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
            self._read_loop(items, model, report, progress, flush)
            wait_for_writes()
        finally:
            writer.shutdown(wait=True)  # no write outlives the ingest, even on an error
            if batches >= 2:
                self._restore_refresh(index)

    def _read_loop(
        self,
        items: Iterable[Item],
        model: _Model,
        report: IngestReport,
        progress: Callable[[str, str], None] | None,
        flush: Callable[[list[PreparedDoc]], None],
    ) -> None:
        """Read and chunk documents, handing batches to ``flush`` as they fill (by documents
        or by chunks, whichever limit comes first). Files skipped unread are counted here."""
        batch: list[PreparedDoc] = []
        seen: set[str] = set()  # doc_ids taken by this ingest, across batches
        n_chunks = 0
        for item in items:
            path, doc_or_error = item.path, item.doc
            report.documents += 1
            if doc_or_error is None:  # unchanged file: its stored document stays as it is
                if item.doc_id is not None:
                    seen.add(item.doc_id)
                report.skipped += 1
                _tick(progress, path, "skipped")
                continue
            try:
                if isinstance(doc_or_error, DocumentError):
                    raise doc_or_error
                doc = doc_or_error
                report.notes.extend((str(path), n) for n in doc.notes)
                if len(doc.doc_id.encode("utf-8")) > MAX_DOC_ID_BYTES:
                    raise DocumentError(
                        path,
                        f"doc_id is {len(doc.doc_id.encode('utf-8'))} bytes long; the limit is {MAX_DOC_ID_BYTES}",
                    )
                count = model.counter()
                chunks = chunk_document(doc, self.strategy, self.config, count)
                if not chunks:
                    raise DocumentSkipped(str(path), "no indexable text after chunking")
                # Hard limits whatever the chunker did (a 2.5M-character word, a 100K heading).
                chunks = guard_chunks(chunks, self.config.max_tokens * MAX_CHARS_PER_TOKEN * 2, count)
                contexts = self.contextualizer.contexts(doc, chunks) if self.contextualizer.recipe else None
            except DocumentSkipped as exc:  # left out by design (no text, a FIFO...), with its reason
                report.skips.append((exc.path, exc.reason))
                _tick(progress, str(path), "skipped")
                continue
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
            version = self._version(doc, model.name, item.stamp)
            key = f"{doc.doc_id}@{version}"
            batch.append(PreparedDoc(doc, str(path), key, chunks, stamp=item.stamp, contexts=contexts))
            n_chunks += len(chunks)
            if len(batch) >= self.s.ingest_batch_docs or n_chunks >= self.s.ingest_batch_chunks:
                flush(batch)
                batch = []
                n_chunks = 0
        if batch:
            flush(batch)

    def _version(self, doc: Document, model_name: str, stamp: FileStamp | None = None) -> str:
        """The version key's hash: the document's text, metadata and the settings that shape its
        chunks -- and, for a file, its stamp, so the stored stamp always belongs to the version."""
        h = hashlib.sha256()
        h.update(doc.text.encode("utf-8"))
        h.update(repr(sorted((k, str(v)) for k, v in doc.metadata.items())).encode("utf-8"))
        h.update(repr((self.strategy, self.config, model_name, doc.title, doc.source)).encode("utf-8"))
        h.update(repr(sorted(doc.variables.items())).encode("utf-8"))  # they change the chunk text
        if stamp is not None:
            h.update(repr((stamp.collection, stamp.origin, stamp.file_hash)).encode("utf-8"))
        if self.contextualizer.recipe:  # the contexts change what is embedded (none adds nothing)
            h.update(f"context={self.contextualizer.recipe}".encode())
        return h.hexdigest()[:16]

    def recipe_key(self, model_name: str, collection: str, reading: str = "") -> str:
        """What shapes a file's chunks besides its bytes (``osrag.sync.recipe``): osrag's version,
        the chunking settings, the model, the collection and how files are read (``reading``:
        the rules that apply, the base URL)."""
        from osrag import __version__

        if self.contextualizer.recipe:
            reading += f"|context={self.contextualizer.recipe}"
        return recipe(__version__, self.strategy, self.config, model_name, collection, reading)

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

    @observability.traced("osrag.ingest.embed")
    def _embed_batch(
        self,
        index: str,
        model: _Model,
        batch: list[PreparedDoc],
        report: IngestReport,
        progress: Callable[[str, str], None] | None,
    ) -> tuple[list[PreparedDoc], dict[str, set[str]]]:
        """Reads only: drop documents another source holds, skip those whose version is already
        the visible one, embed the rest's chunks (attached to each) -- a chunk whose text the
        document's current version already holds takes its stored vector. Returns what to write
        and the visible versions."""
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
        old_keys = sorted({k for p in todo for k in current.get(p.doc.doc_id, ())})
        stored = self.store.stored_vectors(index, old_keys) if old_keys else {}
        embedded = {id(p): [embedding_text(x, c.text) for c, x in zip(p.chunks, _contexts(p))] for p in todo}
        texts = [t for p in todo for t in embedded[id(p)] if t not in stored]
        new = iter(model.get().encode_passages(texts) if texts else [])
        for p in todo:
            p.vectors = [stored[t] if t in stored else next(new) for t in embedded[id(p)]]
        report.reused_vectors += sum(len(p.chunks) for p in todo) - len(texts)
        report.embed_seconds += time.perf_counter() - t0
        return todo, current

    @observability.traced("osrag.ingest.write")
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


class _Sync:
    """The file side of an ingest (``osrag.sync``): stamps files, skips the unchanged ones unread,
    remembers which files it found, and prunes the documents whose file is gone."""

    def __init__(self, ingester: Ingester, options: ReadOptions, read_report: ReadReport) -> None:
        self.ing = ingester
        self.options = options
        self.read_report = read_report
        self.index = ""
        self.model_name = ""
        self.stored: dict[str, dict[str, list[StoredFile]]] = {}  # collection -> origin -> docs
        self.found: dict[str, set[str]] = {}  # collection -> origins found in this run
        self.read_as: dict[str, str] = {}  # origin -> the doc_id it gave in this run

    def begin(self, index: str, model_name: str) -> None:
        """Called under the write lock, before the first file is stamped."""
        self.index, self.model_name = index, model_name

    def _stored(self, collection: str) -> dict[str, list[StoredFile]]:
        if collection not in self.stored:
            vis = [visibility_filter(self.ing.s.alias)]
            self.stored[collection] = stored_files(self.ing.cluster, self.index, collection, vis)
        return self.stored[collection]

    def items(self, paths: Sequence[str | Path]) -> Iterator[Item]:
        """The files under ``paths`` as ``read_tree`` reads them, except that a file whose stamp
        is the stored one is not read at all (``before_read``)."""
        opts = self.options
        stamps: dict[str, tuple[FileStamp, Callable[[str], str]]] = {}
        recipes: dict[tuple[str, int], str] = {}
        digests: dict[Path, Callable[[str], str]] = {}  # per root: include files' bytes hashes

        def before_read(path: Path, root: Path, rules: Rules | None) -> DocumentError | None:
            coll = opts.collection or collection_of(root)
            self.found.setdefault(coll, set()).add(origin_of(path, root, coll))
            key = (coll, id(rules))
            if key not in recipes:
                recipes[key] = self.ing.recipe_key(self.model_name, coll, repr((rules, opts.base_url)))
            stamp = stamp_file(path, root, coll, recipes[key], opts.max_bytes)
            if stamp is None:
                return None
            if root not in digests:
                digests[root] = bytes_digest(root.resolve(), opts.max_bytes)
            known = self._stored(coll).get(stamp.origin, [])
            if unchanged(stamp, known, digests[root]):
                return Unchanged(display_path(path), stamp, known[0].doc_id)
            stamps[display_path(path)] = (stamp, digests[root])
            return None

        for shown, got in read_tree(paths, opts, self.read_report, before_read):
            if isinstance(got, Unchanged):
                yield Item(shown, None, got.stamp, doc_id=got.doc_id)
                continue
            stamped = stamps.pop(shown, None)
            stamp = None
            if stamped is not None and isinstance(got, Document):
                # The stamp covers the files its includes read (an edited include changes it).
                stamp = with_includes(stamped[0], got.metadata.get("includes") or (), stamped[1])
                self.read_as[stamp.origin] = got.doc_id
            yield Item(shown, got, stamp)

    def prune(self, index: str) -> list[str]:
        """Remove (atomically per document, ``VersionStore.remove``) the documents of the
        collections found in this run whose file was not found, or that the file no longer
        gives (its front matter names another doc_id now). A file that failed to read keeps
        its document. Returns the doc_ids removed."""
        doomed: dict[str, set[str]] = {}  # doc_id -> version keys
        for coll, found in self.found.items():
            for origin, docs in self._stored(coll).items():
                now = self.read_as.get(origin)
                for d in docs:
                    if origin not in found or (now is not None and d.doc_id != now):
                        doomed.setdefault(d.doc_id, set()).add(d.version_key)
        if not doomed:
            return []
        keys = sorted(k for ks in doomed.values() for k in ks)
        left = guarded_remove(self.ing.cluster, self.ing.store, index, keys, "osrag ingest --prune")
        if left:
            log.warning("prune: %d version(s) kept hidden, their chunks could not be deleted", len(left))
        return sorted(doomed)


def _contexts(p: PreparedDoc) -> list[str]:
    return p.contexts if p.contexts is not None else [""] * len(p.chunks)


def _tick(progress: Callable[[str, str], None] | None, path: str, outcome: str) -> None:
    if outcome != "failed":  # failures are logged with their reason at the end (log_ingest)
        observability.file_outcome(path, outcome)
    if progress is not None:
        progress(path, outcome)


# Re-exported: callers (bench, tests) read files and build chunk sources through this module.
__all__ = ["IngestReport", "IngestSummary", "Ingester", "chunk_source", "find_files", "read_document"]
