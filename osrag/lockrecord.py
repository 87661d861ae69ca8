"""Who holds a lock, and whether that process still runs: ``LockRecord`` and the one liveness check.

A record names its holder (a random token, pid, host, when it began; a reindex also its target,
a writer what it does and when its lease runs out). ``osrag.admin.locking`` alone turns the stored
documents into records and back; everything else reads their attributes. ``pid_alive`` is the
one answer to "does this process still run" — the locks use it for their holders, and the dev
launcher for the nodes it started.
"""

from __future__ import annotations

import datetime as dt
import os
import socket
import uuid
from collections.abc import Iterable, Mapping
from dataclasses import asdict, dataclass, replace
from typing import Any, Literal

from osrag.names import utcnow

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


__all__ = ["HolderState", "LockRecord", "earliest", "pid_alive"]
