"""One progress bar for the long commands (ingest, reindex, eval).

A bar is for a person watching a terminal: it is drawn on stderr only when
stderr is a TTY and the command was not asked for ``--json``. Piped into a log
or read by a program, the command prints nothing extra, so stdout stays
machine-readable and stderr keeps only the per-file lines that matter.
"""

from __future__ import annotations

import sys
from types import TracebackType
from typing import Any, TextIO


def wanted(quiet: bool, stream: TextIO | None = None) -> bool:
    """Whether to draw: not asked to be quiet, and the stream is a terminal."""
    stream = stream if stream is not None else sys.stderr
    if quiet:
        return False
    isatty = getattr(stream, "isatty", None)
    try:
        return bool(isatty and isatty())
    except (ValueError, OSError):  # a closed or odd stream is not a terminal
        return False


class Progress:
    """A tqdm bar that is a no-op when it is not wanted; a context manager."""

    def __init__(
        self, unit: str, *, total: int | None = None, quiet: bool = False, stream: TextIO | None = None
    ) -> None:
        self.stream = stream if stream is not None else sys.stderr
        self.enabled = wanted(quiet, self.stream)
        self._bar: Any = None
        if self.enabled:
            from tqdm import tqdm

            self._bar = tqdm(total=total, unit=unit, file=self.stream, dynamic_ncols=True, leave=False)

    def advance(self, note: str | None = None) -> None:
        """One more item done (a document ingested, a question answered)."""
        if self._bar is None:
            return
        self._bar.update(1)
        if note:
            self._bar.set_postfix_str(note, refresh=False)

    def update_to(self, done: int, total: int) -> None:
        """Absolute position, for callers that report (done, total)."""
        if self._bar is None:
            return
        self._bar.total = total
        self._bar.n = done
        self._bar.refresh()

    def write(self, line: str) -> None:
        """A log line: printed above the bar on a terminal (not through it), plainly otherwise."""
        if self._bar is not None:
            self._bar.write(line, file=self.stream)
        else:
            print(line, file=self.stream, flush=True)

    def close(self) -> None:
        if self._bar is not None:
            self._bar.close()
            self._bar = None

    def __enter__(self) -> Progress:
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()


__all__ = ["Progress", "wanted"]
