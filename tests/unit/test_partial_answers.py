"""A search the cluster answered from only some shards (HTTP 200, ``_shards.failed`` > 0) is
never taken silently for the whole answer: the retrieval carries a note naming how many shards
failed and why. The live three-node test stops a node mid-search
(tests/integration/test_cluster_nodes.py); a shard failing on every copy is driven here through
the step protocol, because a real one needs a red index."""

from __future__ import annotations

from typing import Any

import pytest

from osrag.access import PUBLIC
from osrag.errors import ClusterError
from osrag.search.candidates import shards_missing
from osrag.search.client import SearchClient
from osrag.settings import Settings
from osrag.steps import Call, Inline, Work, drive

FAILED = {
    "total": 3,
    "successful": 2,
    "skipped": 0,
    "failed": 1,
    "failures": [
        {"shard": 1, "index": "t-unit-1", "reason": {"type": "node_disconnected_exception", "reason": "x"}}
    ],
}


def test_shards_missing_names_the_failed_count_and_reason() -> None:
    note = shards_missing({"_shards": FAILED})
    assert note is not None
    assert "1 of 3 shards failed" in note and "node_disconnected_exception" in note
    assert shards_missing({"_shards": {"total": 3, "successful": 3, "failed": 0}}) is None
    assert shards_missing({"hits": {"hits": []}}) is None  # no _shards at all: nothing claimed
    reasonless = shards_missing({"_shards": {"total": 2, "failed": 2, "failures": [{"shard": 0}]}})
    assert reasonless is not None and "2 of 2 shards failed (unknown)" in reasonless


def _counting_answer(replies: list[dict[str, Any]], asked: list[int]) -> Any:
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
        asked.append(1)
        src = {"chunk_id": "a", "text": "возврат"}
        return {
            "_shards": replies[min(len(asked), len(replies)) - 1],
            "hits": {"hits": [{"_id": "a", "_score": 1.0, "_source": src}]},
        }

    return answer


def test_retrieve_carries_the_note_of_a_partial_answer() -> None:
    s = Settings(url="http://127.0.0.1:1", alias="t-unit", _env_file=None, collapse_duplicates=False)
    sc = SearchClient(s, principal=PUBLIC)
    every = _counting_answer([{"total": 3, "successful": 3, "failed": 0}], [])
    whole = drive(sc._retrieve("возврат", "bm25", None, {}, PUBLIC), Inline(every))
    assert [h.chunk_id for h in whole.hits] == ["a"] and whole.notes == []
    some = _counting_answer([FAILED], [])
    part = drive(sc._retrieve("возврат", "bm25", None, {}, PUBLIC), Inline(some))
    assert [h.chunk_id for h in part.hits] == ["a"]  # what did come back is still given
    assert any("1 of 3 shards failed" in n for n in part.notes), part.notes


@pytest.mark.parametrize(
    ("replies", "searches", "noted"),
    [
        # a copy went away once: asked again, the other copy answers, nothing to note
        ([FAILED, {"total": 3, "successful": 3, "failed": 0}], 2, False),
        # it stays away: asked once more only, and the partial answer is noted
        ([FAILED, FAILED, FAILED], 2, True),
        # a failure that is not a copy going away is not asked again
        (
            [{**FAILED, "failures": [{"shard": 1, "reason": {"type": "query_shard_exception"}}]}],
            1,
            True,
        ),
    ],
)
def test_a_node_going_away_mid_search_is_asked_once_more(
    replies: list[dict[str, Any]], searches: int, noted: bool
) -> None:
    s = Settings(url="http://127.0.0.1:1", alias="t-unit", _env_file=None, collapse_duplicates=False)
    sc = SearchClient(s, principal=PUBLIC)
    asked: list[int] = []
    got = drive(sc._retrieve("возврат", "bm25", None, {}, PUBLIC), Inline(_counting_answer(replies, asked)))
    assert len(asked) == searches
    assert any("shards failed" in n for n in got.notes) is noted, got.notes


def test_section_from_a_partial_answer_is_refused_not_cut_short() -> None:
    s = Settings(url="http://127.0.0.1:1", alias="t-unit", _env_file=None)
    sc = SearchClient(s, principal=PUBLIC)
    shards: dict[str, Any] = {"total": 3, "successful": 3, "failed": 0}

    def answer(step: Call | Work) -> Any:
        if isinstance(step, Work):
            return step.fn()
        if step.method == "indices.get_mapping":
            return {"t-unit-1": {"mappings": {"_meta": {"osrag": {}}, "properties": {}}}}
        assert step.method == "search", step
        src = {"chunk_id": "d#1:0", "text": "возврат", "section_id": "d#1"}
        return {"_shards": shards, "hits": {"hits": [{"_id": "d#1:0", "_source": src}]}}

    whole = drive(sc._section("d#1", PUBLIC, None), Inline(answer))
    assert [p.chunk_id for p in whole] == ["d#1:0"]
    shards = FAILED
    with pytest.raises(ClusterError, match=r"section 'd#1': partial answer: 1 of 3 shards failed"):
        drive(sc._section("d#1", PUBLIC, None), Inline(answer))


def _phase_error(status: int, **err: Any) -> ClusterError:
    """The ClusterError a whole failed search reaches the path as (its cause an opensearch-py error)."""
    from opensearchpy.exceptions import TransportError

    info = {"error": {"type": "search_phase_execution_exception", "reason": "", **err}, "status": status}
    try:
        raise ClusterError(f"OpenSearch search failed: {status}") from TransportError(status, "x", info)
    except ClusterError as exc:
        return exc


@pytest.mark.parametrize(
    ("error", "searches"),
    [
        # the whole search failed as a node stopped: asked once more, answered by the other copy
        (_phase_error(500, failed_shards=[{"reason": {"type": "node_disconnected_exception"}}]), 2),
        (_phase_error(500), 2),  # nothing named: a read, safe to ask once more
        # a failure of another kind is raised, never asked again
        (_phase_error(500, failed_shards=[{"reason": {"type": "query_shard_exception"}}]), 1),
        (_phase_error(400, failed_shards=[{"reason": {"type": "node_disconnected_exception"}}]), 1),
    ],
)
def test_a_search_that_failed_as_a_node_went_away_is_asked_once_more(
    error: ClusterError, searches: int
) -> None:
    s = Settings(url="http://127.0.0.1:1", alias="t-unit", _env_file=None, collapse_duplicates=False)
    sc = SearchClient(s, principal=PUBLIC)
    asked: list[int] = []
    ok = _counting_answer([{"total": 3, "successful": 3, "failed": 0}], [])

    def answer(step: Call | Work) -> Any:
        if isinstance(step, Call) and step.method == "search":
            asked.append(1)
            if len(asked) == 1:
                raise error
        return ok(step)

    if searches == 2:
        got = drive(sc._retrieve("возврат", "bm25", None, {}, PUBLIC), Inline(answer))
        assert [h.chunk_id for h in got.hits] == ["a"] and got.notes == []
    else:
        with pytest.raises(ClusterError):
            drive(sc._retrieve("возврат", "bm25", None, {}, PUBLIC), Inline(answer))
    assert len(asked) == searches
