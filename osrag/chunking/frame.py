"""Rendering context shared by the piece builders and the packer: breadcrumb,
footnotes, token budget, and the ``Piece`` unit they exchange.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from osrag.chunking.markdown import FOOTREF_RE, Line
from osrag.chunking.model import ChunkingConfig, Document, Section, TokenCounter

# --------------------------------------------------------------------------
# Rendering context
# --------------------------------------------------------------------------


@dataclass(frozen=True)
class Env:
    text: str
    lines: tuple[Line, ...]
    config: ChunkingConfig
    count: TokenCounter
    notes: Mapping[str, str]  # movable footnote definitions by id

    def with_notes(self, body: str) -> str:
        """Append the definitions of footnotes referenced in ``body``."""
        if not self.notes:
            return body
        ids: list[str] = []
        for m in FOOTREF_RE.finditer(body):
            if m.group(1) in self.notes and m.group(1) not in ids:
                ids.append(m.group(1))
        if not ids:
            return body
        return body + "\n\n" + "\n".join(self.notes[i] for i in ids)


@dataclass(frozen=True)
class Frame:
    """Per-section rendering: breadcrumb + body + appended footnotes."""

    env: Env
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


def crumb_line(path: Sequence[str], config: ChunkingConfig, count: TokenCounter) -> str:
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


def chunk_path(doc: Document, section: Section) -> tuple[str, ...]:
    path = tuple(p for p in section.heading_path if p.strip())
    title = doc.title.strip()
    if title and not (path and _norm(path[0]) == _norm(title)):
        path = (title, *path)
    return path


# --------------------------------------------------------------------------
# Pieces: atomic, pre-sized parts of blocks that the packer combines
# --------------------------------------------------------------------------


@dataclass(frozen=True)
class Piece:
    body: str
    start: int  # span of the *new* material in Document.text
    end: int
    kind: str  # text | table | code | list | heading | overlap
    block: int = -1  # source block, to restore original spacing


def _joiner(text: str, a: Piece, b: Piece) -> str:
    if a.block >= 0 and a.block == b.block and b.kind == "text":
        if a.kind == "overlap":
            return " "
        if a.kind == "text":
            gap = text[a.end : b.start]
            if gap and not gap.strip():
                return gap
    return "\n\n"


def join_pieces(text: str, pieces: Sequence[Piece]) -> str:
    parts = [pieces[0].body]
    for a, b in zip(pieces, pieces[1:]):
        parts.append(_joiner(text, a, b))
        parts.append(b.body)
    return "".join(parts)
