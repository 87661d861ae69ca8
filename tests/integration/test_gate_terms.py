"""The gate's terms are the installed analyzers' own tokens (live node, no Python copy of them),
and its evidence rides on the search request without changing what the search finds."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from osrag.access import Principal
from osrag.embedding import embedder_for
from osrag.ingest.indexing import Ingester
from osrag.names import pipeline_name
from osrag.search import gate
from osrag.search.candidates import hits_of
from osrag.search.query import candidates_body
from osrag.settings import Settings
from osrag.store.alias import AliasStore

pytestmark = [pytest.mark.integration, pytest.mark.compat]

QUESTIONS = [
    "Какая гарантия на лампу LAMP-LIGHT-MINI и на ёлку?",
    "Действует ли промокод «TEA15» на чай, (заварник) и v2.3.1?",
    "calculateTotal: ошибка ORD-500 — что делать?!",
    "и на в",
]
DOCS = {
    "lamp": "# Лампа\n\n## Гарантия\n\nГарантия на лампы LAMP-LIGHT-MINI — два года, на ёлки — год.\n",
    "tea": "# Промокоды\n\n## TEA15\n\nПромокод TEA15 действует на чай, но не на заварники.\n",
    "pie": "# Рецепты\n\n## Пирог\n\nРецепт яблочного пирога с корицей.\n",
}


def _tokens(client: Any, index: str, analyzer: str, text: str) -> list[str]:
    got = client.indices.analyze(index=index, body={"analyzer": analyzer, "text": text})
    return [t["token"] for t in got["tokens"]]


def test_word_by_word_analysis_equals_the_whole_question(admin: AliasStore) -> None:
    """What lets ``WordTerms`` cache per word: the analyzer's terms of a question are the union of
    its words' terms (whitespace tokenizer, token-local filters)."""
    client, index = admin.cluster.client, admin.require_index()
    cache = gate.WordTerms()
    for q in QUESTIONS:
        words = gate.question_words(q)
        missing = cache.missing(index, words)
        got = client.indices.analyze(index=index, body=gate.analyze_body(missing))
        cache.put(index, gate.parse_analyze(got, missing))
        assert set(cache.terms(index, words)) == set(_tokens(client, index, "ru_search", q)), q
        assert cache.missing(index, words) == []
    terms = cache.terms(index, gate.question_words(QUESTIONS[0]))
    assert "lamp-light-mini" in terms and "елк" in terms and "какая" not in terms
    assert cache.terms(index, ["и", "на", "в"]) == []  # stop words have no terms


def test_probes_give_each_hit_its_terms_and_never_change_the_ranking(
    admin: AliasStore, settings: Settings, tmp_path: Path
) -> None:
    root = tmp_path / "docs"
    root.mkdir()
    for doc_id, text in DOCS.items():
        (root / f"{doc_id}.md").write_text(f"---\ndoc_id: {doc_id}\n---\n{text}", encoding="utf-8")
    Ingester(settings, admin=admin).ingest([root])
    client, index = admin.cluster.client, admin.require_index()
    emb = embedder_for(settings)
    params = {"search_pipeline": pipeline_name(settings.alias, settings.fusion)}
    q = QUESTIONS[1]
    vec = emb.encode_query(q)
    cache = gate.WordTerms()
    words = gate.question_words(q)
    cache.put(
        index, gate.parse_analyze(client.indices.analyze(index=index, body=gate.analyze_body(words)), words)
    )
    terms = cache.terms(index, words)
    plain = client.search(index=index, body=candidates_body("hybrid", q, vec, 10, []), params=params)
    probed = client.search(
        index=index,
        body=candidates_body(
            "hybrid",
            q,
            vec,
            10,
            [],
            probes=gate.probe_clauses(gate.probe_terms(terms, q)),
            aggs=gate.evidence_aggs(terms),
        ),
        params=params,
    )
    # The same candidates, in the same order, with the same scores.
    assert [(h["_id"], h["_score"]) for h in plain["hits"]["hits"]] == [
        (h["_id"], h["_score"]) for h in probed["hits"]["hits"]
    ]
    hits = hits_of(probed)
    a = gate.parse_evidence(probed, terms, hits)
    assert set(a.weights) == set(terms)
    for h, matched in zip(hits, a.texts):
        indexed = set(_tokens(client, index, "ru_index", h.source.text))
        assert matched == frozenset(t for t in gate.probe_terms(terms, q) if t in indexed), h.chunk_id
    # Document frequencies are the index's: "tea15" is in one chunk, "пирог"'s stem in none of these.
    n = client.count(index=index)["count"]
    assert a.doc_count == n
    with_tea15 = client.count(index=index, body={"query": {"term": {"text": "tea15"}}})["count"]
    assert a.weights["tea15"] == pytest.approx(gate.idf(with_tea15, n))
    cov = {h.source.doc_id: gate.term_coverage(a.weights, t) for h, t in zip(hits, a.texts)}
    assert cov["tea"] > 0.3 and all(cov["tea"] > c for d, c in cov.items() if d != "tea"), cov


def test_a_code_is_required_only_when_the_index_vouches_for_it(settings: Settings, tmp_path: Path) -> None:
    """TEA99 in a catalogue of TEA codes: the index has no such thing, «nothing relevant». A file
    name the index has no family for (delivery.html) is evidence like any word. A rare code the
    caller may not see (STAFF30, staff only) is asked for and held by no candidate: refused."""
    from osrag import PUBLIC, SearchClient
    from tests.integration.conftest import drop_alias
    from tests.integration.test_async import write_corpus

    admin = AliasStore(settings)
    admin.install()
    try:
        rep = Ingester(settings, admin=admin).ingest([write_corpus(tmp_path / "kb")])
        assert not rep.failed, rep.failed
        client = SearchClient(settings, principal=PUBLIC)
        env = client.search("сколько стоит чай TEA99?", budget_tokens=400)
        assert env.status == "nothing_relevant" and not env.passages
        assert "tea99" in env.message.lower()

        question = "сколько стоит доставка по Москве, как в delivery.html?"
        env = client.search(question, budget_tokens=400)
        assert env.status != "nothing_relevant"
        assert any(p.doc_id.endswith("delivery") for p in env.passages)

        env = client.search("скидка по коду STAFF30", budget_tokens=400)
        assert env.status == "nothing_relevant"
        staff = SearchClient(settings).search(
            "скидка по коду STAFF30", budget_tokens=400, principal=Principal(groups=["staff"])
        )
        assert staff.status != "nothing_relevant" and staff.passages[0].doc_id.endswith("staff-discount")
    finally:
        drop_alias(admin.cluster.client, settings.alias)
