"""osrag.bulk against the client's interface: one bad item never fails its neighbours, 4xx not retried."""

from __future__ import annotations

import json
from typing import Any

import pytest
from opensearchpy.exceptions import RequestError

from osrag import bulk


def actions(ids: list[str]) -> list[dict[str, Any]]:
    return [{"_op_type": "index", "_index": "i", "_id": i, "_source": {"text": i}} for i in ids]


def sent_ids(body: str) -> list[str]:
    lines = [json.loads(x) for x in body.strip().split("\n")]
    return [line["index"]["_id"] for line in lines[::2]]


class Server:
    """A bulk endpoint that refuses a whole request holding a ``bad*`` id (as OpenSearch does
    for a malformed action, e.g. an ``_id`` over 512 bytes), and can refuse single items."""

    def __init__(self, item_status: dict[str, list[int]] | None = None) -> None:
        self.requests: list[list[str]] = []
        self.item_status = item_status or {}

    def __call__(self, body: str, **_: Any) -> dict[str, Any]:
        ids = sent_ids(body)
        self.requests.append(ids)
        if any(i.startswith("bad") for i in ids):
            raise RequestError(400, "action_request_validation_exception", {"error": "id is too long"})
        items = []
        for i in ids:
            statuses = self.item_status.get(i)
            status = statuses.pop(0) if statuses else 201
            item: dict[str, Any] = {"_index": "i", "_id": i, "status": status}
            if status >= 300:
                item["error"] = {"type": "mapper_parsing_exception", "reason": f"bad {i}"}
            items.append({"index": item})
        return {"took": 1, "errors": any(x["index"]["status"] >= 300 for x in items), "items": items}


def test_a_whole_request_refusal_is_narrowed_to_its_culprit(fake_cluster: Any, fake_client: Any) -> None:
    server = Server()
    fake_client.bulk.side_effect = server
    ids = [f"ok{i}" for i in range(7)] + ["bad-long-id"] + [f"ok{i}" for i in range(7, 12)]
    failed = bulk.write(fake_cluster, actions(ids), "test", concurrency=1)
    assert [bulk.item_info(f)["_id"] for f in failed] == ["bad-long-id"]
    assert bulk.item_info(failed[0])["status"] == 400
    written = {i for r in server.requests if not any(x.startswith("bad") for x in r) for i in r}
    assert written == {i for i in ids if i.startswith("ok")}  # every neighbour was written
    assert len(server.requests) <= 1 + 2 * 4  # halving: a few requests, not one per item


def test_two_culprits_in_one_request_fail_alone(fake_cluster: Any, fake_client: Any) -> None:
    fake_client.bulk.side_effect = Server()
    ids = ["a", "bad1", "b", "c", "bad2", "d"]
    failed = bulk.write(fake_cluster, actions(ids), "test", concurrency=1)
    assert sorted(bulk.item_info(f)["_id"] for f in failed) == ["bad1", "bad2"]


def test_an_item_refused_with_400_is_not_retried(fake_cluster: Any, fake_client: Any) -> None:
    server = Server({"x": [400, 201]})
    fake_client.bulk.side_effect = server
    failed = bulk.write(fake_cluster, actions(["w", "x", "y"]), "test", concurrency=1)
    assert len(server.requests) == 1  # the same input would fail the same way
    assert [bulk.item_info(f)["_id"] for f in failed] == ["x"]
    assert "mapper_parsing_exception" in bulk.reason(bulk.item_info(failed[0])["error"])


def test_an_item_refused_with_429_is_retried(
    fake_cluster: Any, fake_client: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(bulk, "INITIAL_BACKOFF_S", 0)
    server = Server({"x": [429, 429, 201]})
    fake_client.bulk.side_effect = server
    failed = bulk.write(fake_cluster, actions(["w", "x", "y"]), "test", concurrency=1)
    assert failed == []
    assert server.requests == [["w", "x", "y"], ["x"], ["x"]]


def test_a_single_refused_action_is_reported_once(fake_cluster: Any, fake_client: Any) -> None:
    server = Server()
    fake_client.bulk.side_effect = server
    failed = bulk.write(fake_cluster, actions(["bad"]), "test", concurrency=1)
    assert len(failed) == 1 and server.requests == [["bad"]]
