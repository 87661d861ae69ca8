"""The data model: documents in, chunks out, the size knobs and the default token counter."""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

TokenCounter = Callable[[str], int]

_TOKEN_RE = re.compile(r"\w+|[^\w\s]")


#: No token is charged fewer characters than this: a tokenizer that reads one giant "word" as
#: one or two tokens would let a 2.5-million-character string pass a 50-token budget. Above
#: the longest average seen on real text (8.8 characters per navec token on golden/corpus
#: paragraphs, median 5.2), so ordinary text keeps its tokenizer's count.
MAX_CHARS_PER_TOKEN = 10


def bounded_token_count(count: int, text: str) -> int:
    """A tokenizer's ``count`` of ``text``, never below ``len(text) / MAX_CHARS_PER_TOKEN``."""
    return max(int(count), -(-len(text) // MAX_CHARS_PER_TOKEN))


#: Texts longer than this are counted in pieces: a tokenizer's time grows faster than the
#: text (navec's WordLevel: 0.2 s for 100K characters, 4.9 s for 1M in one word).
COUNT_PIECE_CHARS = 4096


def piecewise_token_count(count: TokenCounter, text: str, piece_chars: int = COUNT_PIECE_CHARS) -> int:
    """``count`` summed over pieces of at most ``piece_chars``, cut after whitespace where there is
    some in the piece's second half, else hard: linear in the text, and never below the character
    bound (each piece is charged at least its own bound)."""
    if len(text) <= piece_chars:
        return bounded_token_count(count(text), text)
    total, pos = 0, 0
    while pos < len(text):
        end = min(pos + piece_chars, len(text))
        if end < len(text):
            cut = max(
                text.rfind(" ", pos + piece_chars // 2, end), text.rfind("\n", pos + piece_chars // 2, end)
            )
            if cut > pos:
                end = cut + 1
        piece = text[pos:end]
        total += bounded_token_count(count(piece), piece)
        pos = end
    return total


def thrifty_counter(count: TokenCounter, limit_chars: int) -> TokenCounter:
    """``count`` for texts up to ``limit_chars``; above, only the character bound, which already
    exceeds any budget of ``limit_chars / MAX_CHARS_PER_TOKEN`` tokens or less. The packer asks
    "does it fit?" of the same giant text many times; the tokenizer never needs to read it to say no
    (a 2.5M-character word took ~116 s to chunk). Chunks that long get their real count once,
    piecewise, when they are emitted (``chunk_document``)."""

    def counted(text: str) -> int:
        if len(text) > limit_chars:
            return -(-len(text) // MAX_CHARS_PER_TOKEN)
        return count(text)

    return counted


def simple_token_count(text: str) -> int:
    """Count ``\\w+`` runs plus single non-space punctuation characters (at least the character bound).

    Deterministic and dependency-free, so tests and the eval baseline do not
    hinge on a tokenizer download; production passes the embedder's counter.
    """
    return bounded_token_count(len(_TOKEN_RE.findall(text)), text)


# --------------------------------------------------------------------------
# Public data model
# --------------------------------------------------------------------------


@dataclass(frozen=True)
class Document:
    """One source document; the caller reads files and strips front matter.

    For Markdown, ``text`` is what the reader made of the file (``osrag.chunking.dialects``:
    directives as readable text, includes and variables resolved), and every chunk span points
    into it. ``notes`` are what the reader had to say about the file (a fence it closed at the
    end, an include it could not find), for the ingest report."""

    doc_id: str
    text: str
    source: str = ""
    title: str = ""
    metadata: Mapping[str, Any] = field(default_factory=dict)
    notes: tuple[str, ...] = ()
    #: Values for the dialects' variables (``{var(cloud)}``): the rules file's ``vars`` and ``--var``.
    variables: Mapping[str, str] = field(default_factory=dict)


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
    anchor: str = ""  # the heading's {#id}, else its slug; "" for text before the first heading


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
    anchor: str = ""  # the anchor of the section the chunk belongs to, for links to page#anchor

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
