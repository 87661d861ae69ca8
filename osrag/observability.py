"""What osrag tells about itself: log records under ``osrag.*`` and optional OpenTelemetry spans.

The library installs no handler (an app decides where records go); the CLI does, with
``-v``/``--log-format`` (``configure_cli_logging``). What is recorded:

* one INFO record per ``search()`` (logger ``osrag.search``): the question's hash (its text only
  at DEBUG, in a record of its own), status, candidates, passages, tokens spent of the budget,
  requests sent, and milliseconds per stage -- ``embed``, ``request`` (round trips), ``took``
  (the server's own time), ``gate``, ``rerank``, ``select``, ``total``; the same numbers ride on
  the record as ``record.osrag`` (a dict), which the JSON format prints as fields;
* a WARNING for every degradation the envelope reports (its ``notes``: a reranker that could not
  load, a partial answer from some shards, a cluster that refuses inline scripts, ...);
* per-file ingest outcomes (logger ``osrag.ingest``): indexed and skipped files at DEBUG, failed
  ones with their reason at INFO, and one INFO summary per ingest.

No record carries a secret: settings are never logged, URLs only through ``redact_url``, and
the question (personal data, often) only at DEBUG.

Spans (the ``otel`` extra; nothing happens without ``opentelemetry-api``): ``osrag.search`` with
one child per step of the query path -- each OpenSearch round trip and each CPU stage (embed,
gate, rerank, select) -- timed where the step really runs, in both the sync and the async
client; ``osrag.ingest`` with ``osrag.ingest.embed`` and ``osrag.ingest.write`` per batch.
"""

from __future__ import annotations

import asyncio
import functools
import hashlib
import json
import logging
import sys
import time
from collections.abc import Callable, Iterable, Mapping
from typing import TYPE_CHECKING, Any, TypeVar, overload

from osrag.errors import InputError
from osrag.steps import AsyncTransport, Call, SyncTransport, Transport, Work

if TYPE_CHECKING:
    from osrag.envelope import Envelope

T = TypeVar("T")

search_log = logging.getLogger("osrag.search")
ingest_log = logging.getLogger("osrag.ingest")

#: Work functions of the query path -> the stage name a record and a span use.
STAGES = {
    "_encode_query": "embed",
    "encode_query": "embed",
    "_engine_question": "embed",
    "annotate": "gate",
    "_rerank": "rerank",
    "_select": "select",
}
#: ``Envelope.timings_ms`` keys -> the stage names of the search record.
TIMING_KEYS = {
    "embed_query": "embed",
    "retrieve": "request",
    "analyze_question": "analyze",
    "annotate": "gate",
    "rerank": "rerank",
    "select": "select",
    "total": "total",
}


def question_hash(question: str) -> str:
    """A stable, non-reversible name for a question (sha256 of its stripped text, 16 hex digits)."""
    # surrogatepass: a question that is not valid Unicode still gets a name (it is refused later).
    return hashlib.sha256(question.strip().encode("utf-8", "surrogatepass")).hexdigest()[:16]


# ---------------------------------------------------------------- tracing (optional)
def _tracer() -> Any | None:
    try:
        from opentelemetry import trace
    except ImportError:
        return None
    return trace.get_tracer("osrag")


def _step_name(step: Call | Work) -> str:
    if isinstance(step, Call):
        return f"opensearch {step.what}"
    fn = step.fn
    name = getattr(getattr(fn, "func", fn), "__name__", "work")
    return STAGES.get(name, name.strip("_"))


# ---------------------------------------------------------------- search
class _Observed(Transport):
    """Another transport's answers, counted and timed: what one search records.

    Every step the driver answers goes through here, so the request count and the spans are the
    same for the sync and the async client. At the end: the search record and one WARNING per
    degradation note; a failure is one WARNING naming the error class.
    """

    def __init__(self, inner: Transport, question: str) -> None:
        self.inner = inner
        self.question = question
        self.tracer = _tracer()
        self.span = self.tracer.start_span("osrag.search") if self.tracer is not None else None
        self.requests = 0
        self.t0 = time.perf_counter()

    async def answer(self, step: Call | Work) -> Any:
        if isinstance(step, Call):
            self.requests += 1
        child = _child_span(self.tracer, self.span, step)
        try:
            result = await self.inner.answer(step)
        except BaseException as exc:
            _end(child, exc)
            raise
        _end(child)
        return result

    def finished(self, result: Any) -> None:
        log_search(result, self.question, self.requests)
        if self.span is not None:
            _search_attributes(self.span, result, self.question, self.requests)
            self.span.end()

    def failed(self, exc: BaseException) -> None:
        # A refusal of the caller's own input is the caller's to report (it gets the InputError):
        # INFO, so a CLI or service does not print it twice; anything else is a WARNING. A
        # search called off (its task cancelled) is no failure of osrag's.
        level = logging.INFO if isinstance(exc, InputError) else logging.WARNING
        called_off = isinstance(exc, (GeneratorExit, asyncio.CancelledError))
        if search_log.isEnabledFor(level) and not called_off:
            ms = (time.perf_counter() - self.t0) * 1000
            question = self.question
            search_log.log(
                level,
                "search %s failed after %.0f ms, %d request(s): %s",
                question_hash(question),
                ms,
                self.requests,
                type(exc).__name__,
                extra={"osrag": {"question_hash": question_hash(question), "error": type(exc).__name__}},
            )
        if self.span is not None:
            _end(self.span, None if called_off else exc)


