"""osrag.store.bulk against the client's interface: one bad item never fails its neighbours, 4xx not retried."""

from __future__ import annotations

from typing import Any

import pytest

from osrag.store import bulk


def actions(ids: list[str]) -> list[dict[str, Any]]:
    return [{"_op_type": "index", "_index": "i", "_id": i, "_source": {"text": i}} for i in ids]


def test_a_whole_request_refusal_is_narrowed_to_its_culprit(fake_cluster: Any, bulk_server: Any) -> None:
    server = bulk_server
    ids = [f"ok{i}" for i in range(7)] + ["bad-long-id"] + [f"ok{i}" for i in range(7, 12)]
    failed = bulk.write(fake_cluster, actions(ids), "test", concurrency=1)
    assert [bulk.item_info(f)["_id"] for f in failed] == ["bad-long-id"]
    assert bulk.item_info(failed[0])["status"] == 400
    written = {i for r in server.requests if not any(x.startswith("bad") for x in r) for i in r}
    assert written == {i for i in ids if i.startswith("ok")}  # every neighbour was written
    assert len(server.requests) <= 1 + 2 * 4  # halving: a few requests, not one per item


def test_two_culprits_in_one_request_fail_alone(fake_cluster: Any, bulk_server: Any) -> None:
    ids = ["a", "bad1", "b", "c", "bad2", "d"]
    failed = bulk.write(fake_cluster, actions(ids), "test", concurrency=1)
    assert sorted(bulk.item_info(f)["_id"] for f in failed) == ["bad1", "bad2"]


def test_an_item_refused_with_400_is_not_retried(fake_cluster: Any, bulk_server: Any) -> None:
    server = bulk_server
    server.item_status = {"x": [400, 201]}
    failed = bulk.write(fake_cluster, actions(["w", "x", "y"]), "test", concurrency=1)
    assert len(server.requests) == 1  # the same input would fail the same way
    assert [bulk.item_info(f)["_id"] for f in failed] == ["x"]
    assert "mapper_parsing_exception" in bulk.reason(bulk.item_info(failed[0])["error"])


def test_an_item_refused_with_429_is_retried(
    fake_cluster: Any, bulk_server: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(bulk, "INITIAL_BACKOFF_S", 0)
    server = bulk_server
    server.item_status = {"x": [429, 429, 201]}
    failed = bulk.write(fake_cluster, actions(["w", "x", "y"]), "test", concurrency=1)
    assert failed == []
    assert server.requests == [["w", "x", "y"], ["x"], ["x"]]


def test_a_single_refused_action_is_reported_once(fake_cluster: Any, bulk_server: Any) -> None:
    server = bulk_server
    failed = bulk.write(fake_cluster, actions(["bad"]), "test", concurrency=1)
    assert len(failed) == 1 and server.requests == [["bad"]]


def test_429_is_retried_with_doubling_backoff_then_reported(
    fake_cluster: Any, bulk_server: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    import opensearchpy.helpers.actions as helpers

    pauses: list[float] = []
    monkeypatch.setattr(helpers.time, "sleep", pauses.append)
    bulk_server.item_status = {"x": [429] * (bulk.RETRIES + 5)}
    failed = bulk.write(fake_cluster, actions(["w", "x"]), "test", concurrency=1)
    # the first try and RETRIES more, never beyond: then the item is returned, not raised
    assert bulk_server.requests == [["w", "x"]] + [["x"]] * bulk.RETRIES
    assert [bulk.item_info(f)["status"] for f in failed] == [429]
    assert pauses == [min(bulk.MAX_BACKOFF_S, bulk.INITIAL_BACKOFF_S * 2**i) for i in range(bulk.RETRIES)]


def test_requests_carry_the_minimum_timeout_and_the_chunk_size(
    fake_client: Any, make_cluster: Any, bulk_server: Any
) -> None:
    cluster = make_cluster(bulk_chunk_size=3, timeout_s=5)
    assert bulk.write(cluster, actions([f"d{i}" for i in range(7)]), "test", concurrency=1) == []
    assert [len(r) for r in bulk_server.requests] == [3, 3, 1]
    timeouts = {c.kwargs.get("request_timeout") for c in fake_client.bulk.call_args_list}
    assert timeouts == {bulk.MIN_REQUEST_TIMEOUT_S}


def test_concurrent_requests_write_everything_and_collect_every_failure(
    make_cluster: Any, bulk_server: Any
) -> None:
    cluster = make_cluster(bulk_chunk_size=2)
    bulk_server.item_status = {"d3": [400], "d8": [400]}
    ids = [f"d{i}" for i in range(10)]
    failed = bulk.write(cluster, actions(ids), "test", concurrency=3)
    assert sorted(bulk.item_info(f)["_id"] for f in failed) == ["d3", "d8"]
    assert sorted(bulk_server.sources) == sorted(set(ids) - {"d3", "d8"})
    assert sorted(len(r) for r in bulk_server.requests) == [2] * 5


def test_reason_follows_the_causes() -> None:
    err = {"type": "a", "reason": "top", "caused_by": {"type": "b", "reason": "dimension mismatch"}}
    assert bulk.reason(err) == "a: top; caused by b: dimension mismatch"
    assert bulk.reason("plain") == "plain"
