"""Trim a long passage to the sentences that carry the question's evidence.

A chunk of real documentation is long (p50 ~210 tokens on a docs tree) and usually answers a
question in one or two of its sentences. Delivering it whole spends the budget on its other
sentences, so fewer pages fit. Here a passage keeps its heading line and its best units — whole
sentences of prose, whole list items and table rows, whole code blocks — ranked by the IDF weight
of the question's analyzed terms they hold; the units left out are shown as ``…`` lines, and the
envelope says the passage was trimmed and what it would cost whole (``section()`` gives it).

A pure step: no cluster, no model. The question's terms are the analyzed ones the gate already has
(Snowball stems, ё folded); a unit holds a term when one of its words starts with it, which is how
a Russian stem relates to its word forms.
"""

from __future__ import annotations

import re
from bisect import bisect_left
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

from osrag.chunking.splitting import sentence_bounds

__all__ = ["GAP", "Trim", "TrimConfig", "evidence_pattern", "trim", "units"]

#: The line that stands for units left out (between, before or after the kept ones).
GAP = "…"
#: Chunk kinds never trimmed: a table row without its header, a code line without its block,
#: lose their meaning.
UNTRIMMED_KINDS = frozenset({"table", "code"})

_FENCE = re.compile(r"^\s*(```|~~~)")
_ITEM = re.compile(r"^\s*(?:[-*+]|\d+[.)]|\|)\s|^\s*\|")
_WORD = re.compile(r"\w+")


@dataclass(frozen=True)
class TrimConfig:
    """``max_units``: units a trimmed passage keeps at most; ``keep_whole``: the first candidates
    of the walk (the likeliest answers) are delivered whole, with their context; ``min_saving``: a
    passage is trimmed only when that saves at least this share of its tokens (else it is worth
    delivering whole); ``min_tokens``: shorter passages are never trimmed."""

    max_units: int = 3
    keep_whole: int = 1
    min_saving: float = 0.2
    min_tokens: int = 80

    def __post_init__(self) -> None:
        if isinstance(self.max_units, bool) or not isinstance(self.max_units, int) or self.max_units < 1:
            raise ValueError(f"max_units must be an integer >= 1, got {self.max_units!r}")
        if not 0.0 < self.min_saving < 1.0:
            raise ValueError(f"min_saving must be within (0, 1), got {self.min_saving!r}")
        if isinstance(self.keep_whole, bool) or not isinstance(self.keep_whole, int) or self.keep_whole < 0:
            raise ValueError(f"keep_whole must be an integer >= 0, got {self.keep_whole!r}")
        if isinstance(self.min_tokens, bool) or not isinstance(self.min_tokens, int) or self.min_tokens < 0:
            raise ValueError(f"min_tokens must be an integer >= 0, got {self.min_tokens!r}")


@dataclass(frozen=True)
class Trim:
    """A passage cut to its evidence: the text delivered, its cost, and how much was kept."""

    text: str
    tokens: int
    full_tokens: int
    kept: int
    units: int


def evidence_pattern(terms: Sequence[str]) -> re.Pattern[str] | None:
    """One regex finding any of the question's terms at a word start (longest first); None
    when no term is long enough to mean anything (one-letter stems match everything)."""
    usable = sorted({t for t in terms if len(t) >= 3 or t.isdigit()}, key=len, reverse=True)
    if not usable:
        return None
    return re.compile(r"(?<!\w)(?:" + "|".join(map(re.escape, usable)) + ")")


def _fold(text: str) -> str:
    return text.casefold().replace("ё", "е")


def _block_spans(body: str) -> list[tuple[int, int, bool]]:
    """The body's blocks in order as (start, end, is_paragraph) spans of ``body``: a fenced block
    whole, each list item, table row or heading line, and each paragraph (to be split into
    sentences)."""
    out: list[tuple[int, int, bool]] = []
    para: tuple[int, int] | None = None
    lines = body.split("\n")
    starts = []
    pos = 0
    for line in lines:
        starts.append(pos)
        pos += len(line) + 1
    i = 0
    while i < len(lines):
        line, at = lines[i], starts[i]
        if _FENCE.match(line):
            if para:
                out.append((*para, True))
                para = None
            j = i + 1
            while j < len(lines) and not _FENCE.match(lines[j]):
                j += 1
            j = min(j, len(lines) - 1)
            out.append((at, starts[j] + len(lines[j]), False))
            i = j + 1
            continue
        if not line.strip():
            if para:
                out.append((*para, True))
                para = None
        elif _ITEM.match(line) or line.lstrip().startswith("#"):
            if para:
                out.append((*para, True))
                para = None
            out.append((at, at + len(line), False))
        else:
            para = (para[0] if para else at, at + len(line))
        i += 1
    if para:
        out.append((*para, True))
    return out


