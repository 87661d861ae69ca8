"""Rerank in the cluster by a search pipeline (issue 34): the pipeline's body (the fusion osrag
installs, then the ``rerank`` response processor), its name, the search request sent through it
(the question in ``ext``, ``rerank_depth`` hits), and what a failed rerank does (asked again
without it, the note naming the model) -- without a cluster."""

from __future__ import annotations

from typing import Any
from unittest.mock import Mock

import pytest
from opensearchpy.exceptions import TransportError

from osrag.access import PUBLIC
from osrag.errors import ClusterError
from osrag.mlcommons.blueprints import fusion_rerank_pipeline, rerank_ext, rerank_processor
from osrag.names import pipeline_name, rerank_pipeline_name
from osrag.search.candidates import hits_of
from osrag.search.client import SearchClient
from osrag.search.retrieval import Retrieval, checked_ask
from osrag.settings import Settings
from osrag.steps import Call, Inline, Work, drive

FUSION = {
    "description": "osrag hybrid search (v3)",
    "phase_results_processors": [{"normalization-processor": {"normalization": {"technique": "min_max"}}}],
}


def test_the_rerank_pipeline_is_the_fusion_then_the_rerank_processor() -> None:
    body = fusion_rerank_pipeline(FUSION, "mid-1", "ml:ce")
    assert body["phase_results_processors"] == FUSION["phase_results_processors"]
    assert body["response_processors"] == [
        {"rerank": {"ml_opensearch": {"model_id": "mid-1"}, "context": {"document_fields": ["text"]}}}
    ]
    assert body["response_processors"][0] == rerank_processor("mid-1", "text")
    assert "ml:ce" in body["description"] and "response_processors" not in FUSION  # not changed
    # A fusion that already has a response processor (the explain variant) keeps it first.
    explain = {**FUSION, "response_processors": [{"hybrid_score_explanation": {}}]}
    assert [next(iter(p)) for p in fusion_rerank_pipeline(explain, "m", "ml:ce")["response_processors"]] == [
        "hybrid_score_explanation",
        "rerank",
    ]
    assert rerank_pipeline_name("kb", "minmax") == pipeline_name("kb", "minmax") + "-rerank"


def test_the_alias_store_renders_it_for_the_configured_fusion_and_model_only() -> None:
    from osrag.mlcommons.records import ModelInfo
    from osrag.store.alias import AliasStore

    s = Settings(url="http://127.0.0.1:1", alias="kb", rerank=True, reranker_model="ml:ce", _env_file=None)
    admin = AliasStore(s, cluster=Mock())
    admin.desired_pipelines = Mock(return_value={pipeline_name("kb", s.fusion): FUSION})  # type: ignore[method-assign]
    found = ModelInfo(
        model_id="mid-9", name="ce", version="1", state="DEPLOYED", function_name="TEXT_SIMILARITY"
    )
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr("osrag.mlcommons.client.MLCommons.find", lambda self, ref: found)
        got = admin.desired_rerank_pipelines()
    assert list(got) == [rerank_pipeline_name("kb", s.fusion)]
    assert got[rerank_pipeline_name("kb", s.fusion)] == fusion_rerank_pipeline(FUSION, "mid-9", "ml:ce")
    # A model in this process, or reranking off: no pipeline wanted.
    for other in ({"reranker_model": "BAAI/bge-reranker-v2-m3"}, {"rerank": False}):
        assert AliasStore(s.model_copy(update=other), cluster=Mock()).desired_rerank_pipelines() == {}


def _client(**kw: Any) -> SearchClient:
    return SearchClient(
        Settings(url="http://127.0.0.1:1", alias="kb", _env_file=None, **kw), principal=PUBLIC
    )


def _resp() -> dict[str, Any]:
    src = {"chunk_id": "d:0", "doc_id": "d", "text": "доставка"}
    return {"hits": {"hits": [{"_id": "d:0", "_score": 0.7, "_source": src}]}}


