"""One progress bar for the long commands (ingest, reindex, eval).

A bar is for a person watching a terminal: it is drawn on stderr only when
stderr is a TTY and the command was not asked for ``--json``. Piped into a log
or read by a program, the command prints nothing extra, so stdout stays
machine-readable and stderr keeps only the per-file lines that matter.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Callable
from types import TracebackType
from typing import Any, Self, TextIO


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
        self,
        unit: str,
        *,
        total: int | None = None,
        quiet: bool = False,
        stream: TextIO | None = None,
        bar_format: str | None = None,
        postfix: str | None = None,
    ) -> None:
        self.stream = stream if stream is not None else sys.stderr
        self.enabled = wanted(quiet, self.stream)
        self._rate = Throughput()
        self._bar: Any = None
        if self.enabled:
            from tqdm import tqdm

            self._bar = tqdm(
                total=total,
                unit=unit,
                file=self.stream,
                dynamic_ncols=True,
                leave=False,
                bar_format=bar_format,
                postfix=postfix,
            )

    def advance(self, note: str | None = None) -> None:
        """One more item done (a document ingested, a question answered)."""
        if self._bar is None:
            return
        self._bar.update(1)
        if note:
            self._bar.set_postfix_str(note, refresh=False)

    def update_to(self, done: int, total: int) -> None:
        """Absolute position, for callers that report (done, total); the ETA beside it comes from
        the throughput since the first report (``Throughput``), not from when the bar appeared."""
        if self._bar is None:
            return
        self._rate.observe(done)
        eta = self._rate.eta_s(total)
        self._bar.total = total
        self._bar.n = done
        self._bar.set_postfix_str(
            f"ETA {clock_text(eta)}" if eta is not None else "ETA: measuring", refresh=False
        )
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

    def __enter__(self) -> Self:
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()


class Throughput:
    """An ETA from measured throughput: the rate counts only the work done since the first
    observation, so what came before it (reading files, loading a model) does not make the
    first estimate wildly long; no estimate until there is a rate to go by."""

    def __init__(self, clock: Callable[[], float] = time.monotonic, settle_s: float = 1.0) -> None:
        self._clock = clock
        self._settle_s = settle_s
        self._start: tuple[float, float] | None = None  # (time, done) of the first observation
        self._last: tuple[float, float] | None = None

    def observe(self, done: float) -> None:
        now = self._clock()
        if self._start is None:
            self._start = (now, done)
        self._last = (now, done)

    def eta_s(self, total: float) -> float | None:
        """Seconds left at the rate so far; None while there is none (too early, nothing moved)."""
        if self._start is None or self._last is None:
            return None
        (t0, d0), (t1, d1) = self._start, self._last
        if d1 <= d0 or t1 - t0 < self._settle_s:
            return None
        return max(0.0, (total - d1) * (t1 - t0) / (d1 - d0))


def clock_text(seconds: float) -> str:
    """``1:05`` or ``1:02:03``."""
    s = round(seconds)
    h, rest = divmod(s, 3600)
    m, sec = divmod(rest, 60)
    return f"{h}:{m:02d}:{sec:02d}" if h else f"{m}:{sec:02d}"


class IngestBar(Progress):
    """The ingest's bar over the documents to read: a document moves it when it is settled
    (unchanged, skipped, failed) or as its chunks are embedded (the slow part, told slice by
    slice through ``Ingester.on_embedded``), so a long batch moves the bar while it runs; the ETA
    comes from the throughput measured since embedding began (``Throughput``)."""

    def __init__(self, total: int, *, quiet: bool = False, stream: TextIO | None = None) -> None:
        super().__init__(
            "doc",
            total=total,
            quiet=quiet,
            stream=stream,
            bar_format="{l_bar}{bar}| {n:.0f}/{total_fmt} docs [{elapsed}{postfix}]",
            postfix="reading files, loading the model",
        )
        self.total = total
        self.settled = 0  # documents that ended before or instead of being embedded
        self.embedded_docs = 0.0  # documents of batches whose chunks are all embedded
        self.batch = (0, 0, 0)  # the batch being embedded: (chunks done, chunks, documents)
        self.rate = Throughput()

    def outcome(self, path: str, outcome: str) -> None:
        """The ingest's per-document callback: an indexed document was counted as it was embedded."""
        if outcome != "indexed":
            self.settled += 1
            self._show()

    def embedded(self, done: int, of: int, docs: int) -> None:
        """``Ingester.on_embedded``: ``done`` of the batch's ``of`` chunks, for ``docs`` documents."""
        if done >= of:
            self.embedded_docs += docs
            self.batch = (0, 0, 0)
        else:
            self.batch = (done, of, docs)
        self._show()

    def position(self) -> float:
        done, of, docs = self.batch
        part = docs * done / of if of else 0.0
        return min(float(self.total), self.settled + self.embedded_docs + part)

    def _show(self) -> None:
        pos = self.position()
        self.rate.observe(pos)
        if self._bar is None:
            return
        eta = self.rate.eta_s(self.total)
        done, of, _ = self.batch
        note = f"embedding {done}/{of} chunks" if of else ""
        note += (", " if note else "") + (f"ETA {clock_text(eta)}" if eta is not None else "ETA: measuring")
        self._bar.n = pos
        self._bar.set_postfix_str(note, refresh=False)
        self._bar.refresh()


__all__ = ["IngestBar", "Progress", "Throughput", "clock_text", "wanted"]
