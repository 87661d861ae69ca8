"""The reindex lock and the ingest writers' register: how writes and a reindex never interleave unseen.

Both live in the alias's state index (``{alias}.state``, next to the ``hidden`` list):

* ``reindex-lock`` -- created with ``op_type=create``, so of two reindexes started at the
  same instant exactly one creates it; the other gets a 409 and stops before it has made
  anything (no orphan index). It names its holder (a random token, pid, host, target).
* ``writers`` -- every ingest batch registers itself here (one scripted update) *before*
  it reads the lock, and leaves when its batch is fully written. A reindex takes the lock
  *before* it reads the register. Both reads are real-time GETs, so for any batch either
  the batch sees the lock (and refuses to write) or the reindex sees the batch (and
  waits for it, then copies what it wrote). Neither can miss the other.

Client-side clocks only order an ingest's chunks against a reindex on one host or
hosts whose clocks agree within ``CLOCK_MARGIN_S``.

Writers of one alias take turns through ``osrag.store.writelock``, which keeps its holder in the
``hidden`` document of the same state index.

Every holder is a ``LockRecord``: it names its holder (a random token, pid, host, when it began; a
reindex also its target, a writer what it does and when its lease runs out). This module alone
reads and writes their documents, and callers get records. ``pid_alive`` is the one answer to
"does this process still run" -- the locks use it for their holders, and the dev launcher for the
nodes it started.
"""

from __future__ import annotations

import datetime as dt
import logging
import os
import socket
import uuid
from collections.abc import Iterable, Mapping
from dataclasses import asdict, dataclass, replace
from typing import Any, Literal

from osrag.connection import Cluster
from osrag.errors import ClusterError, IndexStateError
from osrag.names import state_index, utcnow

log = logging.getLogger(__name__)

#: Whether a lock's holder still runs: on this host (``live``), not at all (``dead``), or on
#: another host, which cannot be checked from here (``unknown``).
HolderState = Literal["live", "dead", "unknown"]


