"""The write path's stages, one batch at a time: read -> parse -> chunk -> count -> embed -> write -> flip.

- read: the inputs as ``Item``s (``osrag.ingest.filesync``: files, unchanged ones skipped unread);
- parse: an item's ``Document`` (or the reason it has none), ``parse``;
- chunk and count: the document's chunks, each counted with the index's model tokenizer
  (``chunk``; ``LazyModel.counter`` remembers the counts of one ingest), and its version key;
- embed: drop the documents another source holds and those whose version is already visible,
  then embed the rest's chunks, reusing the stored vector of every unchanged chunk (``embed``);
- write: hidden writes and a refresh (``write``); flip: one update of the hidden list shows the
  batch and hides what it replaces (``flip``; ``osrag.store.versions``).

Each batch is one plain ``Batch``: its documents (with their chunks and vectors) and what the
stages made of them, as ``FileOutcome`` records. The stages never touch the ingest's report:
the thread that owns it adds a batch's outcomes when the batch comes back (``WriteBehind``
runs write and flip on one writer thread while the next batch is read and embedded).
"""

from __future__ import annotations

import functools
import logging
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any

from osrag.chunking import Chunk, ChunkingConfig, Document, chunk_document
from osrag.embedding import Embedder, embedder_for, require_same_model
from osrag.errors import DocumentError, WritesRefused
from osrag.ingest.context import Contextualizer
from osrag.ingest.filesync import Item
from osrag.ingest.prepared import PreparedDoc, document_version
from osrag.ingest.readpool import COUNT_CACHE, ChunkPlan, chunk_outcome, chunks_of, plan_for
from osrag.ingest.report import FileOutcome
from osrag.ingest.stamps import FileStamp
from osrag.mlcommons.errors import MLCommonsError, classify
from osrag.records import IndexMeta, embedding_text
from osrag.settings import Settings
from osrag.store import bulk
from osrag.store.alias import ensure_ingest_pipeline
from osrag.store.versions import BatchOutcome, VersionStore, version_key

log = logging.getLogger(__name__)

#: A doc_id longer than this is a per-file error (ids beyond 512 bytes are hashed into the
#: ``_id``; a keyword holds at most 32,766 bytes, and the id travels in every version key).
MAX_DOC_ID_BYTES = 4096


@dataclass(frozen=True)
class Recipe:
    """What shapes a document's chunks besides its text: the chunker and the contextualizer."""

    strategy: str
    config: ChunkingConfig
    contextualizer: Contextualizer


@dataclass
class Batch:
    """One batch on its way through the stages, and what they made of it."""

    #: Documents as read, chunked and counted (each gets its vectors in ``embed``).
    docs: list[PreparedDoc]
    #: After ``embed``: the documents to write, and the versions readers saw before.
    todo: list[PreparedDoc] = field(default_factory=list)
    current: dict[str, set[str]] = field(default_factory=dict)
    #: Inputs the embed stage decided (taken by another source, already visible).
    embedded: list[FileOutcome] = field(default_factory=list)
    reused_vectors: int = 0
    embed_seconds: float = 0.0
    #: Documents the ingest had written before this batch (for a refusal's message).
    written_before: int = 0
    #: Set by ``write``: what the bulk write left unwritten.
    outcome: BatchOutcome | None = None
    #: Set by ``embed`` when the cluster embeds the new chunks at ingest: the local ml-commons
    #: model (its id and how the index names it) whose ingest pipeline the bulk requests name.
    pipeline_model: tuple[str, str] | None = None

    @property
    def paths(self) -> list[str]:
        return [p.path for p in self.todo]

    def written(self) -> list[FileOutcome]:
        """Each written document's outcome, once ``write`` ran."""
        failed = self.outcome.failed if self.outcome is not None else {}
        return [
            FileOutcome(p.path, "failed", failed[p.version_key])
            if p.version_key in failed
            else FileOutcome(
                p.path, "indexed", chunks=len(p.chunks), tokens=sum(c.token_count for c in p.chunks)
            )
            for p in self.todo
        ]


