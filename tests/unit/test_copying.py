"""osrag.admin.copying on the shared fake client: a server-side ``_reindex`` when the vectors stay, a
scan + re-embed + bulk write when they change, and the catch-up with ingests that overlapped."""

from __future__ import annotations

import datetime as dt
import os
import socket
import subprocess
from typing import Any
from unittest.mock import Mock

import pytest

from osrag.admin import copying
from osrag.admin.copying import REEMBED, SERVER_SIDE, IndexCopier
from osrag.embedding import Embedder
from osrag.errors import BulkIndexError, IndexStateError
from osrag.names import content_hash, state_index, visibility_filter
from osrag.records import embedding_text
from osrag.store import locking
from osrag.store.locking import LockRecord

ALIAS = "kb"
STATE = state_index(ALIAS)
SOURCE, TARGET = "kb-a", "kb-b"
SINCE = dt.datetime(2026, 1, 1, 12, 0, tzinfo=dt.UTC)


@pytest.fixture
def copier(fake_cluster: Any, node: Any) -> IndexCopier:
    node.add_index(STATE)  # an ingest ran: the hidden list applies
    return IndexCopier(fake_cluster, ALIAS)


def fake_embedder(dim: int = 3) -> Any:
    emb = Mock(spec=Embedder)
    emb.ingest_pipeline_model.return_value = None  # a model here: the vectors come from encode_passages
    emb.encode_passages.side_effect = lambda texts: [[float(len(t))] * dim for t in texts]
    return emb


def filters(query: dict[str, Any]) -> list[dict[str, Any]]:
    return list(query["bool"]["filter"])


# ---------------------------------------------------------------- server-side
def task_ends(fake_client: Any, response: dict[str, Any], *running: dict[str, Any]) -> None:
    """The server-side copy starts as task ``n:1``; polling it answers ``running`` statuses, then its end."""
    fake_client.reindex.return_value = {"task": "n:1"}
    fake_client.tasks.get.side_effect = [
        *({"completed": False, "task": {"status": st}} for st in running),
        {"completed": True, "task": {"status": {"total": 4, "created": 4}}, "response": response},
    ]


def test_server_side_copies_only_what_readers_see(
    copier: IndexCopier, fake_client: Any, monkeypatch: Any
) -> None:
    monkeypatch.setattr(copying, "TASK_POLL_S", 0)
    task_ends(fake_client, {"failures": []})
    only = [{"terms": {"doc_id": ["d1"]}}]
    copier.copy(SOURCE, TARGET, fake_embedder(), SERVER_SIDE, only=only)
    call = fake_client.reindex.call_args.kwargs
    assert call["body"]["dest"] == {"index": TARGET} and call["wait_for_completion"] is False
    assert fake_client.tasks.get.call_args.kwargs == {"task_id": "n:1"}
    assert call["body"]["source"]["index"] == SOURCE
    assert filters(call["body"]["source"]["query"]) == [visibility_filter(ALIAS), *only]
    fake_client.bulk.assert_not_called()


def test_server_side_failures_stop_the_copy(copier: IndexCopier, fake_client: Any, monkeypatch: Any) -> None:
    monkeypatch.setattr(copying, "TASK_POLL_S", 0)
    task_ends(fake_client, {"failures": [{"id": "x", "cause": {"type": "mapper"}}]})
    with pytest.raises(IndexStateError, match="_reindex into kb-b failed"):
        copier.copy(SOURCE, TARGET, fake_embedder(), SERVER_SIDE)


def test_a_server_side_task_that_ended_in_an_error_stops_the_copy(
    copier: IndexCopier, fake_client: Any, monkeypatch: Any
) -> None:
    monkeypatch.setattr(copying, "TASK_POLL_S", 0)
    fake_client.reindex.return_value = {"task": "n:1"}
    fake_client.tasks.get.return_value = {"completed": True, "error": {"type": "x", "reason": "node left"}}
    with pytest.raises(IndexStateError, match="_reindex into kb-b failed: node left"):
        copier.copy(SOURCE, TARGET, fake_embedder(), SERVER_SIDE)


