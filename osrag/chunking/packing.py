"""Packing pieces into chunks: greedy fill, prose overlap, small-chunk and tiny-section
merging, and emitting ``Chunk`` objects with exact spans.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from osrag.chunking.frame import Env, Frame, Piece, join_pieces
from osrag.chunking.markdown import FOOTREF_RE, Block, Parsed
from osrag.chunking.model import MAX_CHARS_PER_TOKEN, Chunk, Document, Section, TokenCounter
from osrag.chunking.splitting import sentence_bounds

# --------------------------------------------------------------------------
# Packing, overlap, small-chunk merging
# --------------------------------------------------------------------------

_Draft = list[Piece]


def _tail(s: str, target: int, count: TokenCounter) -> str:
    """Longest suffix of ``s`` within ``target`` tokens that starts a sentence; "" when even the
    last sentence is longer. (A tail cut at a word would start the next chunk mid-sentence.)"""
    if target <= 0:
        return ""
    longest = target * MAX_CHARS_PER_TOKEN  # a longer suffix is over target by the character bound
    starts = [a for a, _ in sentence_bounds(s) if a > 0 and len(s) - a <= longest]
    lo, hi = 0, len(starts)  # a later start is a shorter suffix: bisect for the first one that fits
    while lo < hi:
        mid = (lo + hi) // 2
        if count(s[starts[mid] :]) <= target:
            hi = mid
        else:
            lo = mid + 1
    return s[starts[lo] :] if lo < len(starts) else ""


def _with_overlap(env: Env, frame: Frame, prev: _Draft, piece: Piece) -> _Draft:
    """Start a new chunk; prose continuing prose repeats the previous tail."""
    if piece.kind != "text" or prev[-1].kind != "text":
        return [piece]
    run: list[Piece] = []
    for p in reversed(prev):
        if p.kind not in ("text", "overlap"):
            break
        run.insert(0, p)
    tail = _tail(join_pieces(env.text, run), env.config.overlap_tokens, env.count)
    while tail:
        ov = Piece(tail, prev[-1].end, prev[-1].end, "overlap", prev[-1].block)
        if frame.fits(join_pieces(env.text, [ov, piece])):
            return [ov, piece]
        later = [a for a, _ in sentence_bounds(tail) if a > 0]  # a shorter tail, still a sentence start
        tail = tail[later[0] :] if later else ""
    return [piece]


def pack(env: Env, frame: Frame, pieces: Sequence[Piece]) -> list[_Draft]:
    """Greedy: add pieces while the rendered chunk fits max_tokens."""
    drafts: list[_Draft] = []
    cur: _Draft = []
    i = 0
    while i < len(pieces):
        p = pieces[i]
        if cur and frame.fits(join_pieces(env.text, [*cur, p])):
            # The same greedy fill, found by galloping: a draft of many short sentences would
            # otherwise be counted once per sentence, whole (a 5 MB line of them: ~0.2 ms a char).
            step, last = 1, i  # pieces[i..last] fit after cur
            while last + step < len(pieces) and frame.fits(
                join_pieces(env.text, [*cur, *pieces[i : last + step + 1]])
            ):
                last += step
                step *= 2
            while step > 1:
                step //= 2
                if last + step < len(pieces) and frame.fits(
                    join_pieces(env.text, [*cur, *pieces[i : last + step + 1]])
                ):
                    last += step
            cur.extend(pieces[i : last + 1])
            i = last + 1
            continue
        if cur:
            drafts.append(cur)
            cur = _with_overlap(env, frame, cur, p)
        else:
            cur = [p]
        i += 1
    if cur:
        drafts.append(cur)
    return drafts


def _merged(a: _Draft, b: _Draft) -> _Draft:
    return [*a, *(p for p in b if p.kind != "overlap")]


def merge_small(env: Env, frame: Frame, drafts: list[_Draft]) -> list[_Draft]:
    """Chunks under min_tokens join a neighbour in the same section
    (previous first) when the result still fits."""
    out = list(drafts)
    i = 0
    while i < len(out):
        if len(out) > 1 and frame.tokens(join_pieces(env.text, out[i])) < env.config.min_tokens:
            if i > 0:
                m = _merged(out[i - 1], out[i])
                if frame.fits(join_pieces(env.text, m)):
                    out[i - 1 : i + 1] = [m]
                    continue
            if i + 1 < len(out):
                m = _merged(out[i], out[i + 1])
                if frame.fits(join_pieces(env.text, m)):
                    out[i : i + 2] = [m]
                    continue
        i += 1
    return out


@dataclass(frozen=True)
class Group:
    section: Section
    path: tuple[str, ...]
    frame: Frame
    drafts: tuple[_Draft, ...]


def merge_tiny_sections(env: Env, parsed: Parsed, groups: list[Group]) -> list[Group]:
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
        while g.frame.tokens(join_pieces(env.text, draft)) < env.config.min_tokens:
            k = j
            while k < len(out) and not out[k].drafts:
                k += 1
            if k >= len(out) or not inside(out[k].section, g.section.parent_id):
                break
            heads: list[Piece] = []
            for m in range(j, k + 1):
                hb = heading_of[out[m].section.section_id]
                if hb >= 0:  # the heading as a Markdown line of its plain title, without {#id}
                    b = parsed.blocks[hb]
                    heads.append(Piece(f"{'#' * b.level} {b.label}", b.start, b.end, "heading"))
            cand = _merged([*draft, *heads], out[k].drafts[0])
            if not g.frame.fits(join_pieces(env.text, cand)):
                break
            draft = cand
            rest = out[k].drafts[1:]
            out[k] = Group(out[k].section, out[k].path, out[k].frame, rest)
            j = k + 1
            if rest:
                break
        out[idx] = Group(g.section, g.path, g.frame, (draft,))
    return out


def _kind(pieces: Sequence[Piece]) -> str:
    kinds = {p.kind for p in pieces if p.kind not in ("overlap", "heading")}
    if not kinds:
        return "text"
    return kinds.pop() if len(kinds) == 1 else "mixed"


def emit_chunks(
    doc: Document,
    env: Env,
    items: Sequence[tuple[_Draft, Frame, tuple[str, ...], Section | None]],
) -> list[Chunk]:
    """Chunks from drafts, each with the section it belongs to (None: a document without one)."""
    out: list[Chunk] = []
    for draft, frame, path, sec in items:
        body = env.with_notes(join_pieces(env.text, draft))
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
                section_id=sec.section_id if sec else f"{doc.doc_id}#root",
                parent_section_id=sec.parent_id if sec else None,
                kind=_kind(draft),
                start=min(p.start for p in new),
                end=max(p.end for p in new),
                token_count=env.count(text),
                anchor=sec.anchor if sec else "",
            )
        )
    return out


def movable_notes(
    text: str, blocks: Sequence[Block], limit: int, count: TokenCounter
) -> tuple[dict[str, str], frozenset[int]]:
    """Footnote definitions that move next to their references: referenced
    and small (<= ``limit`` tokens). Others stay where they are, as prose."""
    defs: dict[str, int] = {}
    refs: set[str] = set()
    for bi, b in enumerate(blocks):
        if b.kind == "footnote":
            defs.setdefault(b.label, bi)
        else:
            refs.update(m.group(1) for m in FOOTREF_RE.finditer(text, b.start, b.end))
    notes: dict[str, str] = {}
    moved: set[int] = set()
    for label, bi in defs.items():
        body = text[blocks[bi].start : blocks[bi].end]
        if label in refs and count(body) <= limit:
            notes[label] = body
            moved.add(bi)
    return notes, frozenset(moved)
