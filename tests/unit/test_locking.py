"""osrag.store.locking against the client's interface: the reindex lock, the writers' register and the
alias's write lock -- what is asked of the cluster, and what each answer makes of it."""

from __future__ import annotations

import datetime as dt
import os
import socket
import subprocess
import time
from typing import Any

import pytest
from opensearchpy.exceptions import TransportError

from osrag.errors import ClusterError
from osrag.names import HIDDEN_ID, state_index
from osrag.store import locking, writelock
from osrag.store.locking import LockRecord, earliest, pid_alive

ALIAS = "kb"
STATE = state_index(ALIAS)


def dead_pid() -> int:
    """A pid of this host that ran and is gone (reaped)."""
    proc = subprocess.Popen(["true"])
    proc.wait()
    return proc.pid


def updates(fake_client: Any) -> list[dict[str, Any]]:
    return [c.kwargs for c in fake_client.update.call_args_list]


# ---------------------------------------------------------------- the record and liveness
def test_a_record_round_trips_and_tolerates_an_older_document() -> None:
    rec = LockRecord.new(target="kb-1")
    assert rec.pid == os.getpid() and rec.host == socket.gethostname() and len(rec.token) == 32
    assert LockRecord.from_doc(rec.as_dict()) == rec
    assert set(rec.as_dict()) == {"token", "since", "pid", "host", "target"}  # no writer fields
    old = LockRecord.from_doc({"token": "t", "pid": "12", "extra": 1})
    assert old == LockRecord(token="t") and old.state() == "dead"


def test_state_of_a_holder() -> None:
    here = socket.gethostname()
    assert LockRecord(token="t", pid=os.getppid(), host=here).state() == "live"
    assert LockRecord(token="t", pid=dead_pid(), host=here).state() == "dead"
    assert LockRecord(token="t", pid=1, host="elsewhere.invalid").state() == "unknown"
    assert LockRecord(token="t", pid=os.getpid(), host=here).state() == "dead"  # this run failed
    assert locking.lock_state(None) == "dead"


def test_a_zombie_is_not_alive() -> None:
    proc = subprocess.Popen(["true"])
    deadline = time.monotonic() + 5
    with open(f"/proc/{proc.pid}/stat") as fh:
        stat = fh.read()
    while " Z " not in stat and time.monotonic() < deadline:
        time.sleep(0.02)
        with open(f"/proc/{proc.pid}/stat") as fh:
            stat = fh.read()
    try:
        assert " Z " in stat
        assert not pid_alive(proc.pid)  # kill(pid, 0) still answers for it
    finally:
        proc.wait()
    assert pid_alive(os.getpid())


def test_a_registered_batch_of_this_process_is_alive_even_though_the_lock_state_says_dead() -> None:
    mine = LockRecord.new()
    assert mine.state() == "dead" and locking.writer_alive(mine)
    assert not locking.writer_alive(LockRecord(token="t", pid=dead_pid(), host=socket.gethostname()))


def test_earliest_since() -> None:
    default = dt.datetime(2026, 1, 2, tzinfo=dt.UTC)
    recs = [
        LockRecord(token="a", since="2026-01-03T00:00:00+00:00"),
        LockRecord(token="b", since="2026-01-01T00:00:00+00:00"),
        LockRecord(token="c", since="not a time"),
    ]
    assert earliest(recs, default) == dt.datetime(2026, 1, 1, tzinfo=dt.UTC)
    assert earliest([], default) == default


# ---------------------------------------------------------------- the reindex lock
def test_take_the_lock(fake_cluster: Any, fake_client: Any, node: Any) -> None:
    rec = locking.holder()
    locking.acquire(fake_cluster, ALIAS, rec)
    call = fake_client.index.call_args.kwargs
    assert (call["index"], call["id"], call["op_type"]) == (STATE, locking.LOCK_ID, "create")
    assert node.source(STATE, locking.LOCK_ID) == {"lock": rec.as_dict()}
    assert locking.read_lock(fake_cluster, ALIAS) == rec


def test_a_held_lock_is_refused_and_named(fake_cluster: Any, node: Any) -> None:
    first = LockRecord(token="first", since="2026-01-01T00:00:00", pid=4242, host="h1", target="kb-x")
    locking.acquire(fake_cluster, ALIAS, first)
    with pytest.raises(locking.LockHeld) as ei:
        locking.acquire(fake_cluster, ALIAS, locking.holder())
    assert ei.value.lock == first
    assert "pid 4242 on h1" in str(ei.value) and "into kb-x" in str(ei.value)
    assert locking.read_lock(fake_cluster, ALIAS) == first  # unchanged


