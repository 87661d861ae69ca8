"""IR metrics: textbook values, the dedupe convention, nan handling."""

from __future__ import annotations

import math

import numpy as np
import pytest

from osrag.metrics import (
    dedupe,
    hit_at_k,
    mean,
    ndcg_at_k,
    percentile,
    recall_at_k,
    reciprocal_rank,
)


def test_dedupe_keeps_first_occurrence() -> None:
    assert dedupe(["s1", "s2", "s1", "s3", "s2"]) == ["s1", "s2", "s3"]
    assert dedupe([]) == []


def test_dedupe_rejects_a_bare_string() -> None:
    with pytest.raises(TypeError):
        dedupe("abc")


# ---------------------------------------------------------------- hit / recall / rr


def test_hit_at_k() -> None:
    ranked = ["x", "y", "a"]
    assert hit_at_k(ranked, {"a"}, 2) == 0.0
    assert hit_at_k(ranked, {"a"}, 3) == 1.0
    assert hit_at_k(ranked, {"a"}, 100) == 1.0
    assert hit_at_k([], {"a"}, 5) == 0.0


def test_hit_at_k_counts_sections_not_chunks() -> None:
    # Three chunks of section x would otherwise push a out of the top 2.
    assert hit_at_k(["x", "x", "x", "a"], {"a"}, 2) == 1.0


def test_recall_at_k() -> None:
    ranked = ["a", "b", "c", "d"]
    rel = {"b", "d", "z"}
    assert recall_at_k(ranked, rel, 1) == 0.0
    assert recall_at_k(ranked, rel, 2) == pytest.approx(1 / 3)
    assert recall_at_k(ranked, rel, 4) == pytest.approx(2 / 3)
    assert recall_at_k(["b", "b", "d"], ["b", "d"], 2) == 1.0


def test_reciprocal_rank() -> None:
    assert reciprocal_rank(["a", "b"], {"a"}) == 1.0
    assert reciprocal_rank(["x", "y", "a", "b"], {"a", "b"}) == pytest.approx(1 / 3)
    assert reciprocal_rank(["x", "x", "a"], {"a"}) == 0.5
    assert reciprocal_rank(["x", "y"], {"a"}) == 0.0


@pytest.mark.parametrize(
    "metric",
    [
        lambda r, rel: hit_at_k(r, rel, 3),
        lambda r, rel: recall_at_k(r, rel, 3),
        reciprocal_rank,
        lambda r, rel: ndcg_at_k(r, rel, 3),
    ],
)
def test_nothing_relevant_is_nan(metric) -> None:  # type: ignore[no-untyped-def]
    assert math.isnan(metric(["a", "b"], set()))


@pytest.mark.parametrize("k", [0, -1, True, 2.5])
def test_bad_k_raises(k: int) -> None:
    with pytest.raises(ValueError, match="k must be"):
        recall_at_k(["a"], {"a"}, k)
    with pytest.raises(ValueError, match="k must be"):
        ndcg_at_k(["a"], {"a"}, k)


def test_relevant_as_bare_string_raises() -> None:
    with pytest.raises(TypeError):
        recall_at_k(["a"], "a", 1)


# ---------------------------------------------------------------- nDCG


def test_ndcg_textbook_graded_example() -> None:
    # The classic example: ranked gains 3,2,3,0,1,2; two more judged documents
    # (gains 3 and 2) were not retrieved, so the ideal is 3,3,3,2,2,2.
    gains = {"d1": 3, "d2": 2, "d3": 3, "d4": 0, "d5": 1, "d6": 2, "d7": 3, "d8": 2}
    ranked = ["d1", "d2", "d3", "d4", "d5", "d6"]
    dcg = 3 + 2 / math.log2(3) + 3 / 2 + 0 + 1 / math.log2(6) + 2 / math.log2(7)
    idcg = 3 + 3 / math.log2(3) + 3 / 2 + 2 / math.log2(5) + 2 / math.log2(6) + 2 / math.log2(7)
    assert dcg == pytest.approx(6.861, abs=1e-3)
    assert idcg == pytest.approx(8.740, abs=1e-3)
    assert ndcg_at_k(ranked, gains, 6) == pytest.approx(dcg / idcg)
    assert ndcg_at_k(ranked, gains, 6) == pytest.approx(0.785, abs=1e-3)


def test_ndcg_binary() -> None:
    assert ndcg_at_k(["x", "a"], {"a"}, 2) == pytest.approx(1 / math.log2(3))
    assert ndcg_at_k(["a", "x"], {"a"}, 2) == 1.0
    assert ndcg_at_k(["x", "y"], {"a"}, 2) == 0.0
    # Two relevant, one found at rank 2: (1/log2 3) / (1 + 1/log2 3).
    expected = (1 / math.log2(3)) / (1 + 1 / math.log2(3))
    assert ndcg_at_k(["x", "a", "y"], ["a", "b"], 3) == pytest.approx(expected)


def test_ndcg_ideal_is_cut_at_k() -> None:
    # Five relevant items, k=1, the top one is relevant: perfect at 1.
    assert ndcg_at_k(["a"], {"a", "b", "c", "d", "e"}, 1) == 1.0


def test_ndcg_perfect_graded_order_is_one() -> None:
    gains = {"a": 3.0, "b": 2.0, "c": 1.0}
    assert ndcg_at_k(["a", "b", "c", "x"], gains, 10) == pytest.approx(1.0)
    assert ndcg_at_k(["c", "b", "a"], gains, 3) < 1.0


def test_ndcg_repeats_do_not_earn_gain_twice() -> None:
    assert ndcg_at_k(["a", "a", "b"], {"a", "b"}, 2) == pytest.approx(1.0)


def test_ndcg_zero_gain_only_is_nan_and_negative_gain_raises() -> None:
    assert math.isnan(ndcg_at_k(["a"], {"a": 0.0}, 1))
    with pytest.raises(ValueError, match="gain"):
        ndcg_at_k(["a"], {"a": -1.0}, 1)


# ---------------------------------------------------------------- aggregation


def test_mean_ignores_nan() -> None:
    assert mean([1.0, math.nan, 0.0]) == 0.5
    assert math.isnan(mean([]))
    assert math.isnan(mean([math.nan, math.nan]))
    assert mean(x for x in (1.0, 2.0, 3.0)) == 2.0


def test_percentile_linear_interpolation() -> None:
    assert percentile([1.0, 2.0, 3.0, 4.0], 50) == 2.5
    assert percentile([4.0, 1.0, 3.0, 2.0], 0) == 1.0
    assert percentile([4.0, 1.0, 3.0, 2.0], 100) == 4.0
    assert percentile([10.0, 20.0], 25) == 12.5
    assert percentile([7.0], 95) == 7.0


def test_percentile_matches_numpy_default() -> None:
    values = [13.0, 2.5, 8.0, 1.0, 99.0, 42.0, 7.0]
    for p in (0, 5, 33.3, 50, 90, 95, 99, 100):
        assert percentile(values, p) == pytest.approx(float(np.percentile(values, p)))


def test_percentile_nan_and_empty() -> None:
    assert percentile([1.0, math.nan, 3.0], 50) == 2.0
    assert math.isnan(percentile([], 50))


@pytest.mark.parametrize("p", [-1, 100.5, math.nan])
def test_percentile_rejects_p_out_of_range(p: float) -> None:
    with pytest.raises(ValueError, match="p must be"):
        percentile([1.0], p)