class LazyModel:
    """The index's embedder, loaded on first use: an unchanged re-ingest never loads a model."""

    def __init__(self, settings: Settings, meta: IndexMeta, embedder: Embedder | None = None) -> None:
        self._settings = settings
        self._meta = meta
        self._emb = embedder
        self._counter: Callable[[str], int] | None = None
        if embedder is not None:
            require_same_model(meta, embedder)

    @property
    def name(self) -> str:
        return str(self._emb.model_name if self._emb is not None else self._meta.embedding_model)

    @property
    def loaded(self) -> Embedder | None:
        return self._emb

    def counter(self) -> Callable[[str], int]:
        """The count stage: the model's token counter, remembering its answers for this ingest
        (the chunker counts many pieces more than once -- a third of the calls on the dev docs
        tree -- and each count is a tokenizer run)."""
        if self._counter is None:
            self._counter = functools.lru_cache(maxsize=COUNT_CACHE)(self.get().count_tokens)
        return self._counter

    def plan(self, recipe: Recipe) -> ChunkPlan | None:
        """What a worker process needs to chunk and count as ``counter`` does (``osrag.ingest.readpool``),
        or None when only this process can count (the model is loaded here, never in a worker)."""
        return plan_for(self.get(), recipe.strategy, recipe.config)

    def pipeline_model(self) -> tuple[str, str] | None:
        """(model id, the index's name for it) when the model is a local ml-commons model: the
        cluster embeds new chunks through the alias's ingest pipeline (``osrag.mlcommons.pipelines``);
        None for a model that runs here or behind a connector (which keep ``_predict``)."""
        emb = self.get()
        model_id = emb.ingest_pipeline_model()
        return (model_id, emb.model_name) if model_id is not None else None

    def get(self) -> Embedder:
        if self._emb is None:
            emb = embedder_for(self._settings, meta=self._meta)
            require_same_model(self._meta, emb)
            self._emb = emb
        return self._emb


# ---------------------------------------------------------------- parse, chunk, count
def parse(item: Item) -> Document:
    """The parse stage: the item's document, or the error (a ``DocumentSkipped`` too) that
    stands for it. An item skipped unread (no document) is the caller's to count."""
    if isinstance(item.doc, DocumentError):
        raise item.doc
    doc = item.doc
    if doc is None:
        raise ValueError(f"{item.path}: skipped unread, nothing to parse")
    size = len(doc.doc_id.encode("utf-8"))
    if size > MAX_DOC_ID_BYTES:
        raise DocumentError(item.path, f"doc_id is {size} bytes long; the limit is {MAX_DOC_ID_BYTES}")
    return doc


def chunk(
    doc: Document, path: str, recipe: Recipe, count: Callable[[str], int]
) -> tuple[list[Chunk], list[str] | None]:
    """The chunk stage (counting each chunk's tokens with ``count``): chunks within hard limits
    (``osrag.ingest.readpool.chunks_of``), and their contexts when a contextualizer is on."""
    chunks = chunks_of(doc, path, recipe.strategy, recipe.config, count, chunk_document)
    return chunks, contexts(doc, chunks, recipe)


def contexts(doc: Document, chunks: list[Chunk], recipe: Recipe) -> list[str] | None:
    """The chunks' contexts (always made on the ingest's thread: a chat contextualizer asks an
    endpoint and caches its answers), None without a contextualizer."""
    ctx = recipe.contextualizer
    return ctx.contexts(doc, chunks) if ctx.recipe else None


def version(doc: Document, model_name: str, recipe: Recipe, stamp: FileStamp | None = None) -> str:
    """The version key's hash: the document's text, metadata and the settings that shape its
    chunks -- and, for a file, its stamp (``osrag.ingest.prepared.document_version``)."""
    return document_version(
        doc, recipe.strategy, recipe.config, model_name, stamp, recipe.contextualizer.recipe
    )


def prepared(item: Item, doc: Document, model: LazyModel, recipe: Recipe) -> PreparedDoc | FileOutcome:
    """Chunk, count and key one parsed document (chunked already when a worker read it); a per-file
    outcome when it has no chunks to write (a chunker bug fails its file, not the ingest)."""
    done = item.chunked
    if isinstance(done, FileOutcome):
        return done
    if done is None:
        got = chunk_outcome(item.path, lambda: chunk(doc, item.path, recipe, model.counter()))
    else:
        got = chunk_outcome(item.path, lambda: (done, contexts(doc, done, recipe)))
    if isinstance(got, FileOutcome):
        return got
    chunks, ctxs = got
    key = version_key(doc.doc_id, version(doc, model.name, recipe, item.stamp))
    return PreparedDoc(doc, item.path, key, chunks, stamp=item.stamp, contexts=ctxs)


