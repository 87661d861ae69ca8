"""The node the tests run on has what osrag needs: k-NN, neural-search, hybrid RRF."""

from __future__ import annotations

import pytest

pytestmark = pytest.mark.integration


def test_plugins_listed(os_client) -> None:
    names = {row["component"] for row in os_client.cat.plugins(format="json")}
    assert {"opensearch-knn", "opensearch-neural-search"} <= names


def test_hybrid_rrf_query_returns_hits_from_either_head(os_client, unique_name: str) -> None:
    index, pipeline = f"{unique_name}-idx", f"{unique_name}-rrf"
    os_client.indices.create(
        index=index,
        body={
            "settings": {"index.knn": True, "number_of_replicas": 0},
            "mappings": {
                "properties": {
                    "text": {"type": "text"},
                    "vec": {
                        "type": "knn_vector",
                        "dimension": 3,
                        "method": {"name": "hnsw", "engine": "lucene", "space_type": "cosinesimil"},
                    },
                }
            },
        },
    )
    try:
        docs = {
            "lexical": {"text": "красная лампа настольная", "vec": [0.0, 0.0, 1.0]},
            "vector": {"text": "совсем другой текст", "vec": [1.0, 0.0, 0.0]},
            "neither": {"text": "чай зеленый", "vec": [0.0, 1.0, 0.0]},
        }
        for doc_id, body in docs.items():
            os_client.index(index=index, id=doc_id, body=body)
        os_client.indices.refresh(index=index)
        os_client.transport.perform_request(
            "PUT",
            f"/_search/pipeline/{pipeline}",
            body={
                "phase_results_processors": [
                    {"score-ranker-processor": {"combination": {"technique": "rrf", "rank_constant": 60}}}
                ]
            },
        )
        resp = os_client.search(
            index=index,
            params={"search_pipeline": pipeline},
            body={
                "size": 10,
                "query": {
                    "hybrid": {
                        "queries": [
                            {"match": {"text": "лампа"}},
                            {"knn": {"vec": {"vector": [1.0, 0.05, 0.0], "k": 1}}},
                        ]
                    }
                },
            },
        )
        ids = [h["_id"] for h in resp["hits"]["hits"]]
        assert set(ids) == {"lexical", "vector"}
        # RRF with equal weights: each found by one head at rank 1 → equal scores 1/(60+1).
        scores = [h["_score"] for h in resp["hits"]["hits"]]
        assert scores[0] == pytest.approx(scores[1])
        assert scores[0] == pytest.approx(1 / 61, rel=1e-3)
    finally:
        os_client.indices.delete(index=index, ignore_unavailable=True)
        os_client.transport.perform_request("DELETE", f"/_search/pipeline/{pipeline}")
