"""The reader: a Markdown file in the dialect its team writes -> plain, readable Markdown.

Docs trees are not CommonMark. They carry directives of their build tools, and left verbatim those
land in chunk text and in BM25 (``{note:info}``, ``{% cut %}``, ``<TabItem>``). The reader keeps
the Markdown and turns each directive into what a reader of the built page sees:

- notes and admonitions become a label before their text ("Примечание: …", "Внимание: …");
  tabs, cuts and spoilers keep their titles as a line of their own ("Личный кабинет:");
- includes are inlined where they stand, read in turn, resolved relative to the including file
  through the ``include`` callback, with a cycle guard and a depth limit (so a page holds what its
  readers see; the included file is still a document of its own when the tree is ingested whole,
  unless the rules file excludes it); ``[tags=…]`` keeps the tagged parts only;
- variables (``{var(x)}``, YFM ``{{ x }}``) are replaced when ``variables`` knows them, else they
  leave their name and a note; ``{ifdef(x)}`` / ``{ifndef(x)}`` are decided when ``variables``
  names ``x`` (defined = present and not "", 0, false, no, off), else both branches are kept;
- links keep their text, headings keep their id as ``{#id}`` (which the chunker reads as the
  anchor), captions and counters become their text, HTML comments and MDX imports go.

Dialects: brace directives (``{note:…}``, ``{tabs}``/``{tab(…)}``, ``{cut(…)}``, ``{include(…)}``,
``{includetag(…)}``, ``{ifdef(…)}``/``{ifndef(…)}``, ``{var(…)}``, ``{linkto(…)[text=…]}``,
``{heading(…)[id=…]}``, ``{caption(…)}``, ``{counter(…)}``, ``{const(…)}``, ``{params[…]}``),
YFM (``{% note %}``, ``{% cut %}``, ``{% list tabs %}``, ``{% include %}``, ``{% if %}``), heading
ids ``{#id}``, Docusaurus ``:::note`` containers, MkDocs ``!!! note`` admonitions, MyST
```` ```{note} ```` fences, GitBook ``{% hint %}``/``{% tab %}``, MDX/JSX component tags, known HTML
tags, BBCode-like ``[tag …]…[/tag]`` lines and ``<info:…>`` links of tutorial engines, Hugo
shortcodes, a leading ``libs:`` block, AsciiDoc ``|===`` tables.

Nothing inside code changes: fenced and indented code (found by the Markdown parser) and inline
code spans are copied verbatim. A fence that never closes is closed at the end and noted.
Pure: the only way out is the ``include`` callback the caller passes.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from markdown_it.token import Token

from osrag.chunking.asciidoc import adoc_tables
from osrag.chunking.directive import IncludeLoader, ReadContext
from osrag.chunking.parser import block_tokens, share_tokens
from osrag.chunking.render import Out, Renderer

logger = logging.getLogger(__name__)

_DIRECTIVE_LINE = re.compile(
    r"\{/?(?:note|tabs?|cut|include|includetag|ifdef|ifndef)\b|\{%-?\s*(?:end)?(?:note|cut|list|include)\b"
)
_MYST = re.compile(r"\{([\w-]+)\}(.*)")
_MYST_PROSE = frozenset(
    [
        "note",
        "warning",
        "tip",
        "hint",
        "important",
        "attention",
        "caution",
        "danger",
        "error",
        "seealso",
        "admonition",
    ]
)
_LIBS_KEY = re.compile(r"[a-z][a-z_]*:.*")


@dataclass(frozen=True)
class Reading:
    """What the reader made of a file: readable Markdown and what it had to say about it."""

    text: str
    notes: tuple[str, ...] = ()


def read_markdown(
    text: str,
    *,
    variables: Mapping[str, str] | None = None,
    include: IncludeLoader | None = None,
    key: str = "",
) -> Reading:
    """Read ``text`` (a Markdown body, front matter already removed) into readable Markdown.

    ``key`` names the file for ``include`` and in notes; ``variables`` are the known values
    (``--var NAME=VALUE`` and the rules file's ``vars:``)."""
    ctx = ReadContext(dict(variables or {}), include)
    out = _read(text, ctx, key, (key,), None)
    for msg in ctx.notes:
        logger.debug("%s: %s", key or "document", msg)
    return Reading(out, tuple(ctx.notes))


def _dedent(line: str, cut: int) -> str:
    """``line`` without up to ``cut`` columns of leading whitespace (a tab is 4)."""
    k = col = 0
    while k < len(line) and col < cut and line[k] in " \t":
        col += 4 - col % 4 if line[k] == "\t" else 1
        k += 1
    return line[k:]


def _strip_libs(text: str) -> str:
    """A leading ``libs:`` / ``importance:`` block of a tutorial engine (key lines and ``  - item``
    lines, up to a ``---`` line or a blank line) is metadata, not text."""
    lines = text.split("\n")
    k = 0
    while k < len(lines) and not lines[k].strip():
        k += 1
    if k >= len(lines) or not re.match(r"(?:libs|importance):", lines[k]):
        return text
    j = k
    while j < len(lines) and (_LIBS_KEY.fullmatch(lines[j]) or re.match(r"\s+-\s", lines[j])):
        j += 1
    while j < len(lines) and not lines[j].strip():
        j += 1
    if j < len(lines) and lines[j].strip() == "---":
        j += 1
    return "\n".join(lines[j:])


def _walk(
    tokens: Sequence[Token], lines: list[str], ctx: ReadContext, key: str
) -> tuple[list[bool], dict[int, tuple[str, str]], list[str]]:
    """The markdown-it token walk: which lines are code (copied verbatim), which lines open or close
    a container, an admonition or a MyST directive (``replace``: line -> (kind, payload)), and the
    fences that never close (closed at the end). Dedents an admonition's body in ``lines``."""
    code = [False] * len(lines)
    replace: dict[int, tuple[str, str]] = {}  # line -> (kind, payload) for ::: containers
    unclosed: list[str] = []
    for tok in tokens:
        if not tok.map:
            continue
        a, b = tok.map
        if tok.type == "code_block" and any(_DIRECTIVE_LINE.match(x.strip()) for x in lines[a:b]):
            continue  # directives indented too deep under a list item: prose its author indented
        myst = _MYST.match(tok.info.strip()) if tok.type == "fence" else None
        if myst and myst.group(1).lower() in _MYST_PROSE:  # ```{note} Заголовок: MyST, prose inside
            replace[a] = ("admon", f"{myst.group(1)} {myst.group(2).strip()}")
            last = b - 1
            if a < last < len(lines) and lines[last].strip().startswith(tok.markup[:3]):
                replace[last] = ("close", "")
            for k in range(a + 1, min(b, len(lines))):
                if not lines[k].strip().startswith(":"):
                    break
                replace[k] = ("skip", "")  # :class: and other options
            continue
        if tok.type in ("fence", "code_block"):
            for k in range(a, min(b, len(lines))):
                code[k] = True
            last = b - 1
            while last > a and not lines[last].strip():
                last -= 1
            closing = lines[last].strip() if last > a else ""
            fence = tok.markup or " "
            closed = len(closing) >= len(fence) and closing == fence[0] * len(closing)
            at_end = b >= len(lines) or not any(x.strip() for x in lines[b:])
            if tok.type == "fence" and not closed and at_end:
                indent = lines[a][: len(lines[a]) - len(lines[a].lstrip())]
                unclosed.append(indent + tok.markup)
                where = key or "document"
                ctx.note(f"{where}: code fence opened at line {a + 1} never closes; closed at the end")
        elif tok.type == "admonition_open":  # MkDocs: !!! type "Title", the body indented under it
            replace[a] = ("admon", tok.info.strip())
            cut = len(lines[a]) - len(lines[a].lstrip()) + 4
            for k in range(a + 1, min(b, len(lines))):
                lines[k] = _dedent(lines[k], cut)
        elif tok.type.startswith("container_") and tok.nesting == 1:
            replace[a] = ("open", tok.info.strip())
            for end in (b - 1, b):  # the closing ::: line (the plugin's map may stop before it)
                if (
                    a < end < len(lines)
                    and lines[end].strip().startswith(":::")
                    and not lines[end].strip(": \t")
                ):
                    replace[end] = ("close", "")
                    break
    return code, replace, unclosed


#: A text with none of these holds nothing for the token walk (a fence needs ``` or ~~~, indented
#: code four spaces or a tab, a container :::, an admonition !!! or ???; |=== is an AsciiDoc table),
#: so the reader does not parse it: the chunker's parse is then the file's only one.
_STRUCTURE_MARKS = ("```", "~~~", "    ", "\t", ":::", "!!!", "???", "|===")


def _structure_tokens(text: str) -> tuple[Token, ...]:
    """The parse the token walk needs, or none when the text cannot hold what it looks for."""
    if not any(m in text for m in _STRUCTURE_MARKS):
        return ()
    return block_tokens(text, containers=True)


def _read(
    text: str, ctx: ReadContext, key: str, stack: tuple[str, ...], tags: frozenset[str] | None = None
) -> str:
    text = _strip_libs(text.replace("\r\n", "\n"))
    tokens = _structure_tokens(text)
    if "|===" in text:  # AsciiDoc tables first: their rows are not Markdown, the parser misreads them
        fenced = {k for t in tokens if t.type == "fence" and t.map for k in range(*t.map)}
        converted = adoc_tables(text, fenced)
        if converted != text:
            text, tokens = converted, block_tokens(converted, containers=True)
    lines = text.split("\n")
    code, replace, unclosed = _walk(tokens, lines, ctx, key)
    out = Out()
    render = Renderer(ctx, key, stack, tags, out, _read)
    prose: list[str] = []

    def flush_prose() -> None:
        if prose:
            render.prose("\n".join(prose))
            prose.clear()

    for k, line in enumerate(lines):
        if code[k]:
            flush_prose()
            render.code_line(line)
        elif k in replace:
            flush_prose()
            kind, info = replace[k]
            render.container(kind, info, line[: len(line) - len(line.lstrip())])
        else:
            prose.append(line)
    flush_prose()
    render.finish()
    result = out.text()
    for fence in reversed(unclosed):
        result = result.rstrip("\n") + "\n" + fence + "\n"
    # the file's own ending (a text without directives reads back unchanged)
    result = result.rstrip("\n") + "\n" * (len(text) - len(text.rstrip("\n")) or bool(unclosed))
    if len(stack) == 1 and tokens and result == text:  # read back unchanged: one parse serves both
        share_tokens(text, tokens)
    return result


#: Kinds of reader notes, by the words their messages carry (checked in this order).
NOTE_KINDS: tuple[tuple[str, str], ...] = (
    ("never closes", "unclosed fence"),
    ("include cycle", "include cycle"),
    ("not found", "include not found"),
    ("deeper than", "include too deep"),
    ("no include resolver", "include not read"),
    ("has no value", "unknown variable"),
)


def note_kind(note: str) -> str:
    """The kind of a reader note (``Document.notes``), for summaries that count them per kind."""
    return next((kind for words, kind in NOTE_KINDS if words in note), "other")
