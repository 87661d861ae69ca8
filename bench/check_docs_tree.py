"""Chunk a whole Markdown docs tree and count what a reader would trip over.

    .venv/bin/python bench/check_docs_tree.py ../shared/datasets/vkdocs-ru-dev/corpus --var cloud="VK Cloud"

Reads every ``.md`` file as ingest does (front matter off, the dialect reader with includes
resolved below the root and the given variables, the title), chunks it with the default Markdown
chunker and the simple token counter, and prints: files, chunks, headings kept (sections the
chunker found) and headings whose title still holds markup, titles taken from a line of code,
chunks with directive markup left (``osrag.chunking.checks.markup_left``), chunks starting
mid-sentence (``starts_mid_sentence``), and the chunk token p50/p90. No node, no model.

``--raw`` skips the reader (the text as the file has it), to compare with what it does.
"""

from __future__ import annotations

import argparse
import statistics
import sys
from collections import Counter
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from osrag.chunking import ChunkingConfig, Document, chunk_markdown, parse_sections
from osrag.chunking.checks import code_lines, markup_left, starts_mid_sentence
from osrag.chunking.dialects import read_markdown
from osrag.chunking.markdown import markdown_title
from osrag.ingest.frontmatter import normalise_newlines, split_front_matter
from osrag.ingest.includes import FileIncludes


def _vars(items: list[str]) -> dict[str, str]:
    out: dict[str, str] = {}
    for item in items:
        name, sep, value = item.partition("=")
        if not sep:
            raise SystemExit(f"--var {item!r}: expected NAME=VALUE")
        out[name.strip()] = value
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("root", type=Path)
    ap.add_argument("--var", action="append", default=[], help="NAME=VALUE, repeatable")
    ap.add_argument("--raw", action="store_true", help="no dialect reader: chunk the files as they are")
    ap.add_argument("--show", type=int, default=5, help="examples of each problem to print")
    args = ap.parse_args(argv)
    root = args.root.resolve()
    variables = _vars(args.var)
    includes = FileIncludes(root)
    cfg = ChunkingConfig()
    files = sorted(root.rglob("*.md"))
    chunks_n = headings = marked_headings = code_titles = with_markup = mid = 0
    tokens: list[int] = []
    kinds: Counter[str] = Counter()
    shown: dict[str, int] = Counter()

    def show(kind: str, msg: str) -> None:
        if shown[kind] < args.show:
            shown[kind] += 1
            print(f"  [{kind}] {msg}")

    for f in files:
        key = f.relative_to(root).as_posix()
        _, body = split_front_matter(normalise_newlines(f.read_text(encoding="utf-8-sig")))
        text = body
        if not args.raw:
            text = read_markdown(body, variables=variables, include=includes, key=key).text
        title = markdown_title(text) or f.stem
        if title and any(ln.strip().lstrip("#").strip() == title for ln in code_lines(text)):
            code_titles += 1
            show("title-from-code", f"{key}: {title!r}")
        doc = Document(key, text, source=key, title=title)
        for s in parse_sections(doc):
            if s.level:
                headings += 1
                if markup_left(s.heading_path[-1]) or "{" in s.heading_path[-1]:
                    marked_headings += 1
                    show("heading-markup", f"{key}: {s.heading_path[-1]!r}")
        for c in chunk_markdown(doc, cfg):
            chunks_n += 1
            tokens.append(c.token_count)
            kinds[c.kind] += 1
            left = markup_left(c.text)
            if left:
                with_markup += 1
                show("markup", f"{c.chunk_id}: {left[:3]}")
            if starts_mid_sentence(text, c):
                mid += 1
                show("mid-sentence", f"{c.chunk_id}: {c.body[:70]!r}")
    q = statistics.quantiles(tokens, n=10) if len(tokens) > 1 else [0] * 9
    print(f"files {len(files)}  chunks {chunks_n}  kinds {dict(kinds)}")
    print(f"headings kept {headings}  headings with markup {marked_headings}  titles from code {code_titles}")
    print(f"chunks with markup left {with_markup} ({with_markup / max(chunks_n, 1):.2%})")
    print(f"chunks starting mid-sentence {mid} ({mid / max(chunks_n, 1):.2%})")
    print(f"chunk tokens p50 {statistics.median(tokens) if tokens else 0:.0f}  p90 {q[8]:.0f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
