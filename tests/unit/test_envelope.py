"""The self-describing answer: JSON round trip and the readable view."""

from __future__ import annotations

import json

import pytest

from osrag.envelope import (
    Envelope,
    Freshness,
    LeftOutItem,
    Passage,
    RerankInfo,
    StageScores,
    render_text,
)


def passage(
    rank: int, chunk_id: str, heading_path: list[str], text: str, tokens: int, **kw: object
) -> Passage:
    return Passage(
        chunk_id=chunk_id,
        doc_id=chunk_id.split(":")[0],
        title=f"Title {chunk_id}",
        heading_path=heading_path,
        source=f"/docs/{chunk_id.split(':')[0]}.md",
        text=text,
        tokens=tokens,
        rank=rank,
        **kw,
    )


def envelope(**kw: object) -> Envelope:
    base: dict[str, object] = dict(
        question="Как заваривать зелёный чай?",
        status="budgeted",
        message="a budgeted selection: 1 relevant passage(s) did not fit 120 tokens",
        budget_tokens=120,
        spent_tokens=110,
        passages=[
            passage(
                1,
                "brewing:0",
                ["Как заваривать чай", "Зелёный чай"],
                "Вода 70–80 градусов.\nДве минуты.",
                60,
                scores=StageScores(fused=0.0164, relevance=1.0),
            ),
            passage(
                2,
                "tea15:0",
                ["Зелёный чай TEA15 Сенча"],
                "Артикул TEA15.",
                50,
                scores=StageScores(fused=0.0157, rerank=2.5, relevance=1.0),
                rerank_truncated=True,
            ),
        ],
        left_out=[
            LeftOutItem(chunk_id="brewing:1", doc_id="brewing", tokens=57, reason="budget"),
            LeftOutItem(
                chunk_id="tea10:0", doc_id="tea10", tokens=53, reason="duplicate", duplicate_of="tea15:0"
            ),
        ],
        left_out_for_budget=1,
        duplicates_dropped=1,
        below_threshold=5,
        candidates=9,
        rerank=RerankInfo(
            model="tiny", used=True, note="1 candidate(s) truncated to 32 tokens for reranking"
        ),
        filters={"category": ["catalog", "guide"], "include_archived": False, "updated_after": "2026-01-01"},
        freshness=Freshness(
            alias="a",
            index="a-fp-20260101",
            embedding_model="navec:news-300d",
            dimension=300,
            last_ingest_at="2026-01-01T00:00:00+00:00",
            age_seconds=7200.0,
        ),
        timings_ms={"embed_query": 1.5, "retrieve": 12.25, "rerank": 3.0, "select": 0.5, "total": 20.0},
        notes=["a note for the reader"],
    )
    base.update(kw)
    return Envelope(**base)  # type: ignore[arg-type]


# --------------------------------------------------------------------------- JSON
def test_envelope_json_round_trip() -> None:
    env = envelope()
    raw = env.model_dump_json()
    data = json.loads(raw)  # plain JSON, no custom types
    assert data["status"] == "budgeted"
    assert data["passages"][0]["heading_path"] == ["Как заваривать чай", "Зелёный чай"]
    assert data["left_out"][1] == {
        "chunk_id": "tea10:0",
        "doc_id": "tea10",
        "tokens": 53,
        "reason": "duplicate",
        "duplicate_of": "tea15:0",
    }
    assert data["filters"]["category"] == ["catalog", "guide"]
    assert data["freshness"]["age_seconds"] == 7200.0
    back = Envelope.model_validate_json(raw)
    assert back == env
    assert back.model_dump() == env.model_dump()


def test_envelope_json_round_trip_of_an_empty_answer() -> None:
    env = envelope(
        status="nothing_relevant",
        message="no candidate passed the relevance threshold",
        spent_tokens=0,
        passages=[],
        left_out=[],
        left_out_for_budget=0,
        duplicates_dropped=0,
        rerank=RerankInfo(),
        notes=[],
        freshness=Freshness(alias="a", index="a-1"),
    )
    assert Envelope.model_validate_json(env.model_dump_json()) == env
    assert json.loads(env.model_dump_json())["freshness"]["last_ingest_at"] is None


