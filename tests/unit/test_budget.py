"""Token-budget selection: the budget contract, dedup, reserve slot, honest reporting."""

from __future__ import annotations

import math
import random

import pytest

from osrag.search.budget import (
    LeftOut,
    ScoredUnit,
    Selection,
    SelectionConfig,
    select,
    shingle_overlap,
)

NO_RESERVE = SelectionConfig(reserve_fraction=0.0)


def cand(
    cid: str,
    tokens: int,
    score: float,
    *,
    text: str | None = None,
    kind: str = "text",
) -> ScoredUnit:
    # Default texts share no words, so no two of them look like duplicates.
    body = text if text is not None else f"{cid} alpha{cid} beta{cid} gamma{cid} delta{cid}"
    return ScoredUnit(chunk_id=cid, doc_id=f"doc-{cid}", text=body, tokens=tokens, score=score, kind=kind)


def ids(items: tuple[ScoredUnit, ...] | tuple[LeftOut, ...]) -> list[str]:
    return [x.chunk_id if isinstance(x, ScoredUnit) else x.candidate.chunk_id for x in items]


# ---------------------------------------------------------------- basic contract


@pytest.mark.parametrize("budget", [0, -5, 1.5, True, None])
def test_invalid_budget_raises(budget: object) -> None:
    with pytest.raises(ValueError, match="token budget must be a positive integer"):
        select([cand("a", 10, 1.0)], budget)  # type: ignore[arg-type]


def test_empty_candidates_mean_nothing_relevant() -> None:
    sel = select([], 500)
    assert sel.selected == ()
    assert sel.nothing_relevant is True
    assert sel.spent == 0 and sel.budget == 500
    assert sel.left_out_budget == () and sel.duplicates == ()
    assert sel.reserved_used is None


def test_everything_fits_is_complete_and_in_rank_order() -> None:
    cs = [cand("b", 30, 0.5), cand("a", 20, 0.9), cand("c", 10, 0.1)]
    sel = select(cs, 1000)
    assert ids(sel.selected) == ["a", "b", "c"]
    assert sel.spent == 60 and sel.remaining == 940
    assert sel.complete is True and sel.nothing_relevant is False
    assert sel.left_out_budget == ()


def test_ties_keep_input_order() -> None:
    cs = [cand("z", 10, 0.5), cand("a", 10, 0.5), cand("m", 10, 0.5)]
    assert ids(select(cs, 100).selected) == ["z", "a", "m"]


def test_units_are_whole_and_omissions_reported_exactly() -> None:
    cs = [cand("a", 60, 0.9), cand("b", 50, 0.8), cand("c", 30, 0.7), cand("d", 20, 0.6)]
    sel = select(cs, 100, NO_RESERVE)
    # a (60) fits; b would make 110 -> skipped; c (30) -> 90; d would make 110 -> skipped.
    assert ids(sel.selected) == ["a", "c"]
    assert sel.spent == 90
    assert [(lo.candidate.chunk_id, lo.candidate.tokens, lo.reason) for lo in sel.left_out_budget] == [
        ("b", 50, "budget"),
        ("d", 20, "budget"),
    ]
    assert sel.left_out_tokens == 70
    assert sel.complete is False
    for c in sel.selected:  # the very objects, text untouched
        assert c in cs and c.text == next(x.text for x in cs if x.chunk_id == c.chunk_id)


def test_unit_larger_than_budget_is_left_out_not_truncated() -> None:
    sel = select([cand("huge", 5000, 1.0), cand("small", 40, 0.5)], 1000)
    assert ids(sel.selected) == ["small"]
    assert ids(sel.left_out_budget) == ["huge"]
    assert sel.nothing_relevant is False  # relevant material exists, it did not fit


def test_zero_token_candidate_always_fits() -> None:
    sel = select([cand("a", 10, 1.0), cand("empty", 0, 0.5)], 10, NO_RESERVE)
    assert ids(sel.selected) == ["a", "empty"] and sel.spent == 10


# ---------------------------------------------------------------- ranking


def test_negative_scores_are_walked_best_first() -> None:
    # Cross-encoder logits: relevance was decided upstream, every candidate is walked by score.
    cs = [cand("mid", 10, -1.0), cand("low", 10, -3.0), cand("top", 10, 2.0)]
    assert ids(select(cs, 1000).selected) == ["top", "mid", "low"]
    assert ids(select(cs, 20).selected) == ["top", "mid"]


# ---------------------------------------------------------------- duplicates


