"""Line-based Markdown scanner: lines -> blocks -> sections.

No third-party Markdown parser: the scanner knows exactly the constructs the
chunking rules need (ATX headings, ``` / ~~~ fences, pipe tables, ``-``/``*``/``+``/
``1.`` lists nested by indentation, ``[^n]:`` footnotes, paragraphs).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

from osrag.chunking.model import Document, Section

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
