"""osrag.observability without a node: the search record, degradations, failures, JSON lines, spans.

The same records from real searches and ingests (and the secret scan of a whole run) are in
tests/integration/test_observability.py.
"""

from __future__ import annotations

import functools
import io
import json
import logging

import pytest

from osrag.envelope import Envelope, Freshness
from osrag.errors import ClusterError
from osrag.observability import (
    JsonFormatter,
    configure_cli_logging,
    observe_search,
    question_hash,
)
from osrag.steps import Call, Inline, Steps, Work, drive

QUESTION = "действует ли TEA15 на лампы?"


def envelope(notes: list[str]) -> Envelope:
    return Envelope(
        question=QUESTION,
        status="budgeted",
        message="",
        budget_tokens=800,
        spent_tokens=640,
        candidates=40,
        freshness=Freshness(alias="kb", index="kb-1"),
        timings_ms={"embed_query": 3.2, "retrieve": 21.0, "server_took": 12.0, "select": 1.5, "total": 30.1},
        notes=notes,
    )


def path(notes: list[str], fail: bool = False) -> Steps[Envelope]:
    yield Work(functools.partial(len, "x"))
    try:
        yield Call("search", "search", {})
    except ClusterError:
        pass
    yield Call("search", "search", {})
    if fail:
        raise ClusterError("boom")
    return envelope(notes)


def answer(step: Call | Work) -> object:
    if isinstance(step, Work):
        return step.fn()
    answer.calls += 1  # type: ignore[attr-defined]
    if answer.calls == 1:  # type: ignore[attr-defined]
        raise ClusterError("refused once")
    return {}


def test_one_info_record_per_search_with_hash_numbers_and_stages(caplog: pytest.LogCaptureFixture) -> None:
    answer.calls = 0  # type: ignore[attr-defined]
    with caplog.at_level(logging.INFO, logger="osrag"):
        env = drive(path(["reranker unavailable: x"]), observe_search(Inline(answer), QUESTION))
    assert env.spent_tokens == 640
    infos = [r for r in caplog.records if r.levelno == logging.INFO and r.name == "osrag.search"]
    assert len(infos) == 1
    f = infos[0].osrag  # type: ignore[attr-defined]
    assert f["question_hash"] == question_hash(QUESTION) and QUESTION not in infos[0].getMessage()
    assert (f["status"], f["candidates"], f["passages"], f["tokens"], f["requests"]) == (
        "budgeted",
        40,
        0,
        640,
        2,
    )
    assert f["ms"] == {"embed": 3.2, "request": 21.0, "took": 12.0, "select": 1.5, "total": 30.1}
    warnings = [r for r in caplog.records if r.levelno == logging.WARNING]
    assert [r.osrag["degradation"] for r in warnings] == ["reranker unavailable: x"]  # type: ignore[attr-defined]
    assert not [r for r in caplog.records if r.levelno == logging.DEBUG]


def test_the_question_text_only_at_debug(caplog: pytest.LogCaptureFixture) -> None:
    answer.calls = 0  # type: ignore[attr-defined]
    with caplog.at_level(logging.DEBUG, logger="osrag"):
        drive(path([]), observe_search(Inline(answer), QUESTION))
    debug = [r for r in caplog.records if r.levelno == logging.DEBUG]
    assert len(debug) == 1 and QUESTION in debug[0].getMessage()


def test_a_failed_search_is_one_warning_and_the_error_propagates(caplog: pytest.LogCaptureFixture) -> None:
    answer.calls = 0  # type: ignore[attr-defined]
    with caplog.at_level(logging.INFO, logger="osrag"), pytest.raises(ClusterError, match="boom"):
        drive(path([], fail=True), observe_search(Inline(answer), QUESTION))
    (rec,) = caplog.records
    assert rec.levelno == logging.WARNING and "ClusterError" in rec.getMessage()
    assert "2 request(s)" in rec.getMessage()


