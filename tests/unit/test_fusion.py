"""Reference fusion maths: hand-computed values, tie rules, validation."""

from __future__ import annotations

import itertools
import math
import random

import pytest

from osrag.fusion import min_max_arithmetic, rrf


def as_dict(pairs: list[tuple[str, float]]) -> dict[str, float]:
    return dict(pairs)


# ---------------------------------------------------------------- rrf


def test_rrf_hand_computed_example() -> None:
    # A: 1st in vector, 3rd in BM25; B: 1st in BM25 only; C: 2nd in both.
    vector = ["A", "C"]
    bm25 = ["B", "C", "A"]
    out = rrf([vector, bm25], k=60)
    scores = as_dict(out)
    assert scores["A"] == pytest.approx(1 / 61 + 1 / 63)
    assert scores["C"] == pytest.approx(2 / 62)
    assert scores["B"] == pytest.approx(1 / 61)
    assert [d for d, _ in out] == ["A", "C", "B"]  # A and C are close, A wins by 8e-6


def test_rrf_missing_ids_contribute_nothing() -> None:
    scores = as_dict(rrf([["x", "y"], ["z"]], k=10))
    assert scores == pytest.approx({"x": 1 / 11, "y": 1 / 12, "z": 1 / 11})


def test_rrf_weights() -> None:
    scores = as_dict(rrf([["a", "b"], ["b", "c"]], k=60, weights=[2.0, 0.5]))
    assert scores["a"] == pytest.approx(2 / 61)
    assert scores["b"] == pytest.approx(2 / 62 + 0.5 / 61)
    assert scores["c"] == pytest.approx(0.5 / 62)


def test_rrf_zero_weight_silences_a_list_but_keeps_its_ids() -> None:
    scores = as_dict(rrf([["a"], ["b"]], k=60, weights=[1.0, 0.0]))
    assert scores == {"a": pytest.approx(1 / 61), "b": 0.0}


def test_rrf_ties_best_rank_then_id() -> None:
    # k=1 keeps every score exact in binary: q = z = a = 1/2, p = r = 1/3.
    l1 = ["z", "p", "a"]
    l2 = ["q", "r", "a"]
    out = rrf([l1, l2], k=1)
    assert as_dict(out) == {"z": 0.5, "q": 0.5, "a": 0.5, "p": 1 / 3, "r": 1 / 3}
    # q and z reached rank 1, a only rank 3: a goes last despite its id; q < z by id.
    assert [d for d, _ in out] == ["q", "z", "a", "p", "r"]


def test_rrf_symmetric_tie_resolved_by_id() -> None:
    out = rrf([["y", "x"], ["x", "y"]])
    assert out[0][1] == out[1][1]
    assert [d for d, _ in out] == ["x", "y"]


def test_rrf_single_list_keeps_order_and_scores() -> None:
    out = rrf([["c", "a", "b"]], k=60)
    assert [d for d, _ in out] == ["c", "a", "b"]
    assert [s for _, s in out] == pytest.approx([1 / 61, 1 / 62, 1 / 63])


def test_rrf_repeat_inside_one_list_counts_once_at_first_position() -> None:
    assert as_dict(rrf([["a", "b", "a"]], k=60)) == pytest.approx({"a": 1 / 61, "b": 1 / 62})


def test_rrf_empty_input() -> None:
    assert rrf([]) == []
    assert rrf([[], []]) == []


def test_rrf_order_of_lists_does_not_matter_with_equal_weights() -> None:
    rng = random.Random(7)
    ids = [f"d{i}" for i in range(30)]
    lists = [rng.sample(ids, rng.randint(5, 30)) for _ in range(4)]
    expected = rrf(lists)
    for perm in itertools.permutations(lists):
        assert rrf(list(perm)) == expected  # exact, including tie order


