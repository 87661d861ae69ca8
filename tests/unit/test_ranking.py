"""The pure rank-and-select step (``osrag.search.ranking``): hand-made hits in, an envelope out, no cluster."""

from __future__ import annotations

import datetime as dt
import math
from typing import Any

import pytest

from osrag.envelope import passage_of, render_text
from osrag.errors import InputError
from osrag.names import age_seconds
from osrag.records import ChunkSource, IndexMeta
from osrag.search import gate
from osrag.search.candidates import Candidate
from osrag.search.ranking import SelectionPolicy, freshness, rank_and_select
from osrag.settings import Settings

# Thresholds pinned here: these tests are about the logic, not the calibrated defaults.
S = Settings(
    url="http://127.0.0.1:9",
    alias="unit",
    gate_cosine_floor=0.65,
    _env_file=None,
)
FRESH = freshness("unit", "unit-0123456789-20260101000000000", IndexMeta(embedding_model="m", dimension=3))
POLICY = SelectionPolicy.from_settings(S)


def unit(*xs: float) -> list[float]:
    n = math.sqrt(sum(x * x for x in xs))
    return [x / n for x in xs]


#: What the index's analyzers would make of the question and the texts below (hand-made:
#: ``ru_search`` terms of the question with IDF weights, ``ru_index`` terms of each chunk).
QUESTION_TERMS = {"срок": 1.0, "доставк": 1.0, "курьер": 1.0, "москв": 1.0}
TEXT_TERMS: dict[str, frozenset[str]] = {}


def hit(
    cid: str,
    text: str,
    tokens: int,
    vec: list[float],
    rank: int,
    terms: frozenset[str] = frozenset(),
    **src: Any,
) -> Candidate:
    TEXT_TERMS[cid] = terms
    source = {
        "chunk_id": cid,
        "doc_id": cid.split("#")[0],
        "text": text,
        "token_count": tokens,
        "embedding": vec,
        "kind": "text",
        "title": f"title of {cid}",
        "heading_path": ["Доставка", cid],
        "section_id": f"{cid}-s",
        **src,
    }
    return Candidate(ChunkSource.of(source), fused=1.0 / (60 + rank), rank=rank)


def run(
    question: str,
    hits: list[Candidate],
    budget: int,
    qvec: list[float] | None = None,
    policy: str | None = None,
    **kw: Any,
) -> Any:
    analysis = gate.Analysis(QUESTION_TERMS, tuple(TEXT_TERMS[h.chunk_id] for h in hits))
    gate.annotate(question, analysis, qvec, hits)
    return rank_and_select(
        question,
        hits,
        budget,
        POLICY.with_overrides(policy),
        fresh=FRESH,
        count_tokens=lambda t: len(t.split()),
        **kw,
    )


QUESTION = "сроки доставки курьером по Москве"
ON = [
    hit(
        "a#1",
        "Сроки доставки курьером по Москве: один день.",
        40,
        unit(1, 0, 0),
        1,
        frozenset(QUESTION_TERMS),
    ),
    hit(
        "b#1",
        "Доставка курьером по Москве занимает сутки, сроки указаны в заказе.",
        50,
        unit(0, 1, 0),
        2,
        frozenset({*QUESTION_TERMS, "заказ", "сутк"}),
    ),
]
OFF = hit("z#1", "Рецепт яблочного пирога с корицей.", 30, unit(0, 0, 1), 3, frozenset({"рецепт", "пирог"}))


def fresh_hits() -> list[Candidate]:
    return [Candidate(h.source, h.fused, h.rank) for h in [*ON, OFF]]


def test_everything_relevant_fits_is_complete_and_off_topic_is_below_threshold() -> None:
    env = run(QUESTION, fresh_hits(), budget=1000)
    assert env.status == "complete"
    assert [p.chunk_id for p in env.passages] == ["a#1", "b#1"]
    assert [p.rank for p in env.passages] == [1, 2]
    assert env.spent_tokens == 90
    assert env.below_threshold == 1 and env.candidates == 3
    assert env.left_out == []
    first = env.passages[0]
    assert (first.doc_id, first.title, first.heading_path, first.section_id) == (
        "a",
        "title of a#1",
        ["Доставка", "a#1"],
        "a#1-s",
    )
    assert first.scores.fused == pytest.approx(1 / 61) and first.scores.relevance == 1.0