# ---------------------------------------------------------------- embed, write, flip
#: (chunks embedded so far, chunks this batch embeds, documents of the batch) after each slice.
EmbedProgress = Callable[[int, int, int], None]


def embed(
    batch: Batch,
    store: VersionStore,
    index: str,
    model: LazyModel,
    *,
    replace: bool,
    on_embedded: EmbedProgress | None = None,
) -> None:
    """The embed stage (reads only): drop documents another source holds (unless ``replace``),
    skip those whose version is already the visible one, embed the rest's chunks -- a chunk whose
    embedded text the document's current version holds takes its stored vector."""
    docs = batch.docs
    if not replace and docs:
        taken = store.taken_by_others([p.doc for p in docs])
        for p in docs:
            other = taken.get(p.doc.doc_id)
            if other is not None:
                why = (
                    f"doc_id {p.doc.doc_id!r} is taken by {other}; not replaced "
                    "(give another doc_id or collection, or --replace to replace it)"
                )
                batch.embedded.append(FileOutcome(p.path, "failed", why))
        docs = [p for p in docs if p.doc.doc_id not in taken]
    batch.current = current = store.visible_versions([p.doc.doc_id for p in docs])
    for p in docs:
        if current.get(p.doc.doc_id) == {p.version_key}:
            batch.embedded.append(FileOutcome(p.path, "skipped"))
        else:
            batch.todo.append(p)
    if not batch.todo:
        return
    t0 = time.perf_counter()
    old_keys = sorted({k for p in batch.todo for k in current.get(p.doc.doc_id, ())})
    stored = store.stored_vectors(index, old_keys) if old_keys else {}
    texts_of = {
        id(p): [embedding_text(x, c.text) for c, x in zip(p.chunks, _contexts(p))] for p in batch.todo
    }
    texts = [t for p in batch.todo for t in texts_of[id(p)] if t not in stored]
    batch.pipeline_model = model.pipeline_model() if texts else None
    if batch.pipeline_model is not None:  # the cluster embeds them as they are written: no vector here
        new = iter([None] * len(texts))
        if on_embedded is not None:
            on_embedded(len(texts), len(texts), len(batch.todo))
    else:
        new = iter(_encode(model, texts, len(batch.todo), on_embedded) if texts else [])
    for p in batch.todo:
        p.vectors = [stored[t] if t in stored else next(new) for t in texts_of[id(p)]]
    batch.reused_vectors = sum(len(p.chunks) for p in batch.todo) - len(texts)
    batch.embed_seconds = time.perf_counter() - t0


def _encode(model: LazyModel, texts: list[str], docs: int, on_embedded: EmbedProgress | None) -> Any:
    """The passages' vectors: in one call, or -- when someone watches (a progress bar) -- in
    slices of one encoder batch, told after each. A text's vector does not depend on the
    texts encoded with it (padding is masked), so slicing changes no result beyond float rounding."""
    encoder = model.get()
    if on_embedded is None:
        return encoder.encode_passages(texts)
    step = max(1, model._settings.embedding_batch_size)
    out: list[Any] = []
    on_embedded(0, len(texts), docs)
    for start in range(0, len(texts), step):
        out.extend(encoder.encode_passages(texts[start : start + step]))
        on_embedded(min(start + step, len(texts)), len(texts), docs)
    return out


def write(batch: Batch, store: VersionStore, index: str) -> None:
    """The write stage: the batch's chunks, hidden (``VersionStore.write_hidden``); through the
    alias's ingest pipeline (put when missing) when the cluster embeds them."""
    pipeline = None
    if batch.pipeline_model is not None:
        pipeline = ensure_ingest_pipeline(store.cluster, store.alias, batch.pipeline_model[0])
    batch.outcome = store.write_hidden(index, batch.todo, pipeline)