def test_duplicate_by_text_is_not_admitted_nor_charged() -> None:
    long_text = "Служба доставки СДЭК везёт заказы в зону 3 за два-три дня, стоимость 300 рублей."
    # A sub-chunk of the same paragraph, different case and ё spelled as е.
    part = "СЛУЖБА доставки сдэк везет заказы в зону 3 за два-три дня"
    cs = [
        cand("para", 50, 0.9, text=long_text),
        cand("part", 30, 0.85, text=part),
        cand("other", 50, 0.5),
    ]
    sel = select(cs, 100, NO_RESERVE)
    assert ids(sel.selected) == ["para", "other"] and sel.spent == 100  # other fits: part cost nothing
    assert ids(sel.duplicates) == ["part"] and sel.duplicates[0].duplicate_of == "para"
    assert [lo.reason for lo in sel.duplicates] == ["duplicate"] and sel.complete is True


def test_duplicates_are_checked_against_selected_only() -> None:
    text = "одинаковый текст про возврат товара в течение четырнадцати дней"
    cs = [cand("big", 150, 0.9, text=text), cand("small", 50, 0.8, text=text)]
    sel = select(cs, 100, NO_RESERVE)
    # big lost to the budget, so small is not a duplicate of anything delivered.
    assert ids(sel.selected) == ["small"] and ids(sel.left_out_budget) == ["big"]
    assert sel.duplicates == ()


def test_lower_dup_threshold_catches_more() -> None:
    a = "промокод TEA10 даёт скидку десять процентов на чай до конца месяца"
    b = "промокод TEA15 даёт скидку пятнадцать процентов на чай до конца месяца"  # 4 of 9 shingles
    cs = [cand("a", 10, 0.9, text=a), cand("b", 10, 0.8, text=b)]
    assert shingle_overlap(a, b) == pytest.approx(4 / 9)
    assert ids(select(cs, 100).duplicates) == []  # sibling pages: both are delivered
    assert ids(select(cs, 100, SelectionConfig(dup_overlap=0.4)).duplicates) == ["b"]


# ---------------------------------------------------------------- reserved slot


def _table_scenario() -> list[ScoredUnit]:
    # Budget 1000: the table is relevant and essential (rank 2) but costs 600
    # tokens, so its value per token (0.9/600) is under 0.2 x the first unit's (1.0/100).
    return [
        cand("intro", 100, 1.0),
        cand("table", 600, 0.9, kind="table"),
        *[cand(f"f{i}", 50, 0.5) for i in range(6)],
    ]


def test_reserve_admits_large_table_that_value_per_token_greedy_starves() -> None:
    cs = _table_scenario()
    greedy = select(cs, 1000, SelectionConfig(reserve_fraction=0.0, min_value_ratio=0.2))
    assert "table" not in ids(greedy.selected)
    assert [(lo.candidate.chunk_id, lo.reason) for lo in greedy.left_out_budget] == [("table", "not_worth")]
    assert greedy.spent == 400 and greedy.reserved_used is None

    sel = select(cs, 1000, SelectionConfig(reserve_fraction=0.2, min_value_ratio=0.2))
    assert sel.reserved_used == "table"
    assert ids(sel.selected) == ["intro", "table", "f0", "f1", "f2", "f3", "f4", "f5"]
    assert sel.spent == 1000 and sel.complete is True


def test_reserve_holds_budget_back_for_a_pending_essential_unit() -> None:
    cs = [cand("r1", 700, 1.0), cand("r2", 150, 0.9), cand("tbl", 300, 0.8, kind="table")]
    # Without a reserve, r1 + r2 = 850 leave no room for the 300-token table.
    greedy = select(cs, 1000, NO_RESERVE)
    assert ids(greedy.selected) == ["r1", "r2"] and ids(greedy.left_out_budget) == ["tbl"]
    # With 200 reserved, r2 is capped out of the main 800, the table takes the slot.
    sel = select(cs, 1000, SelectionConfig(reserve_fraction=0.2))
    assert ids(sel.selected) == ["r1", "tbl"] and sel.reserved_used == "tbl"
    assert ids(sel.left_out_budget) == ["r2"] and sel.spent == 1000


def test_only_one_unit_through_the_reserve() -> None:
    cs = [
        cand("intro", 100, 1.0),
        cand("t1", 500, 0.9, kind="table"),  # 0.0018/token < 0.2 * 0.01
        cand("t2", 300, 0.5, kind="code"),  # 0.00167/token, also large and essential
    ]
    cfg = SelectionConfig(reserve_fraction=0.2, min_value_ratio=0.2)
    sel = select(cs, 1000, cfg)
    assert sel.reserved_used == "t1"
    assert ids(sel.selected) == ["intro", "t1"]
    assert [(lo.candidate.chunk_id, lo.reason) for lo in sel.left_out_budget] == [("t2", "not_worth")]
    # t2 would have had the slot if t1 had not taken it: the limit is the slot, not t2.
    alone = select([cs[0], cs[2]], 1000, cfg)
    assert alone.reserved_used == "t2"


