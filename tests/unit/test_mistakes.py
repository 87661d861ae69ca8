"""The ``mistyped`` perturbation of ``osrag eval --perturb`` and the perturbed copy of a set."""

from __future__ import annotations

import pytest

from osrag.errors import ConfigError
from osrag.evaluation import mistakes, suite
from osrag.evaluation.datasets import EvalSet, Query


def test_every_long_word_is_mistyped_once_and_the_same_way_everywhere() -> None:
    q = "Как оформить доставку? Доставку оформить нельзя TEA15 где"
    got = mistakes.mistyped(q, 7)
    pairs = list(zip(q.split(), got.split()))
    for a, b in pairs:
        core = a.strip("?")
        if len(core) >= mistakes.MIN_TYPO_LETTERS and core.isalpha() and not core.isascii():
            assert a != b and a[0] == b[0]
            assert len(b) in (len(a), len(a) - 1)  # one swap or one drop
            assert sorted(b) == sorted(a) or len(b) == len(a) - 1
        else:
            assert a == b  # short words and codes as typed
    assert got.split()[1] == got.split()[4]  # "оформить" mistyped alike in both places
    assert got == mistakes.mistyped(q, 7)
    assert mistakes.mistyped(q, 8) != got or len(q) < 10


def test_perturbed_copy_searches_the_clean_index() -> None:
    es = EvalSet(name="xq", queries=[Query("1", "Сколько стоит доставка заказа", {"d": 1})])
    copy = mistakes.perturbed(es, "mistyped", 7, rename=True)
    assert copy.name == "xq~mistyped" and copy.index_name == "xq"
    assert copy.queries[0].relevant == {"d": 1} and copy.queries[0].text != es.queries[0].text
    assert es.queries[0].text == "Сколько стоит доставка заказа" and es.index_name is None


def test_unknown_perturbation_is_one_clear_error() -> None:
    with pytest.raises(ConfigError, match="typoz"):
        suite.load_sets(suite.EvalConfig(datasets=(), perturb=("typoz",), golden=None))


def test_a_task_statement_holds_the_question_and_a_line_of_code() -> None:
    from osrag.search.gate import quotes_code

    q = "Сколько стоит доставка по Москве?"
    t = mistakes.perturb(q, "task", 7, "q1")
    assert q in t and t == mistakes.perturb(q, "task", 7, "q1")
    assert 40 <= len(t.split()) <= 100 and quotes_code(t)
