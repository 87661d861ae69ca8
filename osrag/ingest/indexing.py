"""Ingest: documents → chunks → embeddings → batch writes, with atomic replacement.

The orchestration of the write side. Its stages are ``osrag.ingest.batches``' (read -> parse -> chunk
-> count -> embed -> write -> flip, one ``Batch`` object each): files are read into documents
(``osrag.ingest.filesync``, ``osrag.ingest.documents``), chunked and embedded on the ingest's own thread, in
small batches; each batch is written by ``osrag.store.versions.VersionStore`` (hidden writes, then one
flip, so a re-ingested document replaces its chunks without a reader ever seeing a mix) on one
writer thread, while the next batch is read and embedded. The report is this thread's alone: a
written batch comes back with its outcomes, and they are counted here. Every batch first checks
the reindex lock (``osrag.ingest.target``, ``osrag.store.locking``).

A file whose bytes (with the files it includes and the settings that shape its chunks) are
those its stored document was written from is skipped before it is read (``osrag.ingest.stamps``);
documents whose content hash (which also covers the chunking settings and the model)
matches the visible version are skipped after reading. A changed document's chunks whose
text is unchanged keep their stored vectors. The whole ingest holds the alias's write lock
(``osrag.store.locking.WriteLock``): writers of one alias take turns, and every flip is fenced. Memory stays flat: documents
are read, chunked, embedded and written in small batches, and bulk actions are
streamed. Bulk items rejected with 429 or failing on timeouts are retried with
backoff (``osrag.store.bulk``, the one retry policy ingest and reindex share); what
still fails is reported per item, never dropped.
"""

from __future__ import annotations

import dataclasses
import functools
import logging
import time
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import Any

from osrag import counting, observability
from osrag.chunking import ChunkingConfig, Document
from osrag.embedding import Embedder
from osrag.errors import ConfigError, DocumentError, DocumentSkipped
from osrag.ingest import batches, target
from osrag.ingest.batches import Batch, LazyModel, Recipe, WriteBehind
from osrag.ingest.context import Contextualizer, contextualizer_for
from osrag.ingest.documents import ReadOptions, ReadReport
from osrag.ingest.filesync import FileSync, Item
from osrag.ingest.prepared import PreparedDoc
from osrag.ingest.readpool import ReadPool
from osrag.ingest.report import FileOutcome, IngestReport, tick
from osrag.ingest.stamps import FileStamp, recipe
from osrag.names import utcnow
from osrag.settings import Settings
from osrag.store.alias import AliasStore
from osrag.store.locking import WriteLock
from osrag.store.versions import VersionStore

log = logging.getLogger(__name__)

Progress = Callable[[str, str], None]