def _block_text(body: str, start: int, end: int, is_para: bool) -> str:
    """A block as it is delivered: a paragraph's lines joined by spaces, a line stripped, a
    fenced block without blank lines around it."""
    raw = body[start:end]
    if is_para:
        return " ".join(line.strip() for line in raw.split("\n"))
    return raw.strip("\n") if _FENCE.match(raw) else raw.strip()


def _sentences(paragraph: str) -> list[str]:
    return [paragraph[a:b] for a, b in sentence_bounds(paragraph)]


def units(body: str) -> list[str]:
    """The body's deliverable units in order: a fenced block whole, each list item, table row or
    heading line, and each sentence of a paragraph (its lines joined)."""
    out: list[str] = []
    for a, b, is_para in _block_spans(body):
        text = _block_text(body, a, b, is_para)
        out.extend(_sentences(text) if is_para else [text])
    return out


def split_header(text: str, heading_path: Sequence[str], title: str = "") -> tuple[str, str]:
    """(heading line, body): the chunker puts the breadcrumb as the first paragraph; it is kept
    whole. A first paragraph that is not the breadcrumb is body."""
    head, sep, body = text.partition("\n\n")
    last = heading_path[-1].strip() if heading_path else title.strip()
    if sep and last and "\n" not in head and head.rstrip().endswith(last):
        return head, body
    return "", text


def trim(
    text: str,
    tokens: int,
    weights: Mapping[str, float],
    pattern: re.Pattern[str] | None,
    count: Callable[[str], int],
    *,
    heading_path: Sequence[str] = (),
    title: str = "",
    kind: str = "text",
    config: TrimConfig = TrimConfig(),
) -> Trim | None:
    """The passage cut to its ``config.max_units`` best units, or None when it stays whole
    (short, a table or code, no unit holds a term, or trimming would not save enough)."""
    if pattern is None or tokens < config.min_tokens or kind in UNTRIMMED_KINDS:
        return None
    head, body = split_header(text, heading_path, title)

    def weight(unit: str) -> float:
        return sum(weights.get(t, 0.0) for t in set(pattern.findall(_fold(unit))))

    # The terms are found once in the whole body; a block's are those that start inside it
    # (folding keeps offsets unless a letter folds to two, then each block is folded alone).
    folded = _fold(body)
    same_offsets = len(folded) == len(body)
    found = [(m.start(), m.group(0)) for m in pattern.finditer(folded)] if same_offsets else []
    if same_offsets and not found:
        return None
    at = [pos for pos, _ in found]
    # Only a paragraph that holds a term is split into sentences: one that holds none is never
    # kept, so it stays one unit (the sentence splitter is most of trimming's cost).
    parts: list[str] = []
    scored: list[tuple[float, int]] = []
    for a, b, is_para in _block_spans(body):
        block = _block_text(body, a, b, is_para)
        if same_offsets:
            terms = {term for _, term in found[bisect_left(at, a) : bisect_left(at, b)]}
            w = sum(weights.get(t, 0.0) for t in terms)
        else:
            w = weight(block)
        pieces = _sentences(block) if is_para and w > 0.0 else [block]
        for piece in pieces:
            w_piece = w if len(pieces) == 1 else weight(piece)
            if w_piece > 0.0:
                scored.append((-w_piece, len(parts)))
            parts.append(piece)
    if len(parts) <= config.max_units or not scored:
        return None
    keep = sorted(pos for _, pos in sorted(scored)[: config.max_units])
    lines = [head, ""] if head else []
    prev = -1
    for pos in keep:
        if pos != prev + 1:
            lines.append(GAP)
        lines.append(parts[pos])
        prev = pos
    if prev != len(parts) - 1:
        lines.append(GAP)
    out = "\n".join(lines)
    if len(out) > (1.0 - config.min_saving) * len(text):  # cheap pre-check before the tokenizer
        return None
    n = int(count(out))
    if n > (1.0 - config.min_saving) * tokens:
        return None
    return Trim(text=out, tokens=n, full_tokens=tokens, kept=len(keep), units=len(parts))
