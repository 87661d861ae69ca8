"""Russian query variants (osrag.search.variants) and the perturbed copies of the eval sets (evaluation.perturb)."""

from __future__ import annotations

import json

import pytest

from osrag.evaluation import perturb
from osrag.search import variants
from osrag.search.query import bm25_head
from osrag.search.variants import (
    embedding_text,
    find_variants,
    layout_switch,
    transliterations,
    variant_clauses,
)

ORDINARY = [
    "Сколько стоит доставка в Москву?",
    "Как настроить группу безопасности для виртуальной машины?",
    "действует ли TEA15 на лампы?",
    "Что такое LAMP-LIGHT-MINI и где его купить",
    "Почему console.log ничего не выводит",
    "Где взять ключ API для https://example.com/api/v2",
    "Как подключить Kubernetes кластер через kubectl",
    "Кто победил в Супербоуле 50?",
    "Ещё раз: какой срок возврата?",
]
FIELDS = {"text": 1.0, "breadcrumb": 1.5, "title": 2.0}


def dumps(body: object) -> str:
    return json.dumps(body, ensure_ascii=False, sort_keys=True)


def test_layout_switch_reads_qwerty_as_jcuken() -> None:
    assert layout_switch("ljcnfdrf") == "доставка"
    assert layout_switch("Ljcnfdrf") == "Доставка"
    assert layout_switch("rk.x") == "ключ"  # '.' is the ю key
    assert layout_switch("dostavka") is None  # its ЙЦУКЕН reading is no Russian word


def test_layout_switched_question_is_reread_whole() -> None:
    v = find_variants("cnjbn kb ljcnfdrf d vjcrde?")
    assert v.layout == "стоит ли доставка в москву?"
    assert v.translit is None
    # Typed half in the wrong layout: the Russian words stay, the switched one is re-read.
    assert find_variants("сколько стоит ljcnfdrf").layout == "сколько стоит доставка"


def test_names_in_a_switched_question_are_read_both_ways() -> None:
    v = find_variants("Crjkmrj jxrjd yf,hfkb <hjyrjc d abyfkt&")
    assert v.layout == "Сколько очков набрали <hjyrjc Бронкос в финале&"


def test_transliterated_question_is_read_in_cyrillic() -> None:
    assert transliterations("dostavka") == "доставка"
    assert transliterations("skolko") == "сколько"  # the soft sign people leave out is put back
    v = find_variants("skolko stoit dostavka v moskvu")
    assert v.translit == "сколько стоит доставка в москву"
    assert v.layout is None


def test_misspelt_words_get_a_fuzzy_clause() -> None:
    v = find_variants("сколько стоит доствка")
    assert v.typos == ("доствка",)
    (clause,) = variant_clauses("сколько стоит доствка", FIELDS)
    fuzzy = clause["match"]["text"]
    assert fuzzy["query"] == "доствка"
    assert fuzzy["fuzziness"] == "AUTO" and fuzzy["prefix_length"] == 1
    assert fuzzy["_name"] == variants.TYPO_QUERY_NAME  # the gate reads which candidates it matched


def test_a_question_with_every_long_word_mistyped_gets_them_all_fuzzy() -> None:
    from osrag.evaluation.mistakes import mistyped

    q = "Сколько стоит доставка холодильника курьером через неделю после оформления заказа"
    broken = mistyped(q, 7)
    v = find_variants(broken)
    long_words = [w for w in broken.split() if len(w) >= 5 and w.lower() != "сколько"]
    assert len(v.typos) >= min(len(long_words) - 2, variants.MAX_TYPO_WORDS) > 4


def test_names_are_not_typos() -> None:
    # Capitalised words after the first are names a dictionary does not know.
    assert not find_variants("Сколько очков набрали Бронкос в финале?").typos


@pytest.mark.parametrize("question", ORDINARY)
def test_ordinary_questions_get_no_variant(question: str) -> None:
    assert not find_variants(question)
    assert variant_clauses(question, FIELDS) == []
    assert embedding_text(question) == question


@pytest.mark.parametrize("question", ORDINARY)
def test_ordinary_request_is_byte_identical(question: str) -> None:
    with variants.disabled():
        without = dumps(bm25_head(question, []))
    assert dumps(bm25_head(question, [])) == without


@pytest.mark.parametrize(
    "word",
    ["TEA15", "LAMP-LIGHT-MINI", "console.log", "https://example.com", "SearchClient", "API", "v2.3.1"],
)
def test_identifiers_are_never_transformed(word: str) -> None:
    assert layout_switch(word) is None
    assert transliterations(word) is None
    assert not find_variants(word)
    # Inside a question typed in the wrong layout, the code is kept as it was typed.
    v = find_variants(f"ltqcndetn kb crblrf {word}")
    assert v.layout == f"действует ли скидка {word}"


def test_variant_clauses_mirror_the_heads_fields() -> None:
    clauses = variant_clauses("ljcnfdrf", FIELDS)
    assert clauses == [
        {"match": {"text": {"query": "доставка"}}},
        {"match": {"breadcrumb": {"query": "доставка", "boost": 1.5}}},
        {"match": {"title": {"query": "доставка", "boost": 2.0}}},
    ]


def test_bm25_head_carries_the_variant_clauses() -> None:
    head = bm25_head("ljcnfdrf", [])
    queries = [c["match"] for c in head["bool"]["should"]]
    assert {"text": {"query": "доставка"}} in queries
    assert {"text": {"query": "ljcnfdrf"}} in queries  # the question as typed stays
    assert embedding_text("ljcnfdrf") == "доставка"


def test_variants_off_gives_nothing() -> None:
    with variants.disabled():
        assert not find_variants("ljcnfdrf")
    assert find_variants("ljcnfdrf")


# ------------------------------------------------------------------ perturbed copies
def test_perturbations() -> None:
    assert perturb.layout("доставка") == "ljcnfdrf"
    assert perturb.layout("Где TEA15?") == "Ult TEA15&"  # Latin kept, ЙЦУКЕН's ? is QWERTY's &
    assert perturb.translit("Щука, съешь ёжика") == "Shchuka, sesh yozhika"


def test_typos_are_seeded_and_bounded() -> None:
    q = "Сколько стоит доставка заказа в Москву"
    one = perturb.perturb(q, "typos", 7, "q1")
    assert one == perturb.perturb(q, "typos", 7, "q1")
    changed = [a for a, b in zip(q.split(), one.split()) if a != b]
    assert 1 <= len(changed) <= 2
    assert all(a[0] == b[0] for a, b in zip(q.split(), one.split()))  # never the first letter
    assert perturb.perturb("Где TEA15?", "typos", 7, "q1") == "Где TEA15?"  # nothing to misspell


@pytest.mark.parametrize("question", ORDINARY[:3])
def test_layout_copy_reads_back(question: str) -> None:
    reread = find_variants(perturb.layout(question)).layout
    assert reread is not None
    assert reread.lower().rstrip("&?") == question.lower().rstrip("?")