def test_large_unit_outside_essential_window_gets_no_slot() -> None:
    cs = [
        cand("a", 50, 1.0),
        cand("b", 50, 0.95),
        cand("c", 50, 0.9),
        cand("tbl", 600, 0.85, kind="table"),  # relevant rank 4 > essential_rank 3
    ]
    cfg = SelectionConfig(reserve_fraction=0.2, min_value_ratio=0.2)
    sel = select(cs, 1000, cfg)
    assert sel.reserved_used is None and ids(sel.left_out_budget) == ["tbl"]
    widened = select(cs, 1000, SelectionConfig(reserve_fraction=0.2, min_value_ratio=0.2, essential_rank=4))
    assert widened.reserved_used == "tbl"


def test_unused_reserve_goes_to_normal_candidates() -> None:
    # No large unit among the essential ones: the whole budget is usable at once.
    cs = [cand(f"s{i}", 10, 1.0 - i / 100) for i in range(12)]
    sel = select(cs, 100, SelectionConfig(reserve_fraction=0.2))
    assert sel.spent == 100 and len(sel.selected) == 10 and sel.reserved_used is None


def test_reserve_released_when_pending_unit_needs_no_slot() -> None:
    para = "решение о сверке вебхуков биллинга принято после инцидента в марте прошлого года"
    cs = [
        cand("r1", 700, 1.0, text=para),
        cand("r2", 150, 0.9),  # capped out of main 800 while the table is pending
        cand("dup-table", 200, 0.8, kind="table", text=para),  # a duplicate: no slot needed
        cand("r4", 100, 0.7),
    ]
    sel = select(cs, 1000, SelectionConfig(reserve_fraction=0.2))
    # r2 is retried first when the reserve is released, ahead of r4.
    assert ids(sel.selected) == ["r1", "r2", "r4"] and sel.spent == 950
    assert ids(sel.duplicates) == ["dup-table"] and sel.reserved_used is None
    assert sel.complete is True


def test_reserve_returned_in_rank_order_when_the_large_unit_cannot_fit() -> None:
    cs = [
        cand("r1", 750, 1.0),
        cand("a", 150, 0.9),  # 900 > main 800: held back
        cand("b", 120, 0.85),  # 870 > main 800: held back
        cand("tbl", 300, 0.8, kind="table"),  # 1050 > 1000 even with the reserve
    ]
    sel = select(cs, 1000, SelectionConfig(reserve_fraction=0.2, essential_rank=4))
    # Only one of a, b fits the released reserve; the better-ranked one gets it.
    assert ids(sel.selected) == ["r1", "a"] and sel.spent == 900
    assert [(lo.candidate.chunk_id, lo.reason) for lo in sel.left_out_budget] == [
        ("b", "budget"),
        ("tbl", "budget"),
    ]
    assert sel.reserved_used is None


def test_essential_large_unit_that_fits_main_budget_uses_no_slot() -> None:
    cs = [cand("a", 100, 1.0), cand("tbl", 300, 0.9, kind="table"), cand("b", 100, 0.8)]
    sel = select(cs, 1000, SelectionConfig(reserve_fraction=0.2))
    assert sel.reserved_used is None and sel.complete is True and sel.spent == 500


# ---------------------------------------------------------------- property-style


def _random_case(rng: random.Random) -> tuple[list[ScoredUnit], int, SelectionConfig]:
    n = rng.randint(0, 25)
    base_texts = [f"тема{t} " + " ".join(f"слово{t}_{w}" for w in range(8)) for t in range(6)]
    cs = []
    for i in range(n):
        text = (
            rng.choice(base_texts)
            if rng.random() < 0.3
            else f"уникальный{i} " + " ".join(f"w{i}_{w}" for w in range(rng.randint(0, 10)))
        )
        cs.append(
            ScoredUnit(
                chunk_id=f"c{i}",
                doc_id=f"d{i % 5}",
                text=text,
                tokens=rng.choice([0, rng.randint(1, 60), rng.randint(60, 600)]),
                score=rng.gauss(0, 3) if rng.random() < 0.5 else rng.random(),
                kind=rng.choice(["text", "table", "code", "list", "mixed"]),
            )
        )
    cfg = SelectionConfig(
        reserve_fraction=rng.choice([0.0, 0.2, 0.2, 0.5]),
        large_unit_fraction=rng.choice([0.05, 0.15, 0.4]),
        essential_rank=rng.choice([0, 1, 3, 10]),
        min_value_ratio=rng.choice([0.0, 0.0, 0.1, 0.5]),
    )
    return cs, rng.randint(1, 1500), cfg


