"""Two ingests of the same documents at once (issue 29, item 2), as separate ``osrag`` processes.

Before the write lock, two concurrent ingests with different content both read version 1 as
current and both showed their own version: 20 of 30 documents were visible twice. Here, for
3 rounds, two processes ingest the same 30 documents with different content at the same
instant; afterwards every document is visible in exactly one version, whole. The lock's
own behaviour (bounded wait, one line naming the holder, takeover of a dead holder or an
expired lease, the fence on a lost lease) is checked directly against the node.
"""

from __future__ import annotations

import os
import socket
import time
from pathlib import Path

import pytest

from osrag.errors import IndexStateError
from osrag.ingest.indexing import Ingester
from osrag.names import HIDDEN_ID, state_index, visibility_filter
from osrag.settings import Settings
from osrag.store.alias import AliasStore
from osrag.store.locking import ensure_state_index
from osrag.store.versions import VersionStore
from osrag.store.writelock import WriteLock, WriteLockHeld, WriteLost, read_writer
from tests.integration.test_races import finish, popen

pytestmark = pytest.mark.integration

ROUNDS = 3
DOCS = 30


def write_tree(root: Path, label: str) -> Path:
    """``root/kb/dNN.md``: the same collection and paths (so the same documents) in both trees."""
    kb = root / "kb"
    kb.mkdir(parents=True, exist_ok=True)
    for i in range(DOCS):
        (kb / f"d{i:02d}.md").write_text(
            f"---\ncategory: {label}\n---\n# Документ {i}\n\n"
            f"Версия {label} документа номер {i}: чайник, заварка и доставка {i * 7}.\n",
            encoding="utf-8",
        )
    return kb


def visible(admin: AliasStore) -> dict[str, dict[str, set[str]]]:
    """doc_id -> {"v": version keys, "c": categories} over the chunks readers see."""
    resp = admin.cluster.client.search(
        index=admin.alias,
        body={
            "size": 0,
            "query": {"bool": {"filter": [visibility_filter(admin.alias)]}},
            "aggs": {
                "d": {
                    "terms": {"field": "doc_id", "size": 1000},
                    "aggs": {
                        "v": {"terms": {"field": "version_key"}},
                        "c": {"terms": {"field": "category"}},
                    },
                }
            },
        },
        params={"request_cache": "false"},
    )
    return {
        b["key"]: {"v": {x["key"] for x in b["v"]["buckets"]}, "c": {x["key"] for x in b["c"]["buckets"]}}
        for b in resp["aggregations"]["d"]["buckets"]
    }


def test_two_ingests_of_the_same_documents_leave_one_version_each(
    admin: AliasStore, settings: Settings, tmp_path: Path
) -> None:
    for r in range(ROUNDS):
        a = write_tree(tmp_path / f"r{r}a", f"r{r}a")
        b = write_tree(tmp_path / f"r{r}b", f"r{r}b")
        # Two folders named kb are two roots of one collection: --replace lets each take the other's
        # documents (without it the second is refused per file, docs/write-side.md).
        procs = [
            popen(settings, tmp_path, "ingest", "--replace", str(a)),
            popen(settings, tmp_path, "ingest", "--replace", str(b)),
        ]
        results = [finish(p) for p in procs]
        for code, _out, err in results:
            # The second waits for the first (OSRAG_WRITE_LOCK_WAIT_S) and then runs: both succeed.
            assert code == 0, err
        seen = visible(admin)
        assert len(seen) == DOCS, f"round {r}: {len(seen)} documents visible"
        doubled = {d: v for d, v in seen.items() if len(v["v"]) != 1 or len(v["c"]) != 1}
        assert not doubled, f"round {r}: {len(doubled)} documents visible in two versions: {doubled}"
        # Whichever ran second wrote every document over the first: one tree's content everywhere.
        assert len({c for v in seen.values() for c in v["c"]}) == 1
        assert {c for v in seen.values() for c in v["c"]} <= {f"r{r}a", f"r{r}b"}