def test_the_server_side_copy_reports_what_the_cluster_has_written(
    copier: IndexCopier, fake_client: Any, monkeypatch: Any
) -> None:
    monkeypatch.setattr(copying, "TASK_POLL_S", 0)
    task_ends(
        fake_client, {"failures": []}, {"total": 0}, {"total": 4, "created": 1}, {"total": 4, "created": 3}
    )
    seen: list[tuple[int, int]] = []
    copier.copy(SOURCE, TARGET, fake_embedder(), SERVER_SIDE, progress=lambda d, t: seen.append((d, t)))
    assert seen == [(1, 4), (3, 4), (4, 4)]


def test_before_the_first_ingest_nothing_is_hidden(
    fake_cluster: Any, fake_client: Any, node: Any, monkeypatch: Any
) -> None:
    monkeypatch.setattr(copying, "TASK_POLL_S", 0)
    task_ends(fake_client, {"failures": []})
    IndexCopier(fake_cluster, ALIAS).copy(SOURCE, TARGET, fake_embedder(), SERVER_SIDE)
    assert filters(fake_client.reindex.call_args.kwargs["body"]["source"]["query"]) == []


# ---------------------------------------------------------------- re-embed
def scroll_of(hits: list[dict[str, Any]], fake_client: Any) -> None:
    """The scan's first page holds ``hits``; the next page is empty."""
    fake_client.search.return_value = {
        "_scroll_id": "s1",
        "_shards": {"total": 1, "successful": 1},
        "hits": {"hits": hits},
    }
    fake_client.scroll.return_value = {
        "_scroll_id": "s1",
        "_shards": {"total": 1, "successful": 1},
        "hits": {"hits": []},
    }
    fake_client.clear_scroll.return_value = {}


HITS = [
    {"_id": "d1@v:0", "_source": {"doc_id": "d1", "text": "один", "body": "один", "context": "Раздел"}},
    {"_id": "d2@v:0", "_source": {"doc_id": "d2", "text": "два два", "body": None}},
]


def test_re_embed_writes_new_vectors_into_the_target(
    copier: IndexCopier, fake_client: Any, bulk_server: Any
) -> None:
    scroll_of(HITS, fake_client)
    emb = fake_embedder()
    seen: list[tuple[int, int]] = []
    copier.copy(
        SOURCE, TARGET, emb, REEMBED, total=2, progress=lambda done, total: seen.append((done, total))
    )

    search = fake_client.search.call_args.kwargs
    assert search["index"] == SOURCE and filters(search["body"]["query"]) == [visibility_filter(ALIAS)]
    assert search["body"]["_source"] == {"excludes": ["embedding"]}  # the old vectors are not read
    (texts,) = emb.encode_passages.call_args.args
    assert texts == [embedding_text("Раздел", "один"), embedding_text("", "два два")]
    assert bulk_server.requests == [["d1@v:0", "d2@v:0"]]
    d1 = bulk_server.sources["d1@v:0"]
    assert d1["embedding"] == [float(len(texts[0]))] * 3
    assert d1["content_hash"] == content_hash("один")
    assert bulk_server.sources["d2@v:0"]["content_hash"] == content_hash("два два")  # no body: the text
    assert seen == [(2, 2)]
    assert all(c.kwargs.get("index") != SOURCE for c in fake_client.bulk.call_args_list)


def test_re_embed_into_a_cluster_model_index_goes_through_its_ingest_pipeline(
    copier: IndexCopier, fake_client: Any, bulk_server: Any
) -> None:
    from osrag.mlcommons.pipelines import EMBED_INPUT_FIELD, embed_pipeline

    scroll_of(HITS, fake_client)
    fake_client.ingest.get_pipeline.return_value = {}  # not there yet: put before the copy
    emb = fake_embedder()
    emb.ingest_pipeline_model.return_value = "m1"
    copier.copy(SOURCE, TARGET, emb, REEMBED, total=2)
    fake_client.ingest.put_pipeline.assert_called_once_with(id="kb-embed-m1", body=embed_pipeline("m1"))
    emb.encode_passages.assert_not_called()  # the cluster embeds the copies
    assert all(c.kwargs.get("pipeline") == "kb-embed-m1" for c in fake_client.bulk.call_args_list)
    d1 = bulk_server.sources["d1@v:0"]
    assert "embedding" not in d1 and d1[EMBED_INPUT_FIELD] == embedding_text("Раздел", "один")


