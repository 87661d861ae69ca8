"""One writer of an alias at a time: the write lock every ingest, prune, delete and drop holds.

Writers of one alias take turns (``WriteLock``): an ingest, a prune, ``osrag delete`` and
``osrag drop`` each hold the ``writer`` field of the ``hidden`` document while they run. It is
kept in *that* document because every visibility flip is a scripted update of it: the flip
checks that its writer still holds the field (a fence), so even a writer that lost its lease
(paused for minutes, then woke up) cannot show a version over another writer's. Two ingests of
the same documents would otherwise both read version 1 as current and both show their own
version next to the other's. A second writer waits (``OSRAG_WRITE_LOCK_WAIT_S``), then stops
with one line naming the holder. The lease is renewed by a heartbeat; a holder on this host
whose process is gone is taken over at once, one on another host when its lease has run out.

The holder is a ``LockRecord`` (``osrag.store.locking``), read and written only here.
"""

from __future__ import annotations

import logging
import threading
import time
from types import TracebackType
from typing import Any

from osrag.connection import Cluster
from osrag.errors import ClusterError, IndexStateError
from osrag.names import HIDDEN_ID, state_index
from osrag.store.locking import (
    WRITER_LEASE_S,
    LockRecord,
    painless,
    state_doc,
    writer_alive,
)

log = logging.getLogger(__name__)


class WriteLockHeld(IndexStateError):
    """Another writer of the alias held the write lock for longer than we could wait."""

    def __init__(self, message: str, holder: LockRecord) -> None:
        super().__init__(message)
        self.holder = holder


class WriteLost(IndexStateError):
    """This writer's lease ran out and another writer took the alias: nothing more is shown."""


#: Painless: the fence every update of the ``hidden`` document by a writer carries. When the
#: writer no longer holds the alias, nothing changes (``noop``); else the lease is renewed.
FENCE = (
    "if (ctx._source.writer == null || ctx._source.writer.token != params.fence) { ctx.op = 'none' } "
    "else { ctx._source.writer.expires_ms = params.expires_ms; "
)
FENCE_END = " }"
#: Painless: take the alias when it is free, already ours, its lease ran out, or its holder is gone.
TAKE_WRITER = (
    "def w = ctx._source.writer; if (w == null || w.token == params.w.token || w.expires_ms < params.now "
    "|| w.token == params.takeover) { ctx._source.writer = params.w } else { ctx.op = 'none' }"
)
RELEASE_WRITER = (
    "if (ctx._source.writer != null && ctx._source.writer.token == params.t) "
    "{ ctx._source.writer = null } else { ctx.op = 'none' }"
)


def _now_ms() -> int:
    return int(time.time() * 1000)


def describe_writer(w: LockRecord) -> str:
    return w.describe_writer()


