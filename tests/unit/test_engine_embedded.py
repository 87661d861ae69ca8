"""The question embedded by the engine (issue 34): the ``neural`` head and its request parameter,
the dense scores read from ``matched_queries``, the gate's cosines from them (a hit the dense head
did not find is unmeasured, never a refusal), and the engine's refusal as one line naming the model."""

from __future__ import annotations

from typing import Any

import pytest

from osrag.capabilities import Capabilities
from osrag.records import ChunkSource
from osrag.search import gate
from osrag.search.candidates import Candidate, hits_of
from osrag.search.gate import Analysis, Gate, relevant_ids
from osrag.search.query import DENSE_QUERY_NAME, EngineEmbedded, candidates_body, neural_head
from osrag.search.retrieval import NO_EVIDENCE, checked_ask, search_request


def test_the_neural_head_names_the_model_the_text_k_filters_and_its_name() -> None:
    flt = [{"term": {"tenant": "a"}}]
    head = neural_head(EngineEmbedded("m-1", "доставка"), 7, flt, ef_search=5)
    assert head == {
        "neural": {
            "embedding": {
                "query_text": "доставка",
                "model_id": "m-1",
                "k": 7,
                "filter": {"bool": {"filter": flt}},
                "_name": DENSE_QUERY_NAME,
                "method_parameters": {"ef_search": 7},  # never below k
            }
        }
    }
    body = candidates_body("hybrid", "доставка", EngineEmbedded("m-1", "доставка"), 7, flt)
    assert body["query"]["hybrid"]["queries"][1] == neural_head(EngineEmbedded("m-1", "доставка"), 7, flt)
    assert "knn" not in str(body["query"])


def test_the_request_asks_for_named_query_scores_only_when_the_engine_embeds() -> None:
    caps = Capabilities("3.6.0", (), True, True, True, True, True)
    ask = checked_ask("доставка", "hybrid", 10, [], default_depth=10)
    kw: dict[str, Any] = dict(
        caps=caps, fetch=10, server_collapse=False, ef_search=None, vectors="doc", pipeline="p"
    )
    _, params = search_request(ask, EngineEmbedded("m", "доставка"), NO_EVIDENCE, **kw)
    assert params == {"search_pipeline": "p", "include_named_queries_score": "true"}
    _, params = search_request(ask, [0.1, 0.2], NO_EVIDENCE, **kw)
    assert params == {"search_pipeline": "p"}


def _response(*matched: Any) -> dict[str, Any]:
    return {
        "hits": {
            "hits": [
                {
                    "_id": f"c{i}",
                    "_score": 1.0,
                    "_source": {"chunk_id": f"c{i}", "text": "t"},
                    "matched_queries": m,
                }
                for i, m in enumerate(matched)
            ]
        }
    }


def test_dense_scores_come_from_matched_queries_as_a_map() -> None:
    resp = _response({DENSE_QUERY_NAME: 0.95, "osrag.t.0": 0.0}, {"osrag.t.0": 0.0}, ["osrag.t.0"])
    hits = hits_of(resp, DENSE_QUERY_NAME)
    assert [h.dense_score for h in hits] == [0.95, None, None]
    assert [h.named for h in hits] == [
        frozenset({DENSE_QUERY_NAME, "osrag.t.0"}),
        *[frozenset({"osrag.t.0"})] * 2,
    ]
    assert hits_of(resp)[0].dense_score is None  # not asked: not read


def _hit(cid: str, dense: float | None) -> Candidate:
    return Candidate(ChunkSource.of({"chunk_id": cid, "text": "t"}), fused=1.0, rank=1, dense_score=dense)


def test_engine_cosines_are_2s_minus_1_and_an_unfound_hit_is_bounded_by_the_lowest_found() -> None:
    hits = [_hit("a", 0.95), _hit("b", 0.9), _hit("c", None)]
    assert gate.engine_cosines(hits) == pytest.approx([0.9, 0.8, None])
    gate.annotate("q", Analysis({}, (frozenset(),) * 3), None, hits, engine=True)
    assert [round(h.cosine, 6) for h in hits] == [0.9, 0.8, 0.0]
    assert [h.cosine_at_most for h in hits] == [None, None, pytest.approx(0.8)]


def test_an_unmeasured_cosine_never_makes_the_gate_refuse() -> None:
    # No dense hit at all (nothing measured): the hit's cosine is unknown, so no refusal on it.
    lone = [_hit("a", None)]
    gate.annotate("q", Analysis({}, (frozenset(),)), None, lone, engine=True)
    assert relevant_ids(lone, Gate(floor=0.8)) == {"a"}
    # Measured cosines below the floor bound the unmeasured one below it too: it is refused as
    # the vectors would refuse it.
    low = [_hit("a", 0.85), _hit("b", None)]  # cosine 0.7
    gate.annotate("q", Analysis({}, (frozenset(),) * 2), None, low, engine=True)
    assert relevant_ids(low, Gate(floor=0.8)) == set()
    # A model with no calibrated floor: a cosine, measured or not, never passes.
    assert relevant_ids(lone, Gate(floor=gate.UNKNOWN_FLOOR)) == set()


def test_the_engine_refusing_the_model_is_one_line_naming_it() -> None:
    from opensearchpy import exceptions as ose

    from osrag.errors import ClusterError
    from osrag.mlcommons.errors import ModelMissing, ModelNotDeployed, model_failure

    def wrapped(status: int, reason: str) -> ClusterError:
        info = {"error": {"root_cause": [{"type": "status_exception", "reason": reason}]}, "status": status}
        try:
            try:
                raise ose.TransportError(status, "status_exception", info)
            except ose.TransportError as exc:
                raise ClusterError(f"OpenSearch search failed: {reason}") from exc
        except ClusterError as err:
            return err

    gone = model_failure(
        "search", "ml:e5", wrapped(404, "Failed to find model with the provided model id: x1")
    )
    assert isinstance(gone, ModelMissing) and "ml:e5" in str(gone) and "\n" not in str(gone)
    idle = model_failure(
        "search", "ml:e5", wrapped(400, "Model not ready yet. Please deploy the model first.")
    )
    assert isinstance(idle, ModelNotDeployed)
    # A failure that is not the model's stays what it was (a missing index is re-resolved).
    assert model_failure("search", "ml:e5", wrapped(404, "no such index [x]")) is None
