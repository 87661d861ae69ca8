"""osrag.admin.reindex on the shared fake client: the plan, the lock, the verification, rollback and abort.

The fake node keeps the alias, each index's ``_meta`` and the state documents (the lock); the
searches a reindex makes (counts, the catch-up's aggregation, the sample queries) are answered
by ``Searches`` below, from numbers each test sets.
"""

from __future__ import annotations

import os
import socket
from typing import Any
from unittest.mock import Mock

import pytest

import osrag.admin.reindex
from osrag.admin.copying import REEMBED, SERVER_SIDE
from osrag.admin.reindex import Reindexer
from osrag.embedding import Embedder
from osrag.errors import IndexStateError
from osrag.names import state_index
from osrag.store import locking
from osrag.store.alias import AliasStore
from osrag.store.locking import LockRecord

ALIAS = "kb"
STATE = state_index(ALIAS)
SOURCE, TARGET = "kb-a", "kb-b"


class Searches:
    """Answers a reindex's searches: ``counts[index] = (documents, chunks)``, ``titles`` the
    sample's, ``found[index]`` whether a sample query finds anything there."""

    def __init__(self) -> None:
        self.counts: dict[str, tuple[int, int]] = {}
        self.titles = ["Отпуск", "Командировки"]
        self.found: dict[str, bool] = {}
        self.calls: list[dict[str, Any]] = []

    def __call__(self, index: str, body: dict[str, Any], **_: Any) -> dict[str, Any]:
        self.calls.append({"index": index, **body})
        aggs = body.get("aggs") or {}
        if "cardinality" in (aggs.get("docs") or {}):
            docs, chunks = self.counts.get(index, (0, 0))
            return {"hits": {"total": {"value": chunks}}, "aggregations": {"docs": {"value": docs}}}
        if "composite" in (aggs.get("docs") or {}):  # the catch-up: nothing written meanwhile
            return {"aggregations": {"docs": {"buckets": []}}}
        if "sort" in body:  # the sample
            return {"hits": {"hits": [{"_source": {"title": t}} for t in self.titles]}}
        hits = [{"_id": "x"}] if self.found.get(index, True) else []
        return {"hits": {"hits": hits}}


def embedder(name: str, dimension: int) -> Any:
    emb = Mock(spec=Embedder)
    emb.model_name, emb.dimension = name, dimension
    return emb


@pytest.fixture
def searches(fake_client: Any) -> Searches:
    s = Searches()
    fake_client.search.side_effect = s
    return s


@pytest.fixture
def reindexer(make_cluster: Any, node: Any, searches: Searches, monkeypatch: pytest.MonkeyPatch) -> Reindexer:
    cluster = make_cluster(alias=ALIAS, embedding_model=None)
    node.add_index(SOURCE, {"osrag": {"embedding_model": "m1", "dimension": 4}}, alias=ALIAS)
    searches.counts[SOURCE] = (3, 12)
    dims = {"m1": 4, "m2": 8}
    monkeypatch.setattr(
        osrag.admin.reindex, "embedder_for", lambda s, name=None, meta=None: embedder(name, dims[name])
    )
    return Reindexer(cluster.settings, AliasStore(cluster.settings, cluster))


def put_lock(node: Any, **fields: Any) -> LockRecord:
    rec = LockRecord(token="other", since="2026-01-01T00:00:00+00:00", **fields)
    node.put(STATE, locking.LOCK_ID, {"lock": rec.as_dict()})
    return rec


def made_target(reindexer: Reindexer, node: Any, monkeypatch: pytest.MonkeyPatch) -> list[Any]:
    """``create_index`` stands in for the template machinery: it makes ``TARGET``."""
    made: list[Any] = []

    def create_index(model_name: str | None = None, embedder: Any = None) -> str:
        made.append(embedder)
        node.add_index(
            TARGET, {"osrag": {"embedding_model": embedder.model_name, "dimension": embedder.dimension}}
        )
        return TARGET

    monkeypatch.setattr(reindexer.admin, "create_index", create_index)
    return made


# ---------------------------------------------------------------- the plan
def test_plan_keeps_vectors_when_the_model_stays(reindexer: Reindexer) -> None:
    plan = reindexer.plan()
    assert (plan.source, plan.target, plan.method) == (SOURCE, None, SERVER_SIDE)
    assert (plan.documents, plan.chunks) == (3, 12)
    assert (plan.source_model, plan.target_model, plan.target_dimension) == ("m1", "m1", 4)
    assert plan.stale_target is None and plan.lock_state is None


def test_plan_re_embeds_for_another_model_and_reports_a_dead_lock(reindexer: Reindexer, node: Any) -> None:
    put_lock(node, pid=os.getpid(), host=socket.gethostname(), target="kb-half")
    plan = reindexer.plan("m2")
    assert plan.method == REEMBED and plan.target_dimension == 8
    assert (plan.stale_target, plan.lock_state) == ("kb-half", "dead")