def model_failure(items: Sequence[dict[str, Any]], model: str) -> MLCommonsError | None:
    """One error naming ``model`` when bulk items failed because of it (not deployed, gone, a
    breaker open: ml-commons' reasons inside the items' errors), else None. Every later batch
    would fail the same way, so the ingest stops on it (``stop_on_model_failure``)."""
    for item in items:
        why = " ".join(bulk.reason(bulk.item_info(item).get("error")).split())[:300]
        found = classify(why)
        if found is not None:
            cls, hint = found
            return cls(f"model {model}: embedding at ingest failed: {why}; {hint}")
    return None


def stop_on_model_failure(batch: Batch) -> None:
    """After the flip (the batch's fully written documents shown, its partial ones deleted): raise
    one line naming the model when the cluster could not embed, and how to resume."""
    if batch.pipeline_model is None or batch.outcome is None or not batch.outcome.failed:
        return
    model_id, name = batch.pipeline_model
    err = model_failure(batch.outcome.failed_items, name if model_id in name else f"{name} ({model_id})")
    if err is None:
        return
    not_written = len(batch.outcome.failed)
    raise type(err)(
        f"{err}; ingest stopped: {not_written} document(s) of this batch not written, "
        f"{batch.written_before + len(batch.todo) - not_written} written; later files were not "
        "read; run the same `osrag ingest` again to index the rest"
    )


def flip(batch: Batch, store: VersionStore, index: str) -> None:
    """The flip stage: show the batch and hide what it replaces in one update."""
    assert batch.outcome is not None, "flip follows write"
    store.flip(index, batch.todo, batch.current, batch.outcome)


def _contexts(p: PreparedDoc) -> list[str]:
    return p.contexts if p.contexts is not None else [""] * len(p.chunks)


# ---------------------------------------------------------------- batching and the writer thread
def fill(docs: Iterable[PreparedDoc], max_docs: int, max_chunks: int) -> Iterator[list[PreparedDoc]]:
    """Documents in batches, closed at ``max_docs`` documents or ``max_chunks`` chunks, whichever
    comes first (memory stays flat whatever the corpus)."""
    batch: list[PreparedDoc] = []
    n_chunks = 0
    for p in docs:
        batch.append(p)
        n_chunks += len(p.chunks)
        if len(batch) >= max_docs or n_chunks >= max_chunks:
            yield batch
            batch, n_chunks = [], 0
    if batch:
        yield batch


class WriteBehind:
    """One writer thread: batch N is written (write, flip) while the caller reads, chunks and
    embeds batch N+1. Batches are written one at a time, in order; at most two are held in
    memory. A written batch comes back to the caller through ``collect``, with its outcome."""

    def __init__(self) -> None:
        self._pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="osrag-ingest")
        self._pending: Future[Batch] | None = None

    def submit(self, work: Callable[[Batch], object], batch: Batch) -> None:
        """Write ``batch`` on the writer thread (after ``collect`` took the previous one)."""
        if self._pending is not None:
            raise RuntimeError("collect the batch in flight before submitting another")
        self._pending = self._pool.submit(_run, work, batch)

    def collect(self, also: Sequence[str] = ()) -> Batch | None:
        """The batch in flight, once written (its errors raise here); None when there is none.
        ``also``: paths read and embedded meanwhile, named too when the write was refused."""
        future, self._pending = self._pending, None
        if future is None:
            return None
        try:
            return future.result()
        except WritesRefused as exc:
            if not also:
                raise
            raise WritesRefused(
                f"{exc}; also not written (read meanwhile): {', '.join(also)}", [*exc.not_written, *also]
            ) from exc

    def close(self) -> None:
        """Wait for the write in flight: no write outlives the ingest, even on an error."""
        self._pool.shutdown(wait=True)


def _run(work: Callable[[Batch], object], batch: Batch) -> Batch:
    work(batch)
    return batch


__all__ = [
    "COUNT_CACHE",
    "MAX_DOC_ID_BYTES",
    "Batch",
    "LazyModel",
    "Recipe",
    "WriteBehind",
    "chunk",
    "contexts",
    "embed",
    "fill",
    "flip",
    "model_failure",
    "parse",
    "prepared",
    "stop_on_model_failure",
    "version",
    "write",
]
