"""Metric wrappers around ranx (textbook values, the one-finding-once rule) and the budget measures."""

from __future__ import annotations

import math

import pytest

from osrag.evaluation import metrics as m


def _scores(relevant: dict[str, dict[str, int]], ranked: dict[str, list[str]]) -> dict[str, dict[str, float]]:
    return m.per_query(m.qrels(relevant), m.run(ranked, "r"))


def test_textbook_values_per_question() -> None:
    got = _scores(
        {"q1": {"a": 1}, "q2": {"b": 1, "c": 1}, "q3": {"z": 1}},
        {"q1": ["x", "y", "a"], "q2": ["b", "x", "c"], "q3": ["x"]},
    )
    assert got["mrr@10"] == {"q1": pytest.approx(1 / 3), "q2": 1.0, "q3": 0.0}
    assert got["recall@10"] == {"q1": 1.0, "q2": 1.0, "q3": 0.0}
    assert got["hit_rate@5"] == {"q1": 1.0, "q2": 1.0, "q3": 0.0}
    # Two relevant, found at 1 and 3: (1 + 1/log2 4) / (1 + 1/log2 3).
    assert got["ndcg@10"]["q2"] == pytest.approx((1 + 0.5) / (1 + 1 / math.log2(3)))
    assert got["ndcg@10"]["q1"] == pytest.approx(0.5)


def test_a_repeated_key_counts_once_at_its_best_rank() -> None:
    # Three chunks of section x would otherwise push a out of the top 2 and count x thrice.
    run = m.run({"q": ["x", "x", "x", "a"]}, "r")
    assert list(run.to_dict()["q"]) == ["x", "a"]
    got = _scores({"q": {"a": 1}}, {"q": ["x", "x", "x", "a"]})
    assert got["mrr@10"]["q"] == 0.5


def test_a_question_without_results_scores_zero_not_missing() -> None:
    got = _scores({"q1": {"a": 1}, "q2": {"b": 1}}, {"q1": ["a"], "q2": []})
    assert got["recall@10"] == {"q1": 1.0, "q2": 0.0}
    got = _scores({"q1": {"a": 1}, "q2": {"b": 1}}, {"q1": ["a"]})
    assert got["recall@10"]["q2"] == 0.0


def test_no_answer_questions_are_left_out_of_the_qrels() -> None:
    q = m.qrels({"q1": {"a": 1}, "q2": {}})
    assert set(q.to_dict()) == {"q1"}


def test_paired_test_finds_a_real_difference_and_not_a_fake_one() -> None:
    n = 40
    rel = {f"q{i}": {"a": 1} for i in range(n)}
    good = m.run({f"q{i}": ["a", "x"] for i in range(n)}, "good")
    bad = m.run({f"q{i}": ["x", "y", "a"] if i % 4 else ["a"] for i in range(n)}, "bad")
    same = m.run({f"q{i}": ["a", "x"] for i in range(n)}, "same")
    qrels = m.qrels(rel)
    p = m.significance(qrels, good, bad)
    assert p["mrr@10"] < 0.05 and p["hit_rate@5"] == 1.0  # both always hit in the top 5
    assert m.mark(0.5 - 1.0, p["mrr@10"]) == "▼" and m.mark(0.1, p["mrr@10"]) == "▲"
    assert m.mark(0.0, p["hit_rate@5"]) == ""
    assert m.significance(qrels, good, same)["mrr@10"] == 1.0
    assert m.significance(qrels, good, bad, stat_test="student")["mrr@10"] < 0.05


def test_mark_needs_p_below_threshold() -> None:
    assert m.mark(0.2, 0.049) == "▲" and m.mark(0.2, 0.05) == "" and m.mark(0.2, math.nan) == ""


def test_mean_and_percentile_skip_nan() -> None:
    assert m.mean([1.0, math.nan, 0.0]) == 0.5
    assert math.isnan(m.mean([])) and math.isnan(m.mean([math.nan]))
    assert m.percentile([1.0, 2.0, 3.0, 4.0, math.nan], 50) == 2.5
    assert math.isnan(m.percentile([], 95))


# ------------------------------------------------------------------ budget measures
def test_topk_stops_at_the_first_item_that_does_not_fit() -> None:
    items = [("a", 5), ("b", 10), ("c", 1)]
    assert [i for i, _ in m.topk_within_budget(items, 12, lambda it: it[1])] == ["a"]
    assert [i for i, _ in m.topk_within_budget(items, 16, lambda it: it[1])] == ["a", "b", "c"]
    assert m.topk_within_budget(items, 4, lambda it: it[1]) == []


def test_delivery_counts_relevant_keys_once_and_off_topic_tokens() -> None:
    got = m.delivery([("s1", 30), (None, 10), ("s1", 20)], {"s1", "s2"})
    assert got["recall_in_budget"] == 0.5 and got["answered"] == 1.0
    assert got["tokens"] == 60 and got["off_topic_share"] == pytest.approx(10 / 60)
    empty = m.delivery([], {"s1"})
    assert (
        empty["recall_in_budget"] == 0.0 and empty["answered"] == 0.0 and math.isnan(empty["off_topic_share"])
    )
    # A key that is not relevant to this question is off-topic even when it is a real key.
    assert m.delivery([("s9", 5)], {"s1"})["off_topic_share"] == 1.0


def test_budget_summary_averages_tokens_over_answered_questions_only() -> None:
    rows = [m.delivery([("s1", 100)], {"s1"}), m.delivery([(None, 300)], {"s2"})]
    got = m.budget_summary(rows)
    assert got["recall_in_budget"] == 0.5 and got["answered"] == 0.5
    assert got["tokens_per_answered"] == 100.0  # the unanswered question's 300 tokens are not averaged in
    assert got["off_topic_share"] == 0.5


def test_nothing_found_rate() -> None:
    assert m.nothing_found_rate([True, False, False, False]) == 0.25
    assert math.isnan(m.nothing_found_rate([]))
