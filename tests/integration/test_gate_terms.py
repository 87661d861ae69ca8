"""The gate's terms are the installed analyzers' own tokens (live node, no Python copy of them)."""

from __future__ import annotations

from typing import Any

import pytest

from osrag import gate

pytestmark = pytest.mark.integration


def _tokens(client: Any, index: str, analyzer: str, text: str) -> set[str]:
    got = client.indices.analyze(index=index, body={"analyzer": analyzer, "text": text})
    return {t["token"] for t in got["tokens"]}


def test_one_term_vector_request_gives_the_analyzers_tokens_and_idf(admin: Any) -> None:
    client, index = admin.cluster.client, admin.require_index()
    question = "Какая гарантия на лампу LAMP-LIGHT-MINI и на ёлку?"
    texts = ["Гарантия на лампы LAMP-LIGHT-MINI — два года.", "Рецепт яблочного пирога.", ""]
    resp = client.mtermvectors(index=index, body=gate.termvectors_body(question, texts))
    a = gate.parse_termvectors(resp, len(texts))

    assert set(a.weights) == _tokens(client, index, "ru_search", question)
    assert "какая" not in a.weights and "на" not in a.weights  # the index's stop list
    assert "lamp-light-mini" in a.weights and "елк" in a.weights  # codes whole, ё folded, stemmed
    assert a.texts[0] == frozenset(_tokens(client, index, "ru_index", texts[0]))
    assert a.texts[2] == frozenset()
    # An empty index: every term has doc_freq 0, so all weigh the same.
    assert a.doc_count == 0 and len(set(a.weights.values())) == 1

    on, off = (gate.term_coverage(a.weights, t) for t in a.texts[:2])
    assert on > 0.5 and off == 0.0
