"""Checks on chunks of real docs: directive markup left in the text, chunks starting mid-sentence.

Deliberately independent of the reader: plain patterns over the chunk text (code excluded), so a
directive the reader missed shows up here instead of being excused by the same code that missed it.
Used by the dev-tree test (tests/integration/test_docs_tree.py) and ``bench/check_docs_tree.py``.
"""

from __future__ import annotations

import re
from collections.abc import Iterator

from osrag.chunking.model import Chunk

# What directive markup looks like once it escaped the reader.
_MARKUP = re.compile(
    r"\{/?(?:note|tabs?|cut|include|includetag|ifdef|ifndef|var|linkto|heading|caption|counter|const|params)"
    r"[:()\[}]"
    r"|\{%-?\s*[a-z]+"
    r"|\{\{[<%]"
    r"|<!--"
    r"|^\s*:::"
    r"|^\s*[!?]{3}\s+[a-z]+"
    r"|^\s*\[/[a-z]+\]\s*$"
    r"|^\s*\[(?:smart|warn|info|cut|online|edit|iframe|codetabs|head)\b[^\]]*\]\s*$"
    r"|</?(?:Tabs|TabItem|Admonition|Details)\b"
    r"|\{#[\w.:-]+\}"
    r"|^\s*\|===\s*$"
    r"|^\s*\[cols="
    r"|^libs:\s*$",
    re.MULTILINE,
)
_FENCE = re.compile(r"^\s*(`{3,}|~{3,})")
_CODE_SPAN = re.compile(r"(`+)(?:(?!\1).)+?\1")
_TERMINATORS = ".!?…:;"
_CLOSERS = '»"”’)]*_`'
_BLOCK_START = re.compile(r"\s*(?:[-*+]\s|\d{1,9}[.)]\s|\||#|>|```|~~~|!\[|\[|<)")


def _lines(text: str) -> Iterator[tuple[str, bool]]:
    """(line, inside fenced code) for each line; fence lines count as code."""
    fence = ""
    for line in text.split("\n"):
        m = _FENCE.match(line)
        if fence:
            if m and m.group(1)[0] == fence[0] and len(m.group(1)) >= len(fence) and not line.strip(" `~"):
                fence = ""
            yield line, True
        elif m:
            fence = m.group(1)
            yield line, True
        else:
            yield line, False


def prose_lines(text: str) -> Iterator[str]:
    """Lines of ``text`` outside fenced code, inline code spans blanked."""
    return (_CODE_SPAN.sub(" ", line) for line, code in _lines(text) if not code)


def code_lines(text: str) -> Iterator[str]:
    """Lines of ``text`` inside fenced code (fences included)."""
    return (line for line, code in _lines(text) if code)


def markup_left(text: str) -> list[str]:
    """Directive markup found in ``text`` outside code (empty when the text is clean)."""
    found: list[str] = []
    for line in prose_lines(text):
        found.extend(m.group().strip() for m in _MARKUP.finditer(line))
    return found


def _find_context(text: str, head: str, before: int) -> int:
    """Where repeated context (``head``) sits: its nearest occurrence at a line start, else the
    nearest one (a lead-in's words may also occur inside an earlier sentence)."""
    nearest = pos = text.rfind(head, 0, before)
    for _ in range(50):
        if pos < 0:
            break
        if not text[text.rfind("\n", 0, pos) + 1 : pos].strip():
            return pos
        pos = text.rfind(head, 0, pos + len(head) - 1)
    return nearest


def starts_mid_sentence(doc_text: str, chunk: Chunk) -> bool:
    """Whether ``chunk``'s new text starts inside a sentence of ``doc_text``.

    A start is at a boundary when it begins a paragraph (a blank line before), a Markdown block
    (a list item, a table row, a heading, a fence, a quote), or follows a sentence end (``. ! ? …
    : ;``, closing quotes or brackets after them), or the text before it on its line ends one.
    A chunk whose body opens with repeated context (a table header, a list lead-in, an overlap
    tail) is judged where that context sits in the document."""
    body = chunk.body.lstrip()
    head = body.split("\n", 1)[0][:80]
    pos = chunk.start
    if head and not doc_text.startswith(head, chunk.start):
        found = _find_context(doc_text, head, chunk.start + len(head))
        if found < 0:
            return bool(head[:1].islower())
        pos = found
    before = doc_text[:pos]
    core = before.rstrip()
    gap = before[len(core) :]
    if not core or gap.count("\n") >= 2:  # the document's or a paragraph's start
        return False
    if _BLOCK_START.match(doc_text, pos):
        return False
    tail = core
    while tail and tail[-1] in _CLOSERS:
        tail = tail[:-1]
    if tail.endswith(tuple(_TERMINATORS)):
        return False
    prev_line = core.rsplit("\n", 1)[-1].lstrip()
    return not ("\n" in gap and prev_line[:1] in ("|", "#"))  # after a table row, heading