def test_the_search_goes_through_the_rerank_pipeline_with_the_question_and_rerank_depth() -> None:
    sc = _client(rerank_depth=5)
    ask = checked_ask("доставка", "hybrid", 40, [], default_depth=40)
    sent: list[dict[str, Any]] = []

    def node(step: Call | Work) -> Any:
        assert isinstance(step, Call)
        sent.append(step.kwargs)
        return _resp()

    body, params = {"size": 40, "query": {}}, {"search_pipeline": pipeline_name("kb")}
    resp, by, note = drive(sc._ask_reranked("i", body, params, [], ask, "ml:ce"), Inline(node))
    assert (by, note) == ("ml:ce", "") and resp == _resp()
    (kw,) = sent
    assert kw["params"]["search_pipeline"] == rerank_pipeline_name("kb", sc.s.fusion)
    assert kw["body"]["size"] == 5 and kw["body"]["ext"] == rerank_ext("доставка")
    assert body == {"size": 40, "query": {}}  # the caller's body is not changed


def _refused(reason: str) -> ClusterError:
    info = {"error": {"root_cause": [{"type": "status_exception", "reason": reason}]}, "status": 400}
    try:
        raise ClusterError(f"OpenSearch search failed: {reason}") from TransportError(400, "x", info)
    except ClusterError as exc:
        return exc


@pytest.mark.parametrize(
    ("reason", "said"),
    [
        ("Model not ready yet. Please deploy the model first.", "deploy it"),
        ("Pipeline kb-hybrid-minmax-rerank is not defined", "osrag install"),
    ],
)
def test_a_failed_rerank_asks_again_without_it_and_names_the_model(reason: str, said: str) -> None:
    sc = _client()
    ask = checked_ask("доставка", "hybrid", 40, [], default_depth=40)
    pipelines: list[str] = []

    def node(step: Call | Work) -> Any:
        assert isinstance(step, Call)
        pipelines.append(step.kwargs["params"]["search_pipeline"])
        if "ext" in step.kwargs["body"]:
            raise _refused(reason)
        return _resp()

    params = {"search_pipeline": pipeline_name("kb")}
    resp, by, note = drive(sc._ask_reranked("i", {"size": 40}, params, [], ask, "ml:ce"), Inline(node))
    assert pipelines == [rerank_pipeline_name("kb", sc.s.fusion), pipeline_name("kb")]
    assert by is None and resp == _resp()
    assert "ml:ce" in note and said in note and "\n" not in note
    # The envelope's rerank: not used, where it would have run, the note as said.
    ret = Retrieval(hits_of(resp), "i", Mock(), reranked_by=by, rerank_note=note)
    hits, info = sc._reranked_in_cluster("ml:ce", ret)
    assert not info.used and info.where == "cluster" and info.note == note and hits[0].rerank is None


def test_hits_reranked_in_the_cluster_carry_the_models_score() -> None:
    sc = _client()
    ret = Retrieval(hits_of(_resp()), "i", Mock(), reranked_by="ml:ce")
    hits, info = sc._reranked_in_cluster("ml:ce", ret)
    assert info.used and info.where == "cluster" and info.model == "ml:ce" and info.reranked == 1
    assert (hits[0].rerank, hits[0].fused) == (0.7, 0.0)
    # Reranking off, or a model in this process: no rerank pipeline.
    assert sc._pipeline_reranker(False) is None
    assert _client(reranker_model="ml:ce")._pipeline_reranker(True) == "ml:ce"
    off = _client(reranker_model="ml:ce")
    off.rerank_in_pipeline = False
    assert off._pipeline_reranker(True) is None


def test_check_reports_the_rerank_pipeline_missing_or_its_model_not_found() -> None:
    from osrag.mlcommons.errors import ModelMissing
    from osrag.store.alias import AliasStore

    s = Settings(url="http://127.0.0.1:1", alias="kb", rerank=True, reranker_model="ml:ce", _env_file=None)
    admin = AliasStore(s, cluster=Mock())
    name = rerank_pipeline_name("kb", s.fusion)
    admin.desired_rerank_pipelines = Mock(return_value={name: FUSION})  # type: ignore[method-assign]
    admin.installed = Mock(return_value=None)  # type: ignore[method-assign]
    (drift,) = admin.rerank_drift()
    assert (drift.name, drift.kind, drift.differences) == (name, "search pipeline", ["missing in cluster"])
    admin.installed = Mock(return_value=FUSION)  # type: ignore[method-assign]
    assert admin.rerank_drift() == []
    admin.desired_rerank_pipelines = Mock(side_effect=ModelMissing("no ml-commons model ce in the cluster"))  # type: ignore[method-assign]
    (drift,) = admin.rerank_drift()
    assert drift.name == name and "no ml-commons model ce" in drift.differences[0]