def test_envelope_refuses_an_unknown_status_or_reason() -> None:
    with pytest.raises(ValueError):
        envelope(status="partial")
    with pytest.raises(ValueError):
        LeftOutItem(chunk_id="c", doc_id="d", tokens=1, reason="too_long")  # type: ignore[arg-type]


# --------------------------------------------------------------------------- readable view
def line_index(lines: list[str], prefix: str) -> int:
    found = [i for i, ln in enumerate(lines) if ln.startswith(prefix)]
    assert found, f"no line starts with {prefix!r} in:\n" + "\n".join(lines)
    return found[0]


def test_render_text_passages_then_budget_line_then_left_out() -> None:
    out = render_text(envelope())
    lines = out.splitlines()
    p1 = line_index(lines, "[1] brewing · Как заваривать чай > Зелёный чай")
    p2 = line_index(lines, "[2] tea15 · Зелёный чай TEA15 Сенча")
    budget = line_index(lines, "budget: 110/120 tokens · budgeted · 2 passage(s) from 9 candidate(s)")
    left = line_index(lines, "left out: 1 for budget, 1 duplicate(s), 5 below the relevance threshold")
    item_budget = line_index(lines, "  - brewing:1 57 tok: budget")
    item_dup = line_index(lines, "  - tea10:0 53 tok: duplicate (duplicate of tea15:0)")
    assert p1 < p2 < budget < left < item_budget < item_dup
    # passage bodies are shown, indented, line by line, with the source
    assert "    Вода 70–80 градусов." in lines and "    Две минуты." in lines
    assert "    /docs/brewing.md" in lines
    # the reranker's score wins over the fused one when there is one
    assert "(50 tok, score 2.5000)" in lines[p2] and "(60 tok, score 0.0164)" in lines[p1]
    assert "rerank on (1 candidate(s) truncated to 32 tokens for reranking)" in lines[budget]
    assert "nothing relevant found" not in out


def test_render_text_freshness_and_notes_come_last() -> None:
    lines = render_text(envelope()).splitlines()
    idx = line_index(lines, "index: a-fp-20260101 (navec:news-300d, dim 300) · last ingest 2.0 h ago")
    assert idx > line_index(lines, "left out:")
    assert lines[-1] == "note: a note for the reader"


def test_render_text_nothing_relevant_wording() -> None:
    env = envelope(
        status="nothing_relevant",
        message="no candidate passed the relevance threshold",
        spent_tokens=0,
        passages=[],
        left_out=[],
        left_out_for_budget=0,
        duplicates_dropped=0,
        rerank=RerankInfo(note="disabled by configuration"),
    )
    out = render_text(env)
    lines = out.splitlines()
    assert lines[0] == (
        "Ничего релевантного не найдено / nothing relevant found: no candidate passed the relevance threshold"
    )
    assert not any(ln.startswith("[") for ln in lines)
    assert "budget: 0/120 tokens · nothing_relevant · 0 passage(s) from 9 candidate(s)" in out
    assert "rerank off (disabled by configuration)" in out
    assert "left out:" not in out


def test_render_text_breadcrumb_falls_back_to_title_and_survives_missing_scores() -> None:
    env = envelope(passages=[passage(1, "faq:0", [], "Ответ.", 3)], left_out=[])
    out = render_text(env)
    assert "[1] faq · Title faq:0  (3 tok)" in out.splitlines()


def test_render_text_never_ingested_and_unknown_age() -> None:
    never = render_text(envelope(freshness=Freshness(alias="a", index="a-1")))
    assert "last ingest never" in never
    odd = render_text(envelope(freshness=Freshness(alias="a", index="a-1", last_ingest_at="yesterday")))
    assert "last ingest at yesterday" in odd
