"""Passage trimming: the units a passage is cut into, which ones it keeps, and the envelope's account."""

from __future__ import annotations

from typing import Any

import pytest

from osrag.evaluation.datasets import GoldenSet, Query, kept_units
from osrag.records import ChunkSource, IndexMeta
from osrag.search import gate
from osrag.search.budget import SelectionConfig
from osrag.search.candidates import Candidate
from osrag.search.ranking import SelectionPolicy, freshness, rank_and_select
from osrag.search.trimming import GAP, TrimConfig, evidence_pattern, split_header, trim, units


def words(text: str) -> int:
    return len(text.split())


WEIGHTS = {"ключ": 2.0, "восстановлен": 1.5, "доступ": 0.5}
PATTERN = evidence_pattern(list(WEIGHTS))
HEAD = "Управление ВМ > Восстановление доступа"
FILLER = [
    "Виртуальные машины создаются в личном кабинете за несколько минут.",
    "Тарифы зависят от выбранной конфигурации и региона размещения.",
    "Образы операционных систем обновляются каждый месяц без участия пользователя.",
    "Мониторинг показывает загрузку процессора и дисков в реальном времени.",
]
BODY = " ".join(
    [
        FILLER[0],
        "Для восстановления доступа нужен публичный ключ пользователя.",
        FILLER[1],
        FILLER[2],
        "Если ключ утрачен, создайте новую ключевую пару.",
        FILLER[3],
    ]
)
TEXT = f"{HEAD}\n\n{BODY}"


def cut(text: str = TEXT, **kw: Any) -> Any:
    cfg = kw.pop("config", TrimConfig(max_units=2, min_tokens=10))
    return trim(
        text,
        words(text),
        WEIGHTS,
        PATTERN,
        words,
        heading_path=("Управление ВМ", "Восстановление доступа"),
        config=cfg,
        **kw,
    )


def test_units_are_whole_sentences_items_rows_and_code_blocks() -> None:
    body = (
        "Первое предложение. Второе, т. е. продолжение.\nТа же строка абзаца.\n\n"
        "- пункт один\n- пункт два\n\n| a | b |\n\n```sh\nssh-keygen -y\n\nls\n```\nХвост."
    )
    assert units(body) == [
        "Первое предложение.",
        "Второе, т. е. продолжение.",
        "Та же строка абзаца.",  # a paragraph's lines are joined before it is split
        "- пункт один",
        "- пункт два",
        "| a | b |",
        "```sh\nssh-keygen -y\n\nls\n```",
        "Хвост.",
    ]


def test_the_breadcrumb_is_the_heading_line_and_other_first_paragraphs_are_body() -> None:
    assert split_header(TEXT, ("Управление ВМ", "Восстановление доступа")) == (HEAD, BODY)
    assert split_header("Просто абзац.\n\nЕщё.", ("Управление ВМ",)) == ("", "Просто абзац.\n\nЕщё.")
    assert split_header(f"Заголовок\n\n{BODY}", (), title="Заголовок")[0] == "Заголовок"


def test_terms_match_at_a_word_start_only_and_short_stems_are_ignored() -> None:
    p = evidence_pattern(["ключ", "в", "по", "42"])
    assert p is not None
    assert [m.group(0) for m in p.finditer("ключом и подключение 42")] == ["ключ", "42"]
    assert evidence_pattern(["в", "по"]) is None


def test_a_long_passage_keeps_its_heading_and_best_units_in_order_with_gaps() -> None:
    t = cut()
    assert t is not None
    assert t.text.split("\n") == [
        HEAD,
        "",
        GAP,
        "Для восстановления доступа нужен публичный ключ пользователя.",
        GAP,
        "Если ключ утрачен, создайте новую ключевую пару.",
        GAP,
    ]
    assert (t.kept, t.units, t.full_tokens) == (2, 6, words(TEXT))
    assert t.tokens == words(t.text) < t.full_tokens


def test_the_highest_weight_wins_when_more_units_hold_terms_than_are_kept() -> None:
    t = cut(config=TrimConfig(max_units=1, min_tokens=10))
    assert t is not None
    # 'восстановлен' + 'доступ' + 'ключ' (4.0) beats 'ключ' alone (2.0).
    assert "Для восстановления доступа" in t.text and "утрачен" not in t.text


