"""Selection's batched duplicate test (osrag.search.duplicates) decides every pair exactly as the
per-pair rule 3 does: word 3-shingle containment (shingle_overlap)."""

from __future__ import annotations

import random
import re

import numpy as np
import pytest

from osrag.search import budget, duplicates
from osrag.search.budget import ScoredUnit, SelectionConfig, select, shingle_overlap

WORDS = [
    "привет", "мир", "ёлка", "Ёлка", "елка", "зелёная", "ЗЕЛЕНАЯ", "tea15", "TEA15", "lamp_light",
    "v2", "3", "2024", "straße", "STRASSE", "ﬁle", "𐐀𐐨", "𐐨", "日本語", "x̃", "İstanbul", "café",
    "naïve", "Σίσυφος", "ΣΊΣΥΦΟΣ", "٣٤", "½", "_", "a",
]  # fmt: skip
PUNCT = [" ", " ", " ", "\n", ", ", ". ", " - ", "—", "(", ")", "«", "»", ":", "🙂", "\t", "/"]


def _pair_reference(a: str, b: str, cfg: SelectionConfig) -> bool:
    """Rule 3 for one pair, as the walk decided it pair by pair before the batched test."""
    if budget._words(a) and budget._words(b):
        return shingle_overlap(a, b) >= cfg.dup_overlap
    return False


def _text(rng: random.Random, n: int) -> str:
    return "".join(rng.choice(WORDS) + rng.choice(PUNCT) for _ in range(n)).strip()


def _variant(rng: random.Random, text: str) -> str:
    """A near copy: a slice, a few words changed, case changed, or the text inside another."""
    words = text.split(" ")
    pick = rng.randrange(5)
    if pick == 0:
        k = rng.randrange(len(words) + 1)
        return " ".join(words[k : k + rng.randrange(1, len(words) + 2)])
    if pick == 1:
        for _ in range(rng.randrange(1, 4)):
            words[rng.randrange(len(words))] = rng.choice(WORDS)
        return " ".join(words)
    if pick == 2:
        return text.upper() if rng.random() < 0.5 else text.casefold()
    if pick == 3:
        return _text(rng, 3) + " " + text + " " + _text(rng, 2)
    return text.replace(" ", rng.choice(PUNCT))


def _texts(rng: random.Random, n: int) -> list[str]:
    out: list[str] = []
    for _ in range(n):
        r = rng.random()
        if out and r < 0.45:
            out.append(_variant(rng, rng.choice(out)))
        elif r < 0.55:
            out.append(rng.choice(["", "…", "  ", "один", "два слова", "Ёж", "ß", "𐐀"]))
        else:
            out.append(_text(rng, rng.randrange(1, 40)))
    return out


def _relation(texts: list[str], cfg: SelectionConfig) -> dict[int, set[int]]:
    return duplicates.duplicate_pairs(texts, cfg.dup_overlap)


def _case(seed: int) -> tuple[list[str], SelectionConfig]:
    rng = random.Random(seed)
    n = rng.randrange(2, 45)
    cfg = SelectionConfig(dup_overlap=rng.choice([0.8, 0.5, 0.34, 0.2, 1.0]))
    return _texts(rng, n), cfg


SEEDS = range(40)


@pytest.mark.parametrize("seed", SEEDS)
def test_every_pair_is_decided_as_the_per_pair_rule_decides_it(seed: int) -> None:
    texts, cfg = _case(seed)
    n = len(texts)
    got = _relation(texts, cfg)
    for i in range(n):
        for j in range(n):
            if i != j:
                want = _pair_reference(texts[i], texts[j], cfg)
                assert (j in got.get(i, set())) == want, (i, j, texts[i], texts[j])


def test_most_cases_do_have_duplicates() -> None:
    """The pairwise test above is not vacuous: nearly every case holds duplicate pairs."""
    with_pairs = sum(1 for seed in SEEDS if any(_relation(*_case(seed)).values()))
    assert with_pairs >= 0.8 * len(SEEDS)


def test_the_tables_agree_with_the_regex_and_casefold_for_every_bmp_code_point() -> None:
    fold, single, word = duplicates._tables()
    w = re.compile(r"\w")
    for c in range(0x10000):
        ch = chr(c)
        assert bool(word[c]) == bool(w.fullmatch(ch)), hex(c)
        f = ch.casefold().replace("ё", "е")
        assert bool(single[c]) == (len(f) == 1), hex(c)
        if single[c]:
            assert fold[c] == ord(f), hex(c)


def test_a_hash_that_joins_two_words_falls_back_to_the_regex(monkeypatch: pytest.MonkeyPatch) -> None:
    texts = ["один два три четыре", "один два три пять", "пять шесть семь"]
    assert duplicates._fast_words(texts) is not None

    class Zero:
        def upto(self, n: int) -> tuple[np.ndarray, np.ndarray]:
            return np.zeros(n, dtype=np.uint64), np.zeros(n, dtype=np.uint64)

    monkeypatch.setattr(duplicates, "_POWERS", Zero())  # every word hashes to 0
    assert duplicates._fast_words(texts) is None
    cfg = SelectionConfig(dup_overlap=0.5)
    assert _relation(texts, cfg) == {0: {1}, 1: {0}}


def test_texts_that_are_not_valid_unicode_take_the_regex_path() -> None:
    texts = ["один два три \ud800 четыре", "один два три четыре"]
    assert duplicates._fast_words(texts) is None
    assert _relation(texts, SelectionConfig()) == {0: {1}, 1: {0}}


def test_select_walks_the_same_way_with_the_per_pair_rule(monkeypatch: pytest.MonkeyPatch) -> None:
    rng = random.Random(7)

    def reference(texts: list[str], dup_overlap: float) -> dict[int, set[int]]:
        cfg = SelectionConfig(dup_overlap=dup_overlap)
        return {
            i: {j for j in range(len(texts)) if j != i and _pair_reference(texts[i], texts[j], cfg)}
            for i in range(len(texts))
        }

    for trial in range(30):
        n = rng.randrange(1, 40)
        texts = _texts(rng, n)
        cands = [
            ScoredUnit(f"c{k}", f"d{k}", texts[k], rng.randrange(0, 300), float(n - k)) for k in range(n)
        ]
        cfg = SelectionConfig(dup_overlap=rng.choice([0.8, 0.4]), reserve_fraction=rng.choice([0.0, 0.2]))
        budget_tokens = rng.choice([100, 500, 2000])
        got = select(cands, budget_tokens, cfg)
        with monkeypatch.context() as m:
            m.setattr(budget, "duplicate_pairs", reference)
            want = select(cands, budget_tokens, cfg)
        assert got == want, trial