class _ObservedSync(_Observed, SyncTransport):
    pass


class _ObservedAsync(_Observed, AsyncTransport):
    pass


@overload
def observe_search(transport: SyncTransport, question: str) -> SyncTransport: ...
@overload
def observe_search(transport: AsyncTransport, question: str) -> AsyncTransport: ...
@overload
def observe_search(transport: Transport, question: str) -> Transport: ...
def observe_search(transport: Transport, question: str) -> Transport:
    """``transport`` answering one search's steps unchanged, counted and timed (``_Observed``)."""
    if isinstance(transport, AsyncTransport):
        return _ObservedAsync(transport, question)
    return _ObservedSync(transport, question)


def _child_span(tracer: Any, parent: Any, step: Call | Work) -> Any:
    if tracer is None or parent is None:
        return None
    from opentelemetry import trace

    return tracer.start_span(_step_name(step), context=trace.set_span_in_context(parent))


def _end(span: Any, exc: BaseException | None = None) -> None:
    if span is None:
        return
    if exc is not None and not isinstance(exc, GeneratorExit):
        from opentelemetry.trace import Status, StatusCode

        span.set_status(Status(StatusCode.ERROR, type(exc).__name__))
    span.end()


def search_fields(env: Envelope, question: str, requests: int) -> dict[str, Any]:
    """The numbers of one search, as the record carries them (no text, no secret)."""
    stages = {TIMING_KEYS.get(k, k): round(float(v), 2) for k, v in env.timings_ms.items()}
    took = env.timings_ms.get("server_took")
    if took is not None:
        stages["took"] = round(float(took), 2)
        stages.pop("server_took", None)
    return {
        "question_hash": question_hash(question),
        "status": env.status,
        "candidates": env.candidates,
        "passages": len(env.passages),
        "tokens": env.spent_tokens,
        "budget": env.budget_tokens,
        "requests": requests,
        "rerank": env.rerank.used,
        "index": env.freshness.index,
        "ms": stages,
        "degradations": len(env.notes),
    }


def log_search(env: Envelope, question: str, requests: int) -> None:
    """The INFO record of a search, its DEBUG question, one WARNING per degradation note."""
    if search_log.isEnabledFor(logging.INFO):
        f = search_fields(env, question, requests)
        ms = " ".join(f"{k}={v:g}" for k, v in f["ms"].items())
        search_log.info(
            "search %s %s: %d candidate(s), %d passage(s), %d/%d tokens, %d request(s); ms %s",
            f["question_hash"],
            f["status"],
            f["candidates"],
            f["passages"],
            f["tokens"],
            f["budget"],
            requests,
            ms,
            extra={"osrag": f},
        )
    if search_log.isEnabledFor(logging.DEBUG):
        search_log.debug(
            "search %s question: %s",
            question_hash(question),
            question.strip(),
            extra={"osrag": {"question_hash": question_hash(question), "question": question.strip()}},
        )
    for note in env.notes:
        search_log.warning(
            "search %s degraded: %s",
            question_hash(question),
            note,
            extra={"osrag": {"question_hash": question_hash(question), "degradation": note}},
        )


def _search_attributes(span: Any, env: Envelope, question: str, requests: int) -> None:
    f = search_fields(env, question, requests)
    for key in ("question_hash", "status", "candidates", "passages", "tokens", "budget", "requests"):
        span.set_attribute(f"osrag.{key}", f[key])
    for stage, ms in f["ms"].items():
        span.set_attribute(f"osrag.ms.{stage}", ms)
    for note in env.notes:
        span.add_event("degradation", {"note": note})


# ---------------------------------------------------------------- ingest
def file_outcome(path: str, outcome: str, reason: str | None = None) -> None:
    """One file's outcome: indexed/skipped at DEBUG, failed at INFO (with the reason when known)."""
    level = logging.INFO if outcome == "failed" else logging.DEBUG
    if not ingest_log.isEnabledFor(level):
        return
    extra = {"osrag": {"path": path, "outcome": outcome, **({"reason": reason} if reason else {})}}
    if reason:
        ingest_log.log(level, "%s: %s (%s)", path, outcome, reason, extra=extra)
    else:
        ingest_log.log(level, "%s: %s", path, outcome, extra=extra)