def test_second_writer_waits_bounded_then_names_the_holder(admin: AliasStore, settings: Settings) -> None:
    cluster = admin.cluster
    ensure_state_index(cluster, admin.alias)
    with WriteLock(cluster, admin.alias, "osrag ingest of /docs", wait_s=0) as first:
        assert read_writer(cluster, admin.alias).token == first.token
        started = time.monotonic()
        with pytest.raises(WriteLockHeld) as ei:
            WriteLock(cluster, admin.alias, "osrag delete", wait_s=1.0).acquire()
        assert 0.9 <= time.monotonic() - started < 10
        msg = str(ei.value)
        assert "\n" not in msg
        assert "osrag ingest of /docs" in msg and f"pid {os.getpid()}" in msg and socket.gethostname() in msg
        # An ingest in another process would wait the same way; here it is refused at once.
        with pytest.raises(WriteLockHeld):
            Ingester(settings.model_copy(update={"write_lock_wait_s": 0})).ingest_documents([])
    assert read_writer(cluster, admin.alias) is None  # released on exit


def _plant(admin: AliasStore, record: dict[str, object]) -> None:
    admin.cluster.client.update(
        index=state_index(admin.alias),
        id=HIDDEN_ID,
        body={"doc": {"writer": record}, "doc_as_upsert": True},
        refresh=True,
    )


def test_dead_holder_and_expired_lease_are_taken_over(admin: AliasStore) -> None:
    cluster = admin.cluster
    ensure_state_index(cluster, admin.alias)
    far = int(time.time() * 1000) + 3_600_000
    # A holder on this host whose process is gone (a pid that cannot exist): taken over at once.
    _plant(admin, {"token": "dead", "pid": 2**22 + 12345, "host": socket.gethostname(), "expires_ms": far})
    with WriteLock(cluster, admin.alias, "after a crash", wait_s=0) as lock:
        assert read_writer(cluster, admin.alias).token == lock.token
    # A holder on another host: taken over only once its lease has run out.
    _plant(admin, {"token": "away", "pid": 1, "host": "elsewhere", "expires_ms": far, "what": "a far ingest"})
    with pytest.raises(WriteLockHeld, match="a far ingest"):
        WriteLock(cluster, admin.alias, "x", wait_s=0).acquire()
    _plant(admin, {"token": "away", "pid": 1, "host": "elsewhere", "expires_ms": 1})
    with WriteLock(cluster, admin.alias, "after expiry", wait_s=0) as lock:
        assert read_writer(cluster, admin.alias).token == lock.token


def test_a_writer_that_lost_its_lease_shows_nothing(admin: AliasStore) -> None:
    cluster = admin.cluster
    ensure_state_index(cluster, admin.alias)
    store = VersionStore(cluster, admin.alias)
    lock = WriteLock(cluster, admin.alias, "paused writer", wait_s=0)
    lock.acquire()
    try:
        store.lock = lock
        store.hide(add=["D@new"])  # fenced, accepted while held
        # Another writer takes the alias (as after this one's lease ran out).
        _plant(admin, {"token": "other", "pid": 1, "host": "elsewhere", "expires_ms": 2**50, "what": "B"})
        with pytest.raises(WriteLost, match="lost") as ei:
            store.hide(remove=["D@new"], add=["D@old"])  # the flip
        assert isinstance(ei.value, IndexStateError)
        got = cluster.client.get(index=state_index(admin.alias), id=HIDDEN_ID)["_source"]
        assert got["keys"] == ["D@new"]  # unchanged: the flip did nothing
        assert not lock.renew()
    finally:
        lock.release()
    assert read_writer(cluster, admin.alias).token == "other"  # release leaves another's lock alone


def test_cli_refusal_is_one_line(admin: AliasStore, settings: Settings, tmp_path: Path) -> None:
    kb = write_tree(tmp_path / "t", "y")
    ensure_state_index(admin.cluster, admin.alias)
    with WriteLock(admin.cluster, admin.alias, "osrag ingest of elsewhere", wait_s=0):
        p = popen(settings, tmp_path, "ingest", str(kb), OSRAG_WRITE_LOCK_WAIT_S="0")
        code, _out, err = finish(p)
    assert code != 0
    lines = [ln for ln in err.splitlines() if ln.strip()]
    assert len(lines) == 1 and "being written by osrag ingest of elsewhere" in lines[0], err
