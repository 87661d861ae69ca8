"""The public chunkers: structure-aware Markdown, recursive plain text, and the
dispatcher by strategy name.
"""

from __future__ import annotations

import dataclasses

from osrag.chunking.fixed import chunk_fixed
from osrag.chunking.frame import Env, Frame, Piece, chunk_path, crumb_line
from osrag.chunking.markdown import (
    content_end,
    content_start,
    parse_document,
    parse_sections,
    section_at,
    split_lines,
)
from osrag.chunking.model import (
    MAX_CHARS_PER_TOKEN,
    Chunk,
    ChunkingConfig,
    Document,
    TokenCounter,
    piecewise_token_count,
    simple_token_count,
    thrifty_counter,
)
from osrag.chunking.packing import Group, emit_chunks, merge_small, merge_tiny_sections, movable_notes, pack
from osrag.chunking.pieces import para_pieces, section_pieces

# --------------------------------------------------------------------------
# Public chunkers
# --------------------------------------------------------------------------

#: Frozen, so one shared instance is a safe default argument.
_DEFAULT_CONFIG = ChunkingConfig()


def chunk_markdown(
    doc: Document,
    config: ChunkingConfig = _DEFAULT_CONFIG,
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
    exact, count = count, thrifty_counter(count, _thrift_limit(config))
    parsed = parse_document(doc)
    notes, moved = movable_notes(doc.text, parsed.blocks, max(1, config.max_tokens // 3), count)
    env = Env(doc.text, parsed.lines, config, count, notes)
    groups: list[Group] = []
    for sec, own in zip(parsed.sections, parsed.own):
        path = chunk_path(doc, sec)
        frame = Frame(env, crumb_line(path, config, count))
        blocks = [(bi, parsed.blocks[bi]) for bi in own if bi not in moved]
        drafts = merge_small(env, frame, pack(env, frame, section_pieces(env, frame, blocks)))
        groups.append(Group(sec, path, frame, tuple(drafts)))
    groups = merge_tiny_sections(env, parsed, groups)
    chunks = emit_chunks(doc, env, [(d, g.frame, g.path, g.section) for g in groups for d in g.drafts])
    return _recount_long(chunks, config, exact)


def _thrift_limit(config: ChunkingConfig) -> int:
    """Texts above this many characters are over ``max_tokens`` (plus overlap) by the character
    bound alone, so the packer does not ask the tokenizer about them."""
    return (config.max_tokens + config.overlap_tokens) * MAX_CHARS_PER_TOKEN * 2


def _recount_long(chunks: list[Chunk], config: ChunkingConfig, count: TokenCounter) -> list[Chunk]:
    """The real count, piecewise (linear), of the rare chunk the thrifty counter only bounded."""
    limit = _thrift_limit(config)
    return [
        dataclasses.replace(c, token_count=piecewise_token_count(count, c.text)) if len(c.text) > limit else c
        for c in chunks
    ]


def chunk_text(
    doc: Document,
    config: ChunkingConfig = _DEFAULT_CONFIG,
    count: TokenCounter = simple_token_count,
) -> list[Chunk]:
    """Recursive fallback for unstructured text: paragraph -> sentence ->
    line -> words, with overlap. Never cuts inside a word; a single word
    longer than ``max_tokens`` becomes its own (over-limit) chunk."""
    text = doc.text
    if not text.strip():
        return []
    exact, count = count, thrifty_counter(count, _thrift_limit(config))
    lines = split_lines(text)
    env = Env(text, lines, config, count, {})
    title = doc.title.strip()
    path = (title,) if title else ()
    frame = Frame(env, crumb_line(path, config, count))
    pieces: list[Piece] = []
    i, bi = 0, 0
    while i < len(lines):
        if not lines[i].text.strip():
            i += 1
            continue
        j = i
        while j + 1 < len(lines) and lines[j + 1].text.strip():
            j += 1
        pieces.extend(para_pieces(env, frame, content_start(lines[i]), content_end(lines[j]), bi))
        bi += 1
        i = j + 1
    drafts = merge_small(env, frame, pack(env, frame, pieces))
    sections = parse_sections(doc)
    items = [
        (d, frame, path, section_at(sections, min(p.start for p in d if p.kind != "overlap"))) for d in drafts
    ]
    return _recount_long(emit_chunks(doc, env, items), config, exact)


STRATEGIES: tuple[str, ...] = ("markdown", "text", "fixed")


def chunk_document(
    doc: Document,
    strategy: str = "markdown",
    config: ChunkingConfig = _DEFAULT_CONFIG,
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