def log_ingest(report: Any) -> None:
    """The INFO summary of an ingest (an ``osrag.ingest.report.IngestReport``) and each failure's reason."""
    for path, reason in getattr(report, "failed", ()):
        file_outcome(path, "failed", reason)
    if not ingest_log.isEnabledFor(logging.INFO):
        return
    f = {
        "index": report.index,
        "indexed": report.indexed,
        "skipped": report.skipped,
        "failed": len(report.failed),
        "failed_items": len(report.failed_items),
        "chunks": report.chunks,
        "tokens": report.tokens,
        "seconds": round(report.seconds, 3),
        "embed_seconds": round(report.embed_seconds, 3),
    }
    ingest_log.info(
        "ingest into %s: %d indexed, %d skipped, %d failed, %d chunk(s) in %.1f s (embedding %.1f s)",
        f["index"],
        f["indexed"],
        f["skipped"],
        f["failed"],
        f["chunks"],
        f["seconds"],
        f["embed_seconds"],
        extra={"osrag": f},
    )


def traced(name: str) -> Callable[[Callable[..., T]], Callable[..., T]]:
    """A span named ``name`` around each call of the decorated function (a no-op without OpenTelemetry)."""

    def wrap(fn: Callable[..., T]) -> Callable[..., T]:
        @functools.wraps(fn)
        def inner(*args: Any, **kwargs: Any) -> T:
            tracer = _tracer()
            if tracer is None:
                return fn(*args, **kwargs)
            with tracer.start_as_current_span(name):
                return fn(*args, **kwargs)

        return inner

    return wrap


# ---------------------------------------------------------------- the CLI's handler
#: LogRecord attributes that are not extra fields.
_STD = frozenset(logging.LogRecord("", 0, "", 0, "", (), None).__dict__) | {"message", "asctime"}


class JsonFormatter(logging.Formatter):
    """One JSON object per line: time, level, logger, message and the record's ``osrag`` fields."""

    def format(self, record: logging.LogRecord) -> str:
        out: dict[str, Any] = {
            "time": self.formatTime(record, "%Y-%m-%dT%H:%M:%S") + f".{int(record.msecs):03d}Z",
            "level": record.levelname,
            "logger": record.name,
            "message": record.getMessage(),
        }
        extra = getattr(record, "osrag", None)
        if isinstance(extra, Mapping):
            out.update(extra)
        if record.exc_info and record.exc_info[0] is not None:
            out["error"] = record.exc_info[0].__name__
        return json.dumps(out, ensure_ascii=False, default=str)


class _CurrentStderr(logging.StreamHandler):  # type: ignore[type-arg]
    """Writes to whatever ``sys.stderr`` is when a record comes, not the one at set-up: click's test
    runner (and any app embedding the CLI) swaps stderr per invocation and closes the old one."""

    @property  # type: ignore[override]
    def stream(self) -> Any:
        return sys.stderr

    @stream.setter
    def stream(self, value: Any) -> None:  # StreamHandler.__init__ assigns it; always sys.stderr
        pass


def configure_cli_logging(verbosity: int, fmt: str = "text", stream: Any = None) -> logging.Handler:
    """The CLI's handler on the ``osrag`` logger (stderr): WARNING by default, INFO with ``-v``,
    DEBUG with ``-vv``; ``fmt`` is ``text`` or ``json``. Libraries underneath stay at WARNING."""
    level = logging.WARNING if verbosity <= 0 else logging.INFO if verbosity == 1 else logging.DEBUG
    handler = logging.StreamHandler(stream) if stream is not None else _CurrentStderr()
    if fmt == "json":
        handler.setFormatter(JsonFormatter())
    else:
        handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))
    handler.formatter.converter = time.gmtime  # type: ignore[union-attr]
    root = logging.getLogger("osrag")
    for old in [h for h in root.handlers if getattr(h, "_osrag_cli", False)]:
        root.removeHandler(old)
    handler._osrag_cli = True  # type: ignore[attr-defined]
    if verbosity <= 0:
        # The CLI prints the failure itself as its one error line; the record would be a second.
        handler.addFilter(_not_a_failure_record)
    root.addHandler(handler)
    root.setLevel(level)
    return handler


def _not_a_failure_record(record: logging.LogRecord) -> bool:
    """False for the record of a search that failed (``observe_search``): its caller raises the error."""
    fields = getattr(record, "osrag", None)
    return not (isinstance(fields, dict) and "error" in fields and record.name == search_log.name)


def records_text(records: Iterable[logging.LogRecord]) -> str:
    """Everything a handler could print of ``records`` (message and extra fields), for secret scans."""
    fmt = JsonFormatter()
    return "\n".join(
        fmt.format(r) + " " + repr({k: v for k, v in r.__dict__.items() if k not in _STD}) for r in records
    )


__all__ = [
    "JsonFormatter",
    "configure_cli_logging",
    "file_outcome",
    "log_ingest",
    "log_search",
    "observe_search",
    "question_hash",
    "records_text",
    "search_fields",
    "traced",
]