def test_another_failure_to_take_the_lock_is_not_a_held_lock(fake_cluster: Any, fake_client: Any) -> None:
    fake_client.index.side_effect = TransportError(503, "unavailable_shards_exception", {})
    with pytest.raises(ClusterError) as ei:
        locking.acquire(fake_cluster, ALIAS, locking.holder())
    assert not isinstance(ei.value, locking.LockHeld)
    fake_client.get.assert_not_called()  # no holder to name


def test_release_only_by_its_holder(fake_cluster: Any, fake_client: Any, node: Any) -> None:
    rec = locking.holder()
    locking.acquire(fake_cluster, ALIAS, rec)
    assert locking.release(fake_cluster, ALIAS, "someone else") is False
    fake_client.delete.assert_not_called()
    assert locking.release(fake_cluster, ALIAS, rec.token) is True
    assert fake_client.delete.call_args.kwargs["if_seq_no"] is not None  # only the lock it read
    assert locking.read_lock(fake_cluster, ALIAS) is None
    assert locking.release(fake_cluster, ALIAS, rec.token) is False  # nothing left to release


def test_release_loses_a_race_quietly(fake_cluster: Any, fake_client: Any, node: Any) -> None:
    rec = locking.holder()
    locking.acquire(fake_cluster, ALIAS, rec)
    real_get = node.get

    def get_then_change(**kw: Any) -> dict[str, Any]:
        got = real_get(**kw)
        node.put(STATE, locking.LOCK_ID, {"lock": rec.as_dict()})  # taken over and back: new seq_no
        return got

    fake_client.get.side_effect = get_then_change
    assert locking.release(fake_cluster, ALIAS, rec.token) is False
    assert node.source(STATE, locking.LOCK_ID) is not None


def test_update_names_the_holder_and_the_change(fake_cluster: Any, fake_client: Any) -> None:
    fake_client.update.return_value = {"result": "updated"}
    locking.update(fake_cluster, ALIAS, "tok", target="kb-2")
    call = fake_client.update.call_args.kwargs
    assert (call["index"], call["id"]) == (STATE, locking.LOCK_ID)
    assert call["body"]["script"]["params"] == {"token": "tok", "changes": {"target": "kb-2"}}
    assert "params.token" in call["body"]["script"]["source"]  # only while the token holds it


def test_state_index_is_created_strict_when_missing(fake_cluster: Any, fake_client: Any, node: Any) -> None:
    locking.ensure_state_index(fake_cluster, ALIAS, replicas=1)
    body = fake_client.indices.create.call_args.kwargs["body"]
    assert body["mappings"]["dynamic"] == "strict"
    assert body["settings"]["number_of_replicas"] == 1
    assert fake_client.indices.put_mapping.call_args.kwargs["body"] == {
        "properties": locking.STATE_PROPERTIES
    }
    node.add_index(STATE)
    fake_client.indices.create.reset_mock()
    locking.ensure_state_index(fake_cluster, ALIAS)
    fake_client.indices.create.assert_not_called()


def test_a_state_index_another_ingest_just_made_is_waited_for(
    fake_cluster: Any, fake_client: Any, node: Any, make_cluster: Any
) -> None:
    # "exists" is true while its shard may still recover: the lock read after it would be a 503.
    node.add_index(STATE)
    locking.ensure_state_index(fake_cluster, ALIAS)
    kw = fake_client.cluster.health.call_args.kwargs
    assert kw["index"] == STATE and kw["params"] == {"wait_for_status": "yellow"}
    fake_client.cluster.health.reset_mock()
    serverless = make_cluster(
        url="https://x.eu-west-1.aoss.amazonaws.com", auth="sigv4", aws_service="aoss", aws_region="eu-west-1"
    )
    assert serverless.settings.serverless
    locking.ensure_state_index(serverless, ALIAS)  # no shards there, nor the API
    fake_client.cluster.health.assert_not_called()


# ---------------------------------------------------------------- the writers' register
def test_register_and_read_the_writers(fake_cluster: Any, fake_client: Any, node: Any) -> None:
    rec = locking.holder()
    fake_client.update.return_value = {"result": "updated"}
    locking.register_writer(fake_cluster, ALIAS, rec)
    body = fake_client.update.call_args.kwargs["body"]
    assert body["script"]["params"] == {"w": rec.as_dict()} and body["upsert"] == {"writers": [rec.as_dict()]}
    locking.unregister_writer(fake_cluster, ALIAS, rec.token)
    assert fake_client.update.call_args.kwargs["body"]["script"]["params"] == {"token": rec.token}

    assert locking.writers(fake_cluster, ALIAS) == []
    node.put(STATE, locking.WRITERS_ID, {"writers": [rec.as_dict(), {"token": "x", "pid": 7, "host": "h"}]})
    assert locking.writers(fake_cluster, ALIAS) == [rec, LockRecord(token="x", pid=7, host="h")]