def test_re_embed_refuses_the_switch_when_items_fail(
    copier: IndexCopier, fake_client: Any, bulk_server: Any
) -> None:
    scroll_of(HITS, fake_client)
    bulk_server.item_status = {"d2@v:0": [400]}
    with pytest.raises(BulkIndexError, match="left items unwritten"):
        copier.copy(SOURCE, TARGET, fake_embedder(), REEMBED)


def _copy_through_a_failing_model(
    copier: IndexCopier, fake_client: Any, bulk_server: Any, status: int, error: tuple[str, str]
) -> pytest.ExceptionInfo[Exception]:
    """Re-embed into an index of the cluster model ``ml:e5-small`` whose second item fails with
    ``error``; the one line the copy raises."""
    scroll_of(HITS, fake_client)
    fake_client.ingest.get_pipeline.return_value = {}
    emb = fake_embedder()
    emb.ingest_pipeline_model.return_value = "m1"
    emb.model_name = "ml:e5-small"
    bulk_server.item_status = {"d2@v:0": [status]}
    bulk_server.item_error = error
    with pytest.raises(Exception) as got:
        copier.copy(SOURCE, TARGET, emb, REEMBED, total=2)
    line = str(got.value)
    assert "\n" not in line and "model ml:e5-small" in line and "alias not switched" in line
    return got


def test_re_embed_through_a_cluster_model_that_is_gone_is_one_line_naming_it(
    copier: IndexCopier, fake_client: Any, bulk_server: Any
) -> None:
    from osrag.mlcommons.errors import ModelNotDeployed

    got = _copy_through_a_failing_model(
        copier,
        fake_client,
        bulk_server,
        400,
        ("illegal_argument_exception", "Model not ready yet. Please deploy the model first."),
    )
    assert isinstance(got.value, ModelNotDeployed) and "osrag model deploy" in str(got.value)


def test_re_embed_whose_model_node_was_lost_mid_call_is_one_line_naming_the_model(
    copier: IndexCopier, fake_client: Any, bulk_server: Any
) -> None:
    from osrag.mlcommons.errors import ModelNodeLost

    got = _copy_through_a_failing_model(
        copier,
        fake_client,
        bulk_server,
        500,
        (
            "node_disconnected_exception",
            "[n2][127.0.0.1:9321][cluster:admin/opensearch/ml/predict] disconnected",
        ),
    )
    assert isinstance(got.value, ModelNodeLost) and "left the cluster" in str(got.value)


# ---------------------------------------------------------------- the catch-up
class Index:
    """Versions per document per index, as the catch-up's aggregations read them; ``written``
    is what the source says was ingested since the mark, round by round."""

    def __init__(self, fake_client: Any) -> None:
        self.versions: dict[str, dict[str, set[str]]] = {SOURCE: {}, TARGET: {}}
        self.written: list[list[str]] = []
        self.marks: list[str] = []
        self.copy_follows = True
        fake_client.search.side_effect = self.search
        fake_client.reindex.side_effect = self.reindex
        fake_client.delete_by_query.return_value = {"deleted": 1}
        # the server-side copy runs as a task that has ended by the first time it is asked
        fake_client.tasks.get.return_value = {"completed": True, "response": {"failures": []}}

    def search(self, index: str, body: dict[str, Any], **_: Any) -> dict[str, Any]:
        aggs = body["aggs"]
        if "docs" in aggs:  # documents written since the mark
            self.marks.append(body["query"]["range"]["ingested_at"]["gte"])
            ids = self.written.pop(0) if self.written else []
            return {"aggregations": {"docs": {"buckets": [{"key": {"d": d}} for d in ids]}}}
        asked = next(f["terms"]["doc_id"] for f in body["query"]["bool"]["filter"] if "terms" in f)
        have = self.versions[index]
        buckets = [
            {"key": d, "v": {"buckets": [{"key": k} for k in sorted(have[d])]}} for d in asked if d in have
        ]
        return {"aggregations": {"d": {"buckets": buckets}}}

    def reindex(self, body: dict[str, Any], **_: Any) -> dict[str, Any]:
        if self.copy_follows:
            only = next(
                f["terms"]["doc_id"] for f in body["source"]["query"]["bool"]["filter"] if "terms" in f
            )
            for d in only:
                self.versions[TARGET][d] = set(self.versions[SOURCE][d])
        return {"task": "n:1"}