def test_a_tight_budget_is_budgeted_and_names_what_was_left_out() -> None:
    env = run(QUESTION, fresh_hits(), budget=45)
    assert env.status == "budgeted"
    assert [p.chunk_id for p in env.passages] == ["a#1"]
    assert [(lo.chunk_id, lo.reason, lo.tokens) for lo in env.left_out] == [("b#1", "budget", 50)]
    assert env.left_out_for_budget == 1
    assert "did not fit 45 tokens" in env.message


def test_nothing_fits_is_still_budgeted_not_nothing_relevant() -> None:
    env = run(QUESTION, fresh_hits(), budget=10)
    assert env.status == "budgeted" and env.passages == []
    assert "none of the 2 relevant passage(s) fits 10 tokens" in env.message


def test_off_topic_only_and_no_candidates_are_nothing_relevant() -> None:
    env = run(QUESTION, [fresh_hits()[2]], budget=1000)
    assert env.status == "nothing_relevant" and env.below_threshold == 1
    assert env.message == "no candidate passed the relevance threshold"
    env = run(QUESTION, [], budget=1000)
    assert env.status == "nothing_relevant" and env.message == "the index returned no candidates"


def test_a_near_copy_is_dropped_as_a_duplicate_of_the_better_ranked_one() -> None:
    hits = fresh_hits()[:2]
    copy = hit("c#1", ON[0].text, 40, unit(1, 0, 0), 3, frozenset(QUESTION_TERMS))
    env = run(QUESTION, [*hits, copy], budget=1000)
    assert [p.chunk_id for p in env.passages] == ["a#1", "b#1"]
    assert env.duplicates_dropped == 1
    assert [(lo.chunk_id, lo.reason, lo.duplicate_of) for lo in env.left_out] == [("c#1", "duplicate", "a#1")]
    assert env.status == "complete"


def test_a_close_embedding_passes_the_gate_without_shared_words() -> None:
    hits = [hit("v#1", "Совсем другие слова.", 20, unit(1, 0.05, 0), 1)]
    assert run(QUESTION, hits, budget=100).status == "nothing_relevant"
    hits = [hit("v#1", "Совсем другие слова.", 20, unit(1, 0.05, 0), 1)]
    env = run(QUESTION, hits, budget=100, qvec=unit(1, 0, 0))
    assert env.status == "complete" and env.passages[0].scores.relevance > S.gate_cosine_floor


def test_stored_counts_or_the_callers_tokenizer() -> None:
    env = run(QUESTION, fresh_hits(), budget=1000, use_stored_counts=False)
    assert [p.tokens for p in env.passages] == [7, 10]  # words, by the lambda tokenizer


def test_the_passage_mapping_and_freshness() -> None:
    src = ChunkSource.of(
        {"chunk_id": "d#2", "doc_id": "d", "text": "t", "token_count": 7, "start": 3, "end": 9}
    )
    p = passage_of(src, 4)
    assert (p.chunk_id, p.doc_id, p.tokens, p.rank, p.start, p.end, p.kind) == (
        "d#2",
        "d",
        7,
        4,
        3,
        9,
        "text",
    )
    now = dt.datetime(2026, 1, 2, tzinfo=dt.UTC)
    assert age_seconds("2026-01-01T00:00:00+00:00", now) == 86400.0
    assert age_seconds("not a date") is None and age_seconds(None) is None
    assert FRESH.age_seconds is None and FRESH.embedding_model == "m"


def test_the_envelope_names_the_policy_and_minimal_drops_weaker_evidence() -> None:
    weak = hit("w#1", "Курьер приезжает по будням.", 20, unit(0, 0.6, 0.8), 3, frozenset({"курьер"}))
    hits = [*fresh_hits()[:2], weak]
    recall = run(QUESTION, hits, budget=1000)
    assert recall.selection == S.selection == "recall"
    assert [p.chunk_id for p in recall.passages] == ["a#1", "b#1", "w#1"]  # shares a content term
    minimal = run(QUESTION, [*fresh_hits()[:2], weak], budget=1000, policy="minimal")
    assert minimal.selection == "minimal"
    assert [p.chunk_id for p in minimal.passages] == ["a#1", "b#1"]
    assert "minimal selection" in render_text(minimal)
    with pytest.raises(InputError, match="unknown selection policy 'lean'"):
        run(QUESTION, fresh_hits(), budget=1000, policy="lean")


def test_a_named_code_no_candidate_holds_is_nothing_relevant_and_the_message_names_it() -> None:
    env = run("сроки доставки курьером TEA-MATCHA-30 по Москве", fresh_hits(), budget=1000)
    assert env.status == "nothing_relevant" and env.passages == []
    assert env.message == "no candidate holds tea-matcha-30, which the question names"
