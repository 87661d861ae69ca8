"""Ingest with a local model in the cluster: chunk text goes out, the alias's ingest pipeline
(``text_embedding``) embeds it. The vectors are those ``_predict`` gives (e5's passage prefix
added once, by ml-commons), unchanged chunks are not embedded again, and a model undeployed
mid-ingest stops it with one line naming the model; the same ingest run again (the model
deployed again) writes only what is missing. The model is a tiny one the test builds
(``tests/integration/tiny_embedder.py``): plumbing only."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from osrag.mlcommons.client import MLCommons
from osrag.mlcommons.errors import MLCommonsError
from osrag.mlcommons.pipelines import EMBED_INPUT_FIELD, embed_pipeline_name
from osrag.mlcommons.records import ModelInfo
from osrag.records import embedding_text
from tests.integration.ml_natives import deploy_or_skip, predict_count, remove_model

pytestmark = [pytest.mark.integration, pytest.mark.cluster_model]
onnx = pytest.importorskip("onnx")
pytest.importorskip("tokenizers")

STORAGE_NEW = "Хранить в холодильнике не нужно, держите чай в темной банке до двух лет."


@pytest.fixture(scope="module")
def tiny(
    opensearch_url: str, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[tuple[MLCommons, ModelInfo]]:
    """A deployed tiny embedding model (e5's prefixes), registered for this module; removed after."""
    from osrag.connection import make_client
    from osrag.settings import Settings
    from tests.integration.test_async import DOCS
    from tests.integration.tiny_embedder import build

    ml = MLCommons(make_client(Settings(url=opensearch_url, _env_file=None)), poll_seconds=0.5)
    path = tmp_path_factory.mktemp("tiny") / "tiny.zip"
    meta = build([body for _, body in DOCS.values()] + [STORAGE_NEW], path, f"t-ing-{uuid.uuid4().hex[:8]}")
    info = ml.register_local(path, meta)
    try:
        info = deploy_or_skip(ml, info.model_id)
        assert info.deployed and info.where == "cluster"
        yield ml, info
    finally:
        remove_model(ml, info.model_id)


def _chunks(client: Any, alias: str) -> list[dict[str, Any]]:
    from osrag.names import visibility_filter

    got = client.search(
        index=alias,
        body={"size": 1000, "query": {"bool": {"filter": [visibility_filter(alias)]}}},
        params={"request_cache": "false"},
    )
    return [h["_source"] for h in got["hits"]["hits"]]


def _assert_predict_vectors(ml: MLCommons, model_id: str, chunks: list[dict[str, Any]]) -> None:
    texts = [embedding_text(str(c.get("context") or ""), c["text"]) for c in chunks]
    want = np.array(ml.embed(model_id, texts, content_type="passage").vectors)
    got = np.array([c["embedding"] for c in chunks])
    cos = np.sum(got * want, axis=1) / (np.linalg.norm(got, axis=1) * np.linalg.norm(want, axis=1))
    assert float(cos.min()) >= 0.999, list(zip([c["chunk_id"] for c in chunks], cos))


def test_ingest_through_the_pipeline_gives_predicts_vectors_and_reuses_unchanged_ones(
    settings: Any, tiny: tuple[MLCommons, ModelInfo], tmp_path: Path
) -> None:
    from osrag.ingest.indexing import Ingester
    from osrag.store.alias import AliasStore, installed_ingest_pipeline
    from tests.integration.conftest import drop_alias
    from tests.integration.test_async import DOCS, write_corpus

    ml, info = tiny
    # Small chunks, so that tea15's sections are chunks of their own (one of them is changed below).
    s = settings.model_copy(
        update={"embedding_model": f"ml-id:{info.model_id}", "chunk_max_tokens": 30, "chunk_min_tokens": 5}
    )
    admin = AliasStore(s)
    client = admin.cluster.client
    pipeline = embed_pipeline_name(s.alias, info.model_id)
    try:
        admin.install()  # osrag install puts the pipeline
        assert installed_ingest_pipeline(admin.cluster, pipeline) is not None
        assert not [d for d in admin.check() if d.kind == "ingest pipeline"]
        # gone from the cluster: status/doctor say so, and ingest puts it back before writing
        client.ingest.delete_pipeline(id=pipeline)
        assert [str(d) for d in admin.ingest_pipeline_drift()] == [
            f"ingest pipeline {pipeline}: missing in cluster"
        ]
        kb = write_corpus(tmp_path / "kb")
        report = Ingester(s, admin=admin).ingest([kb])
        assert report.failed == [] and report.indexed == len(DOCS), report.failed
        assert installed_ingest_pipeline(admin.cluster, pipeline) is not None
        chunks = _chunks(client, s.alias)
        assert chunks and all(EMBED_INPUT_FIELD not in c for c in chunks)
        _assert_predict_vectors(ml, info.model_id, chunks)

        again = Ingester(s, admin=admin).ingest([kb])
        assert (again.indexed, again.skipped) == (0, len(DOCS))

        # One section of a document changes: only its new chunk is embedded.
        before = {c["text"]: c["embedding"] for c in chunks if c["doc_id"] == "tea15"}
        doc = kb / "tea15.md"
        doc.write_text(
            doc.read_text(encoding="utf-8").replace("Хранить в сухом прохладном месте до года.", STORAGE_NEW),
            encoding="utf-8",
        )
        asked = predict_count(client, info.model_id)
        changed = Ingester(s, admin=admin).ingest([kb])
        assert predict_count(client, info.model_id) == asked + 1  # one inference call: the new chunk
        assert (changed.indexed, changed.skipped) == (1, len(DOCS) - 1)
        after = [c for c in _chunks(client, s.alias) if c["doc_id"] == "tea15"]
        kept = [c for c in after if c["text"] in before]
        assert kept and len(kept) < len(after) and changed.reused_vectors == len(kept)
        assert all(c["embedding"] == before[c["text"]] for c in kept)
        _assert_predict_vectors(ml, info.model_id, after)

        # Metadata only: every chunk keeps its vector, and the model is asked for none.
        asked = predict_count(client, info.model_id)
        lamp = kb / "lamp.md"
        lamp.write_text(lamp.read_text(encoding="utf-8").replace("category: shop", "category: lamps"))
        meta_only = Ingester(s, admin=admin).ingest([kb])
        assert meta_only.failed == [] and meta_only.indexed == 1, meta_only.failed
        assert meta_only.reused_vectors == len([c for c in chunks if c["doc_id"] == "lamp"])
        assert predict_count(client, info.model_id) == asked
    finally:
        drop_alias(client, s.alias)
    assert installed_ingest_pipeline(admin.cluster, pipeline) is None  # the conftest's cleanup


def test_a_model_undeployed_mid_ingest_stops_it_in_one_line_and_the_rerun_resumes(
    settings: Any, tiny: tuple[MLCommons, ModelInfo], tmp_path: Path
) -> None:
    from osrag.ingest.indexing import Ingester
    from osrag.store.alias import AliasStore
    from tests.integration.conftest import drop_alias
    from tests.integration.test_async import DOCS, write_corpus

    ml, info = tiny
    # Two documents a batch: the model goes away once the first batch is written.
    s = settings.model_copy(update={"embedding_model": f"ml-id:{info.model_id}", "ingest_batch_docs": 2})
    admin = AliasStore(s)
    client = admin.cluster.client
    undeployed: list[str] = []

    def progress(path: str, status: str) -> None:
        if status == "indexed" and not undeployed:
            undeployed.append(path)
            ml.undeploy(info.model_id)

    try:
        admin.install()
        kb = write_corpus(tmp_path / "kb")
        try:
            with pytest.raises(MLCommonsError) as err:
                Ingester(s, admin=admin).ingest([kb], progress=progress)
        finally:
            ml.deploy(info.model_id)
        line = str(err.value)
        assert "\n" not in line and info.model_id in line and "osrag model deploy" in line, line
        assert "run the same `osrag ingest` again" in line, line
        # Only the first batch's documents are visible, each whole; nothing of the failed batch.
        visible = _chunks(client, s.alias)
        docs = {c["doc_id"] for c in visible}
        assert len(docs) == 2, docs
        stored = client.count(index=s.alias, body={"query": {"terms": {"doc_id": sorted(docs)}}})["count"]
        assert stored == len(visible)  # no hidden chunk of a shown document left behind
        for doc_id in docs:
            whole = client.count(index=s.alias, body={"query": {"term": {"doc_id": doc_id}}})["count"]
            assert whole == len([c for c in visible if c["doc_id"] == doc_id])

        resumed = Ingester(s, admin=admin).ingest([kb])
        assert resumed.failed == [] and (resumed.indexed, resumed.skipped) == (len(DOCS) - 2, 2)
        final = _chunks(client, s.alias)
        assert {c["doc_id"] for c in final} == set(DOCS)
        _assert_predict_vectors(ml, info.model_id, final)
    finally:
        drop_alias(client, s.alias)


def test_reindex_into_the_cluster_model_copies_through_the_pipeline(
    settings: Any, tiny: tuple[MLCommons, ModelInfo], tmp_path: Path
) -> None:
    """navec (in the app) -> the tiny model in the cluster: the copies are embedded by the
    pipeline (the vectors _predict gives), counts kept; osrag drop takes the pipeline too."""
    from osrag.admin.lifecycle import drop, plan_drop
    from osrag.admin.reindex import Reindexer
    from osrag.ingest.indexing import Ingester
    from osrag.store.alias import AliasStore, installed_ingest_pipeline
    from tests.integration.conftest import drop_alias
    from tests.integration.test_async import DOCS, write_corpus

    ml, info = tiny
    admin = AliasStore(settings)
    client = admin.cluster.client
    spec = f"ml-id:{info.model_id}"
    pipeline = embed_pipeline_name(settings.alias, info.model_id)
    try:
        admin.install()
        assert installed_ingest_pipeline(admin.cluster, pipeline) is None  # navec: no pipeline
        report = Ingester(settings, admin=admin).ingest([write_corpus(tmp_path / "kb")])
        assert report.indexed == len(DOCS)
        counts = Reindexer(settings).counts(admin.current_index())
        moved = Reindexer(settings).run(spec)
        assert admin.meta(moved.target).embedding_model == spec
        assert Reindexer(settings).counts(moved.target) == counts
        assert installed_ingest_pipeline(admin.cluster, pipeline) is not None
        chunks = _chunks(client, settings.alias)
        assert len(chunks) == counts[1] and all(len(c["embedding"]) == info.dimension for c in chunks)
        _assert_predict_vectors(ml, info.model_id, chunks)

        plan = plan_drop(settings.model_copy(update={"embedding_model": spec}))
        assert plan.ingest_pipelines == [pipeline] and f"ingest pipeline {pipeline}" in plan.lines()
        drop(settings, plan)
        assert installed_ingest_pipeline(admin.cluster, pipeline) is None
    finally:
        drop_alias(client, settings.alias)