@pytest.mark.parametrize(
    "why, kwargs",
    [
        ("short", {"config": TrimConfig(max_units=2, min_tokens=1000)}),
        ("a table", {"kind": "table"}),
        ("code", {"kind": "code"}),
        ("no unit holds a term", {"text": f"{HEAD}\n\n" + " ".join(FILLER)}),
        ("too few units", {"text": f"{HEAD}\n\nОдин ключ. Второе предложение."}),
        ("saves too little", {"config": TrimConfig(max_units=2, min_tokens=10, min_saving=0.9)}),
    ],
)
def test_a_passage_stays_whole_when(why: str, kwargs: dict[str, Any]) -> None:
    assert cut(**kwargs) is None, why


def test_bad_trim_settings_are_refused() -> None:
    for bad in ({"max_units": 0}, {"keep_whole": -1}, {"min_saving": 1.0}, {"min_tokens": True}):
        with pytest.raises(ValueError):
            TrimConfig(**bad)


# ------------------------------------------------------------------ in the envelope
FRESH = freshness("unit", "unit-0123456789-20260101000000000", IndexMeta(embedding_model="m", dimension=2))


def text_of(cid: str) -> str:
    """TEXT with a sentence of its own (no question term), so that no two chunks are duplicates."""
    return f"{TEXT} Раздел {cid} описан отдельно."


def candidate(cid: str, rank: int) -> Candidate:
    src = ChunkSource.of(
        {
            "chunk_id": cid,
            "doc_id": cid,
            "text": text_of(cid),
            "token_count": words(text_of(cid)),
            "heading_path": ["Управление ВМ", "Восстановление доступа"],
            "embedding": [1.0, float(rank)],
        }
    )
    return Candidate(src, fused=1.0 / rank, rank=rank)


def envelope(trim_on: bool, budget: int = 500) -> Any:
    hits = [candidate(f"doc{i}", i) for i in range(1, 5)]
    # Every text holds every term: all four pass the gate.
    gate.annotate("ключ", gate.Analysis(WEIGHTS, tuple(frozenset(WEIGHTS) for _ in hits)), None, hits)
    policy = SelectionPolicy(
        fusion="minmax",
        walk=SelectionConfig(dup_overlap=1.0, reserve_fraction=0.0),
        trim=trim_on,
        trimming=TrimConfig(max_units=2, keep_whole=2, min_tokens=10),
    )
    return rank_and_select(
        "ключ восстановления доступа", hits, budget, policy, fresh=FRESH, count_tokens=words, terms=WEIGHTS
    )


def test_the_first_candidates_stay_whole_and_the_rest_are_trimmed_and_say_so() -> None:
    env = envelope(trim_on=True)
    assert [p.trimmed for p in env.passages] == [False, False, True, True]
    whole, cut_ = env.passages[0], env.passages[2]
    assert whole.text == text_of("doc1") and whole.full_tokens is None
    full = words(text_of("doc3"))
    assert cut_.full_tokens == full and cut_.tokens == words(cut_.text) < full
    assert env.spent_tokens == sum(p.tokens for p in env.passages)
    assert env.trimmed == 2 and any("2 passage(s) trimmed" in n for n in env.notes)


def test_trimming_fits_more_passages_and_off_it_delivers_whole_chunks() -> None:
    budget = 2 * words(text_of("doc1")) + 30
    on, off = envelope(trim_on=True, budget=budget), envelope(trim_on=False, budget=budget)
    assert len(off.passages) == 2 and off.trimmed == 0
    assert [p.text for p in off.passages] == [text_of("doc1"), text_of("doc2")]
    assert len(on.passages) == 3


# ------------------------------------------------------------------ how the eval judges it
def test_the_eval_judges_a_trimmed_golden_passage_on_the_sentences_it_kept() -> None:
    doc = f"# Доступ\n\n{BODY}\n"
    start = doc.index(BODY)
    answer_at = doc.index("Если ключ")
    # The relevant section: only the last two sentences of the body.
    spans = {"q": {"d#ans": ("d", answer_at, len(doc))}}
    golden = GoldenSet(name="g", queries=[], spans=spans, texts={"d": doc})
    q = Query("q", "?", {"d#ans": 1})
    src = ChunkSource(chunk_id="d:0", doc_id="d", start=start, end=start + len(BODY), heading_path=(HEAD,))
    assert golden.key(q, src) == "d#ans"  # the whole chunk overlaps the section
    first_only = f"{HEAD}\n\n{GAP}\nДля восстановления доступа нужен публичный ключ пользователя.\n{GAP}"
    assert golden.trimmed_key(q, src, first_only) == "~d:0"  # what was kept is outside it
    kept = f"{HEAD}\n\n{GAP}\nЕсли ключ утрачен, создайте новую ключевую пару.\n{GAP}"
    assert golden.trimmed_key(q, src, kept) == "d#ans"
    assert golden.trimmed_key(q, src, f"{HEAD}\n\nТакого предложения в документе нет.") == "~d:0"
    assert kept_units(kept, (HEAD,)) == ["Если ключ утрачен, создайте новую ключевую пару."]


