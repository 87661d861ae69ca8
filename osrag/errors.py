"""The few exceptions osrag raises.

Every failure a user can cause or meet is one of these, so the CLI can print a
one-line message instead of a traceback and apps can catch ``OsragError``.
They are raised ``from`` their cause, which keeps the detail for debugging.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any


class OsragError(Exception):
    """Base class: anything osrag raises on purpose."""


class ConfigError(OsragError):
    """A setting, file or argument is invalid (names the thing at fault)."""


class InputError(OsragError):
    """User input cannot be served: empty question, bad budget, bad filter."""


class InvalidSetting(ConfigError, InputError):
    """An ``OSRAG_*`` setting (or a ``Settings(...)`` argument) is out of its range: one line naming it.
    Also an ``InputError``, as every bad argument from the API is; the CLI exits 2 for it."""


class ClusterUnavailable(OsragError):
    """The OpenSearch cluster cannot be reached at all. ``fix`` (when known) is what to do, also
    the message's tail, kept apart so ``doctor`` can print it as its hint."""

    def __init__(self, message: str, fix: str = "") -> None:
        super().__init__(f"{message}; {fix}" if fix else message)
        self.problem = message
        self.fix = fix


class ClusterError(OsragError):
    """The cluster answered, but refused or failed the request."""


class LauncherError(OsragError):
    """The local development node could not be fetched, installed or started."""


class ModelError(OsragError):
    """A model cannot be loaded, or does not match what the index was built with."""


class DocumentError(OsragError):
    """One input document cannot be read or chunked; the rest of an ingest goes on."""

    def __init__(self, path: str, reason: str) -> None:
        super().__init__(f"{path}: {reason}")
        self.path = path
        self.reason = reason


class DocumentSkipped(DocumentError):
    """An input is not indexed, by design rather than by fault: a file with no text (empty, blank,
    front matter or headings only), a FIFO or device, a symlink leaving the ingest root. Reported
    with its reason; an ingest still exits 0 unless ``--strict``."""


class BulkIndexError(OsragError):
    """Some bulk items failed after retries; carries them so none is lost silently."""

    def __init__(self, message: str, items: Sequence[dict[str, Any]]) -> None:
        super().__init__(f"{message} ({len(items)} failed item(s))")
        self.items = list(items)


class IndexStateError(OsragError):
    """The alias, index or lock is not in the state an admin operation needs."""


class WritesRefused(IndexStateError):
    """An ingest stopped because a reindex took the lock meanwhile; ``not_written`` lists the
    documents of the batch it did not write (later files were not read)."""

    def __init__(self, message: str, not_written: Sequence[str]) -> None:
        super().__init__(message)
        self.not_written = list(not_written)