def test_rrf_permuting_lists_with_their_weights_does_not_matter() -> None:
    lists = [["a", "b", "c"], ["c", "a"], ["b", "d"]]
    weights = [0.3, 1.7, 0.9]
    expected = rrf(lists, weights=weights)
    for perm in itertools.permutations(range(3)):
        assert rrf([lists[i] for i in perm], weights=[weights[i] for i in perm]) == expected


@pytest.mark.parametrize("k", [0, -1, -0.5, math.nan, math.inf, True])
def test_rrf_rejects_bad_k(k: float) -> None:
    with pytest.raises(ValueError, match="k must be"):
        rrf([["a"]], k=k)  # type: ignore[arg-type]


def test_rrf_rejects_weight_count_mismatch() -> None:
    with pytest.raises(ValueError, match="weight"):
        rrf([["a"], ["b"]], weights=[1.0])


@pytest.mark.parametrize("bad", [-0.1, math.nan, math.inf])
def test_rrf_rejects_bad_weight(bad: float) -> None:
    with pytest.raises(ValueError, match="weight"):
        rrf([["a"], ["b"]], weights=[1.0, bad])


def test_rrf_rejects_a_bare_string_as_ranking() -> None:
    with pytest.raises(TypeError):
        rrf(["abc"])


# ---------------------------------------------------------------- min-max


def test_min_max_hand_computed() -> None:
    bm25 = {"a": 10.0, "b": 5.0, "c": 0.0}
    dense = {"a": 0.2, "d": 0.8}
    out = min_max_arithmetic([bm25, dense])
    # a: (1 + 0)/2, b: (0.5 + 0)/2, c: 0, d: (0 + 1)/2; a and d tie -> id order.
    assert out == [("a", 0.5), ("d", 0.5), ("b", 0.25), ("c", 0.0)]


def test_min_max_weights() -> None:
    bm25 = {"a": 10.0, "b": 5.0, "c": 0.0}
    dense = {"a": 0.2, "d": 0.8}
    scores = as_dict(min_max_arithmetic([bm25, dense], weights=[3.0, 1.0]))
    assert scores == pytest.approx({"a": 0.75, "b": 0.375, "d": 0.25, "c": 0.0})


def test_min_max_all_equal_list_gives_one() -> None:
    assert min_max_arithmetic([{"a": 3.0, "b": 3.0}]) == [("a", 1.0), ("b", 1.0)]
    assert min_max_arithmetic([{"only": -7.0}]) == [("only", 1.0)]


def test_min_max_negative_scores_normalise() -> None:
    assert as_dict(min_max_arithmetic([{"a": -1.0, "b": -3.0, "c": -2.0}])) == pytest.approx(
        {"a": 1.0, "b": 0.0, "c": 0.5}
    )


def test_min_max_empty_list_counts_as_missing_everywhere() -> None:
    assert min_max_arithmetic([{}, {"a": 1.0}]) == [("a", 0.5)]


def test_min_max_empty_input() -> None:
    assert min_max_arithmetic([]) == []


def test_min_max_order_of_lists_does_not_matter() -> None:
    lists = [{"a": 1.0, "b": 2.0}, {"b": 0.1, "c": 0.7, "a": 0.4}, {"c": 9.0, "d": 3.0}]
    expected = min_max_arithmetic(lists)
    for perm in itertools.permutations(lists):
        assert min_max_arithmetic(list(perm)) == expected


def test_min_max_validation() -> None:
    with pytest.raises(ValueError, match="weight"):
        min_max_arithmetic([{"a": 1.0}], weights=[1.0, 1.0])
    with pytest.raises(ValueError, match="weight"):
        min_max_arithmetic([{"a": 1.0}], weights=[-1.0])
    with pytest.raises(ValueError, match="> 0"):
        min_max_arithmetic([{"a": 1.0}, {"b": 2.0}], weights=[0.0, 0.0])
    with pytest.raises(ValueError, match="non-finite"):
        min_max_arithmetic([{"a": math.nan}])
