"""Chunking: documents -> retrieval units with breadcrumbs and exact char spans.

A chunk is both what gets embedded and what gets cited, so a bad cut cannot
be repaired later by a better embedder. The Markdown chunker therefore cuts
along the document's own structure (headings, tables, fenced code, lists) and
falls back to sentences, lines and words only when a piece is still too long.
Every chunk carries ``start``/``end`` into ``Document.text``: eval relevance
and citations are computed from spans, never from the (decorated) chunk text.

Pure functions: no I/O, no randomness, no third-party Markdown parser. The
parser below is a small line-based one that knows exactly the constructs the
rules need (ATX headings, ``` / ~~~ fences, pipe tables, ``-``/``*``/``+``/
``1.`` lists nested by indentation, ``[^n]:`` footnotes, paragraphs).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

__all__ = [
    "STRATEGIES",
    "Chunk",
    "ChunkingConfig",
    "Document",
    "Section",
    "TokenCounter",
    "chunk_document",
    "chunk_fixed",
    "chunk_markdown",
    "chunk_text",
    "parse_sections",
    "simple_token_count",
]

TokenCounter = Callable[[str], int]

_TOKEN_RE = re.compile(r"\w+|[^\w\s]")


def simple_token_count(text: str) -> int:
    """Count ``\\w+`` runs plus single non-space punctuation characters.

    Deterministic and dependency-free, so tests and the eval baseline do not
    hinge on a tokenizer download; production passes the embedder's counter.
    """
    return len(_TOKEN_RE.findall(text))


# --------------------------------------------------------------------------
# Public data model
# --------------------------------------------------------------------------


@dataclass(frozen=True)
class Document:
    """One source document; the caller reads files and strips front matter."""

    doc_id: str
    text: str
    source: str = ""
    title: str = ""
    metadata: Mapping[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class Section:
    """A heading and everything under it, up to the next heading of the same
    or a higher level. ``end`` excludes trailing blank space, so
    ``text[start:end]`` is exactly what a parent-child lookup should return."""

    section_id: str
    heading_path: tuple[str, ...]
    level: int
    start: int
    end: int
    parent_id: str | None


@dataclass(frozen=True)
class Chunk:
    """One retrieval unit. ``text`` is embedded; ``start:end`` is the truth."""

    doc_id: str
    ordinal: int
    text: str
    body: str
    heading_path: tuple[str, ...]
    section_id: str
    parent_section_id: str | None
    kind: str
    start: int
    end: int
    token_count: int

    @property
    def chunk_id(self) -> str:
        return f"{self.doc_id}:{self.ordinal}"


@dataclass(frozen=True)
class ChunkingConfig:
    """Size knobs. ``overlap`` is a fraction of ``max_tokens`` (10-15 % is
    the usual starting point: enough to carry a sentence across a cut, small
    enough not to flood top-k with near duplicates)."""

    max_tokens: int = 350
    min_tokens: int = 40
    overlap: float = 0.12
    breadcrumb: bool = True

    def __post_init__(self) -> None:
        if self.max_tokens < 1:
            raise ValueError(f"max_tokens must be >= 1, got {self.max_tokens}")
        if not 0 <= self.min_tokens <= self.max_tokens:
            raise ValueError(f"min_tokens must be within 0..max_tokens, got {self.min_tokens}")
        if not 0.0 <= self.overlap < 0.5:
            raise ValueError(f"overlap must be within [0, 0.5), got {self.overlap}")

    @property
    def overlap_tokens(self) -> int:
        return round(self.overlap * self.max_tokens)


# --------------------------------------------------------------------------
# Line-based Markdown scanner
# --------------------------------------------------------------------------

_HEADING_RE = re.compile(r"^ {0,3}(#{1,6})(?=[ \t]|$)(.*)$")
_HEADING_CLOSE_RE = re.compile(r"(?:^|[ \t])#+[ \t]*$")
_FENCE_RE = re.compile(r"^([ \t]*)(`{3,}|~{3,})(.*)$")
_FENCE_CLOSE_RE = re.compile(r"^[ \t]*(`{3,}|~{3,})[ \t]*$")
_FOOTDEF_RE = re.compile(r"^ {0,3}\[\^([^\]\s]+)\]:")
_FOOTREF_RE = re.compile(r"\[\^([^\]\s]+)\](?!:)")
_LIST_RE = re.compile(r"^([ \t]*)(?:[-*+]|(\d{1,9})[.)])[ \t]+\S")
_HRULE_RE = re.compile(r"^ {0,3}([-*_])(?:[ \t]*\1){2,}[ \t]*$")
_TABLE_SEP_CELL_RE = re.compile(r"^[ \t]*:?-+:?[ \t]*$")
_CAPTION_RE = re.compile(r"^(?:\*\*|__)?(?:таблица|табл\.|table)\s*№?\s*\d", re.I)
_WORD_RE = re.compile(r"\S+")


@dataclass(frozen=True)
class _Line:
    start: int  # offset of the first char of the line
    end: int  # offset after the last char, newline and \r excluded
    text: str


@dataclass(frozen=True)
class _Block:
    kind: str  # heading | paragraph | table | code | list | footnote
    first: int  # first line index
    last: int  # last line index, inclusive
    start: int  # offset of the first non-space char
    end: int  # offset after the last non-space char
    level: int = 0  # heading level
    label: str = ""  # heading title / footnote id


def _split_lines(text: str) -> tuple[_Line, ...]:
    out: list[_Line] = []
    pos = 0
    for raw in text.split("\n"):
        content = raw[:-1] if raw.endswith("\r") else raw
        out.append(_Line(pos, pos + len(content), content))
        pos += len(raw) + 1
    return tuple(out)


def _indent(t: str) -> int:
    n = 0
    for ch in t:
        if ch == " ":
            n += 1
        elif ch == "\t":
            n += 4 - n % 4
        else:
            break
    return n


def _content_start(line: _Line) -> int:
    return line.start + len(line.text) - len(line.text.lstrip())


def _content_end(line: _Line) -> int:
    return line.start + len(line.text.rstrip())


def _open_fence(t: str, max_indent: int | None = 3) -> str | None:
    """Return the fence chars if ``t`` opens a fenced code block."""
    m = _FENCE_RE.match(t)
    if not m or (max_indent is not None and _indent(t) > max_indent):
        return None
    if m.group(2)[0] == "`" and "`" in m.group(3):
        return None  # ```inline``` on one line is not a fence
    return m.group(2)


def _closes_fence(t: str, fence: str) -> bool:
    m = _FENCE_CLOSE_RE.match(t)
    return bool(m) and m.group(1)[0] == fence[0] and len(m.group(1)) >= len(fence)


def _fence_end(lines: Sequence[_Line], i: int, fence: str) -> int:
    """Index of the closing fence line; an unclosed fence runs to the end."""
    for k in range(i + 1, len(lines)):
        if _closes_fence(lines[k].text, fence):
            return k
    k = len(lines) - 1
    while k > i and not lines[k].text.strip():
        k -= 1
    return k


def _is_table_sep(t: str) -> bool:
    s = t.strip()
    if "|" not in s or "-" not in s:
        return False
    if s.startswith("|"):
        s = s[1:]
    if s.endswith("|"):
        s = s[:-1]
    return all(_TABLE_SEP_CELL_RE.match(c) for c in s.split("|"))


def _is_table_start(lines: Sequence[_Line], k: int) -> bool:
    return k + 1 < len(lines) and "|" in lines[k].text and _is_table_sep(lines[k + 1].text)


def _starts_block(lines: Sequence[_Line], k: int) -> bool:
    """Whether line ``k`` interrupts a running paragraph."""
    t = lines[k].text
    if _HRULE_RE.match(t) or _HEADING_RE.match(t) or _FOOTDEF_RE.match(t):
        return True
    if _open_fence(t) is not None:
        return True
    m = _LIST_RE.match(t)
    if m and (m.group(2) is None or m.group(2) == "1"):
        return True  # as in CommonMark, only "1." may interrupt a paragraph
    return _is_table_start(lines, k)


def _list_end(lines: Sequence[_Line], i: int) -> int:
    base = _indent(lines[i].text)
    last = i
    k = i + 1
    while k < len(lines):
        t = lines[k].text
        if not t.strip():
            k += 1
            continue
        if _LIST_RE.match(t) and not _HRULE_RE.match(t):
            pass  # another item, at any depth
        elif _indent(t) > base:
            fence = _open_fence(t, max_indent=None)
            if fence is not None:  # fenced code inside an item: swallow whole
                k = _fence_end(lines, k, fence)
        elif k == last + 1 and not _starts_block(lines, k):
            pass  # lazy continuation line
        else:
            break
        last = k
        k += 1
    return last


def _footnote_end(lines: Sequence[_Line], i: int) -> int:
    last = i
    k = i + 1
    while k < len(lines):
        t = lines[k].text
        if not t.strip():
            k += 1
            continue
        if (k == last + 1 and not _starts_block(lines, k)) or (k > last + 1 and _indent(t) >= 2):
            pass
        else:
            break
        last = k
        k += 1
    return last


def _make_block(lines: Sequence[_Line], kind: str, i: int, j: int, level: int = 0, label: str = "") -> _Block:
    return _Block(kind, i, j, _content_start(lines[i]), _content_end(lines[j]), level, label)


def _scan_blocks(lines: Sequence[_Line]) -> tuple[_Block, ...]:
    blocks: list[_Block] = []
    n = len(lines)
    i = 0
    while i < n:
        t = lines[i].text
        if not t.strip() or _HRULE_RE.match(t):
            i += 1
            continue
        fence = _open_fence(t)
        hm = _HEADING_RE.match(t)
        fm = _FOOTDEF_RE.match(t)
        if fence is not None:
            j = _fence_end(lines, i, fence)
            blocks.append(_make_block(lines, "code", i, j))
        elif hm:
            title = _HEADING_CLOSE_RE.sub("", hm.group(2).strip()).strip()
            blocks.append(_make_block(lines, "heading", i, i, len(hm.group(1)), title))
            j = i
        elif fm:
            j = _footnote_end(lines, i)
            blocks.append(_make_block(lines, "footnote", i, j, label=fm.group(1)))
        elif _is_table_start(lines, i):
            j = i + 1
            while (
                j + 1 < n
                and lines[j + 1].text.strip()
                and "|" in lines[j + 1].text
                and not _HEADING_RE.match(lines[j + 1].text)
                and _open_fence(lines[j + 1].text) is None
            ):
                j += 1
            blocks.append(_make_block(lines, "table", i, j))
        elif _LIST_RE.match(t):
            j = _list_end(lines, i)
            blocks.append(_make_block(lines, "list", i, j))
        else:
            j = i
            while j + 1 < n and lines[j + 1].text.strip() and not _starts_block(lines, j + 1):
                j += 1
            blocks.append(_make_block(lines, "paragraph", i, j))
        i = j + 1
    return tuple(blocks)


@dataclass(frozen=True)
class _Parsed:
    lines: tuple[_Line, ...]
    blocks: tuple[_Block, ...]
    sections: tuple[Section, ...]
    own: tuple[tuple[int, ...], ...]  # per section: block indices it owns directly
    heading: tuple[int, ...]  # per section: its heading block index, -1 for root


def _parse(doc: Document) -> _Parsed:
    lines = _split_lines(doc.text)
    blocks = _scan_blocks(lines)
    heads = [bi for bi, b in enumerate(blocks) if b.kind == "heading"]
    sections: list[Section] = []
    own: list[tuple[int, ...]] = []
    heading: list[int] = []
    first = heads[0] if heads else len(blocks)
    if first > 0:
        sections.append(Section(f"{doc.doc_id}#root", (), 0, blocks[0].start, blocks[first - 1].end, None))
        own.append(tuple(range(first)))
        heading.append(-1)
    stack: list[tuple[int, str, tuple[str, ...]]] = []
    for n, bi in enumerate(heads):
        b = blocks[bi]
        while stack and stack[-1][0] >= b.level:
            stack.pop()
        parent = stack[-1][1] if stack else None
        path = (stack[-1][2] if stack else ()) + (b.label,)
        stop = next((h for h in heads[n + 1 :] if blocks[h].level <= b.level), len(blocks))
        sid = f"{doc.doc_id}#{n}"
        sections.append(Section(sid, path, b.level, lines[b.first].start, blocks[stop - 1].end, parent))
        nxt = heads[n + 1] if n + 1 < len(heads) else len(blocks)
        own.append(tuple(range(bi + 1, nxt)))
        heading.append(bi)
        stack.append((b.level, sid, path))
    return _Parsed(lines, blocks, tuple(sections), tuple(own), tuple(heading))


def parse_sections(doc: Document) -> list[Section]:
    """Sections in document order (root first when there is text before the
    first heading). Headings inside fenced code are not headings."""
    return list(_parse(doc).sections)


def _section_at(sections: Sequence[Section], pos: int) -> Section | None:
    """Deepest section containing ``pos`` (later one wins a tie)."""
    best: Section | None = None
    for s in sections:
        if s.start <= pos < max(s.end, s.start + 1) and (best is None or s.level >= best.level):
            best = s
    return best


# --------------------------------------------------------------------------
# Sentence / line / word splitting (the recursive fallback)
# --------------------------------------------------------------------------

_SENT_END_RE = re.compile(r"[.!?…]+[»\"”’)\]]*(?=\s)")
_SPACE_RE = re.compile(r"\s+")
_DOTTED_ABBR_RE = re.compile(r"^(?:[^\W\d_]{1,3}\.)+[^\W\d_]{1,3}$")
# Multi-letter abbreviations that end with a dot but rarely end a sentence.
# Single letters ("т. е.", "и т. д.", "г.", initials "А. С.") are handled by rule.
_ABBREVIATIONS = frozenset(
    [
        "гг",
        "вв",
        "см",
        "ср",
        "стр",
        "рис",
        "табл",
        "прим",
        "напр",
        "руб",
        "коп",
        "тыс",
        "млн",
        "млрд",
        "трлн",
        "др",
        "пр",
        "им",
        "ул",
        "кв",
        "обл",
        "респ",
        "проф",
        "акад",
        "доц",
        "ст",
        "пп",
        "гл",
        "разд",
        "илл",
        "мин",
        "сек",
        "изд",
        "ред",
        "сокр",
        "англ",
        "лат",
        "тел",
        "каб",
        "корп",
        "пос",
        "эт",
        "зам",
        "нач",
        "etc",
        "e.g",
        "i.e",
        "vs",
        "mr",
        "mrs",
        "dr",
        "no",
        "fig",
    ]
)


def _is_sentence_break(seg: str, m: re.Match[str], after: int) -> bool:
    if seg[after].islower():
        return False  # "... т. е. так", "2024 г. в ..." : a sentence starts upper-case
    if m.group().rstrip('»"”’)]') != ".":
        return True
    k = m.start()
    while k > 0 and not seg[k - 1].isspace():
        k -= 1
    word = seg[k : m.start()].lstrip("([«\"'“„")
    if len(word) == 1 and word.isalpha():
        return False  # т. д. / г. / initials
    return not (word.lower() in _ABBREVIATIONS or _DOTTED_ABBR_RE.match(word))


def _sentence_bounds(seg: str) -> list[tuple[int, int]]:
    """Sentence spans in ``seg`` (trimmed, local offsets)."""
    out: list[tuple[int, int]] = []
    cur = 0
    for m in _SENT_END_RE.finditer(seg):
        sp = _SPACE_RE.match(seg, m.end())
        after = sp.end() if sp else m.end()
        if after >= len(seg):
            break
        if _is_sentence_break(seg, m, after):
            out.append((cur, m.end()))
            cur = after
    out.append((cur, len(seg)))
    return [t for t in (_trim(seg, a, b) for a, b in out) if t]


def _trim(text: str, a: int, b: int) -> tuple[int, int] | None:
    while a < b and text[a].isspace():
        a += 1
    while b > a and text[b - 1].isspace():
        b -= 1
    return (a, b) if a < b else None


def _sentence_spans(text: str, s: int, e: int) -> list[tuple[int, int]]:
    return [(s + a, s + b) for a, b in _sentence_bounds(text[s:e])]


def _line_spans(text: str, s: int, e: int) -> list[tuple[int, int]]:
    out: list[tuple[int, int]] = []
    pos = s
    for raw in text[s:e].split("\n"):
        t = _trim(text, pos, pos + len(raw))
        if t:
            out.append(t)
        pos += len(raw) + 1
    return out


def _group_words(text: str, s: int, e: int, fits: Callable[[str], bool]) -> list[tuple[int, int]]:
    """Greedy word runs that fit; a word that alone does not fit stays whole."""
    words = [(m.start(), m.end()) for m in _WORD_RE.finditer(text, s, e)]
    out: list[tuple[int, int]] = []
    i = 0
    n = len(words)

    def ok(j: int) -> bool:
        return fits(text[words[i][0] : words[j][1]])

    while i < n:
        if not ok(i):
            out.append(words[i])
            i += 1
            continue
        good, step = i, 1
        while good + step < n and ok(good + step):  # gallop, then bisect
            good += step
            step *= 2
        lo, hi = good, min(good + step, n - 1)
        while lo < hi:
            mid = (lo + hi + 1) // 2
            if ok(mid):
                lo = mid
            else:
                hi = mid - 1
        out.append((words[i][0], words[lo][1]))
        i = lo + 1
    return out


def _split_units(
    text: str,
    s: int,
    e: int,
    fits: Callable[[str], bool],
    fits_tight: Callable[[str], bool],
    level: int = 0,
) -> list[tuple[int, int]]:
    """Recursive split: whole -> sentences -> lines -> word runs.

    Coarser separators are tried first because they carry more meaning; word
    runs are sized with ``fits_tight`` so that overlap still has room.
    """
    if fits(text[s:e]):
        return [(s, e)]
    if level >= 2:
        return _group_words(text, s, e, fits_tight)
    parts = _sentence_spans(text, s, e) if level == 0 else _line_spans(text, s, e)
    if len(parts) <= 1:
        return _split_units(text, s, e, fits, fits_tight, level + 1)
    out: list[tuple[int, int]] = []
    for a, b in parts:
        out.extend(_split_units(text, a, b, fits, fits_tight, level + 1))
    return out


def _group_spans(
    text: str, units: Sequence[tuple[int, int]], fits: Callable[[str], bool]
) -> list[tuple[int, int]]:
    out: list[tuple[int, int]] = []
    cur: tuple[int, int] | None = None
    for a, b in units:
        if cur is not None and fits(text[cur[0] : b]):
            cur = (cur[0], b)
            continue
        if cur is not None:
            out.append(cur)
        cur = (a, b)
    if cur is not None:
        out.append(cur)
    return out


def _prefixed(header: str, body: str) -> str:
    return f"{header}\n{body}" if header else body


# --------------------------------------------------------------------------
# Rendering context
# --------------------------------------------------------------------------


@dataclass(frozen=True)
class _Env:
    text: str
    lines: tuple[_Line, ...]
    config: ChunkingConfig
    count: TokenCounter
    notes: Mapping[str, str]  # movable footnote definitions by id

    def with_notes(self, body: str) -> str:
        """Append the definitions of footnotes referenced in ``body``."""
        if not self.notes:
            return body
        ids: list[str] = []
        for m in _FOOTREF_RE.finditer(body):
            if m.group(1) in self.notes and m.group(1) not in ids:
                ids.append(m.group(1))
        if not ids:
            return body
        return body + "\n\n" + "\n".join(self.notes[i] for i in ids)


@dataclass(frozen=True)
class _Frame:
    """Per-section rendering: breadcrumb + body + appended footnotes."""

    env: _Env
    crumb: str

    def render(self, body: str) -> str:
        body = self.env.with_notes(body)
        return f"{self.crumb}\n\n{body}" if self.crumb else body

    def tokens(self, body: str) -> int:
        return self.env.count(self.render(body))

    def fits(self, body: str) -> bool:
        return self.tokens(body) <= self.env.config.max_tokens

    def fits_tight(self, body: str) -> bool:
        cfg = self.env.config
        return self.tokens(body) + cfg.overlap_tokens <= cfg.max_tokens

    def budget(self) -> int:
        return self.env.config.max_tokens - self.env.count(self.render(""))


def _crumb(path: Sequence[str], config: ChunkingConfig, count: TokenCounter) -> str:
    """Breadcrumb line; outer levels are dropped if it would eat half the budget."""
    if not config.breadcrumb:
        return ""
    parts = list(path)
    while parts:
        line = " > ".join(parts)
        if count(line) <= config.max_tokens // 2:
            return line
        parts.pop(0)
    return ""


def _norm(s: str) -> str:
    return " ".join(s.replace("*", " ").replace("_", " ").replace("`", " ").split()).casefold()


def _chunk_path(doc: Document, section: Section) -> tuple[str, ...]:
    path = tuple(p for p in section.heading_path if p.strip())
    title = doc.title.strip()
    if title and not (path and _norm(path[0]) == _norm(title)):
        path = (title, *path)
    return path


# --------------------------------------------------------------------------
# Pieces: atomic, pre-sized parts of blocks that the packer combines
# --------------------------------------------------------------------------


@dataclass(frozen=True)
class _Piece:
    body: str
    start: int  # span of the *new* material in Document.text
    end: int
    kind: str  # text | table | code | list | heading | overlap
    block: int = -1  # source block, to restore original spacing


def _joiner(text: str, a: _Piece, b: _Piece) -> str:
    if a.block >= 0 and a.block == b.block and b.kind == "text":
        if a.kind == "overlap":
            return " "
        if a.kind == "text":
            gap = text[a.end : b.start]
            if gap and not gap.strip():
                return gap
    return "\n\n"


def _join(text: str, pieces: Sequence[_Piece]) -> str:
    parts = [pieces[0].body]
    for a, b in zip(pieces, pieces[1:]):
        parts.append(_joiner(text, a, b))
        parts.append(b.body)
    return "".join(parts)


def _para_pieces(env: _Env, frame: _Frame, s: int, e: int, bi: int) -> list[_Piece]:
    units = _split_units(env.text, s, e, frame.fits, frame.fits_tight)
    return [_Piece(env.text[a:b], a, b, "text", bi) for a, b in units]


def _table_pieces(
    env: _Env, frame: _Frame, block: _Block, intro: tuple[int, int] | None, bi: int
) -> list[_Piece]:
    """Split by rows; header + separator (+ caption) repeat in every piece."""
    text, L = env.text, env.lines
    lead = intro[0] if intro else block.start
    whole = text[lead : block.end]
    rows = range(block.first + 2, block.last + 1)
    if frame.fits(whole) or not rows:
        return [_Piece(whole, lead, block.end, "table", bi)]
    header = _prefixed(
        text[intro[0] : intro[1]] if intro else "",
        text[block.start : _content_end(L[block.first + 1])],
    )
    spans: list[tuple[int, int]] = []
    cur: tuple[int, int] | None = None
    for r in rows:
        s, e = L[r].start, _content_end(L[r])
        if cur is not None and frame.fits(f"{header}\n{text[cur[0] : e]}"):
            cur = (cur[0], e)
            continue
        if cur is not None:
            spans.append(cur)
        cur = (s, e)  # a row that does not fit even alone still stays whole
    if cur is not None:
        spans.append(cur)
    return [
        _Piece(f"{header}\n{text[s:e]}", lead if n == 0 else _content_start_at(text, s), e, "table", bi)
        for n, (s, e) in enumerate(spans)
    ]


def _content_start_at(text: str, pos: int) -> int:
    while pos < len(text) and text[pos] in " \t":
        pos += 1
    return pos


# ---- lists ---------------------------------------------------------------


@dataclass(frozen=True)
class _Item:
    first: int  # line index of the marker line
    start: int  # offset of that line's start (indentation kept for nesting)
    end: int
    head_end: int  # end of the lines before the first child item
    children: tuple[_Item, ...]


def _list_items(lines: Sequence[_Line], block: _Block) -> tuple[_Item, ...]:
    is_item: dict[int, bool] = {}
    fence: str | None = None
    for k in range(block.first, block.last + 1):
        t = lines[k].text
        if fence is not None:
            is_item[k] = False
            if _closes_fence(t, fence):
                fence = None
            continue
        f = _open_fence(t, max_indent=None)
        if f is not None:
            fence = f
            is_item[k] = False
            continue
        is_item[k] = bool(_LIST_RE.match(t)) and not _HRULE_RE.match(t)

    def last_nonblank(a: int, b: int) -> int:
        while b > a and not lines[b].text.strip():
            b -= 1
        return b

    def items(lo: int, hi: int) -> tuple[_Item, ...]:
        marks = [k for k in range(lo, hi + 1) if is_item[k]]
        if not marks:
            return ()
        lvl = min(_indent(lines[k].text) for k in marks)
        tops = [k for k in marks if _indent(lines[k].text) <= lvl + 1]
        out: list[_Item] = []
        for a, k in enumerate(tops):
            last = last_nonblank(k, tops[a + 1] - 1 if a + 1 < len(tops) else hi)
            kids = items(k + 1, last)
            head_last = last_nonblank(k, kids[0].first - 1) if kids else last
            out.append(
                _Item(
                    k,
                    lines[k].start,
                    _content_end(lines[last]),
                    _content_end(lines[head_last]),
                    kids,
                )
            )
        return tuple(out)

    return items(block.first, block.last)


def _split_items(env: _Env, frame: _Frame, items: Sequence[_Item], header: str) -> list[tuple[str, int, int]]:
    """Pack items greedily between item boundaries, ``header`` on every piece."""
    text = env.text
    out: list[tuple[str, int, int]] = []
    run: list[_Item] = []

    def flush() -> None:
        if run:
            out.append((_prefixed(header, text[run[0].start : run[-1].end]), run[0].start, run[-1].end))
            run.clear()

    for it in items:
        if run and frame.fits(_prefixed(header, text[run[0].start : it.end])):
            run.append(it)
            continue
        flush()
        if frame.fits(_prefixed(header, text[it.start : it.end])):
            run.append(it)
        else:
            out.extend(_split_big_item(env, frame, it, header))
    flush()
    return out


def _split_big_item(env: _Env, frame: _Frame, it: _Item, header: str) -> list[tuple[str, int, int]]:
    """An item that alone is too long: its sub-items go under a repeated
    parent line; an item without sub-items falls back to sentences/words."""
    text = env.text
    head = text[it.start : it.head_end]
    out: list[tuple[str, int, int]] = []
    if it.children:
        h2 = _prefixed(header, head)
        if frame.tokens(h2) <= env.config.max_tokens // 2:
            sub = _split_items(env, frame, it.children, h2)
            if sub:
                sub[0] = (sub[0][0], it.start, sub[0][2])  # the parent line is new here
            return sub

    def fits(b: str) -> bool:
        return frame.fits(_prefixed(header, b))

    def tight(b: str) -> bool:
        return frame.fits_tight(_prefixed(header, b))

    s = _content_start_at(text, it.start)
    units = _split_units(text, s, it.head_end, fits, tight)
    for a, b in _group_spans(text, units, fits):
        out.append((_prefixed(header, text[a:b]), a, b))
    if it.children:
        out.extend(_split_items(env, frame, it.children, header))
    return out


def _list_pieces(
    env: _Env, frame: _Frame, block: _Block, intro: tuple[int, int] | None, bi: int
) -> list[_Piece]:
    """Split between top-level items; the lead-in repeats in every piece."""
    text = env.text
    lead = intro[0] if intro else block.start
    whole = text[lead : block.end]
    if frame.fits(whole):
        return [_Piece(whole, lead, block.end, "list", bi)]
    header = text[intro[0] : intro[1]] if intro else ""
    raw = _split_items(env, frame, _list_items(env.lines, block), header)
    pieces = [_Piece(body, _content_start_at(text, s), e, "list", bi) for body, s, e in raw]
    if pieces:
        pieces[0] = _Piece(pieces[0].body, lead, pieces[0].end, "list", bi)
    return pieces


# ---- code ----------------------------------------------------------------

_DECORATOR_RE = re.compile(r"^@[\w.]+")
_UNIT_RE = re.compile(
    r"^(?:"
    r"(?:async\s+)?def\s+\w+"
    r"|(?:export\s+(?:default\s+)?)?(?:declare\s+)?(?:abstract\s+)?class\s+[\w$]+"
    r"|(?:export\s+(?:default\s+)?)?(?:async\s+)?function\b"
    r"|(?:export\s+)?(?:const|let|var)\s+[\w$]+\s*(?::[^=]*)?=\s*(?:async\s+)?function\b"
    r"|(?:export\s+)?(?:interface|enum)\s+[\w$]+"
    r"|func\s"
    r"|(?:pub(?:\([^)]*\))?\s+)?(?:async\s+)?(?:fn|struct|enum|trait|impl)\b"
    r")"
)
_ARROW_RE = re.compile(
    r"^(?:export\s+)?(?:const|let|var)\s+[\w$]+\s*(?::[^=]*)?=\s*(?:async\s+)?(?:\(|[\w$]+\s*=>)"
)
_CLASS_RE = re.compile(
    r"^(?:(?:export\s+(?:default\s+)?)?(?:declare\s+)?(?:abstract\s+)?class\s+[\w$]+"
    r"|(?:pub(?:\([^)]*\))?\s+)?(?:impl|trait)\b)"
)
_METHOD_RE = re.compile(
    r"^(?:(?:static|async|public|private|protected|readonly|override|get|set)\s+)*"
    r"(?!(?:if|for|while|switch|catch|return|function|else|do|try|new|await|typeof|throw)\b)"
    r"(?:constructor|[A-Za-z_$#][\w$]*)\s*(?:<[^>]*>)?\s*\([^;]*$"
)
_COMMENT_RE = re.compile(r"^(?:#(?!!)|//|/\*|\*|--\s)")
_TRAILING_COMMENT_RE = re.compile(r"\s+(?:#|//).*$")


def _is_unit_start(lines: Sequence[_Line], i: int, hi: int, member: bool) -> bool:
    s = lines[i].text.strip()
    if _DECORATOR_RE.match(s) or _UNIT_RE.match(s):
        return True
    if _ARROW_RE.match(s):
        return any("=>" in lines[k].text for k in range(i, min(hi, i + 3) + 1))
    return member and bool(_METHOD_RE.match(s))


def _unit_bounds(lines: Sequence[_Line], lo: int, hi: int, indent: int, member: bool) -> list[int]:
    """Lines that open a function/class at ``indent``; decorators and a
    directly preceding comment block travel with the definition."""
    nb = [i for i in range(lo, hi + 1) if lines[i].text.strip()]
    bounds: list[int] = []
    for idx, i in enumerate(nb):
        if _indent(lines[i].text) != indent or not _is_unit_start(lines, i, hi, member):
            continue
        if idx > 0:
            p = lines[nb[idx - 1]].text
            if _indent(p) == indent and _DECORATOR_RE.match(p.strip()):
                continue
        j = idx
        while (
            j > 0
            and nb[j - 1] == nb[j] - 1
            and _indent(lines[nb[j - 1]].text) == indent
            and _COMMENT_RE.match(lines[nb[j - 1]].text.strip())
        ):
            j -= 1
        bounds.append(nb[j])
    return bounds


def _ranges(lines: Sequence[_Line], starts: Sequence[int], hi: int) -> list[tuple[int, int]]:
    out: list[tuple[int, int]] = []
    for n, a in enumerate(starts):
        b = starts[n + 1] - 1 if n + 1 < len(starts) else hi
        while b > a and not lines[b].text.strip():
            b -= 1
        if lines[a].text.strip() or a < b:
            out.append((a, b))
    return out


_CodeFits = Callable[[int, int, tuple[str, ...]], bool]


def _signature(t: str) -> str:
    return _TRAILING_COMMENT_RE.sub("", t.rstrip())


def _pack_code(
    lines: Sequence[_Line],
    fits: _CodeFits,
    units: Sequence[tuple[int, int]],
    scopes: tuple[int, ...],
    level: str,
) -> list[tuple[int, int, tuple[str, ...]]]:
    def ctx(a: int) -> tuple[str, ...]:
        return tuple(_signature(lines[k].text) for k in scopes if k < a)

    out: list[tuple[int, int, tuple[str, ...]]] = []
    cur: tuple[int, int] | None = None
    for a, b in units:
        if cur is not None and fits(cur[0], b, ctx(cur[0])):
            cur = (cur[0], b)
            continue
        if cur is not None:
            out.append((cur[0], cur[1], ctx(cur[0])))
            cur = None
        if fits(a, b, ctx(a)):
            cur = (a, b)
        elif level == "line":
            out.append((a, b, ctx(a)))  # one over-long line: kept whole
        else:
            out.extend(_split_code_unit(lines, fits, a, b, scopes, level))
    if cur is not None:
        out.append((cur[0], cur[1], ctx(cur[0])))
    return out


def _split_code_unit(
    lines: Sequence[_Line],
    fits: _CodeFits,
    a: int,
    b: int,
    scopes: tuple[int, ...],
    level: str,
) -> list[tuple[int, int, tuple[str, ...]]]:
    """A unit that does not fit: a class splits at its members (the class
    line is carried into later pieces); a function at its top-level
    statements (its signature carried); whatever is left, by lines."""
    sig = next(
        (
            i
            for i in range(a, b + 1)
            if lines[i].text.strip()
            and not _DECORATOR_RE.match(lines[i].text.strip())
            and not _COMMENT_RE.match(lines[i].text.strip())
        ),
        None,
    )
    if level == "statement":
        units = [(i, i) for i in range(a, b + 1) if lines[i].text.strip()]
        return _pack_code(lines, fits, units, scopes, "line")
    if sig is not None and _CLASS_RE.match(lines[sig].text.strip()):
        base = _indent(lines[sig].text)
        member_indent = next(
            (
                _indent(lines[i].text)
                for i in range(sig + 1, b + 1)
                if lines[i].text.strip() and _indent(lines[i].text) > base
            ),
            None,
        )
        if member_indent is not None:
            bounds = [x for x in _unit_bounds(lines, sig + 1, b, member_indent, True) if x > a]
            if bounds:
                units = _ranges(lines, [a, *bounds], b)
                return _pack_code(lines, fits, units, (*scopes, sig), "member")
    inner = scopes
    if sig is not None and _is_unit_start(lines, sig, b, True):
        inner = (*scopes, sig)
        if level != "statement":
            starts = _statement_starts(lines, sig, b)
            if starts:
                units = _ranges(lines, [a, *starts], b)
                return _pack_code(lines, fits, units, inner, "statement")
    units = [(i, i) for i in range(a, b + 1) if lines[i].text.strip()]
    return _pack_code(lines, fits, units, inner, "line")


_CONTINUATION_RE = re.compile(r"^(?:[)\]}]|else\b|elif\b|except\b|finally\b|catch\b|\.|&&|\|\||\+|\?|:)")


def _statement_starts(lines: Sequence[_Line], sig: int, b: int) -> list[int]:
    """Top-level statements of a function body: the "logical blocks" to cut
    between before falling back to single lines."""
    body = [i for i in range(sig + 1, b + 1) if lines[i].text.strip()]
    if not body:
        return []
    base = _indent(lines[sig].text)
    indent = next((_indent(lines[i].text) for i in body if _indent(lines[i].text) > base), None)
    if indent is None:
        return []
    out: list[int] = []
    for n, i in enumerate(body):
        t = lines[i].text
        if n == 0 or _indent(t) != indent or _CONTINUATION_RE.match(t.strip()):
            continue
        prev = lines[body[n - 1]].text.rstrip()
        if prev.endswith(("(", "[", "{", ",", "\\")) and _indent(lines[body[n - 1]].text) == indent:
            continue  # still inside a bracketed expression
        out.append(i)
    return out


def _code_pieces(
    env: _Env, frame: _Frame, block: _Block, intro: tuple[int, int] | None, bi: int
) -> list[_Piece]:
    """Whole when it fits; else at top-level def/class boundaries, each piece
    re-fenced with the original opener; lines only as the last resort."""
    text, L = env.text, env.lines
    lead = intro[0] if intro else block.start
    whole = text[lead : block.end]
    if frame.fits(whole) or block.last == block.first:
        return [_Piece(whole, lead, block.end, "code", bi)]
    opener = L[block.first].text.strip()
    fence = _open_fence(L[block.first].text) or "```"
    closed = _closes_fence(L[block.last].text, fence)
    lo, hi = block.first + 1, block.last - 1 if closed else block.last
    while lo <= hi and not L[lo].text.strip():
        lo += 1
    while hi >= lo and not L[hi].text.strip():
        hi -= 1
    if lo > hi:
        return [_Piece(whole, lead, block.end, "code", bi)]
    intro_text = text[intro[0] : intro[1]] if intro else ""

    def render(a: int, b: int, ctx: tuple[str, ...]) -> str:
        code = text[L[a].start : _content_end(L[b])]
        return _prefixed(intro_text, "\n".join((opener, *ctx, code, fence)))

    def fits(a: int, b: int, ctx: tuple[str, ...]) -> bool:
        return frame.fits(render(a, b, ctx))

    indent = min(_indent(L[i].text) for i in range(lo, hi + 1) if L[i].text.strip())
    units = _ranges(L, [lo, *[x for x in _unit_bounds(L, lo, hi, indent, False) if x > lo]], hi)
    out: list[_Piece] = []
    for a, b, ctx in _pack_code(L, fits, units, (), "unit"):
        start = lead if a == lo else _content_start(L[a])
        end = block.end if b == hi else _content_end(L[b])
        out.append(_Piece(render(a, b, ctx), start, end, "code", bi))
    return out


# ---- sections ------------------------------------------------------------


def _ends_with_colon(s: str) -> bool:
    return s.rstrip().rstrip("*_").rstrip().endswith((":", "："))


def _intro_span(env: _Env, frame: _Frame, para: _Block, kind: str) -> tuple[int, int] | None:
    """The lead-in / caption that must travel with a following structure.

    Short enough (<= 1/3 of the body budget) to be repeated in every piece;
    of a longer paragraph only its last sentence is taken."""
    text = env.text
    ptext = text[para.start : para.end]
    colon = _ends_with_colon(ptext)
    if not (colon or (kind == "table" and _CAPTION_RE.match(ptext))):
        return None
    limit = max(1, frame.budget() // 3)
    if env.count(ptext) <= limit:
        return (para.start, para.end)
    if colon:
        sents = _sentence_spans(text, para.start, para.end)
        if len(sents) > 1 and env.count(text[sents[-1][0] : sents[-1][1]]) <= limit:
            return sents[-1]
    return None


_StructBuilder = Callable[[_Env, _Frame, _Block, "tuple[int, int] | None", int], list[_Piece]]


def _section_pieces(env: _Env, frame: _Frame, blocks: Sequence[tuple[int, _Block]]) -> list[_Piece]:
    """Blocks of one section -> pieces, lead-ins/captions attached to the
    structure they introduce."""
    text = env.text
    builders: dict[str, _StructBuilder] = {
        "table": _table_pieces,
        "list": _list_pieces,
        "code": _code_pieces,
    }
    para: dict[int, tuple[int, int] | None] = {}
    struct: dict[int, list[_Piece]] = {}
    for idx, (bi, blk) in enumerate(blocks):
        if blk.kind in ("paragraph", "footnote"):
            para[idx] = (blk.start, blk.end)
            continue
        build = builders.get(blk.kind)
        if build is None:
            continue
        plain = build(env, frame, blk, None, bi)
        struct[idx] = plain
        prev = blocks[idx - 1][1] if idx > 0 else None
        if prev is None or prev.kind != "paragraph" or para.get(idx - 1) != (prev.start, prev.end):
            continue
        span = _intro_span(env, frame, prev, blk.kind)
        if span is None:
            continue
        framed = build(env, frame, blk, span, bi)
        if _overflow(frame, framed) > _overflow(frame, plain):
            continue  # the lead-in would push pieces over the limit: keep it as prose
        struct[idx] = framed
        para[idx - 1] = None if span[0] <= prev.start else _trim(text, prev.start, span[0])
    pieces: list[_Piece] = []
    for idx, (bi, _blk) in enumerate(blocks):
        if idx in struct:
            pieces.extend(struct[idx])
        elif para.get(idx):
            s, e = para[idx]  # type: ignore[misc]
            pieces.extend(_para_pieces(env, frame, s, e, bi))
    return pieces


def _overflow(frame: _Frame, pieces: Sequence[_Piece]) -> int:
    return sum(not frame.fits(p.body) for p in pieces)


# --------------------------------------------------------------------------
# Packing, overlap, small-chunk merging
# --------------------------------------------------------------------------

_Draft = list[_Piece]


def _tail(s: str, target: int, count: TokenCounter) -> str:
    """Longest suffix of ``s`` within ``target`` tokens, starting at a
    sentence start when that keeps at least half the target, else at a word."""
    if target <= 0:
        return ""
    word_pos: int | None = None
    for m in reversed(list(_WORD_RE.finditer(s))[1:]):
        if count(s[m.start() :]) > target:
            break
        word_pos = m.start()
    if word_pos is None:
        return ""
    for a, _ in _sentence_bounds(s):
        if a >= word_pos:
            if a > 0 and 2 * count(s[a:]) >= target:
                return s[a:]
            break
    return s[word_pos:]


def _with_overlap(env: _Env, frame: _Frame, prev: _Draft, piece: _Piece) -> _Draft:
    """Start a new chunk; prose continuing prose repeats the previous tail."""
    if piece.kind != "text" or prev[-1].kind != "text":
        return [piece]
    run: list[_Piece] = []
    for p in reversed(prev):
        if p.kind not in ("text", "overlap"):
            break
        run.insert(0, p)
    tail = _tail(_join(env.text, run), env.config.overlap_tokens, env.count)
    while tail:
        ov = _Piece(tail, prev[-1].end, prev[-1].end, "overlap", prev[-1].block)
        if frame.fits(_join(env.text, [ov, piece])):
            return [ov, piece]
        words = tail.split(None, 1)
        tail = words[1] if len(words) > 1 else ""
    return [piece]


def _pack(env: _Env, frame: _Frame, pieces: Sequence[_Piece]) -> list[_Draft]:
    """Greedy: add pieces while the rendered chunk fits max_tokens."""
    drafts: list[_Draft] = []
    cur: _Draft = []
    for p in pieces:
        if cur and frame.fits(_join(env.text, [*cur, p])):
            cur.append(p)
            continue
        if cur:
            drafts.append(cur)
            cur = _with_overlap(env, frame, cur, p)
        else:
            cur = [p]
    if cur:
        drafts.append(cur)
    return drafts


def _merged(a: _Draft, b: _Draft) -> _Draft:
    return [*a, *(p for p in b if p.kind != "overlap")]


def _merge_small(env: _Env, frame: _Frame, drafts: list[_Draft]) -> list[_Draft]:
    """Chunks under min_tokens join a neighbour in the same section
    (previous first) when the result still fits."""
    out = list(drafts)
    i = 0
    while i < len(out):
        if len(out) > 1 and frame.tokens(_join(env.text, out[i])) < env.config.min_tokens:
            if i > 0:
                m = _merged(out[i - 1], out[i])
                if frame.fits(_join(env.text, m)):
                    out[i - 1 : i + 1] = [m]
                    continue
            if i + 1 < len(out):
                m = _merged(out[i], out[i + 1])
                if frame.fits(_join(env.text, m)):
                    out[i : i + 2] = [m]
                    continue
        i += 1
    return out


@dataclass(frozen=True)
class _Group:
    section: Section
    path: tuple[str, ...]
    frame: _Frame
    drafts: tuple[_Draft, ...]


def _merge_tiny_sections(env: _Env, parsed: _Parsed, groups: list[_Group]) -> list[_Group]:
    """A section that is one chunk under min_tokens absorbs the first chunk of
    the following section when that one is its child or later sibling (or
    their descendant); the merged chunk keeps the first breadcrumb and
    carries the absorbed headings as Markdown lines."""
    by_id = {s.section_id: s for s in parsed.sections}

    def inside(sec: Section, ancestor: str | None) -> bool:
        if ancestor is None:
            return True
        p = sec.parent_id
        while p is not None:
            if p == ancestor:
                return True
            p = by_id[p].parent_id
        return False

    heading_of = {s.section_id: parsed.heading[n] for n, s in enumerate(parsed.sections)}
    out = list(groups)
    for idx in range(len(out)):
        g = out[idx]
        if len(g.drafts) != 1:
            continue
        draft = g.drafts[0]
        j = idx + 1
        while g.frame.tokens(_join(env.text, draft)) < env.config.min_tokens:
            k = j
            while k < len(out) and not out[k].drafts:
                k += 1
            if k >= len(out) or not inside(out[k].section, g.section.parent_id):
                break
            heads: list[_Piece] = []
            for m in range(j, k + 1):
                hb = heading_of[out[m].section.section_id]
                if hb >= 0:
                    b = parsed.blocks[hb]
                    heads.append(_Piece(env.text[b.start : b.end], b.start, b.end, "heading"))
            cand = _merged([*draft, *heads], out[k].drafts[0])
            if not g.frame.fits(_join(env.text, cand)):
                break
            draft = cand
            rest = out[k].drafts[1:]
            out[k] = _Group(out[k].section, out[k].path, out[k].frame, rest)
            j = k + 1
            if rest:
                break
        out[idx] = _Group(g.section, g.path, g.frame, (draft,))
    return out


def _kind(pieces: Sequence[_Piece]) -> str:
    kinds = {p.kind for p in pieces if p.kind not in ("overlap", "heading")}
    if not kinds:
        return "text"
    return kinds.pop() if len(kinds) == 1 else "mixed"


def _emit(
    doc: Document,
    env: _Env,
    items: Sequence[tuple[_Draft, _Frame, tuple[str, ...], str, str | None]],
) -> list[Chunk]:
    out: list[Chunk] = []
    for draft, frame, path, sid, parent in items:
        body = env.with_notes(_join(env.text, draft))
        if not body.strip():
            continue
        new = [p for p in draft if p.kind != "overlap"]
        text = f"{frame.crumb}\n\n{body}" if frame.crumb else body
        out.append(
            Chunk(
                doc_id=doc.doc_id,
                ordinal=len(out),
                text=text,
                body=body,
                heading_path=path,
                section_id=sid,
                parent_section_id=parent,
                kind=_kind(draft),
                start=min(p.start for p in new),
                end=max(p.end for p in new),
                token_count=env.count(text),
            )
        )
    return out


def _movable_notes(
    text: str, blocks: Sequence[_Block], limit: int, count: TokenCounter
) -> tuple[dict[str, str], frozenset[int]]:
    """Footnote definitions that move next to their references: referenced
    and small (<= ``limit`` tokens). Others stay where they are, as prose."""
    defs: dict[str, int] = {}
    refs: set[str] = set()
    for bi, b in enumerate(blocks):
        if b.kind == "footnote":
            defs.setdefault(b.label, bi)
        else:
            refs.update(m.group(1) for m in _FOOTREF_RE.finditer(text, b.start, b.end))
    notes: dict[str, str] = {}
    moved: set[int] = set()
    for label, bi in defs.items():
        body = text[blocks[bi].start : blocks[bi].end]
        if label in refs and count(body) <= limit:
            notes[label] = body
            moved.add(bi)
    return notes, frozenset(moved)


# --------------------------------------------------------------------------
# Public chunkers
# --------------------------------------------------------------------------


def chunk_markdown(
    doc: Document,
    config: ChunkingConfig = ChunkingConfig(),
    count: TokenCounter = simple_token_count,
) -> list[Chunk]:
    """Structure-aware chunks: by headings, then blocks packed up to
    ``max_tokens`` (tables/code/lists split at their own boundaries).

    ``max_tokens`` holds for every chunk except, by design, (a) a single
    whitespace-free word longer than the limit, which is never cut, and
    (b) a single table row or code line that cannot fit even next to its
    mandatory context (breadcrumb + table header, or fence + carried
    signature). A breadcrumb longer than half the limit loses its outer
    levels in ``text`` (``heading_path`` stays complete)."""
    if not doc.text.strip():
        return []
    parsed = _parse(doc)
    notes, moved = _movable_notes(doc.text, parsed.blocks, max(1, config.max_tokens // 3), count)
    env = _Env(doc.text, parsed.lines, config, count, notes)
    groups: list[_Group] = []
    for sec, own in zip(parsed.sections, parsed.own):
        path = _chunk_path(doc, sec)
        frame = _Frame(env, _crumb(path, config, count))
        blocks = [(bi, parsed.blocks[bi]) for bi in own if bi not in moved]
        drafts = _merge_small(env, frame, _pack(env, frame, _section_pieces(env, frame, blocks)))
        groups.append(_Group(sec, path, frame, tuple(drafts)))
    groups = _merge_tiny_sections(env, parsed, groups)
    return _emit(
        doc,
        env,
        [(d, g.frame, g.path, g.section.section_id, g.section.parent_id) for g in groups for d in g.drafts],
    )


def chunk_text(
    doc: Document,
    config: ChunkingConfig = ChunkingConfig(),
    count: TokenCounter = simple_token_count,
) -> list[Chunk]:
    """Recursive fallback for unstructured text: paragraph -> sentence ->
    line -> words, with overlap. Never cuts inside a word; a single word
    longer than ``max_tokens`` becomes its own (over-limit) chunk."""
    text = doc.text
    if not text.strip():
        return []
    lines = _split_lines(text)
    env = _Env(text, lines, config, count, {})
    title = doc.title.strip()
    path = (title,) if title else ()
    frame = _Frame(env, _crumb(path, config, count))
    pieces: list[_Piece] = []
    i, bi = 0, 0
    while i < len(lines):
        if not lines[i].text.strip():
            i += 1
            continue
        j = i
        while j + 1 < len(lines) and lines[j + 1].text.strip():
            j += 1
        pieces.extend(_para_pieces(env, frame, _content_start(lines[i]), _content_end(lines[j]), bi))
        bi += 1
        i = j + 1
    drafts = _merge_small(env, frame, _pack(env, frame, pieces))
    sections = parse_sections(doc)
    items = []
    for d in drafts:
        sec = _section_at(sections, min(p.start for p in d if p.kind != "overlap"))
        sid = sec.section_id if sec else f"{doc.doc_id}#root"
        items.append((d, frame, path, sid, sec.parent_id if sec else None))
    return _emit(doc, env, items)


def chunk_fixed(
    doc: Document,
    size_chars: int = 1200,
    overlap_chars: int = 150,
    count: TokenCounter = simple_token_count,
) -> list[Chunk]:
    """Eval baseline: plain character windows, blind to structure on purpose
    (it may cut words, rows and code). Windows are trimmed of surrounding
    whitespace; no breadcrumb; ``section_id`` is the section holding the start."""
    if size_chars < 1:
        raise ValueError(f"size_chars must be >= 1, got {size_chars}")
    if not 0 <= overlap_chars < size_chars:
        raise ValueError(f"overlap_chars must be within 0..size_chars-1, got {overlap_chars}")
    text = doc.text
    if not text.strip():
        return []
    sections = parse_sections(doc)
    step = size_chars - overlap_chars
    out: list[Chunk] = []
    pos = 0
    while True:
        end = min(pos + size_chars, len(text))
        span = _trim(text, pos, end)
        if span:
            s, e = span
            sec = _section_at(sections, s)
            body = text[s:e]
            out.append(
                Chunk(
                    doc_id=doc.doc_id,
                    ordinal=len(out),
                    text=body,
                    body=body,
                    heading_path=(),
                    section_id=sec.section_id if sec else f"{doc.doc_id}#root",
                    parent_section_id=sec.parent_id if sec else None,
                    kind="text",
                    start=s,
                    end=e,
                    token_count=count(body),
                )
            )
        if end >= len(text):
            break
        pos += step
    return out


STRATEGIES: tuple[str, ...] = ("markdown", "text", "fixed")


def chunk_document(
    doc: Document,
    strategy: str = "markdown",
    config: ChunkingConfig = ChunkingConfig(),
    count: TokenCounter = simple_token_count,
) -> list[Chunk]:
    """Dispatch by strategy name (``STRATEGIES``); ``fixed`` uses its defaults."""
    if strategy == "markdown":
        return chunk_markdown(doc, config, count)
    if strategy == "text":
        return chunk_text(doc, config, count)
    if strategy == "fixed":
        return chunk_fixed(doc, count=count)
    raise ValueError(f"unknown chunking strategy {strategy!r}; expected one of {STRATEGIES}")
