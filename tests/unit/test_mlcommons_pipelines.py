"""The ingest pipeline through which a cluster model embeds (osrag.mlcommons.pipelines): its body,
its drift, and how ingest uses it -- chunks to embed carry their text, reused chunks their vector,
bulk requests name the pipeline, and a model failure in the items stops the ingest in one line."""

from __future__ import annotations

import copy
from typing import Any
from unittest.mock import Mock

import pytest

from osrag.chunking import Chunk, Document
from osrag.connection import Cluster
from osrag.ingest import batches
from osrag.ingest.batches import Batch
from osrag.ingest.prepared import PreparedDoc
from osrag.mlcommons.errors import ModelMissing, ModelNodeLost, ModelNotDeployed
from osrag.mlcommons.pipelines import (
    EMBED_INPUT_FIELD,
    MARKER,
    PIPELINE_VERSION,
    PROCESSOR_BATCH,
    embed_pipeline,
    embed_pipeline_name,
    pipeline_drift,
)
from osrag.mlcommons.records import ModelInfo
from osrag.records import embedding_text
from osrag.store import bulk
from osrag.store.alias import AliasStore, ensure_ingest_pipeline
from osrag.store.versions import BatchOutcome, VersionStore


def test_the_pipeline_embeds_the_input_field_into_the_vector_field_and_drops_it() -> None:
    body = embed_pipeline("abcDEF123")
    assert embed_pipeline_name("kb", "abcDEF123") == "kb-embed-abcDEF123"
    assert "_meta" not in body  # ingest pipelines refuse it: the marker is the description and version
    assert body["description"].startswith(MARKER) and body["version"] == PIPELINE_VERSION
    embed, remove = body["processors"]
    assert embed["text_embedding"]["model_id"] == "abcDEF123"
    assert embed["text_embedding"]["field_map"] == {EMBED_INPUT_FIELD: "embedding"}
    assert embed["text_embedding"]["batch_size"] == PROCESSOR_BATCH
    assert remove == {"remove": {"field": EMBED_INPUT_FIELD, "ignore_missing": True}}


def test_drift_is_what_osrag_sets_not_what_the_cluster_adds() -> None:
    want = embed_pipeline("m1")
    assert pipeline_drift(want, None) == ["missing in cluster"]
    have = copy.deepcopy(want)
    have["processors"][0]["text_embedding"]["skip_existing"] = False  # a default the cluster may show
    assert pipeline_drift(want, have) == []
    other = embed_pipeline("m2")
    assert any("model_id" in d and "m2" in d for d in pipeline_drift(want, other))
    old = {**copy.deepcopy(want), "version": PIPELINE_VERSION - 1}
    assert any(d.startswith("version") for d in pipeline_drift(want, old))
    foreign = {**copy.deepcopy(want), "description": "someone else's"}
    assert any("not an osrag pipeline" in d for d in pipeline_drift(want, foreign))
    short = {**copy.deepcopy(want), "processors": want["processors"][:1]}
    assert any(d.startswith("processors") for d in pipeline_drift(want, short))


def _info(where: str = "cluster", model_id: str = "m1") -> ModelInfo:
    return ModelInfo(
        model_id, "e5", "1", "DEPLOYED", "TEXT_EMBEDDING", connector_id=None if where == "cluster" else "c1"
    )


def test_alias_store_reports_the_ingest_pipeline_drift(
    fake_client: Any, fake_cluster: Cluster, monkeypatch: pytest.MonkeyPatch
) -> None:
    admin = AliasStore(fake_cluster.settings.model_copy(update={"alias": "kb"}), fake_cluster)
    monkeypatch.setattr(admin, "pipeline_model", lambda: _info())
    fake_client.ingest.get_pipeline.return_value = {}
    drift = admin.ingest_pipeline_drift()
    assert [str(d) for d in drift] == ["ingest pipeline kb-embed-m1: missing in cluster"]
    fake_client.ingest.get_pipeline.return_value = {"kb-embed-m1": embed_pipeline("m1")}
    assert admin.ingest_pipeline_drift() == []
    assert admin.install_ingest_pipeline() == "kb-embed-m1"
    fake_client.ingest.put_pipeline.assert_called_once_with(id="kb-embed-m1", body=embed_pipeline("m1"))

    monkeypatch.setattr(admin, "pipeline_model", lambda: None)  # a model here or behind a connector
    assert admin.ingest_pipeline_drift() == [] and admin.install_ingest_pipeline() is None

    def gone() -> ModelInfo:
        raise ModelMissing("no ml-commons model e5 in the cluster")

    monkeypatch.setattr(admin, "pipeline_model", gone)
    assert [d.kind for d in admin.ingest_pipeline_drift()] == ["ingest pipeline"]
    assert "no ml-commons model e5" in str(admin.ingest_pipeline_drift()[0])


