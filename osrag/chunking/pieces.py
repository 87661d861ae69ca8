"""Pieces: atomic, pre-sized parts of a section's blocks that the packer combines.

Tables split by rows (header repeated), lists between items (lead-in repeated),
code by ``osrag.chunking.code``; a lead-in or caption travels with the structure it introduces.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from osrag.chunking.code import code_pieces
from osrag.chunking.frame import Env, Frame, Piece
from osrag.chunking.markdown import CAPTION_RE, Block, Item, content_end
from osrag.chunking.splitting import group_spans, prefixed, sentence_spans, split_units, trim_span


def para_pieces(env: Env, frame: Frame, s: int, e: int, bi: int) -> list[Piece]:
    units = split_units(env.text, s, e, frame.fits, frame.fits_tight)
    return [Piece(env.text[a:b], a, b, "text", bi) for a, b in units]


def _table_pieces(
    env: Env, frame: Frame, block: Block, intro: tuple[int, int] | None, bi: int
) -> list[Piece]:
    """Split by rows; header + separator (+ caption) repeat in every piece."""
    text, L = env.text, env.lines
    lead = intro[0] if intro else block.start
    whole = text[lead : block.end]
    rows = range(block.first + 2, block.last + 1)
    if frame.fits(whole) or not rows:
        return [Piece(whole, lead, block.end, "table", bi)]
    header = prefixed(
        text[intro[0] : intro[1]] if intro else "",
        text[block.start : content_end(L[block.first + 1])],
    )
    spans: list[tuple[int, int]] = []
    cur: tuple[int, int] | None = None
    for r in rows:
        s, e = L[r].start, content_end(L[r])
        if cur is not None and frame.fits(f"{header}\n{text[cur[0] : e]}"):
            cur = (cur[0], e)
            continue
        if cur is not None:
            spans.append(cur)
        cur = (s, e)  # a row that does not fit even alone still stays whole
    if cur is not None:
        spans.append(cur)
    return [
        Piece(f"{header}\n{text[s:e]}", lead if n == 0 else _content_start_at(text, s), e, "table", bi)
        for n, (s, e) in enumerate(spans)
    ]


def _content_start_at(text: str, pos: int) -> int:
    while pos < len(text) and text[pos] in " \t":
        pos += 1
    return pos


# ---- lists ---------------------------------------------------------------


def _split_items(env: Env, frame: Frame, items: Sequence[Item], header: str) -> list[tuple[str, int, int]]:
    """Pack items greedily between item boundaries, ``header`` on every piece."""
    text = env.text
    out: list[tuple[str, int, int]] = []
    run: list[Item] = []

    def flush() -> None:
        if run:
            out.append((prefixed(header, text[run[0].start : run[-1].end]), run[0].start, run[-1].end))
            run.clear()

    for it in items:
        if run and frame.fits(prefixed(header, text[run[0].start : it.end])):
            run.append(it)
            continue
        flush()
        if frame.fits(prefixed(header, text[it.start : it.end])):
            run.append(it)
        else:
            out.extend(_split_big_item(env, frame, it, header))
    flush()
    return out


def _split_big_item(env: Env, frame: Frame, it: Item, header: str) -> list[tuple[str, int, int]]:
    """An item that alone is too long: its sub-items go under a repeated
    parent line; an item without sub-items falls back to sentences/words."""
    text = env.text
    head = text[it.start : it.head_end]
    out: list[tuple[str, int, int]] = []
    if it.children:
        h2 = prefixed(header, head)
        if frame.tokens(h2) <= env.config.max_tokens // 2:
            sub = _split_items(env, frame, it.children, h2)
            if sub:
                sub[0] = (sub[0][0], it.start, sub[0][2])  # the parent line is new here
            return sub

    def fits(b: str) -> bool:
        return frame.fits(prefixed(header, b))

    def tight(b: str) -> bool:
        return frame.fits_tight(prefixed(header, b))

    s = _content_start_at(text, it.start)
    units = split_units(text, s, it.head_end, fits, tight)
    for a, b in group_spans(text, units, fits):
        out.append((prefixed(header, text[a:b]), a, b))
    if it.children:
        out.extend(_split_items(env, frame, it.children, header))
    return out


def _list_pieces(env: Env, frame: Frame, block: Block, intro: tuple[int, int] | None, bi: int) -> list[Piece]:
    """Split between top-level items; the lead-in repeats in every piece."""
    text = env.text
    lead = intro[0] if intro else block.start
    whole = text[lead : block.end]
    if frame.fits(whole):
        return [Piece(whole, lead, block.end, "list", bi)]
    header = text[intro[0] : intro[1]] if intro else ""
    raw = _split_items(env, frame, block.items, header)
    pieces = [Piece(body, _content_start_at(text, s), e, "list", bi) for body, s, e in raw]
    if pieces:
        pieces[0] = Piece(pieces[0].body, lead, pieces[0].end, "list", bi)
    return pieces


# ---- sections ------------------------------------------------------------


def _ends_with_colon(s: str) -> bool:
    return s.rstrip().rstrip("*_").rstrip().endswith((":", "："))


def _intro_span(env: Env, frame: Frame, para: Block, kind: str) -> tuple[int, int] | None:
    """The lead-in / caption that must travel with a following structure.

    Short enough (<= 1/3 of the body budget) to be repeated in every piece;
    of a longer paragraph only its last sentence is taken."""
    text = env.text
    ptext = text[para.start : para.end]
    colon = _ends_with_colon(ptext)
    if not (colon or (kind == "table" and CAPTION_RE.match(ptext))):
        return None
    limit = max(1, frame.budget() // 3)
    if env.count(ptext) <= limit:
        return (para.start, para.end)
    if colon:
        sents = sentence_spans(text, para.start, para.end)
        if len(sents) > 1 and env.count(text[sents[-1][0] : sents[-1][1]]) <= limit:
            return sents[-1]
    return None


_StructBuilder = Callable[[Env, Frame, Block, "tuple[int, int] | None", int], list[Piece]]


def section_pieces(env: Env, frame: Frame, blocks: Sequence[tuple[int, Block]]) -> list[Piece]:
    """Blocks of one section -> pieces, lead-ins/captions attached to the
    structure they introduce."""
    text = env.text
    builders: dict[str, _StructBuilder] = {
        "table": _table_pieces,
        "list": _list_pieces,
        "code": code_pieces,
    }
    para: dict[int, tuple[int, int] | None] = {}
    struct: dict[int, list[Piece]] = {}
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
        para[idx - 1] = None if span[0] <= prev.start else trim_span(text, prev.start, span[0])
    pieces: list[Piece] = []
    for idx, (bi, _blk) in enumerate(blocks):
        if idx in struct:
            pieces.extend(struct[idx])
        elif para.get(idx):
            s, e = para[idx]  # type: ignore[misc]
            pieces.extend(para_pieces(env, frame, s, e, bi))
    return pieces


def _overflow(frame: Frame, pieces: Sequence[Piece]) -> int:
    return sum(not frame.fits(p.body) for p in pieces)
