"""The in-process ``ru_search`` analyzer, piece by piece (its parity with the index's ``_analyze``
on every eval question is tests/integration/test_analyzer_parity.py), and its use by the query path."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from osrag import PUBLIC, SearchClient, templates
from osrag.records import IndexMeta
from osrag.search.analyzer import (
    SearchAnalyzer,
    Unsupported,
    delimit,
    java_lower,
    java_whitespace,
    search_analyzer,
    shipped_analysis,
    whitespace_tokens,
)
from osrag.settings import Settings
from osrag.steps import Call, Inline, Work, drive
from osrag.store.alias import AliasStore


def test_the_shipped_template_is_the_analysis_it_reproduces() -> None:
    """Fails when osrag-analysis.json changes in a way the Python analyzer does not follow; the
    query path would then ask ``_analyze`` again for every new word (a round trip per question)."""
    a = search_analyzer("russian")
    assert "и" in a.stopwords and "не" not in a.stopwords  # negations are kept (the template's note)
    with pytest.raises(Unsupported, match="light_russian"):
        SearchAnalyzer(shipped_analysis("light_russian"))


@pytest.mark.parametrize(
    ("path", "value"),
    [
        (("filter", "ru_wdg_search", "catenate_words"), True),
        (("filter", "ru_keywords", "keywords_pattern"), ".*[0-9].*"),
        (("char_filter", "ident_punct", "pattern"), "[.]"),
        (("analyzer", "ru_search", "filter"), ["lowercase", "ru_stop", "ru_stem"]),
        (("filter", "ru_stop", "ignore_case"), False),
    ],
)
def test_a_definition_it_was_not_written_for_is_refused(path: tuple[str, ...], value: Any) -> None:
    analysis = copy.deepcopy(shipped_analysis("russian"))
    node = analysis
    for key in path[:-1]:
        node = node[key]
    node[path[-1]] = value
    with pytest.raises(Unsupported, match=path[-2] if path[0] != "analyzer" else "ru_search"):
        SearchAnalyzer(analysis)


def test_word_delimiter_keeps_the_original_then_parts_and_never_splits_letters_from_digits() -> None:
    assert delimit("LAMP-LIGHT-MINI") == ["LAMP-LIGHT-MINI", "LAMP", "LIGHT", "MINI"]
    assert delimit("TEA15") == ["TEA15"]
    assert delimit("calculateTotal") == ["calculateTotal", "calculate", "Total"]
    assert delimit("ABCde") == ["ABCde"]  # upper -> lower is no break
    assert delimit("C++") == ["C++", "C"]  # one subword among delimiters: original and the part
    assert delimit("+") == ["+"]  # delimiters only: the original
    assert delimit("v2.3.1") == ["v2.3.1", "v2", "3", "1"]


def test_java_whitespace_casing_and_the_tokenizer_limit() -> None:
    assert java_whitespace(" ") and java_whitespace("\u2028") and java_whitespace("\x1f")
    assert not java_whitespace("\u00a0") and not java_whitespace("\u202f")
    assert java_lower("İСТАНБУЛ Ё") == "iстанбул ё"  # one character to one, as Character.toLowerCase
    long = "я" * 300
    assert whitespace_tokens(f"{long} б\u00a0в") == ["я" * 255, "я" * 45, "б\u00a0в"]
    assert [len(t) for t in whitespace_tokens("😀" * 130)] == [128, 2]  # 255 UTF-16 units, pairs whole


def test_tokens_fold_yo_drop_stop_words_keep_codes_and_stem_the_rest() -> None:
    a = search_analyzer("russian")
    assert a.tokens("Какая гарантия на лампу LAMP-LIGHT-MINI и на ёлку?") == [
        "гарант",
        "ламп",
        "lamp-light-mini",
        "lamp",
        "light",
        "mini",
        "елк",
    ]
    assert a.tokens("«TEA15» (заварник)") == ["tea15", "заварник"]
    assert a.word_terms("и") == () and a.word_terms("и-или") == ("и-", "и", "ил")


def _answer(calls: list[str]) -> Any:
    def answer(step: Call | Work) -> Any:
        if isinstance(step, Work):
            return step.fn()
        calls.append(step.method)
        assert step.method == "indices.analyze", step
        text = step.kwargs["body"]["text"]  # one word in these calls: the word itself, unstemmed
        return {"tokens": [{"token": text.lower(), "start_offset": 0}]}

    return answer


def test_the_query_path_analyzes_in_process_only_an_index_made_from_the_shipped_template() -> None:
    s = Settings(url="http://127.0.0.1:1", alias="t-unit", _env_file=None)
    made = AliasStore(s).desired_components()
    meta = IndexMeta(
        embedding_model="m",
        dimension=3,
        template_version=templates.TEMPLATE_VERSION,
        stemmer="russian",
        fingerprint=templates.fingerprint("m", 3, templates.TEMPLATE_VERSION, made),
    )
    sc = SearchClient(s, principal=PUBLIC)
    calls: list[str] = []
    terms = drive(sc._question_terms("i1", meta, "гарантия на лампу"), Inline(_answer(calls)))
    assert terms == ["гарант", "ламп"] and calls == []
    # Another fingerprint: the index was made from other files, so its words go to _analyze.
    terms = drive(sc._question_terms("i2", meta.updated(fingerprint="x"), "гарантия"), Inline(_answer(calls)))
    assert calls == ["indices.analyze"] and terms == ["гарантия"]
    # The light stemmer is not reproduced: _analyze too.
    drive(sc._question_terms("i3", meta.updated(stemmer="light_russian"), "гарантия"), Inline(_answer(calls)))
    assert calls == ["indices.analyze", "indices.analyze"]
