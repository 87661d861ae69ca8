"""The report of one ingest: what happened to each input, counted for the summary the CLI prints.

One thread owns a report: the ingest's own. The stages hand what they did back as
``FileOutcome`` records (``osrag.ingest.batches``), and only the owning thread adds them here -- the
writer thread that overlaps the next batch's embedding never touches the report.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from typing import Any, Literal

from osrag import observability
from osrag.chunking.dialects import note_kind
from osrag.ingest.documents import ReadReport

#: What became of one input. ``left_out``: by design, with its reason (no text, a FIFO).
Status = Literal["indexed", "skipped", "left_out", "failed"]


@dataclass(frozen=True)
class FileOutcome:
    """One input's outcome, as a stage hands it back to the thread that owns the report."""

    path: str
    status: Status
    reason: str = ""
    chunks: int = 0
    tokens: int = 0


@dataclass
class IngestReport:
    """One ingest's counts and per-input lists; written by the ingest's own thread only."""

    documents: int = 0
    indexed: int = 0
    skipped: int = 0
    chunks: int = 0
    tokens: int = 0
    failed: list[tuple[str, str]] = field(default_factory=list)
    failed_items: list[dict[str, Any]] = field(default_factory=list)
    seconds: float = 0.0
    embed_seconds: float = 0.0
    index: str = ""
    #: Chunks whose vector was reused from the document's previous version (same text).
    reused_vectors: int = 0
    #: Documents removed by ``--prune`` (their file is gone, or now gives another doc_id).
    pruned: list[str] = field(default_factory=list)
    #: Documents withdrawn because their file's new version could not be indexed (fail closed).
    withdrawn: list[str] = field(default_factory=list)
    #: Inputs left out by design, with the reason (``DocumentSkipped``: no text, not a regular file).
    skips: list[tuple[str, str]] = field(default_factory=list)
    #: What reading the files noticed (rules applied, exclusions, front-matter keys kept as meta).
    reading: ReadReport = field(default_factory=ReadReport)
    #: What the Markdown reader noted per file (include not found, cycle, unknown variable, unclosed fence).
    notes: list[tuple[str, str]] = field(default_factory=list)

    def add(self, outcome: FileOutcome) -> None:
        """Count one input's outcome (called by the owning thread only)."""
        if outcome.status == "indexed":
            self.indexed += 1
            self.chunks += outcome.chunks
            self.tokens += outcome.tokens
        elif outcome.status == "skipped":
            self.skipped += 1
        elif outcome.status == "left_out":
            self.skips.append((outcome.path, outcome.reason))
        else:
            self.failed.append((outcome.path, outcome.reason))

    @property
    def chunks_per_s(self) -> float:
        return self.chunks / self.seconds if self.seconds > 0 else 0.0

    def summary(self) -> IngestSummary:
        """What the CLI prints: failures as path/reason records, failed items left out."""
        return IngestSummary(
            index=self.index,
            documents=self.documents,
            indexed=self.indexed,
            skipped=self.skipped,
            failed=len(self.failed),
            failures=[{"path": p, "reason": r} for p, r in self.failed],
            chunks=self.chunks,
            tokens=self.tokens,
            seconds=round(self.seconds, 3),
            embed_seconds=round(self.embed_seconds, 3),
            chunks_per_s=round(self.chunks_per_s, 1),
            reused_vectors=self.reused_vectors,
            pruned=len(self.pruned),
            pruned_docs=list(self.pruned),
            withdrawn=len(self.withdrawn),
            withdrawn_docs=list(self.withdrawn),
            skips=[{"path": p, "reason": r} for p, r in self.skips],
            excluded=dict(self.reading.excluded),
            rules=dict(self.reading.rules),
            meta_keys=dict(self.reading.meta_keys),
            meta_too_long=dict(self.reading.meta_too_long),
            notes=_note_counts(self.notes),
            note_examples=_note_examples(self.notes),
        )

    def as_dict(self) -> dict[str, Any]:
        return asdict(self.summary())


@dataclass(frozen=True)
class IngestSummary:
    """An ingest report as data (reports are dataclasses read out with ``dataclasses.asdict``)."""

    index: str
    documents: int
    indexed: int
    skipped: int
    failed: int
    failures: list[dict[str, str]]
    chunks: int
    tokens: int
    seconds: float
    embed_seconds: float
    chunks_per_s: float
    reused_vectors: int = 0
    pruned: int = 0
    pruned_docs: list[str] = field(default_factory=list)
    withdrawn: int = 0
    withdrawn_docs: list[str] = field(default_factory=list)
    skips: list[dict[str, str]] = field(default_factory=list)
    #: exclusion glob -> files/folders it left out; rule -> files it set metadata on
    excluded: dict[str, int] = field(default_factory=dict)
    rules: dict[str, int] = field(default_factory=dict)
    #: front-matter keys osrag does not read, kept as meta.KEY -> files carrying them
    meta_keys: dict[str, int] = field(default_factory=dict)
    meta_too_long: dict[str, int] = field(default_factory=dict)
    #: reader notes: kind -> count, and the first few of each kind as path/note records
    notes: dict[str, int] = field(default_factory=dict)
    note_examples: list[dict[str, str]] = field(default_factory=list)


#: Reader notes shown per kind in a summary (all are counted).
NOTE_EXAMPLES = 3


def _note_counts(notes: list[tuple[str, str]]) -> dict[str, int]:
    counts: dict[str, int] = {}
    for _, note in notes:
        kind = note_kind(note)
        counts[kind] = counts.get(kind, 0) + 1
    return counts


def _note_examples(notes: list[tuple[str, str]]) -> list[dict[str, str]]:
    shown: dict[str, int] = {}
    out: list[dict[str, str]] = []
    for path, note in notes:
        kind = note_kind(note)
        if shown.get(kind, 0) < NOTE_EXAMPLES:
            shown[kind] = shown.get(kind, 0) + 1
            out.append({"kind": kind, "path": path, "note": note})
    return out


def tick(progress: Callable[[str, str], None] | None, outcome: FileOutcome) -> None:
    """Tell the log and the progress callback about one input (a left-out input shows as skipped)."""
    shown = "skipped" if outcome.status == "left_out" else outcome.status
    if shown != "failed":  # failures are logged with their reason at the end (log_ingest)
        observability.file_outcome(outcome.path, shown)
    if progress is not None:
        progress(outcome.path, shown)


__all__ = ["FileOutcome", "IngestReport", "IngestSummary", "Status", "tick"]
