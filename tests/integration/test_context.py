"""Contextual retrieval against the real node: the context is stored, searched by BM25 and embedded;
the chat contextualizer's endpoint (a real local HTTP server) is not asked again on a re-ingest;
switching contextualizer re-embeds."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from osrag.access import PUBLIC
from osrag.chunking import Document
from osrag.embedding import embedder_for
from osrag.ingest.context import CONTEXT_FIELD
from osrag.ingest.indexing import Ingester
from osrag.names import visibility_filter
from osrag.records import embedding_text
from osrag.search.client import SearchClient
from osrag.settings import Settings
from osrag.store.alias import AliasStore
from tests.integration.conftest import drop_alias
from tests.unit.test_context import ChatServer

pytestmark = pytest.mark.integration

#: A word only the endpoint's context holds (never in any chunk's text).
CONTEXT_WORD = "криптоконтейнер"


def _docs(tag: str = "") -> list[Document]:
    text = (
        "# Диски\n\nДиски подключают к виртуальной машине в личном кабинете.\n\n"
        "## Ограничения\n\nРазмер увеличивают только после остановки машины.\n"
    )
    return [Document(doc_id="disks", title="Диски", text=text, source="disks.md", metadata={"tag": tag})]


@pytest.fixture
def small(settings: Settings) -> Settings:
    return settings.model_copy(update={"chunk_max_tokens": 30, "chunk_min_tokens": 2, "chunk_overlap": 0.0})


@pytest.fixture
def admin(small: Settings) -> Iterator[AliasStore]:
    adm = AliasStore(small)
    try:
        adm.install()
        yield adm
    finally:
        drop_alias(adm.cluster.client, adm.alias)


def _visible(admin: AliasStore) -> list[dict[str, Any]]:
    resp = admin.cluster.client.search(
        index=admin.s.alias,
        body={
            "size": 100,
            "query": {"bool": {"filter": [visibility_filter(admin.s.alias)]}},
            "sort": ["ordinal"],
        },
    )
    return [h["_source"] for h in resp["hits"]["hits"]]


def test_chat_context_is_stored_searched_and_not_asked_again_on_reingest(
    small: Settings, admin: AliasStore, tmp_path: Path
) -> None:
    with ChatServer(reply=f"Фрагмент о сервисе {CONTEXT_WORD} (вызов {{n}}).") as server:
        s = small.model_copy(
            update={
                "contextualizer": "chat",
                "context_url": server.url,
                "context_model": "tiny",
                "context_cache_dir": tmp_path / "contexts",
            }
        )
        first = Ingester(s, admin=admin).ingest_documents(_docs())
        assert first.indexed == 1 and not first.failed
        chunks = _visible(admin)
        assert len(chunks) == 2 and len(server.requests) == 2  # one call per chunk
        assert [c[CONTEXT_FIELD] for c in chunks] == [
            f"Фрагмент о сервисе {CONTEXT_WORD} (вызов 1).",
            f"Фрагмент о сервисе {CONTEXT_WORD} (вызов 2).",
        ]
        assert all(CONTEXT_WORD not in c["text"] for c in chunks)

        # The context is its own BM25 field, analysed in Russian (another word form still matches).
        hits = SearchClient(s, principal=PUBLIC).retrieve("криптоконтейнеры", mode="bm25", depth=5).hits
        assert {h.source.chunk_id for h in hits} == {"disks:0", "disks:1"}

        # A new version of the same document (metadata changed, same chunks): written again, and
        # the contexts come from the disk cache -- the endpoint is not asked.
        again = Ingester(s, admin=admin).ingest_documents(_docs(tag="v2"))
        assert again.indexed == 1 and len(server.requests) == 2
        assert [c[CONTEXT_FIELD] for c in _visible(admin)] == [c[CONTEXT_FIELD] for c in chunks]
        # Unchanged: skipped, nothing asked.
        same = Ingester(s, admin=admin).ingest_documents(_docs(tag="v2"))
        assert same.skipped == 1 and len(server.requests) == 2


def test_switching_to_outline_reembeds_with_the_context_first(small: Settings, admin: AliasStore) -> None:
    plain = Ingester(small, admin=admin).ingest_documents(_docs())
    assert plain.indexed == 1
    before = _visible(admin)
    assert all(CONTEXT_FIELD not in c for c in before)

    s = small.model_copy(update={"contextualizer": "outline"})
    rep = Ingester(s, admin=admin).ingest_documents(_docs())
    assert rep.indexed == 1  # a new version, though the document did not change
    after = _visible(admin)
    assert {c["version_key"] for c in after}.isdisjoint({c["version_key"] for c in before})
    # The second chunk gets the lead sentence; the first already holds it (no context, vector reused).
    assert CONTEXT_FIELD not in after[0]
    assert after[1][CONTEXT_FIELD] == "Диски подключают к виртуальной машине в личном кабинете."
    assert rep.reused_vectors == 1
    emb = embedder_for(s)
    want = emb.encode_passages([embedding_text(after[1][CONTEXT_FIELD], after[1]["text"])])[0]
    assert np.allclose(after[1]["embedding"], want, atol=1e-5)
    assert not np.allclose(after[1]["embedding"], before[1]["embedding"], atol=1e-3)
