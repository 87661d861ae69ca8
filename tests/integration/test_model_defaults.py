"""Model defaults on the real node: nothing is written before the model loads; a reranker that is
not here by default is said once, in the envelope, with nothing logged per search."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest

from osrag.access import Principal
from osrag.admin.status import read_status
from osrag.errors import ModelError
from osrag.ingest.indexing import Ingester
from osrag.search.client import SearchClient
from osrag.settings import Settings
from osrag.store.alias import AliasStore
from tests.integration.conftest import drop_alias

pytestmark = pytest.mark.integration

ROOT = Path(__file__).resolve().parents[2]


def test_install_writes_nothing_when_the_model_cannot_load(settings: Settings, tmp_path: Path) -> None:
    s = settings.model_copy(update={"embedding_model": str(tmp_path / "no-such-model")})
    admin = AliasStore(s)
    client = admin.cluster.client
    try:
        with pytest.raises(ModelError, match="no such directory"):
            admin.install()
        assert client.indices.get_index_template(name=f"{s.alias}-template", ignore=404).get("status") == 404
        assert (
            client.cluster.get_component_template(name=f"{s.alias}-analysis", ignore=404).get("status") == 404
        )
        pipes = client.transport.perform_request("GET", "/_search/pipeline", params={"ignore": 404})
        assert not [p for p in pipes if p.startswith(f"{s.alias}-")]
        assert admin.current_index() is None
    finally:
        drop_alias(client, s.alias)


def test_the_index_records_how_its_model_was_chosen(admin: AliasStore, settings: Settings) -> None:
    meta = admin.meta(admin.require_index())
    assert meta.embedding_model == "navec:news-300d"
    assert (
        meta.embedding_model_source == "embedding model: navec:news-300d (configured: OSRAG_EMBEDDING_MODEL)"
    )
    models = read_status(settings).models
    assert models["embedding"] == "navec:news-300d"
    assert models["embedding_source"] == meta.embedding_model_source
    assert models["reranker"] is None and "OSRAG_RERANK=false" in models["reranker_source"]


def test_a_default_reranker_that_is_not_here_is_said_once_and_not_logged(
    admin: AliasStore, settings: Settings, caplog: pytest.LogCaptureFixture
) -> None:
    s = settings.model_copy(update={"rerank": True})  # the default cross-encoder, not named
    if s.reranker_choice.name is not None:
        pytest.skip(f"{s.reranker_model} is in this machine's model cache")
    Ingester(settings, admin=admin).ingest([ROOT / "golden" / "corpus" / "returns-policy.md"])
    caplog.set_level(logging.INFO)
    client = SearchClient(s, principal=Principal.admin_bypass())
    for _ in range(2):
        env = client.search("можно ли вернуть товар", budget_tokens=500)
        assert env.passages
        assert env.rerank.used is False and env.rerank.model is None
        assert env.rerank.note.startswith("no cross-encoder here, fused order plus evidence (")
        assert not [n for n in env.notes if "cross-encoder" in n or "rerank" in n]
    assert not [r for r in caplog.records if "rerank" in r.getMessage() and r.levelno >= logging.WARNING]
