"""The real dev docs tree (../shared/datasets/vkdocs-ru-dev), read and chunked file by file as ingest does.

Every file is a Document or a reported skip (heading-only landing pages, empty files); no chunk
carries directive markup (by ``osrag.chunking.checks.markup_left``, independent of the reader);
the headings of the files are kept as sections; no title is a line of code; at most 1 % of chunks
start mid-sentence. No node: this is the documents -> chunks half of an ingest, on real files.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from osrag.chunking import Chunk, Document, chunk_markdown, parse_sections
from osrag.chunking.checks import code_lines, markup_left, prose_lines, starts_mid_sentence
from osrag.errors import DocumentSkipped
from osrag.ingest.documents import read_document
from osrag.ingest.rules import Rules

REPO = Path(__file__).resolve().parents[2]
CORPUS = REPO.parent / "shared" / "datasets" / "vkdocs-ru-dev" / "corpus"
_ATX = re.compile(r" {0,3}#{1,6}(?:\s|$)")

pytestmark = pytest.mark.skipif(not CORPUS.is_dir(), reason=f"the dev docs tree is not at {CORPUS}")


def _raw_headings(path: Path) -> int:
    """ATX heading lines outside fences, counted on the file as written (not by the reader)."""
    return sum(1 for line in prose_lines(path.read_text(encoding="utf-8")) if _ATX.match(line))


@pytest.fixture(scope="module")
def tree() -> list[tuple[Path, Document | None, list[Chunk]]]:
    rules = Rules(variables={"cloud": "VK Cloud"})  # the value the portal gives {var(cloud)}
    out: list[tuple[Path, Document | None, list[Chunk]]] = []
    for path in sorted(CORPUS.rglob("*.md")):
        try:
            doc = read_document(path, CORPUS, rules=rules)
        except DocumentSkipped:
            out.append((path, None, []))
            continue
        out.append((path, doc, chunk_markdown(doc)))
    return out


def test_every_file_reads_and_only_textless_pages_are_skipped(tree: list) -> None:
    assert len(tree) == 849
    skipped = [p for p, d, _ in tree if d is None]
    assert len(skipped) <= 32  # the README's heading-only and empty pages
    assert all(cs for _, d, cs in tree if d is not None), "a read document gave no chunks"


def test_no_markup_left_in_chunk_text(tree: list) -> None:
    bad = [(c.chunk_id, markup_left(c.text)[:3]) for _, _, cs in tree for c in cs if markup_left(c.text)]
    assert bad == []


def test_headings_are_kept_and_titled_without_markup(tree: list) -> None:
    raw = kept = 0
    for path, doc, _ in tree:
        if doc is None:
            continue
        n = _raw_headings(path)
        secs = [s for s in parse_sections(doc) if s.level]
        raw += n
        kept += min(n, len(secs))  # includes may add headings; none may go missing
        assert all("{" not in s.heading_path[-1] and s.anchor for s in secs), path
    assert kept >= 0.99 * raw, (kept, raw)


def test_titles_never_come_from_code(tree: list) -> None:
    for path, doc, _ in tree:
        if doc is None:
            continue
        in_code = {ln.strip().lstrip("#").strip() for ln in code_lines(doc.text)}
        assert doc.title not in in_code or doc.title == path.stem, (path, doc.title)
        assert "{" not in doc.title, (path, doc.title)


def test_chunks_start_at_sentence_boundaries(tree: list) -> None:
    total = mid = 0
    for _, doc, cs in tree:
        for c in cs:
            total += 1
            mid += starts_mid_sentence(doc.text, c)
    assert total > 3000
    assert mid <= 0.01 * total, f"{mid} of {total} chunks start mid-sentence"
