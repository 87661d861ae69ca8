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

import functools
import math
import re
from bisect import bisect_left, bisect_right
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field

from osrag.chunking.splitting import sentence_bounds

__all__ = ["GAP", "Evidence", "Trim", "TrimConfig", "evidence", "evidence_pattern", "trim", "units"]

#: The line that stands for units left out (between, before or after the kept ones).
GAP = "…"
#: Chunk kinds never trimmed: a table row without its header, a code line without its block,
#: lose their meaning.
UNTRIMMED_KINDS = frozenset({"table", "code"})

_FENCE = re.compile(r"^\s*(```|~~~)")
_ITEM = re.compile(r"^\s*(?:[-*+]|\d+[.)]|\|)\s|^\s*\|")
_WORDS = re.compile(r"\w+")
_WORD_CHAR = re.compile(r"\w")


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
    """A passage cut to its evidence: the text delivered, its cost, and how much was kept.

    ``units`` (what the passage was cut into) is counted when read: a paragraph none of whose
    sentences could be kept is not split while trimming (``whole``), only then."""

    text: str
    tokens: int
    full_tokens: int
    kept: int
    #: Units counted while trimming (each paragraph in ``whole`` as one).
    counted: int = field(repr=False, compare=False)
    whole: tuple[str, ...] = field(default=(), repr=False, compare=False)

    @property
    def units(self) -> int:
        """The units the passage was cut into, each paragraph split into its sentences."""
        return self.counted + sum(len(sentence_bounds(p)) - 1 for p in self.whole)


@dataclass(frozen=True)
class Evidence:
    """The question's terms made ready once per search (``evidence``), longest first.

    ``pattern`` finds a term at a word start. When every term is made of word characters only
    (``words_only``), ``find`` looks each term up with ``str.find`` instead and keeps, at each word
    start, the longest term found there: such a match never covers another word start, so these
    are exactly ``pattern``'s matches, found about twice as fast and without compiling a regex
    (~90 us a question). ``spaceless``: no term holds a space, so no match crosses a line or a
    sentence boundary."""

    terms: tuple[str, ...]
    words_only: bool = False
    spaceless: bool = False

    @functools.cached_property
    def pattern(self) -> re.Pattern[str]:
        return _at_word_start(self.terms)

    def find(self, folded: str) -> list[tuple[int, str]]:
        """(offset, term) of every term at a word start of ``folded``, in order."""
        if not self.words_only:
            return [(m.start(), m.group(0)) for m in self.pattern.finditer(folded)]
        inside = _WORD_CHAR.match
        at: dict[int, str] = {}
        for term in self.terms:
            i = folded.find(term)
            while i >= 0:
                if i not in at and not (i and inside(folded, i - 1)):
                    at[i] = term
                i = folded.find(term, i + 1)
        return sorted(at.items())


def _usable(terms: Sequence[str]) -> tuple[str, ...]:
    """The terms long enough to mean anything (one-letter stems match everything), longest first
    (then alphabetical: two terms of one length never match at the same place, so any order of
    them finds the same, and this one is the same in every process)."""
    return tuple(sorted({t for t in terms if len(t) >= 3 or t.isdigit()}, key=lambda t: (-len(t), t)))


def _at_word_start(terms: Sequence[str]) -> re.Pattern[str]:
    return re.compile(r"(?<!\w)(?:" + "|".join(map(re.escape, terms)) + ")")


def evidence(terms: Sequence[str]) -> Evidence | None:
    """The question's terms compiled for ``trim`` (None when none is usable)."""
    usable = _usable(terms)
    if not usable:
        return None
    return Evidence(
        usable,
        words_only=all(_WORDS.fullmatch(t) for t in usable),
        spaceless=not any(ch.isspace() for t in usable for ch in t),
    )


