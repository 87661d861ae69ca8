"""Markdown structure for the chunker: lines -> blocks -> sections, from markdown-it tokens.

``osrag.chunking.parser`` parses (CommonMark + GFM tables + footnotes, lenient about backticks in
a fence's info string); this module turns its top-level block tokens into the chunker's blocks
(heading, paragraph, table, code, list, footnote) with exact line and character spans, lists into
their item tree, and headings into sections with a title and an anchor (``{#id}`` when the heading
gives one, else a GitHub-style slug, numbered when repeated).
"""

from __future__ import annotations

import re
import threading
from collections import OrderedDict
from collections.abc import Sequence
from dataclasses import dataclass

from markdown_it.token import Token

from osrag.chunking.model import Document, Section
from osrag.chunking.parser import block_tokens, inline_text

# Footnote references in chunk text (``[^n]``), to append the note's text after its reference.
FOOTREF_RE = re.compile(r"\[\^([^\]\s]+)\](?!:)")
_FOOTDEF_RE = re.compile(r"^ {0,3}\[\^([^\]\s]+)\]:")
# A table caption in prose ("Таблица 3 — …"), which travels with the table after it.
CAPTION_RE = re.compile(r"^(?:\*\*|__)?(?:таблица|табл\.|table)\s*№?\s*\d", re.I)
# An explicit heading id at the end of a heading: {#id}, {#id .class}, {: #id}.
_HEADING_ID_RE = re.compile(r"\s*\{:?\s*#([^\s{}]+)[^{}]*\}[\s\]}]*$")


@dataclass(frozen=True)
class Line:
    start: int  # offset of the first char of the line
    end: int  # offset after the last char, newline and \r excluded
    text: str


@dataclass(frozen=True)
class Item:
    first: int  # line index of the marker line
    start: int  # offset of that line's start (indentation kept for nesting)
    end: int
    head_end: int  # end of the lines before the first child item
    children: tuple[Item, ...]


@dataclass(frozen=True)
class Block:
    kind: str  # heading | paragraph | table | code | list | footnote
    first: int  # first line index
    last: int  # last line index, inclusive
    start: int  # offset of the first non-space char
    end: int  # offset after the last non-space char
    level: int = 0  # heading level
    label: str = ""  # heading title (plain text) / footnote id
    anchor: str = ""  # heading anchor as written ({#id}); "" when the heading gives none
    fence: str = ""  # code: the opening fence (``` / ~~~~), "" for indented code
    closed: bool = True  # code: whether the fence has a closing line
    items: tuple[Item, ...] = ()  # list: its items, nested


def split_lines(text: str) -> tuple[Line, ...]:
    out: list[Line] = []
    pos = 0
    for raw in text.split("\n"):
        content = raw[:-1] if raw.endswith("\r") else raw
        out.append(Line(pos, pos + len(content), content))
        pos += len(raw) + 1
    return tuple(out)


def indent_width(t: str) -> int:
    n = 0
    for ch in t:
        if ch == " ":
            n += 1
        elif ch == "\t":
            n += 4 - n % 4
        else:
            break
    return n


def content_start(line: Line) -> int:
    return line.start + len(line.text) - len(line.text.lstrip())


def content_end(line: Line) -> int:
    return line.start + len(line.text.rstrip())


def _last_nonblank(lines: Sequence[Line], a: int, b: int) -> int:
    """Last non-blank line index within ``a..b`` (``a`` when all are blank)."""
    b = min(b, len(lines) - 1)
    while b > a and not lines[b].text.strip():
        b -= 1
    return b


def heading_label(source: str) -> tuple[str, str]:
    """(plain title, explicit anchor or "") of a heading's inline source."""
    m = _HEADING_ID_RE.search(source)
    anchor = ""
    if m:
        anchor, source = m.group(1), source[: m.start()]
    return inline_text(source), anchor