def test_catch_up_copies_again_what_changed_during_the_copy(copier: IndexCopier, fake_client: Any) -> None:
    idx = Index(fake_client)
    idx.versions[SOURCE] = {"d1": {"d1@v2"}, "d2": {"d2@v1"}}
    idx.versions[TARGET] = {"d1": {"d1@v1"}, "d2": {"d2@v1"}}
    idx.written = [["d1", "d2"], ["d1"]]  # round two sees d1 again: now the same on both sides
    assert copier.catch_up(SOURCE, TARGET, fake_embedder(), SERVER_SIDE, SINCE) == 1
    drop = fake_client.delete_by_query.call_args.kwargs
    assert drop["index"] == TARGET and filters(drop["body"]["query"]) == [{"terms": {"doc_id": ["d1"]}}]
    assert fake_client.reindex.call_count == 1
    assert idx.marks[0] == (SINCE - dt.timedelta(seconds=locking.CLOCK_MARGIN_S)).isoformat()
    assert idx.versions[TARGET]["d1"] == {"d1@v2"}


def test_catch_up_refuses_the_switch_while_writes_keep_coming(copier: IndexCopier, fake_client: Any) -> None:
    idx = Index(fake_client)
    idx.copy_follows = False  # every round finds d1 different again
    idx.versions[SOURCE] = {"d1": {"d1@v2"}}
    idx.versions[TARGET] = {"d1": {"d1@v1"}}
    idx.written = [["d1"]] * (copying.CATCH_UP_ROUNDS + 1)
    with pytest.raises(IndexStateError, match="kept writing"):
        copier.catch_up(SOURCE, TARGET, fake_embedder(), SERVER_SIDE, SINCE)
    assert fake_client.reindex.call_count == copying.CATCH_UP_ROUNDS


def test_catch_up_clears_a_dead_batch_and_waits_for_a_live_one(
    copier: IndexCopier, fake_client: Any, node: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    Index(fake_client)
    monkeypatch.setattr(copying, "WRITERS_WAIT_S", 2.0)  # a dead batch taken for a live one fails fast
    here = socket.gethostname()
    gone = subprocess.Popen(["true"])
    gone.wait()
    dead = LockRecord(token="dead", pid=gone.pid, host=here)
    node.put(STATE, locking.WRITERS_ID, {"writers": [dead.as_dict()]})
    fake_client.update.return_value = {"result": "updated"}
    assert copier.catch_up(SOURCE, TARGET, fake_embedder(), SERVER_SIDE, SINCE) == 0
    assert fake_client.update.call_args.kwargs["body"]["script"]["params"] == {"token": "dead"}

    live = LockRecord(token="live", pid=os.getppid(), host=here)
    node.put(STATE, locking.WRITERS_ID, {"writers": [live.as_dict()]})
    monkeypatch.setattr(copying, "WRITERS_WAIT_S", -1.0)
    with pytest.raises(IndexStateError, match=f"still writing into kb-a \\(pid {os.getppid()} on "):
        copier.catch_up(SOURCE, TARGET, fake_embedder(), SERVER_SIDE, SINCE)
