"""Chunking: documents -> retrieval units with breadcrumbs and exact char spans.

A chunk is both what gets embedded and what gets cited, so a bad cut cannot
be repaired later by a better embedder. The Markdown chunker therefore cuts
along the document's own structure (headings, tables, fenced code, lists) and
falls back to sentences, lines and words only when a piece is still too long.
Every chunk carries ``start``/``end`` into ``Document.text``: eval relevance
and citations are computed from spans, never from the (decorated) chunk text.

Pure functions: no I/O, no randomness. Markdown is parsed by markdown-it-py (CommonMark + GFM
tables), never by hand. The package, bottom floor first (each module imports only the ones above it):

- ``model``: ``Document``, ``Section``, ``Chunk``, ``ChunkingConfig``, the token counter;
- ``linecounts``: a tokenizer's counts by line where the sum of the lines' counts is the count
  (``osrag.embedding.count_tokens_with`` uses it: each distinct line is tokenized once);
- ``parser``: the markdown-it-py parser (block tokens with source lines, fences lenient about
  backticks in the info string);
- ``directive``, ``tags``, ``scanner``, ``asciidoc``, ``render``: the reader's parts (what a directive is;
  HTML/JSX/BBCode tags, YFM and Hugo; the line scanner with the brace dialect; AsciiDoc tables; the
  renderer with its labels and includes);
- ``dialects``: the reader, a docs team's dialect (directives, includes, variables) -> readable Markdown
  (the markdown-it token walk that tells code from prose, then the renderer line by line);
- ``markdown``: blocks, list items and sections (with anchors) from the tokens, ``markdown_title``;
- ``splitting``: the sentence -> line -> word fallback for long prose;
- ``frame``: the rendering context (breadcrumb, footnotes, budget) and ``Piece``;
- ``code`` and ``pieces``: tables, lists, code and lead-ins cut at their own seams;
- ``packing``: greedy packing, overlap, small-chunk merging, emitting chunks;
- ``chunkers``: ``chunk_markdown``, ``chunk_text``, ``chunk_document``; ``fixed``: the baseline;
- ``checks``: markup left in chunk text, chunks starting mid-sentence (for tests and bench).
"""

from osrag.chunking.chunkers import STRATEGIES, chunk_document, chunk_markdown, chunk_text
from osrag.chunking.dialects import Reading, read_markdown
from osrag.chunking.directive import IncludeLoader
from osrag.chunking.fixed import chunk_fixed
from osrag.chunking.markdown import markdown_title, parse_sections
from osrag.chunking.model import Chunk, ChunkingConfig, Document, Section, TokenCounter, simple_token_count

__all__ = [
    "STRATEGIES",
    "Chunk",
    "ChunkingConfig",
    "Document",
    "IncludeLoader",
    "Reading",
    "Section",
    "TokenCounter",
    "chunk_document",
    "chunk_fixed",
    "chunk_markdown",
    "chunk_text",
    "markdown_title",
    "parse_sections",
    "read_markdown",
    "simple_token_count",
]