class Ingester:
    """Writes documents into the index behind the alias, one batch at a time."""

    #: Told (chunks embedded, chunks to embed, documents) as a batch's chunks are embedded, so a
    #: progress bar can move during a long batch; None (the default) embeds each batch at once.
    on_embedded: batches.EmbedProgress | None = None

    def __init__(
        self,
        settings: Settings,
        admin: AliasStore | None = None,
        embedder: Embedder | None = None,
        strategy: str = "markdown",
        *,
        replace: bool = False,
        store: VersionStore | None = None,
        contextualizer: Contextualizer | None = None,
    ) -> None:
        self.s = settings
        #: The context each chunk is embedded and BM25-indexed with (``osrag.ingest.context``).
        self.contextualizer = contextualizer if contextualizer is not None else contextualizer_for(settings)
        #: Replace a document whose stored source is another file (refused by default: two files, one id).
        self.replace = replace
        self.admin = admin or AliasStore(settings)
        self.cluster = self.admin.cluster
        #: Where batches are written (hidden writes, one flip): ``osrag.store.versions``.
        self.store = store or VersionStore(self.cluster, settings.alias)
        self._embedder = embedder
        #: The file side of the ingest running now (None between ingests, and for in-memory documents).
        self._sync: FileSync | None = None
        self.strategy = strategy
        self.config = ChunkingConfig(
            max_tokens=settings.chunk_max_tokens,
            min_tokens=settings.chunk_min_tokens,
            overlap=settings.chunk_overlap,
        )

    @property
    def recipe(self) -> Recipe:
        """What shapes chunks besides the text (read when used: the contextualizer may be swapped)."""
        return Recipe(self.strategy, self.config, self.contextualizer)

    # -- entry points
    def ingest(
        self,
        paths: Iterable[str | Path],
        progress: Progress | None = None,
        collection: str | None = None,
        *,
        prune: bool = False,
        options: ReadOptions | None = None,
        read_report: ReadReport | None = None,
    ) -> IngestReport:
        """Files and folders, read by ``osrag.ingest.documents.read_tree`` with ``options`` (rules file,
        variables, base URL; ``collection`` when no options are given); ids are
        ``{collection}/{relative path}``. What reading noticed goes to ``read_report``.

        A file whose bytes (and the settings that shape its chunks) are the ones stored is
        skipped before it is parsed (``osrag.ingest.stamps``). ``prune``: afterwards, remove the
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
        sync = FileSync(
            self.store,
            self.recipe_key,
            options,
            read_report if read_report is not None else ReadReport(),
            replace=self.replace,
        )
        # Files are read and chunked by worker processes when there are many (osrag.ingest.readpool);
        # the pool is closed however the ingest ends.
        with ReadPool(self.s.ingest_workers) as pool:
            report = self._ingest(
                sync.items(paths, pool),
                progress,
                f"ingest of {', '.join(map(str, paths))}"[:300],
                sync,
                prune,
            )
        report.reading = sync.read_report
        return report

    def ingest_documents(self, docs: Iterable[Document], progress: Progress | None = None) -> IngestReport:
        """Documents built in memory (e.g. a BEIR corpus row each), on the same path as files."""
        return self._ingest((Item(d.source or d.doc_id, d) for d in docs), progress, "ingest of documents")

    @observability.traced("osrag.ingest")
    def _ingest(
        self,
        items: Iterable[Item],
        progress: Progress | None,
        what: str,
        sync: FileSync | None = None,
        prune: bool = False,
    ) -> IngestReport:
        started = time.perf_counter()
        index, meta = target.prepare(self.admin, self.s, bool(self.contextualizer.recipe))
        model = LazyModel(self.s, meta, self._embedder)
        report = IngestReport(index=index)
        # One writer of the alias at a time (osrag.store.locking.WriteLock): two ingests of the same
        # documents would both read the same current version and both show their own.
        with WriteLock(self.cluster, self.s.alias, f"osrag {what}", self.s.write_lock_wait_s) as lock:
            self.store.lock = lock
            try:
                if sync is not None:
                    sync.begin(index, model.name)
                    sync.chunk_plan = functools.partial(model.plan, self.recipe)
                self._sync = sync
                self._write_all(index, model, items, report, progress)
                if sync is not None:
                    report.withdrawn = sync.withdraw_failed(index)
                if sync is not None and prune:
                    report.pruned = sync.prune(index)
            finally:
                self.store.lock = None
                self._sync = None
        # Which tokenizer made the stored token_count values: a search reuses them only when
        # its budget tokenizer is the same one (osrag.counting).
        # An ingest that changed nothing (every file unchanged) leaves _meta alone: the index's
        # last ingest stays its last change (readers' caches keyed on it stay valid), and an
        # unchanged re-ingest costs no cluster-state update.
        if report.indexed or report.pruned or report.withdrawn or report.failed_items:
            changes: dict[str, Any] = {"last_ingest_at": utcnow().isoformat()}
            if model.loaded is not None:
                changes["token_counter"] = counting.model_counter(model.loaded).identity()
            self.admin.update_meta(index, **changes)
        report.seconds = time.perf_counter() - started
        observability.log_ingest(report)
        return report

    # -- the stages, batch by batch
    def _write_all(
        self,
        index: str,
        model: LazyModel,
        items: Iterable[Item],
        report: IngestReport,
        progress: Progress | None,
    ) -> None:
        """Read, chunk and embed each batch here; write and flip it on the writer thread while
        the next one is read (the overlap pays: embedding and bulk writes use different
        resources). Everything the stages did is counted here, on this thread."""
        behind = WriteBehind()
        written = 0  # batches handed to the writer
        try:
            prepared = self._prepare(items, model, report, progress)
            for docs in batches.fill(prepared, self.s.ingest_batch_docs, self.s.ingest_batch_chunks):
                batch = self._embed_batch(index, model, Batch(docs))
                _count(report, progress, batch.embedded)
                report.reused_vectors += batch.reused_vectors
                report.embed_seconds += batch.embed_seconds
                self._collect(behind, report, progress, batch.paths)
                if not batch.todo:
                    continue
                written += 1
                if written == 2:  # a large ingest: periodic refreshes off until it ends
                    target.refresh_off(self.admin, index)
                batch.written_before = report.indexed
                behind.submit(functools.partial(self._guarded_write, index), batch)
            self._collect(behind, report, progress)
        finally:
            behind.close()  # no write outlives the ingest, even on an error
            if written >= 2:
                target.restore_refresh(self.admin, index)

    def _collect(
        self,
        behind: WriteBehind,
        report: IngestReport,
        progress: Progress | None,
        also: list[str] | None = None,
    ) -> None:
        """Wait for the batch in flight and count what its write did."""
        batch = behind.collect(also or ())
        if batch is not None:
            report.failed_items.extend(batch.outcome.failed_items if batch.outcome is not None else ())
            _count(report, progress, batch.written())

    def _prepare(
        self, items: Iterable[Item], model: LazyModel, report: IngestReport, progress: Progress | None
    ) -> Iterator[PreparedDoc]:
        """Parse, chunk and count each input (on the ingest's thread); the documents to embed,
        in order. Inputs that end here (skipped unread, left out, failed) are counted here."""
        seen: set[str] = set()  # doc_ids taken by this ingest, across batches
        for item in items:
            report.documents += 1
            if item.doc is None:  # unchanged file: its stored document stays as it is
                if item.doc_id is not None:
                    seen.add(item.doc_id)
                _count(report, progress, [FileOutcome(item.path, "skipped")])
                continue
            if isinstance(item.doc, Document):
                report.notes.extend((item.path, n) for n in item.doc.notes)
            try:
                doc = batches.parse(item)
            except DocumentError as exc:  # a DocumentSkipped too: left out by design
                _count(report, progress, [self._withdrawing(_outcome_of(exc))])
                continue
            got = batches.prepared(item, doc, model, self.recipe)
            if isinstance(got, FileOutcome):
                _count(report, progress, [self._withdrawing(got)])
                continue
            if doc.doc_id in seen:
                # Two files, one doc_id: the second would silently replace the first (and the
                # two would replace each other on every later ingest). Refuse the second.
                why = f"duplicate doc_id {doc.doc_id!r} in this ingest"
                _count(report, progress, [FileOutcome(item.path, "failed", why)])
                continue
            seen.add(doc.doc_id)
            yield got

    def _withdrawing(self, outcome: FileOutcome) -> FileOutcome:
        """A file whose new version is left out or failed: its stored document, if any, is withdrawn
        at the end of the ingest (``FileSync.failed``), and its outcome says so."""
        sync = self._sync
        if sync is None or outcome.status not in ("left_out", "failed"):
            return outcome
        ids = sync.failed(outcome.path)
        if not ids:
            return outcome
        said = f"{outcome.reason}; its previous version ({', '.join(ids)}) is withdrawn from search"
        return dataclasses.replace(outcome, reason=said)

    @observability.traced("osrag.ingest.embed")
    def _embed_batch(self, index: str, model: LazyModel, batch: Batch) -> Batch:
        """The embed stage of one batch (``osrag.ingest.batches.embed``)."""
        batches.embed(batch, self.store, index, model, replace=self.replace, on_embedded=self.on_embedded)
        return batch

    def _guarded_write(self, index: str, batch: Batch) -> None:
        """On the writer thread: write and flip one batch while no reindex holds the lock."""
        target.guarded(
            self.admin, self.s.alias, batch.paths, batch.written_before, self._write_batch, index, batch
        )

    @observability.traced("osrag.ingest.write")
    def _write_batch(self, index: str, batch: Batch) -> None:
        """The write and flip stages of one embedded batch (hidden, refresh, one flip)."""
        batches.write(batch, self.store, index)
        batches.flip(batch, self.store, index)
        batches.stop_on_model_failure(batch)  # the cluster's model failed: one line, resumable

    # -- keys
    def _version(self, doc: Document, model_name: str, stamp: FileStamp | None = None) -> str:
        """The version key's hash of ``doc`` (``osrag.ingest.batches.version``)."""
        return batches.version(doc, model_name, self.recipe, stamp)

    def recipe_key(self, model_name: str, collection: str, reading: str = "") -> str:
        """What shapes a file's chunks besides its bytes (``osrag.ingest.stamps.recipe``): osrag's version,
        the chunking settings, the model, the collection and how files are read (``reading``:
        the rules that apply, the base URL)."""
        from osrag import __version__

        if self.contextualizer.recipe:
            reading += f"|context={self.contextualizer.recipe}"
        return recipe(__version__, self.strategy, self.config, model_name, collection, reading)


def _outcome_of(exc: DocumentError) -> FileOutcome:
    if isinstance(exc, DocumentSkipped):
        return FileOutcome(exc.path, "left_out", exc.reason)
    return FileOutcome(exc.path, "failed", exc.reason)


def _count(report: IngestReport, progress: Progress | None, outcomes: Iterable[FileOutcome]) -> None:
    for outcome in outcomes:
        report.add(outcome)
        tick(progress, outcome)


__all__ = ["Ingester"]