class WriteLock:
    """The alias's one writer at a time (module doc): a context manager around a whole ingest,
    prune, delete or drop. ``token`` fences the visibility flips made while it is held."""

    def __init__(
        self, cluster: Cluster, alias: str, what: str, wait_s: float, lease_s: float = WRITER_LEASE_S
    ) -> None:
        self.cluster = cluster
        self.alias = alias
        self.lease_s = lease_s
        self.wait_s = wait_s
        self.record = LockRecord.new(what=what)
        self.token: str = self.record.token
        self._stop = threading.Event()
        self._beat: threading.Thread | None = None
        #: Set when a renewal found another writer holding the alias (the next flip refuses too).
        self.lost = False
        self._abandoned = False

    # -- the fence other updates of the hidden document carry
    def fence_params(self) -> dict[str, Any]:
        return {"fence": self.token, "expires_ms": _now_ms() + int(self.lease_s * 1000)}

    # -- taking and leaving
    def __enter__(self) -> WriteLock:
        self.acquire()
        return self

    def __exit__(
        self, et: type[BaseException] | None, ev: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.release()

    def acquire(self) -> None:
        deadline = time.monotonic() + self.wait_s
        waited = False
        pause = 0.2
        while True:
            current = self._try(takeover=None)
            if current is None:
                break
            if not writer_alive(current):  # its process is gone (this host): take it over now
                log.warning(
                    "taking over the write lock of %s (its process is gone)", describe_writer(current)
                )
                if self._try(takeover=current.token) is None:
                    break
                continue
            if time.monotonic() >= deadline:
                raise WriteLockHeld(
                    f"alias {self.alias} is being written by {describe_writer(current)}; waited "
                    f"{self.wait_s:g} s (OSRAG_WRITE_LOCK_WAIT_S) — run again when it has finished",
                    current,
                )
            if not waited:
                log.info("waiting for the write lock of %s, held by %s", self.alias, describe_writer(current))
                waited = True
            time.sleep(min(pause, max(0.0, deadline - time.monotonic())))
            pause = min(pause * 1.5, 2.0)
        self._stop.clear()
        self._beat = threading.Thread(target=self._heartbeat, name="osrag-write-lease", daemon=True)
        self._beat.start()

    def _try(self, takeover: str | None) -> LockRecord | None:
        """One attempt: None when this writer now holds the lock, else the holder's record."""
        now = _now_ms()
        record = self.record.leased(now + int(self.lease_s * 1000)).as_dict()
        got = self.cluster.call(
            "take the write lock",
            self.cluster.client.update,
            index=state_index(self.alias),
            id=HIDDEN_ID,
            body={
                "script": painless(TAKE_WRITER, w=record, now=now, takeover=takeover),
                "upsert": {"keys": [], "writer": record},
            },
            refresh=True,
            retry_on_conflict=10,
            _source=True,
        )
        if got.get("result") in ("created", "updated"):
            return None
        src = (got.get("get") or {}).get("_source") or {}
        w = src.get("writer")
        return LockRecord.from_doc(w) if w else LockRecord(token="", what="an unknown writer")

    def _heartbeat(self) -> None:
        while not self._stop.wait(self.lease_s / 4):
            try:
                if not self.renew():
                    self.lost = True
                    log.error("the write lock of %s was taken by another writer", self.alias)
                    return
            except Exception as exc:  # a failed renewal is retried at the next beat
                log.warning("renewing the write lock of %s failed: %s", self.alias, exc)

    def renew(self) -> bool:
        """Extend the lease; False when another writer holds the alias now."""
        got = self.cluster.call(
            "renew the write lock",
            self.cluster.client.update,
            index=state_index(self.alias),
            id=HIDDEN_ID,
            body={"script": painless(FENCE + FENCE_END, **self.fence_params())},
            retry_on_conflict=10,
        )
        return got.get("result") != "noop"

    def abandon(self) -> None:
        """Stop renewing without touching the cluster (the state index is about to be deleted:
        an update would auto-create it again)."""
        self._stop.set()
        if self._beat is not None:
            self._beat.join(timeout=10)
            self._beat = None
        self._abandoned = True

    def release(self) -> None:
        if self._abandoned:
            return
        self.abandon()
        self._abandoned = False
        try:
            self.cluster.call(
                "release the write lock",
                self.cluster.client.update,
                index=state_index(self.alias),
                id=HIDDEN_ID,
                body={"script": painless(RELEASE_WRITER, t=self.token)},
                refresh=True,
                retry_on_conflict=10,
                params={"ignore": 404},  # the state index went with `osrag drop`
            )
        except ClusterError as exc:  # the lease runs out by itself; say so, do not mask the real error
            log.warning(
                "could not release the write lock of %s (%s); it expires in %g s",
                self.alias,
                exc,
                self.lease_s,
            )


def read_writer(cluster: Cluster, alias: str) -> LockRecord | None:
    """The alias's current writer (real time), None when no writer holds it or its lease ran out."""
    doc = state_doc(cluster, alias, HIDDEN_ID)
    w = (doc or {}).get("writer")
    if not w or int(w.get("expires_ms") or 0) < _now_ms():
        return None
    return LockRecord.from_doc(w)


__all__ = [
    "FENCE",
    "FENCE_END",
    "RELEASE_WRITER",
    "TAKE_WRITER",
    "WriteLock",
    "WriteLockHeld",
    "WriteLost",
    "describe_writer",
    "read_writer",
]