def slugify(text: str) -> str:
    """GitHub-style heading slug: lower case, word characters and hyphens, spaces to hyphens."""
    kept = "".join(ch for ch in text.strip().lower() if ch.isalnum() or ch in "_- ")
    return kept.replace(" ", "-")


def _is_fence_close(line: str, fence: str) -> bool:
    s = line.strip()
    return len(s) >= len(fence) and s == fence[0] * len(s)


def _list_items(tokens: Sequence[Token], i: int, j: int, lines: Sequence[Line]) -> tuple[Item, ...]:
    """The item tree of the list whose tokens are ``tokens[i:j]``, from the items' own line maps."""
    stack: list[tuple[Token, list[Item]]] = []
    top: list[Item] = []
    for tok in tokens[i:j]:
        if tok.type == "list_item_open" and tok.map:
            stack.append((tok, []))
        elif tok.type == "list_item_close" and stack:
            opened, kids = stack.pop()
            a, b = opened.map  # type: ignore[misc]
            last = _last_nonblank(lines, a, b - 1)
            head_last = _last_nonblank(lines, a, kids[0].first - 1) if kids else last
            item = Item(
                a, lines[a].start, content_end(lines[last]), content_end(lines[head_last]), tuple(kids)
            )
            (stack[-1][1] if stack else top).append(item)
    return tuple(top)


def _block(lines: Sequence[Line], kind: str, a: int, b: int, **kw: object) -> Block:
    last = _last_nonblank(lines, a, b)
    return Block(kind, a, last, content_start(lines[a]), content_end(lines[last]), **kw)  # type: ignore[arg-type]


def _scan_blocks(text: str, lines: Sequence[Line]) -> tuple[Block, ...]:
    """Top-level blocks in line order. Lines the parser gives no token still become blocks, so no
    text is lost: footnote definitions (the footnote plugin keeps them out of the block tokens
    while inline parsing is off), link reference definitions."""
    tokens = block_tokens(text)
    found: list[Block] = []
    i, n = 0, len(tokens)
    while i < n:
        tok = tokens[i]
        if tok.level != 0 or tok.nesting < 0 or not tok.map:
            i += 1
            continue
        a, b = tok.map[0], tok.map[1] - 1
        j = i + 1
        if tok.nesting == 1:  # past the matching close: the next level-0 closing token
            while j < n and not (tokens[j].level == 0 and tokens[j].nesting == -1):
                j += 1
            j += 1
        t = tok.type
        if t == "heading_open":
            label, anchor = heading_label(tokens[i + 1].content if i + 1 < n else "")
            found.append(_block(lines, "heading", a, a, level=int(tok.tag[1:]), label=label, anchor=anchor))
        elif t in ("fence", "code_block"):
            fence = tok.markup if t == "fence" else ""
            last = _last_nonblank(lines, a, b)
            closed = t != "fence" or (last > a and _is_fence_close(lines[last].text, fence))
            found.append(_block(lines, "code", a, b, fence=fence, closed=closed))
        elif t in ("bullet_list_open", "ordered_list_open"):
            found.append(_block(lines, "list", a, b, items=_list_items(tokens, i, j, lines)))
        elif t == "table_open":
            found.append(_block(lines, "table", a, b))
        elif t != "hr":
            found.append(_block(lines, "paragraph", a, b))
        i = j
    return _fill_gaps(lines, sorted(found, key=lambda blk: blk.first))


def _fill_gaps(lines: Sequence[Line], blocks: Sequence[Block]) -> tuple[Block, ...]:
    out: list[Block] = []
    k = 0
    for blk in (*blocks, None):
        stop = blk.first if blk is not None else len(lines)
        while k < stop:
            if not lines[k].text.strip():
                k += 1
                continue
            e = k
            while e + 1 < stop and lines[e + 1].text.strip() and not _FOOTDEF_RE.match(lines[e + 1].text):
                e += 1
            m = _FOOTDEF_RE.match(lines[k].text)
            out.append(_block(lines, "footnote" if m else "paragraph", k, e, label=m.group(1) if m else ""))
            k = e + 1
        if blk is not None:
            out.append(blk)
            k = max(k, blk.last + 1)
    return tuple(out)