def test_ensure_puts_the_pipeline_only_when_missing_or_different(
    fake_client: Any, fake_cluster: Cluster
) -> None:
    fake_client.ingest.get_pipeline.return_value = {"kb-embed-m1": embed_pipeline("m1")}
    assert ensure_ingest_pipeline(fake_cluster, "kb", "m1") == "kb-embed-m1"
    fake_client.ingest.put_pipeline.assert_not_called()
    fake_client.ingest.get_pipeline.return_value = {}
    ensure_ingest_pipeline(fake_cluster, "kb", "m1")
    fake_client.ingest.put_pipeline.assert_called_once()


def test_bulk_requests_name_the_pipeline(fake_client: Any, make_cluster: Any, bulk_server: Any) -> None:
    cluster = make_cluster(bulk_chunk_size=2, bulk_concurrency=2)
    actions = [
        {"_op_type": "index", "_index": "i", "_id": str(n), "_source": {"text": "t"}} for n in range(5)
    ]
    assert bulk.write(cluster, actions, "w", pipeline="kb-embed-m1") == []
    calls = fake_client.bulk.call_args_list
    assert len(calls) == 3 and all(c.kwargs.get("pipeline") == "kb-embed-m1" for c in calls)
    fake_client.bulk.reset_mock()
    bulk.write(cluster, actions[:1], "w")
    assert "pipeline" not in fake_client.bulk.call_args.kwargs


def _chunk(i: int) -> Chunk:
    return Chunk(
        doc_id="d", ordinal=i, section_id="s", parent_section_id=None, kind="text",
        heading_path=(), text=f"text {i}", body=f"text {i}", start=0, end=1, token_count=2,
    )  # fmt: skip


def test_pipeline_mode_sends_new_chunks_as_text_and_reused_ones_with_their_vector() -> None:
    store = Mock(spec=VersionStore)
    store.taken_by_others.return_value = {}
    store.visible_versions.return_value = {"d": {"d@v0"}}
    store.stored_vectors.return_value = {"text 0": [0.5]}
    model = Mock(spec=batches.LazyModel)
    model.pipeline_model.return_value = ("m1", "ml:e5")
    doc = Document(doc_id="d", text="x", source="d.md", title="d")
    batch = Batch([PreparedDoc(doc, "d.md", "d@v1", [_chunk(0), _chunk(1)], contexts=["", "ctx"])])
    told: list[tuple[int, int, int]] = []
    batches.embed(batch, store, "idx", model, replace=False, on_embedded=lambda *t: told.append(t))
    model.get.return_value.encode_passages.assert_not_called()  # the cluster embeds them
    assert batch.pipeline_model == ("m1", "ml:e5") and batch.reused_vectors == 1
    assert batch.todo[0].vectors == [[0.5], None] and told == [(1, 1, 1)]
    reused, new = (a["_source"] for a in batch.todo[0].actions("idx", "2026-12-07T00:00:00"))
    assert reused["embedding"] == [0.5] and EMBED_INPUT_FIELD not in reused
    assert "embedding" not in new and new[EMBED_INPUT_FIELD] == embedding_text("ctx", "text 1")

    # nothing new to embed: the model is not even asked which way it embeds
    model.reset_mock()
    store.visible_versions.return_value = {"d": {"d@v0"}}
    store.stored_vectors.return_value = {"text 0": [0.5], embedding_text("ctx", "text 1"): [0.25]}
    again = Batch([PreparedDoc(doc, "d.md", "d@v2", [_chunk(0), _chunk(1)], contexts=["", "ctx"])])
    batches.embed(again, store, "idx", model, replace=False)
    model.pipeline_model.assert_not_called()
    assert again.pipeline_model is None and again.todo[0].vectors == [[0.5], [0.25]]