def evidence_pattern(terms: Sequence[str]) -> re.Pattern[str] | None:
    """One regex finding any of the question's terms at a word start (longest first); None
    when no term is long enough to mean anything (one-letter stems match everything)."""
    usable = _usable(terms)
    return _at_word_start(usable) if usable else None


def _fold(text: str) -> str:
    return text.casefold().replace("ё", "е")


def _block_spans(body: str) -> list[tuple[int, int, bool]]:
    """The body's blocks in order as (start, end, is_paragraph) spans of ``body``: a fenced block
    whole, each list item, table row or heading line, and each paragraph (to be split into
    sentences)."""
    return _prose_blocks(body) or _blocks_by_line(body)


#: What a line's first non-space character is when the line may open a fence, a list item, a
#: table row or a heading (``_FENCE``, ``_ITEM``, ``#``; a decimal digit too).
_NOT_PROSE = frozenset("`~-*+|#")


def _prose_blocks(body: str) -> list[tuple[int, int, bool]] | None:
    """``_block_spans`` of a body that is only prose (its runs of non-blank lines), or None
    (and nothing found) when a line may be more than prose."""
    out: list[tuple[int, int, bool]] = []
    start = -1
    pos = end = 0
    for line in body.split("\n"):
        kept = line.lstrip()
        if not kept:
            if start >= 0:
                out.append((start, end, True))
                start = -1
        else:
            if kept[0] in _NOT_PROSE or kept[0].isdecimal():
                return None
            if start < 0:
                start = pos
            end = pos + len(line)
        pos += len(line) + 1
    if start >= 0:
        out.append((start, end, True))
    return out


def _blocks_by_line(body: str) -> list[tuple[int, int, bool]]:
    """``_block_spans`` line by line (any body)."""
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


def _weight(terms: set[str], weights: Mapping[str, float]) -> float:
    """The IDF weight a unit holds: ``fsum`` is exact whatever order the set iterates in, so two
    units holding the same terms tie exactly (and the earlier one wins) in every process."""
    return math.fsum(weights.get(t, 0.0) for t in terms)


#: A unit not yet made text: (start, end, is_paragraph) of a block of the body.
_Span = tuple[int, int, bool]


def _units_found(
    body: str, found: list[tuple[int, str]], weights: Mapping[str, float], keep: int | None
) -> tuple[list[str | _Span], list[tuple[float, int]], list[_Span]]:
    """(units, (-weight, position) of those holding a term, paragraphs left whole) from the terms
    found once in the folded body (offsets kept): a block's terms are those starting inside it, a
    sentence's those starting inside it once the paragraph's offsets are mapped to its joined text.

    Only a paragraph that holds a term is made text and split into sentences, best paragraph
    first, and only while one of its sentences could still be among the ``keep`` best units (None:
    every one is split): with no negative weight a sentence never outweighs its paragraph, and on
    equal weight the earlier unit wins. A paragraph passed over stays one unit here (the kept
    units, the gaps between them and the text are the same) and is listed, so that
    ``Trim.units`` can count its sentences."""
    at = [pos for pos, _ in found]
    blocks = _block_spans(body)
    # (-weight, block, sentence) of every unit holding a term: sorted, the best come first.
    best: list[tuple[float, int, int]] = []
    paragraphs: list[tuple[float, int, int, int]] = []
    for k, (a, b, is_para) in enumerate(blocks):
        lo, hi = bisect_left(at, a), bisect_left(at, b)
        if lo == hi:
            continue
        w = _weight({term for _, term in found[lo:hi]}, weights)
        if w > 0.0:
            if is_para:
                paragraphs.append((-w, k, lo, hi))
            else:
                best.append((-w, k, 0))
    prune = keep is not None and all(v >= 0.0 for v in weights.values())
    paragraphs.sort()
    split: dict[int, tuple[str, list[tuple[int, int]]]] = {}
    passed: list[int] = []
    for n, (neg_w, k, lo, hi) in enumerate(paragraphs):
        if prune and len(best) >= keep and (neg_w, k, 0) > sorted(best)[keep - 1]:
            passed = [p[1] for p in paragraphs[n:]]  # sorted: none of the rest can do better
            break
        a, b, _ = blocks[k]
        text, mapped = _joined(body, a, b, found[lo:hi])
        bounds = sentence_bounds(text)
        split[k] = (text, bounds)
        if len(bounds) == 1:
            best.append((neg_w, k, 0))
            continue
        pos = [p for p, _ in mapped]
        for j, (s, e) in enumerate(bounds):
            i, i_end = bisect_left(pos, s), bisect_left(pos, e)
            ws = _weight({term for _, term in mapped[i:i_end]}, weights) if i < i_end else 0.0
            if ws > 0.0:
                best.append((-ws, k, j))
    parts: list[str | _Span] = []
    first: list[int] = []
    for k, span in enumerate(blocks):
        first.append(len(parts))
        if k in split:
            text, bounds = split[k]
            parts.extend(text[s:e] for s, e in bounds)
        else:
            parts.append(span)
    scored = [(neg_w, first[k] + j) for neg_w, k, j in best]
    return parts, scored, [blocks[k] for k in sorted(passed)]