def _assert_invariants(cs: list[ScoredUnit], budget: int, cfg: SelectionConfig, sel: Selection) -> None:
    assert sel.budget == budget
    assert sel.spent == sum(c.tokens for c in sel.selected)
    assert sel.spent <= budget
    # Every candidate is accounted for exactly once.
    accounted = ids(sel.selected) + ids(sel.left_out_budget) + ids(sel.duplicates)
    assert len(accounted) == len(set(accounted))
    assert len(accounted) == len(cs)
    assert sel.nothing_relevant == (not cs)
    assert sel.complete == (not sel.left_out_budget)
    # Rank order is kept.
    scores = [c.score for c in sel.selected]
    assert scores == sorted(scores, reverse=True)
    # At most one reserved unit, and it was delivered.
    assert sel.reserved_used is None or sel.reserved_used in ids(sel.selected)
    assert all(lo.reason in {"budget", "not_worth"} for lo in sel.left_out_budget)
    assert all(lo.reason == "duplicate" and lo.duplicate_of in ids(sel.selected) for lo in sel.duplicates)
    # Whatever lost to the budget really did not fit in what is left.
    for lo in sel.left_out_budget:
        if lo.reason == "budget":
            assert lo.candidate.tokens > sel.remaining
    # No two delivered units are near-duplicates of each other.
    for i, a in enumerate(sel.selected):
        for b in sel.selected[i + 1 :]:
            assert shingle_overlap(a.text, b.text) < cfg.dup_overlap


def test_invariants_hold_on_random_candidate_sets() -> None:
    rng = random.Random(20240611)
    for _ in range(500):
        cs, budget, cfg = _random_case(rng)
        sel = select(cs, budget, cfg)
        _assert_invariants(cs, budget, cfg, sel)
        assert select(list(cs), budget, cfg) == sel  # deterministic


# ---------------------------------------------------------------- validation & helpers


def test_candidate_validation() -> None:
    with pytest.raises(ValueError, match="tokens"):
        cand("a", -1, 1.0)
    with pytest.raises(ValueError, match="score"):
        cand("a", 1, math.nan)
    with pytest.raises(ValueError, match="kind"):
        cand("a", 1, 1.0, kind="image")


def test_repeated_chunk_id_raises() -> None:
    with pytest.raises(ValueError, match="more than once"):
        select([cand("a", 1, 1.0), cand("a", 1, 0.5)], 10)


@pytest.mark.parametrize(
    "kwargs",
    [
        {"dup_overlap": 0.0},
        {"dup_overlap": 1.1},
        {"reserve_fraction": 1.0},
        {"large_unit_fraction": -0.1},
        {"essential_rank": -1},
        {"min_value_ratio": -0.5},
        {"dup_overlap": math.nan},
    ],
)
def test_config_validation(kwargs: dict[str, float]) -> None:
    with pytest.raises(ValueError):
        SelectionConfig(**kwargs)  # type: ignore[arg-type]


def test_shingle_overlap() -> None:
    a = "один два три четыре пять"
    assert shingle_overlap(a, a) == 1.0
    assert shingle_overlap(a, "два три четыре") == 1.0  # contained
    assert shingle_overlap(a, "ОДИН два ТРИ шесть семь") == pytest.approx(1 / 3)
    assert shingle_overlap("Ёлка зелёная стоит", "елка зеленая стоит") == 1.0
    assert shingle_overlap(a, "") == 0.0
    assert shingle_overlap("привет мир", "мир привет") == 0.0  # order matters
    assert shingle_overlap("привет мир", "привет мир и все") == 1.0


def test_same_text_is_a_duplicate() -> None:
    text = "промокод TEA15 действует только на чай и не действует на лампы и посуду"
    a = cand("a", 20, 2.0, text=text)
    b = cand("b", 20, 1.0, text=text)
    sel = select([a, b], 1000)
    assert ids(sel.selected) == ["a"]
    assert [(d.candidate.chunk_id, d.duplicate_of) for d in sel.duplicates] == [("b", "a")]
    assert sel.spent == 20