# ---------------------------------------------------------------- the lock
def test_a_live_lock_refuses_the_run_before_anything_is_made(
    reindexer: Reindexer, node: Any, fake_client: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    made = made_target(reindexer, node, monkeypatch)
    held = put_lock(node, pid=os.getppid(), host=socket.gethostname(), target="kb-other")
    with pytest.raises(IndexStateError, match="still running"):
        reindexer.run()
    assert made == [] and TARGET not in node.metas
    fake_client.indices.delete.assert_not_called()
    assert locking.read_lock(reindexer.cluster, ALIAS) == held  # not released: it is not ours


def test_a_lock_of_another_host_is_refused_with_the_way_out(reindexer: Reindexer, node: Any) -> None:
    put_lock(node, pid=1, host="elsewhere.invalid", target="kb-other")
    with pytest.raises(IndexStateError, match="--abort"):
        reindexer.run()


def test_abort_drops_a_dead_run_s_index_and_its_lock(
    reindexer: Reindexer, node: Any, fake_client: Any
) -> None:
    node.add_index("kb-half")
    put_lock(node, pid=os.getpid(), host=socket.gethostname(), target="kb-half")
    released = reindexer.abort()
    assert released is not None and released["target"] == "kb-half"
    assert fake_client.indices.delete.call_args.kwargs["index"] == "kb-half"
    assert locking.read_lock(reindexer.cluster, ALIAS) is None
    assert reindexer.abort() is None


def test_abort_refuses_a_live_run(reindexer: Reindexer, node: Any, fake_client: Any) -> None:
    put_lock(node, pid=os.getppid(), host=socket.gethostname(), target="kb-half")
    with pytest.raises(IndexStateError, match="stop it before aborting"):
        reindexer.abort()
    fake_client.indices.delete.assert_not_called()


# ---------------------------------------------------------------- a whole run
def test_a_run_copies_verifies_then_switches_and_releases(
    reindexer: Reindexer, node: Any, fake_client: Any, searches: Searches, monkeypatch: pytest.MonkeyPatch
) -> None:
    made_target(reindexer, node, monkeypatch)
    # a killed run's lock and half-built index are cleared on the way in
    node.add_index("kb-half")
    put_lock(node, pid=os.getpid(), host=socket.gethostname(), target="kb-half")
    searches.counts[TARGET] = (3, 12)
    fake_client.update.return_value = {"result": "updated"}
    fake_client.reindex.return_value = {"task": "n:1"}  # a server-side copy, polled
    fake_client.tasks.get.return_value = {"completed": True, "response": {"failures": []}}

    plan = reindexer.run()

    assert plan.target == TARGET and plan.caught_up == 0
    assert [c.kwargs["index"] for c in fake_client.indices.delete.call_args_list] == ["kb-half"]
    copy = fake_client.reindex.call_args.kwargs["body"]
    assert (copy["source"]["index"], copy["dest"]["index"]) == (SOURCE, TARGET)
    assert fake_client.update.call_args.kwargs["body"]["script"]["params"]["changes"] == {"target": TARGET}
    assert node.aliases[ALIAS] == [TARGET]
    assert node.metas[TARGET]["osrag"]["previous_index"] == SOURCE
    assert node.metas[TARGET]["osrag"]["reindexed_from"] == SOURCE
    assert locking.read_lock(reindexer.cluster, ALIAS) is None


def test_a_count_mismatch_stops_the_switch_and_rolls_the_target_back(
    reindexer: Reindexer, node: Any, fake_client: Any, searches: Searches, monkeypatch: pytest.MonkeyPatch
) -> None:
    made_target(reindexer, node, monkeypatch)
    searches.counts[TARGET] = (3, 11)  # one chunk short
    fake_client.update.return_value = {"result": "updated"}
    fake_client.reindex.return_value = {"task": "n:1"}  # a server-side copy, polled
    fake_client.tasks.get.return_value = {"completed": True, "response": {"failures": []}}
    with pytest.raises(IndexStateError, match="has 3 documents / 11 chunks"):
        reindexer.run()
    assert node.aliases[ALIAS] == [SOURCE]  # readers never saw the target
    assert fake_client.indices.delete.call_args.kwargs["index"] == TARGET
    assert locking.read_lock(reindexer.cluster, ALIAS) is None  # not left to block ingest


def test_verify_wants_the_sample_queries_to_find_something(reindexer: Reindexer, searches: Searches) -> None:
    searches.counts[TARGET] = (3, 12)
    reindexer.verify(SOURCE, TARGET)
    asked = [c["query"]["match"]["title"] for c in searches.calls if "match" in c.get("query", {})]
    assert asked == searches.titles
    searches.found[TARGET] = False
    with pytest.raises(IndexStateError, match="finds nothing in kb-b"):
        reindexer.verify(SOURCE, TARGET)


# ---------------------------------------------------------------- rollback
def test_rollback_points_the_alias_back(reindexer: Reindexer, node: Any) -> None:
    node.add_index("kb-0", {"osrag": {"embedding_model": "m1", "dimension": 4}})
    node.metas[SOURCE]["osrag"]["previous_index"] = "kb-0"
    assert reindexer.rollback() == (SOURCE, "kb-0")
    assert node.aliases[ALIAS] == ["kb-0"]
    assert node.metas["kb-0"]["osrag"]["previous_index"] == SOURCE  # a second rollback goes forward


def test_rollback_refuses_without_a_previous_index_or_during_a_run(reindexer: Reindexer, node: Any) -> None:
    with pytest.raises(IndexStateError, match="no previous index"):
        reindexer.rollback()
    node.metas[SOURCE]["osrag"]["previous_index"] = "kb-gone"
    with pytest.raises(IndexStateError, match="no longer exists"):
        reindexer.rollback()
    put_lock(node, pid=os.getppid(), host=socket.gethostname(), target="kb-new")
    with pytest.raises(IndexStateError, match="roll back once it has finished"):
        reindexer.rollback()
    assert node.aliases[ALIAS] == [SOURCE]