def test_candidates_are_trimmed_until_twice_the_budget_is_spoken_for() -> None:
    from osrag.search.ranking import TRIM_REACH, _trim_all

    hits = [candidate(f"doc{i}", i) for i in range(1, 6)]
    for c in hits:
        c.tokens = words(c.text)
    policy = SelectionPolicy(
        fusion="minmax",
        walk=SelectionConfig(),
        trim=True,
        trimming=TrimConfig(max_units=2, keep_whole=2, min_tokens=10),
    )
    whole = hits[0].tokens + hits[1].tokens  # the first two stay whole: already spoken for
    budget = whole // 2 + 5  # 1.5 times this is less than what the whole two cost, twice it is more
    trims = _trim_all(hits, budget, policy, WEIGHTS, words)
    assert TRIM_REACH == 2.0 and 1.5 * budget < whole <= TRIM_REACH * budget
    assert "doc3" in trims and "doc1" not in trims and "doc2" not in trims
    spoken = whole + sum(trims[c].tokens for c in trims)
    assert len(trims) == 3 or spoken > TRIM_REACH * budget  # stops only past the reach


# ------------------------------------------------------------------ a budget smaller than the best
TABLE_WEIGHTS = {"тариф": 1.0, "премиум": 3.0}
TABLE = (
    "Тарифы > Сравнение\n\n"
    "| Тариф | Цена | Диск |\n|---|---|---|\n"
    "| Базовый | 300 рублей | 10 ГБ |\n| Стандарт | 700 рублей | 50 ГБ |\n"
    "| Премиум | 1500 рублей | 200 ГБ |\n| Корпоративный | по запросу | без ограничений |"
)


def test_a_table_that_must_fit_keeps_its_header_and_best_row() -> None:
    pattern = evidence_pattern(list(TABLE_WEIGHTS))
    kw: dict[str, Any] = {"heading_path": ("Тарифы", "Сравнение"), "kind": "table", "config": TrimConfig()}
    assert trim(TABLE, words(TABLE), TABLE_WEIGHTS, pattern, words, **kw) is None  # tables stay whole
    cut_ = trim(TABLE, words(TABLE), TABLE_WEIGHTS, pattern, words, fit=words(TABLE) - 10, **kw)
    assert cut_ is not None and cut_.tokens <= words(TABLE) - 10 and cut_.full_tokens == words(TABLE)
    lines = cut_.text.split("\n")
    assert lines[:4] == ["Тарифы > Сравнение", "", "| Тариф | Цена | Диск |", "|---|---|---|"]
    assert "| Премиум | 1500 рублей | 200 ГБ |" in lines and GAP in lines
    assert not any(ln.startswith(("| Базовый", "| Стандарт", "| Корпоративный")) for ln in lines)
    assert trim(TABLE, words(TABLE), TABLE_WEIGHTS, pattern, words, fit=3, **kw) is None  # nothing fits
    code = trim(TABLE, words(TABLE), TABLE_WEIGHTS, pattern, words, fit=20, **{**kw, "kind": "code"})
    assert code is None  # code is never cut


def test_the_best_passage_too_big_for_the_budget_is_trimmed_not_replaced() -> None:
    budget = words(text_of("doc1")) - 5  # the best passage does not fit whole, the others neither
    env = envelope(trim_on=True, budget=budget)
    assert env.passages and env.passages[0].chunk_id == "doc1"
    assert env.passages[0].trimmed and env.passages[0].tokens <= budget
    assert env.spent_tokens <= budget
    off = envelope(trim_on=False, budget=budget)
    assert not off.passages or off.passages[0].chunk_id != "doc1" or not off.passages[0].trimmed


def test_a_passage_that_must_fit_keeps_fewer_units_rather_than_none() -> None:
    two = cut()  # max_units=2: both key sentences
    assert two is not None and two.kept == 2
    one = cut(fit=two.tokens - 1)
    assert one is not None and one.kept == 1 and one.tokens <= two.tokens - 1
    assert "Для восстановления доступа нужен публичный ключ пользователя." in one.text  # the best unit
    short = cut(fit=two.tokens - 1, config=TrimConfig(max_units=2, min_tokens=10_000))
    assert short is not None and short.kept == 1  # too short to trim for saving's sake, not when it must fit