def pid_alive(pid: int) -> bool:
    """Whether process ``pid`` on this host still runs (a zombie, killed but not yet reaped, does not)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # it runs, as another user
        return True
    try:  # a killed process whose parent has not reaped it yet still answers kill(pid, 0)
        with open(f"/proc/{pid}/stat", encoding="ascii", errors="replace") as fh:
            # the state follows the command name, which is in parentheses and may hold spaces
            return fh.read().rsplit(")", 1)[-1].split()[0] not in ("Z", "X")
    except (OSError, IndexError):
        return True


@dataclass(frozen=True, slots=True)
class LockRecord:
    """One holder of the reindex lock, a writer of the alias, or an ingest batch in the register."""

    token: str
    since: str | None = None
    pid: int | None = None
    host: str | None = None
    #: The reindex lock: the index being built.
    target: str | None = None
    #: The write lock: what the writer does (``ingest of …``, ``osrag drop …``).
    what: str | None = None
    #: The write lock: when its lease runs out (epoch milliseconds).
    expires_ms: int | None = None

    @classmethod
    def new(cls, target: str | None = None, what: str | None = None) -> LockRecord:
        """A record for this process, with a fresh token."""
        return cls(
            token=uuid.uuid4().hex,
            since=utcnow().isoformat(),
            pid=os.getpid(),
            host=socket.gethostname(),
            target=target,
            what=what,
        )

    @classmethod
    def from_doc(cls, raw: Mapping[str, Any]) -> LockRecord:
        """The record stored in the state index (tolerant: an older osrag's may lack fields)."""
        pid, expires = raw.get("pid"), raw.get("expires_ms")
        return cls(
            token=str(raw.get("token") or ""),
            since=None if raw.get("since") is None else str(raw["since"]),
            pid=pid if isinstance(pid, int) and not isinstance(pid, bool) else None,
            host=None if raw.get("host") is None else str(raw["host"]),
            target=None if raw.get("target") is None else str(raw["target"]),
            what=None if raw.get("what") is None else str(raw["what"]),
            expires_ms=int(expires) if isinstance(expires, int | float) else None,
        )

    def as_dict(self) -> dict[str, Any]:
        """The stored form (also what reports show): the reindex lock's fields always, a writer's
        only when set."""
        doc = asdict(self)
        for key in ("what", "expires_ms"):
            if doc[key] is None:
                del doc[key]
        return doc

    def leased(self, expires_ms: int) -> LockRecord:
        return replace(self, expires_ms=expires_ms)

    def started(self) -> dt.datetime | None:
        """``since`` as a time (None when missing or unreadable)."""
        try:
            return dt.datetime.fromisoformat(str(self.since))
        except ValueError:
            return None

    def state(self) -> HolderState:
        """Whether the holder still runs. A record naming no process, or this very process (whose
        run failed, since it is asking), is ``dead``."""
        if self.host is None or self.pid is None:
            return "dead"
        if self.host != socket.gethostname():
            return "unknown"
        if self.pid == os.getpid():
            return "dead"
        return "live" if pid_alive(self.pid) else "dead"

    def is_this_process(self) -> bool:
        return self.host == socket.gethostname() and self.pid == os.getpid()

    def who(self) -> str:
        return f"pid {self.pid} on {self.host}" if self.host else "an unknown process"

    def describe(self) -> str:
        """The reindex lock in one phrase, for the errors that name it."""
        into = f" into {self.target}" if self.target else ""
        return f"a reindex ({self.who()}){into} has held the lock since {self.since}"

    def describe_writer(self) -> str:
        """The writer of an alias in one phrase."""
        return f"{self.what or 'a writer'} ({self.who()}) since {self.since}"


def earliest(records: Iterable[LockRecord], default: dt.datetime) -> dt.datetime:
    """The earliest ``since`` of ``records`` (``default`` when none is earlier or readable)."""
    times = [t for t in (r.started() for r in records) if t is not None]
    return min([default, *times])


LOCK_ID = "reindex-lock"
WRITERS_ID = "writers"
#: Slack for clocks and for the moment between an ingest's lock check and its chunks' timestamp.
CLOCK_MARGIN_S = 60.0

#: The state index: the hidden list is a keyword list; the lock and the register are opaque objects.
STATE_PROPERTIES: dict[str, Any] = {
    "keys": {"type": "keyword"},
    "lock": {"type": "object", "enabled": False},
    "writers": {"type": "object", "enabled": False},
    "writer": {"type": "object", "enabled": False},
}
#: A writer's lease (seconds): renewed every quarter of it while the writer runs.
WRITER_LEASE_S = 120.0


class LockHeld(IndexStateError):
    """Another reindex holds the lock (``lock`` says who)."""

    def __init__(self, message: str, lock: LockRecord | None) -> None:
        super().__init__(message)
        self.lock = lock


def holder(target: str | None = None) -> LockRecord:
    """A new lock or writer record for this process."""
    return LockRecord.new(target=target)


def ensure_state_index(cluster: Cluster, alias: str, replicas: int = 0) -> None:
    """Create the state index (or add the lock/register fields to one made by an older osrag)."""
    name = state_index(alias)
    client = cluster.client
    if not cluster.call("check state index", client.indices.exists, index=name):
        cluster.call(
            "create state index",
            client.indices.create,
            index=name,
            body={
                "settings": {"number_of_shards": 1, "number_of_replicas": replicas},
                "mappings": {"dynamic": "strict", "properties": STATE_PROPERTIES},
            },
            ignore=400,  # created meanwhile by a concurrent ingest or reindex
        )
    # A concurrent ingest may have just created it: "exists" is true while its shard is still
    # recovering, and a lock read then fails with 503 (seen in the two-process race test). Wait for
    # the primary (a no-op once it is started). Serverless has no shards to wait for, nor this API.
    if not getattr(cluster.settings, "serverless", False):
        cluster.call(
            "wait for state index",
            client.cluster.health,
            index=name,
            # The server's own 30 s bound; never a "timeout" key in params: opensearch-py takes that
            # for the client's request timeout (and "30s" for a number it is not).
            params={"wait_for_status": "yellow"},
        )
    cluster.call(
        "update state index mapping",
        client.indices.put_mapping,
        index=name,
        body={"properties": STATE_PROPERTIES},
    )


def painless(source: str, **params: Any) -> dict[str, Any]:
    return {"lang": "painless", "source": source, "params": params}


def _read(cluster: Cluster, alias: str, doc_id: str) -> dict[str, Any] | None:
    """The state document ``doc_id`` as the GET answers it (with ``_seq_no``), None when missing."""
    got = cluster.call(
        f"read {doc_id}", cluster.client.get, index=state_index(alias), id=doc_id, params={"ignore": 404}
    )
    return got if got and got.get("found") else None


def state_doc(cluster: Cluster, alias: str, doc_id: str) -> dict[str, Any] | None:
    """The state document ``doc_id``'s source (real time), None when missing."""
    got = _read(cluster, alias, doc_id)
    return dict(got["_source"]) if got else None


def read_lock(cluster: Cluster, alias: str) -> LockRecord | None:
    """The reindex lock (real time), None when no reindex holds it."""
    doc = state_doc(cluster, alias, LOCK_ID)
    return LockRecord.from_doc(doc["lock"]) if doc and doc.get("lock") else None


def acquire(cluster: Cluster, alias: str, record: LockRecord) -> None:
    """Create the lock document; ``LockHeld`` when it exists (exactly one of two racers wins)."""
    try:
        cluster.call(
            "take the reindex lock",
            cluster.client.index,
            index=state_index(alias),
            id=LOCK_ID,
            body={"lock": record.as_dict()},
            op_type="create",
            refresh=True,
        )
    except ClusterError as exc:
        if getattr(exc.__cause__, "status_code", None) != 409:
            raise
        held = read_lock(cluster, alias)
        raise LockHeld(held.describe() if held else "another reindex holds the lock", held) from exc


def update(cluster: Cluster, alias: str, token: str, **changes: Any) -> None:
    """Change the held lock (e.g. name its target), only while ``token`` holds it."""
    cluster.call(
        "update the reindex lock",
        cluster.client.update,
        index=state_index(alias),
        id=LOCK_ID,
        body={
            "script": painless(
                "if (ctx._source.lock.token != params.token) { ctx.op = 'none' } else { for (e in "
                "params.changes.entrySet()) { ctx._source.lock[e.getKey()] = e.getValue() } }",
                token=token,
                changes=changes,
            )
        },
        refresh=True,
        retry_on_conflict=5,
    )


def release(cluster: Cluster, alias: str, token: str) -> bool:
    """Delete the lock if ``token`` (still) holds it; True when this call released it."""
    got = _read(cluster, alias, LOCK_ID)
    if not got or (got["_source"].get("lock") or {}).get("token") != token:
        return False
    try:
        cluster.call(
            "release the reindex lock",
            cluster.client.delete,
            index=state_index(alias),
            id=LOCK_ID,
            if_seq_no=got["_seq_no"],
            if_primary_term=got["_primary_term"],
            refresh=True,
        )
    except ClusterError as exc:
        if getattr(exc.__cause__, "status_code", None) in (404, 409):
            return False
        raise
    return True


def describe(lock: LockRecord) -> str:
    return lock.describe()


def lock_state(lock: LockRecord | None) -> HolderState:
    """Whether the process holding a reindex lock still runs (``LockRecord.state``; no lock: ``dead``)."""
    return lock.state() if lock else "dead"


def writer_alive(w: LockRecord) -> bool:
    """Whether the process of a registered ingest batch still runs (this process: yes, a thread)."""
    return w.is_this_process() or w.state() != "dead"


# ---------------------------------------------------------------- the writers' register
def register_writer(cluster: Cluster, alias: str, record: LockRecord) -> None:
    """Enter an ingest batch in the register (before it reads the lock)."""
    cluster.call(
        "register ingest batch",
        cluster.client.update,
        index=state_index(alias),
        id=WRITERS_ID,
        body={
            "script": painless(
                "if (ctx._source.writers == null) { ctx._source.writers = [] } ctx._source.writers.add(params.w)",
                w=record.as_dict(),
            ),
            "upsert": {"writers": [record.as_dict()]},
        },
        refresh=True,
        retry_on_conflict=20,
    )


def unregister_writer(cluster: Cluster, alias: str, token: str) -> None:
    """Leave the register (the batch is fully written, or gave up)."""
    cluster.call(
        "unregister ingest batch",
        cluster.client.update,
        index=state_index(alias),
        id=WRITERS_ID,
        body={
            "script": painless(
                "if (ctx._source.writers != null) { ctx._source.writers.removeIf(w -> w.token == params.token) }",
                token=token,
            )
        },
        refresh=True,
        retry_on_conflict=20,
        params={"ignore": 404},
    )


def writers(cluster: Cluster, alias: str) -> list[LockRecord]:
    """The ingest batches being written now (real time)."""
    doc = state_doc(cluster, alias, WRITERS_ID)
    return [LockRecord.from_doc(w) for w in (doc or {}).get("writers") or []]


__all__ = [
    "HolderState",
    "LockHeld",
    "LockRecord",
    "acquire",
    "describe",
    "earliest",
    "ensure_state_index",
    "holder",
    "lock_state",
    "painless",
    "pid_alive",
    "read_lock",
    "register_writer",
    "release",
    "state_doc",
    "unregister_writer",
    "update",
    "writer_alive",
    "writers",
]