# ---------------------------------------------------------------- one writer of an alias at a time
def holding(record: LockRecord | None, result: str = "noop") -> dict[str, Any]:
    """The answer to a ``take the write lock`` update."""
    src = {"keys": [], "writer": record.as_dict() if record else None}
    return {"result": result, "get": {"_source": src}}


def test_take_a_free_write_lock_and_release_it(fake_cluster: Any, fake_client: Any) -> None:
    fake_client.update.return_value = {"result": "updated"}
    with writelock.WriteLock(fake_cluster, ALIAS, "ingest of x", wait_s=0, lease_s=400) as lock:
        take = updates(fake_client)[0]
        assert (take["index"], take["id"]) == (STATE, HIDDEN_ID)
        w = take["body"]["script"]["params"]["w"]
        assert (
            w["token"] == lock.token and w["what"] == "ingest of x" and w["expires_ms"] > time.time() * 1000
        )
        assert take["body"]["upsert"] == {"keys": [], "writer": w}
    release = updates(fake_client)[-1]
    assert release["body"]["script"]["params"] == {"t": lock.token}
    assert len(updates(fake_client)) == 2  # no renewal within the lease


def test_a_live_writer_is_waited_for_then_named(fake_cluster: Any, fake_client: Any) -> None:
    other = LockRecord(
        token="o", since="s", pid=os.getppid(), host=socket.gethostname(), what="osrag drop kb"
    )
    fake_client.update.return_value = holding(other)
    with pytest.raises(writelock.WriteLockHeld) as ei:
        writelock.WriteLock(fake_cluster, ALIAS, "ingest", wait_s=0).acquire()
    assert ei.value.holder == other
    assert "osrag drop kb" in str(ei.value) and f"pid {os.getppid()}" in str(ei.value)
    assert [u["body"]["script"]["params"]["takeover"] for u in updates(fake_client)] == [None]


def test_a_dead_writer_on_this_host_is_taken_over_at_once(fake_cluster: Any, fake_client: Any) -> None:
    dead = LockRecord(token="gone", since="s", pid=dead_pid(), host=socket.gethostname(), what="ingest")
    fake_client.update.side_effect = [holding(dead), holding(None, "updated"), {"result": "updated"}]
    lock = writelock.WriteLock(fake_cluster, ALIAS, "ingest", wait_s=0, lease_s=400)
    lock.acquire()
    lock.release()
    assert [u["body"]["script"]["params"].get("takeover") for u in updates(fake_client)[:2]] == [None, "gone"]


def test_renew_says_when_the_lease_was_lost(fake_cluster: Any, fake_client: Any) -> None:
    lock = writelock.WriteLock(fake_cluster, ALIAS, "ingest", wait_s=0)
    fake_client.update.return_value = {"result": "updated"}
    assert lock.renew() is True
    params = fake_client.update.call_args.kwargs["body"]["script"]["params"]
    assert params["fence"] == lock.token and params["expires_ms"] > time.time() * 1000
    fake_client.update.return_value = {"result": "noop"}
    assert lock.renew() is False


def test_read_writer_ignores_a_lease_that_ran_out(fake_cluster: Any, node: Any) -> None:
    assert writelock.read_writer(fake_cluster, ALIAS) is None
    now_ms = int(time.time() * 1000)
    w = LockRecord(token="w", what="ingest", expires_ms=now_ms + 60_000)
    node.put(STATE, HIDDEN_ID, {"keys": [], "writer": w.as_dict()})
    assert writelock.read_writer(fake_cluster, ALIAS) == w
    node.put(STATE, HIDDEN_ID, {"keys": [], "writer": w.leased(now_ms - 1).as_dict()})
    assert writelock.read_writer(fake_cluster, ALIAS) is None


def test_the_dev_launcher_asks_the_same_liveness_check(
    tmp_path: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    from osrag.devnode import process

    pid_file = tmp_path / "node.pid"
    pid_file.write_text(f"{os.getpid()}\n")
    assert process.read_pid(pid_file) == os.getpid()
    pid_file.write_text(str(dead_pid()))
    assert process.read_pid(pid_file) is None
    asked: list[int] = []
    monkeypatch.setattr(process, "pid_alive", lambda pid: asked.append(pid) or False)
    pid_file.write_text("4242")
    assert process.read_pid(pid_file) is None and asked == [4242]
