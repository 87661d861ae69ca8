"""How candidates' stored vectors come back: by script field (cheaper for the server than
``_source``), into the same ``source["embedding"]`` every reader uses; and the fallback to
``_source`` on a cluster that runs no inline scripts.

The live-node check that the script field returns the stored vectors is in
tests/integration/test_query_path.py; the fallback is driven here through the step protocol,
because a node that refuses inline scripts needs a static setting the session node lacks.
"""

from __future__ import annotations

import base64
from typing import Any

import numpy as np
import pytest
from opensearchpy.exceptions import RequestError

from osrag.access import PUBLIC
from osrag.errors import ClusterError
from osrag.search.candidates import VECTOR_FIELD, decode_vector, hits_of, scripts_refused
from osrag.search.client import SearchClient
from osrag.search.query import candidates_body, vectors_in_source
from osrag.settings import Settings
from osrag.steps import Call, Inline, Work, drive


def test_the_default_body_asks_for_vectors_by_script_field_and_not_in_source() -> None:
    body = candidates_body("bm25", "возврат", None, 10, [])
    assert body["_source"] == {"excludes": ["body", "embedding"]}
    assert set(body["script_fields"]) == {VECTOR_FIELD}
    assert "doc[params.f]" in body["script_fields"][VECTOR_FIELD]["script"]["source"]
    old = candidates_body("bm25", "возврат", None, 10, [], vectors="source")
    assert old["_source"] == {"excludes": ["body"]} and "script_fields" not in old
    assert vectors_in_source(body) == old
    none = candidates_body("bm25", "возврат", None, 10, [], vectors="none")
    assert none["_source"] == {"excludes": ["body", "embedding"]} and "script_fields" not in none
    with pytest.raises(ValueError, match="vectors must be one of"):
        candidates_body("bm25", "возврат", None, 10, [], vectors="stored")


def test_hits_of_puts_the_script_fields_vector_where_source_vectors_go() -> None:
    resp = {
        "hits": {
            "hits": [
                {
                    "_id": "a",
                    "_score": 2.0,
                    "_source": {"chunk_id": "a"},
                    "fields": {VECTOR_FIELD: [_b64([0.1, 0.2])]},
                },
                {
                    "_id": "l",
                    "_score": 1.5,
                    "_source": {"chunk_id": "l"},
                    "fields": {VECTOR_FIELD: [[0.5, 0.25]]},
                },
                {"_id": "b", "_score": 1.0, "_source": {"chunk_id": "b"}, "fields": {VECTOR_FIELD: [None]}},
                {"_id": "c", "_score": 0.5, "_source": {"chunk_id": "c", "embedding": [0.3, 0.4]}},
            ]
        }
    }
    a, listed, b, c = hits_of(resp)
    # The float32 values exactly (not the decimal 0.1 the float32 approximates), as an array.
    assert a.source.embedding.dtype == np.float32
    assert a.source.embedding.tolist() == [float(np.float32(0.1)), float(np.float32(0.2))]
    assert a.source.embedding.tolist() != [0.1, 0.2]
    assert listed.source.embedding.tolist() == [0.5, 0.25]  # numbers, as the script sent them before
    assert b.source.embedding is None and b.embedding is None  # a chunk without a vector stays without one
    assert c.source.embedding.tolist() == [
        float(np.float32(0.3)),
        float(np.float32(0.4)),
    ]  # from _source, as float32 too


def _b64(xs: list[float]) -> str:
    return base64.b64encode(np.asarray(xs, dtype="<f4").tobytes()).decode()


def test_decode_vector_reads_little_endian_float32_and_refuses_a_torn_value() -> None:
    got = decode_vector(_b64([1.0, -2.5, 0.0]))
    assert got.dtype == np.float32 and got.tolist() == [1.0, -2.5, 0.0]  # an array, not a list
    assert decode_vector(base64.b64encode(b"\x00\x00\x80\x3f").decode()).tolist() == [1.0]
    assert decode_vector([0.5, 2]).tolist() == [0.5, 2.0]
    with pytest.raises(ValueError, match="not a whole number of float32"):
        decode_vector(base64.b64encode(b"\x00\x00\x80").decode())
    with pytest.raises(ValueError):
        decode_vector("not base64!")


def refused(reason: str, status: int = 400) -> ClusterError:
    try:
        raise ClusterError(f"OpenSearch search failed: {status}") from RequestError(
            status, "search_phase_execution_exception", {"error": {"root_cause": [{"reason": reason}]}}
        )
    except ClusterError as exc:
        return exc


def test_scripts_refused_knows_the_clusters_words_only() -> None:
    assert scripts_refused(refused("cannot execute [inline] scripts"))
    assert scripts_refused(refused("cannot execute scripts using [field] context"))
    assert not scripts_refused(refused("no such index [x]"))
    assert not scripts_refused(ClusterError("no cause"))


def test_a_cluster_without_inline_scripts_gets_source_vectors_from_then_on() -> None:
    s = Settings(url="http://127.0.0.1:1", alias="t-unit", _env_file=None, collapse_duplicates=False)
    sc = SearchClient(s, principal=PUBLIC)
    bodies: list[dict[str, Any]] = []

    def answer(step: Call | Work) -> Any:
        if isinstance(step, Work):
            return step.fn()
        if step.method == "info":
            return {"version": {"number": "3.6.0"}}
        if step.method == "cat.plugins":
            return [{"component": "opensearch-knn"}, {"component": "opensearch-neural-search"}]
        if step.method == "indices.get_mapping":
            return {"t-unit-1": {"mappings": {"_meta": {"osrag": {}}, "properties": {}}}}
        assert step.method == "search", step
        body = step.kwargs["body"]
        bodies.append(body)
        if "script_fields" in body:
            raise refused("cannot execute [inline] scripts")
        src = {"chunk_id": "a", "text": "возврат", "embedding": [0.1, 0.2]}
        return {"hits": {"hits": [{"_id": "a", "_score": 1.0, "_source": src}]}}

    got = drive(sc._retrieve("возврат", "bm25", None, {}, PUBLIC), Inline(answer))
    assert [h.source.embedding.tolist() for h in got.hits] == [
        [float(np.float32(0.1)), float(np.float32(0.2))]
    ]
    assert "inline scripts" in got.notes[0]
    assert ["script_fields" in b for b in bodies] == [True, False]
    drive(sc._retrieve("возврат", "bm25", None, {}, PUBLIC), Inline(answer))
    assert ["script_fields" in b for b in bodies] == [True, False, False]  # asked once, remembered
    # Any other refusal is not mistaken for it.
    other = SearchClient(s, principal=PUBLIC)

    def no_index(step: Call | Work) -> Any:
        if isinstance(step, Call) and step.method == "search":
            raise refused("some other failure", 500)
        return answer(step)

    with pytest.raises(ClusterError):
        drive(other._retrieve("возврат", "bm25", None, {}, PUBLIC), Inline(no_index))
