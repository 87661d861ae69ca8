"""The in-process ``ru_search`` (``osrag.search.analyzer``) against the index's own ``_analyze``: on every
question of the three evaluation sets, token for token, and word by word as the gate uses it.

What lets ``search()`` make one request for a question it has never seen; a single difference
fails the test (and names the question)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from osrag.search import gate
from osrag.search.analyzer import search_analyzer
from osrag.search.client import SearchClient
from osrag.search.query import lexical_text
from osrag.settings import Settings
from osrag.store.alias import AliasStore

pytestmark = [pytest.mark.integration, pytest.mark.compat]

REPO = Path(__file__).resolve().parents[2]
SHARED = REPO.parent / "shared" / "datasets"
#: Every question file of the evaluation sets (vkdocs has three phrasings of its questions).
SETS = {
    "golden": (REPO / "golden" / "golden.jsonl", "question"),
    "xquad-ru-dev": (SHARED / "xquad-ru-dev" / "queries.jsonl", "text"),
    "vkdocs-ru-dev": (SHARED / "vkdocs-ru-dev" / "queries.jsonl", "text"),
    "vkdocs-ru-dev short": (SHARED / "vkdocs-ru-dev" / "queries-short.jsonl", "text"),
    "vkdocs-ru-dev context": (SHARED / "vkdocs-ru-dev" / "queries-context.jsonl", "text"),
}
#: Hard cases beyond the sets: codes, camelCase, ё, punctuation, stop words inside identifiers,
#: symbols, Latin-1 letters and digits, a word longer than the tokenizer's 255 units, emoji.
EXTRA = [
    "Какая гарантия на лампу LAMP-LIGHT-MINI и на ёлку?",
    "Действует ли промокод «TEA15» на чай, (заварник) и v2.3.1?",
    "calculateTotal: ошибка ORD-500 — что делать?!",
    "и на в и-или не-а ВСЁ Её",
    "C++ 50% +7 a.b.c _x_ 'кавычки' /путь/к/файлу ~/.ssh/config e-mail: a@b.ru",
    "ÀçÇ ªº µß ²³ ½ Ǆ İstanbul ПоЧтА iOS XMLHttpRequest ABCde",
    "слово" * 60 + " ещё",
    "эмодзи 😀 внутри😀слова и 𝒜𝒷𝒸",
    "табуляция\tи\u00a0неразрывный пробел\u2007тут",
]


def _questions() -> list[tuple[str, str]]:
    out: list[tuple[str, str]] = [("extra", q) for q in EXTRA]
    for name, (path, key) in SETS.items():
        if not path.exists():
            pytest.skip(f"evaluation set {name} not found at {path}")
        for line in path.read_text(encoding="utf-8").splitlines():
            if line.strip():
                out.append((name, str(json.loads(line)[key])))
    return out


def test_the_python_analyzer_gives_the_index_tokens_on_every_eval_question(
    admin: AliasStore, settings: Settings
) -> None:
    client, index = admin.cluster.client, admin.require_index()
    local = search_analyzer(settings.stemmer)
    questions = _questions()
    assert len(questions) > 1900  # all five files were read
    differ: list[str] = []
    for name, q in questions:
        # What the gate analyses: the words of the text the BM25 head sees, joined by one space.
        words = gate.question_words(lexical_text(q))
        text = " ".join(words)
        resp = client.indices.analyze(index=index, body={"analyzer": "ru_search", "text": text})
        want = [t["token"] for t in resp["tokens"]]
        if local.tokens(text) != want:
            differ.append(f"{name}: {q!r}: python {local.tokens(text)} != index {want}")
            continue
        # And word by word, as the gate keeps them (the words' terms by offset).
        if not any(ord(c) > 0xFFFF for c in text):  # _analyze offsets count UTF-16 units
            by_word = gate.parse_analyze(resp, words)
            if local.words_terms(words) != by_word:
                differ.append(f"{name}: {q!r}: per word python {local.words_terms(words)} != {by_word}")
        # The whole question as typed, too (the analyzer is the BM25 head's search analyzer).
        if q == text:
            continue
        raw = [
            t["token"]
            for t in client.indices.analyze(index=index, body={"analyzer": "ru_search", "text": q})["tokens"]
        ]
        if local.tokens(q) != raw:
            differ.append(f"{name}: {q!r}: whole python {local.tokens(q)} != index {raw}")
    assert not differ, f"{len(differ)} of {len(questions)} differ:\n" + "\n".join(differ[:20])


def test_search_uses_it_only_on_an_index_made_from_the_shipped_template(
    admin: AliasStore, settings: Settings
) -> None:
    sc = SearchClient(settings)
    index, meta = sc._run(sc._target())
    assert sc.local_analyzer(index, meta) is not None
    other = SearchClient(settings)
    assert other.local_analyzer(index, meta.updated(fingerprint="0123456789")) is None
    assert other.local_analyzer("x", meta.updated(stemmer="light_russian")) is None
    assert other.local_analyzer("y", meta.updated(template_version=2)) is None