def _joined(body: str, a: int, b: int, found: list[tuple[int, str]]) -> tuple[str, list[tuple[int, str]]]:
    """A paragraph as ``_block_text`` delivers it (lines stripped, joined by spaces) and its found
    terms at their offsets in that text (a term holds no space, so it never spans a line)."""
    raw = body[a:b]
    if "\n" not in raw:
        lead = len(raw) - len(raw.lstrip())
        return raw.strip(), [(p - a - lead, t) for p, t in found]
    lines, body_at, text_at = [], [], []
    pos, out = a, 0
    for line in raw.split("\n"):
        kept = line.strip()
        body_at.append(pos + len(line) - len(line.lstrip()))
        text_at.append(out)
        lines.append(kept)
        pos += len(line) + 1
        out += len(kept) + 1
    mapped = []
    for p, t in found:
        k = bisect_right(body_at, p) - 1
        mapped.append((text_at[k] + p - body_at[k], t))
    return " ".join(lines), mapped


def _units_folded(
    body: str, pattern: re.Pattern[str], weights: Mapping[str, float], found: list[tuple[int, str]] | None
) -> tuple[list[str | _Span], list[tuple[float, int]], list[_Span]]:
    """The same units and scores with each sentence folded and searched on its own: for a term
    that holds a space, or a bare regex. A block's terms are those ``found`` in the whole folded
    body that start inside it, or (a body whose folding changes its length: a letter folding to
    two) the block is folded and searched alone."""
    at = [pos for pos, _ in found] if found is not None else []
    parts: list[str | _Span] = []
    scored: list[tuple[float, int]] = []
    for a, b, is_para in _block_spans(body):
        block = _block_text(body, a, b, is_para)
        if found is not None:
            w = _weight({term for _, term in found[bisect_left(at, a) : bisect_left(at, b)]}, weights)
        else:
            w = _weight(set(pattern.findall(_fold(block))), weights)
        pieces = _sentences(block) if is_para and w > 0.0 else [block]
        for piece in pieces:
            w_piece = w if len(pieces) == 1 else _weight(set(pattern.findall(_fold(piece))), weights)
            if w_piece > 0.0:
                scored.append((-w_piece, len(parts)))
            parts.append(piece)
    return parts, scored, []