@dataclass(frozen=True)
class Parsed:
    lines: tuple[Line, ...]
    blocks: tuple[Block, ...]
    sections: tuple[Section, ...]
    own: tuple[tuple[int, ...], ...]  # per section: block indices it owns directly
    heading: tuple[int, ...]  # per section: its heading block index, -1 for root


def _anchors(blocks: Sequence[Block], heads: Sequence[int]) -> list[str]:
    """Each heading's anchor: its explicit id, else its slug ("-1", "-2" on repeats, as GitHub)."""
    used: dict[str, int] = {}
    out: list[str] = []
    for bi in heads:
        b = blocks[bi]
        if b.anchor:
            out.append(b.anchor)
            used.setdefault(b.anchor, 0)
            continue
        slug = slugify(b.label)
        if slug in used:
            used[slug] += 1
            slug = f"{slug}-{used[slug]}"
        used.setdefault(slug, 0)
        out.append(slug)
    return out


#: How many texts' lines and blocks are remembered: the title and the chunker read the same text
#: right after each other (``osrag.ingest.documents.read_document``, then the chunk stage).
RECENT_SCANS = 2
_SCANS: OrderedDict[str, tuple[tuple[Line, ...], tuple[Block, ...]]] = OrderedDict()
_SCANS_LOCK = threading.Lock()


def _lines_and_blocks(text: str) -> tuple[tuple[Line, ...], tuple[Block, ...]]:
    """``split_lines`` and ``_scan_blocks`` of ``text``, the last few remembered (both immutable)."""
    with _SCANS_LOCK:
        got = _SCANS.get(text)
        if got is not None:
            _SCANS.move_to_end(text)
            return got
    lines = split_lines(text)
    got = (lines, _scan_blocks(text, lines))
    with _SCANS_LOCK:
        _SCANS[text] = got
        while len(_SCANS) > RECENT_SCANS:
            _SCANS.popitem(last=False)
    return got


def parse_document(doc: Document) -> Parsed:
    lines, blocks = _lines_and_blocks(doc.text)
    heads = [bi for bi, b in enumerate(blocks) if b.kind == "heading"]
    anchors = _anchors(blocks, heads)
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
        end = blocks[stop - 1].end
        sections.append(Section(sid, path, b.level, lines[b.first].start, end, parent, anchors[n]))
        nxt = heads[n + 1] if n + 1 < len(heads) else len(blocks)
        own.append(tuple(range(bi + 1, nxt)))
        heading.append(bi)
        stack.append((b.level, sid, path))
    return Parsed(lines, blocks, tuple(sections), tuple(own), tuple(heading))


def parse_sections(doc: Document) -> list[Section]:
    """Sections in document order (root first when there is text before the
    first heading). Headings inside fenced code are not headings."""
    return list(parse_document(doc).sections)


def markdown_title(text: str) -> str | None:
    """The title a Markdown body gives itself: its first H1, else the first heading of the
    shallowest level it uses; a heading needs a letter or digit to count. Never a line of code
    (``# comment`` in a fence is code to the parser). None when it has no such heading."""
    heads = [
        b for b in _lines_and_blocks(text)[1] if b.kind == "heading" and any(c.isalnum() for c in b.label)
    ]
    if not heads:
        return None
    top = min(b.level for b in heads)
    return next(b.label for b in heads if b.level == top)


def section_at(sections: Sequence[Section], pos: int) -> Section | None:
    """Deepest section containing ``pos`` (later one wins a tie)."""
    best: Section | None = None
    for s in sections:
        if s.start <= pos < max(s.end, s.start + 1) and (best is None or s.level >= best.level):
            best = s
    return best