def test_the_write_stage_puts_the_pipeline_and_names_it(monkeypatch: pytest.MonkeyPatch) -> None:
    store = Mock(spec=VersionStore)
    store.cluster, store.alias = Mock(), "kb"
    store.write_hidden.return_value = BatchOutcome()
    put: list[tuple[str, str]] = []
    monkeypatch.setattr(
        batches, "ensure_ingest_pipeline", lambda c, a, m: put.append((a, m)) or embed_pipeline_name(a, m)
    )
    batch = Batch([])
    batches.write(batch, store, "idx")
    store.write_hidden.assert_called_once_with("idx", [], None)
    batch.pipeline_model = ("m1", "ml:e5")
    batches.write(batch, store, "idx")
    assert put == [("kb", "m1")] and store.write_hidden.call_args.args[2] == "kb-embed-m1"


def _failed(reason: str, type_: str = "illegal_argument_exception") -> dict[str, Any]:
    return {"index": {"_id": "d@v1:0", "status": 400, "error": {"type": type_, "reason": reason}}}


def test_a_model_failure_in_the_items_is_one_line_naming_the_model() -> None:
    gone = batches.model_failure(
        [_failed("Model not ready yet. Please deploy the model first.")], "ml:e5 (m1)"
    )
    assert (
        isinstance(gone, ModelNotDeployed) and "ml:e5 (m1)" in str(gone) and "osrag model deploy" in str(gone)
    )
    missing = batches.model_failure([_failed("Failed to find model m1")], "ml:e5 (m1)")
    assert isinstance(missing, ModelMissing)
    assert (
        batches.model_failure([_failed("failed to parse field [x]", "mapper_parsing_exception")], "m") is None
    )

    doc = Document(doc_id="d", text="x", source="d.md", title="d")
    batch = Batch([], todo=[PreparedDoc(doc, "d.md", "d@v1", [_chunk(0)])], written_before=3)
    batch.outcome = BatchOutcome({"d@v1": "bulk write failed"}, [_failed("Model not ready yet.")])
    batches.stop_on_model_failure(batch)  # not written through a pipeline: an ordinary failed file
    batch.pipeline_model = ("m1", "ml-id:m1")
    with pytest.raises(ModelNotDeployed) as err:
        batches.stop_on_model_failure(batch)
    line = str(err.value)
    assert "\n" not in line and "ml-id:m1" in line and "(m1)" not in line
    assert "1 document(s) of this batch not written, 3 written" in line and "osrag ingest` again" in line


#: As neural-search's text_embedding processor fails an item once its own retries on the node's
#: disconnection are spent (the item's error and its cause, as osrag.store.bulk.reason joins them).
NODE_GONE = "[osrag-n2][127.0.0.1:9321][cluster:admin/opensearch/ml/predict] disconnected"


def test_a_node_lost_mid_inference_stops_the_ingest_in_one_line_naming_the_model() -> None:
    lost = batches.model_failure([_failed(NODE_GONE, "node_disconnected_exception")], "ml:e5 (m1)")
    assert isinstance(lost, ModelNodeLost) and "ml:e5 (m1)" in str(lost) and "left the cluster" in str(lost)
    not_connected = batches.model_failure(
        [_failed("[osrag-n2][127.0.0.1:9321] Node not connected", "node_not_connected_exception")], "m"
    )
    assert isinstance(not_connected, ModelNodeLost)
    # A reason that says the model cannot embed at all wins: it, not the lost node, stops every batch.
    both = [_failed(NODE_GONE, "node_disconnected_exception"), _failed("Model not ready yet.")]
    assert isinstance(batches.model_failure(both, "m"), ModelNotDeployed)
    # Not a node: the document's own failure stays a failed file.
    assert (
        batches.model_failure([_failed("version conflict", "version_conflict_engine_exception")], "m") is None
    )

    doc = Document(doc_id="d", text="x", source="d.md", title="d")
    batch = Batch([], todo=[PreparedDoc(doc, "d.md", "d@v1", [_chunk(0)])], written_before=3)
    batch.outcome = BatchOutcome(
        {"d@v1": "bulk write failed"}, [_failed(NODE_GONE, "node_disconnected_exception")]
    )
    batches.stop_on_model_failure(batch)  # not written through a pipeline: an ordinary failed file
    batch.pipeline_model = ("m1", "ml-id:m1")
    with pytest.raises(ModelNodeLost) as err:
        batches.stop_on_model_failure(batch)
    line = str(err.value)
    assert "\n" not in line and "ml-id:m1" in line and NODE_GONE in line
    assert "1 document(s) of this batch not written, 3 written" in line and "osrag ingest` again" in line