def test_json_lines_carry_the_fields_and_the_cli_handler_is_replaced_not_stacked() -> None:
    out = io.StringIO()
    configure_cli_logging(1, "json", stream=out)
    configure_cli_logging(1, "json", stream=out)
    try:
        answer.calls = 0  # type: ignore[attr-defined]
        drive(path([]), observe_search(Inline(answer), QUESTION))
    finally:
        configure_cli_logging(0, "text")
    lines = [json.loads(x) for x in out.getvalue().splitlines()]
    assert len(lines) == 1
    assert lines[0]["logger"] == "osrag.search" and lines[0]["level"] == "INFO"
    assert lines[0]["requests"] == 2 and lines[0]["ms"]["took"] == 12.0
    assert len([h for h in logging.getLogger("osrag").handlers if getattr(h, "_osrag_cli", False)]) == 1


def test_json_formatter_is_one_line_per_record() -> None:
    rec = logging.LogRecord("osrag.x", logging.INFO, __file__, 1, "a\nb %s", ("c",), None)
    line = JsonFormatter().format(rec)
    assert "\n" not in line and json.loads(line)["message"] == "a\nb c"


@pytest.fixture(scope="module")
def spans():
    """The SDK's in-memory exporter behind the global tracer provider (set once per process)."""
    pytest.importorskip("opentelemetry.sdk")
    from opentelemetry import trace
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

    exporter = InMemorySpanExporter()
    provider = trace.get_tracer_provider()
    if not isinstance(provider, TracerProvider):
        provider = TracerProvider()
        trace.set_tracer_provider(provider)
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    return exporter


def test_a_search_is_a_span_with_one_child_per_step(spans) -> None:  # type: ignore[no-untyped-def]
    spans.clear()
    answer.calls = 0  # type: ignore[attr-defined]
    drive(path(["partial answer"]), observe_search(Inline(answer), QUESTION))
    got = spans.get_finished_spans()
    root = next(s for s in got if s.name == "osrag.search")
    children = [s for s in got if s.parent is not None and s.parent.span_id == root.context.span_id]
    assert [s.name for s in children] == ["len", "opensearch search", "opensearch search"]
    assert children[1].status.status_code.name == "ERROR"  # the refused request
    assert root.attributes["osrag.requests"] == 2 and root.attributes["osrag.ms.took"] == 12.0
    assert root.attributes["osrag.question_hash"] == question_hash(QUESTION)
    assert QUESTION not in str(dict(root.attributes))
    assert [e.name for e in root.events] == ["degradation"]


def test_a_failed_search_span_is_an_error(spans) -> None:  # type: ignore[no-untyped-def]
    spans.clear()
    answer.calls = 0  # type: ignore[attr-defined]
    with pytest.raises(ClusterError):
        drive(path([], fail=True), observe_search(Inline(answer), QUESTION))
    root = next(s for s in spans.get_finished_spans() if s.name == "osrag.search")
    assert root.status.status_code.name == "ERROR"


def test_ingest_stages_are_spans_nested_under_the_ingest(spans) -> None:  # type: ignore[no-untyped-def]
    from osrag.ingest.indexing import Ingester
    from osrag.observability import traced

    spans.clear()

    @traced("osrag.ingest")
    def ingest() -> None:
        embed()

    @traced("osrag.ingest.embed")
    def embed() -> None:
        pass

    ingest()
    got = {s.name: s for s in spans.get_finished_spans()}
    assert got["osrag.ingest.embed"].parent.span_id == got["osrag.ingest"].context.span_id
    # the ingest path itself carries the decorators
    assert all(
        hasattr(getattr(Ingester, m), "__wrapped__") for m in ("_ingest", "_embed_batch", "_write_batch")
    )


def test_cli_handler_writes_to_the_current_stderr(monkeypatch: pytest.MonkeyPatch) -> None:
    """click's runner swaps stderr per invocation and closes the old one: records follow the swap."""
    import io
    import logging
    import sys

    from osrag.observability import configure_cli_logging

    first = io.StringIO()
    monkeypatch.setattr(sys, "stderr", first)
    handler = configure_cli_logging(0)
    try:
        first.close()
        second = io.StringIO()
        monkeypatch.setattr(sys, "stderr", second)
        logging.getLogger("osrag.test").warning("after the swap")
        assert "after the swap" in second.getvalue()
    finally:
        logging.getLogger("osrag").removeHandler(handler)