def trim(
    text: str,
    tokens: int,
    weights: Mapping[str, float],
    pattern: Evidence | re.Pattern[str] | None,
    count: Callable[[str], int],
    *,
    heading_path: Sequence[str] = (),
    title: str = "",
    kind: str = "text",
    config: TrimConfig = TrimConfig(),
    fit: int | None = None,
) -> Trim | None:
    """The passage cut to its ``config.max_units`` best units, or None when it stays whole
    (short, a table or code, no unit holds a term, or trimming would not save enough).

    ``pattern``: the question's terms as ``evidence`` compiles them once per search (a bare
    ``evidence_pattern`` regex gives the same result, searching each unit on its own).

    ``fit``: the passage does not fit the budget whole and must come within ``fit`` tokens to be
    delivered at all. It is then cut even when short, a table too (its header row kept above
    its best rows), to as many of its best units as fit -- or None when not even one does."""
    forced = fit is not None
    if pattern is None or kind == "code" or (kind in UNTRIMMED_KINDS and not forced):
        return None
    if tokens < config.min_tokens and not forced:
        return None
    head, body = split_header(text, heading_path, title)
    table_head = ""
    if kind == "table":  # a row means something only under its header
        table_head, body = _table_header(body)
    folded = _fold(body)
    if isinstance(pattern, Evidence) and pattern.spaceless and len(folded) == len(body):
        found = pattern.find(folded)
        if not found:
            return None
        parts, scored, whole = _units_found(body, found, weights, config.max_units)
        if len(parts) <= config.max_units and whole:  # too few units so far: count them all
            parts, scored, whole = _units_found(body, found, weights, None)
    else:
        regex = pattern.pattern if isinstance(pattern, Evidence) else pattern
        found = (
            [(m.start(), m.group(0)) for m in regex.finditer(folded)] if len(folded) == len(body) else None
        )
        if found == []:
            return None
        parts, scored, whole = _units_folded(body, regex, weights, found)
    if not scored:
        return None
    whole_text = tuple(_block_text(body, *span) for span in whole)
    if fit is not None:  # as many of the best units as fit, down to one
        for k in range(min(config.max_units, len(parts) - 1), 0, -1):
            keep = sorted(pos for _, pos in sorted(scored)[:k])
            out = _joined_units(head, table_head, body, parts, keep)
            n = int(count(out))
            if n <= fit:
                return Trim(
                    text=out,
                    tokens=n,
                    full_tokens=tokens,
                    kept=len(keep),
                    counted=len(parts),
                    whole=whole_text,
                )
        return None
    if len(parts) <= config.max_units:
        return None
    keep = sorted(pos for _, pos in sorted(scored)[: config.max_units])
    out = _joined_units(head, table_head, body, parts, keep)
    if len(out) > (1.0 - config.min_saving) * len(text):  # cheap pre-check before the tokenizer
        return None
    n = int(count(out))
    if n > (1.0 - config.min_saving) * tokens:
        return None
    return Trim(text=out, tokens=n, full_tokens=tokens, kept=len(keep), counted=len(parts), whole=whole_text)


def _joined_units(
    head: str, table_head: str, body: str, parts: Sequence[str | _Span], keep: Sequence[int]
) -> str:
    """The delivered text: the heading line, a table's header rows, the kept units in document
    order with a ``GAP`` line wherever units were left out."""
    lines = [head, ""] if head else []
    if table_head:
        lines.append(table_head)
    prev = -1
    for pos in keep:
        if pos != prev + 1:
            lines.append(GAP)
        part = parts[pos]
        lines.append(part if isinstance(part, str) else _block_text(body, *part))
        prev = pos
    if prev != len(parts) - 1:
        lines.append(GAP)
    return "\n".join(lines)


_TABLE_RULE = re.compile(r"^\s*\|?\s*:?-{3,}:?\s*(\|\s*:?-{3,}:?\s*)*\|?\s*$")


def _table_header(body: str) -> tuple[str, str]:
    """(a Markdown table's header row and rule, the body after them); ("", body) when the body
    does not start with one (text before the table stays body)."""
    lines = body.split("\n")
    for i in range(len(lines) - 1):
        if lines[i].lstrip().startswith("|") and _TABLE_RULE.match(lines[i + 1]):
            if any(line.strip() for line in lines[:i]):
                return "", body
            return "\n".join(lines[i : i + 2]).strip(), "\n".join(lines[i + 2 :])
    return "", body
