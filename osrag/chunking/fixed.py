"""The eval baseline: plain character windows, blind to structure on purpose."""

from __future__ import annotations

from osrag.chunking.markdown import parse_sections, section_at
from osrag.chunking.model import Chunk, Document, TokenCounter, simple_token_count
from osrag.chunking.splitting import trim_span


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
        span = trim_span(text, pos, end)
        if span:
            s, e = span
            sec = section_at(sections, s)
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
