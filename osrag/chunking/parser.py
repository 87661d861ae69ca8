"""The Markdown parser under the reader and the chunker: markdown-it-py, block level.

markdown-it-py is a maintained CommonMark implementation whose block tokens carry the source lines
they came from (``Token.map``); the chunker needs exactly that to keep every chunk's span exact.
GFM tables and strikethrough are enabled, footnote definitions come from mdit-py-plugins, and ``:::``
containers (Docusaurus admonitions) and MkDocs ``!!! note`` admonitions too when the reader asks for them.

One deliberate leniency over CommonMark: a backtick fence whose info string holds backticks
(```` ```js run header="`let` и `const`" ````) is a fence here. Strict CommonMark reads such a line as
inline code, and then every later fence flips prose and code until the end of the file; docs and
tutorial engines do write such fences, and mean them as fences. A line like ```` ```x``` ```` (the
opening run repeated inside it) stays inline code.

Inline parsing is off: the chunker cuts text by lines and spans and only needs the plain text of
headings, which ``inline_text`` parses on demand.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from functools import lru_cache
from typing import Any

from markdown_it import MarkdownIt
from markdown_it.rules_block.fence import make_fence_rule
from markdown_it.rules_block.state_block import StateBlock
from markdown_it.token import Token
from mdit_py_plugins.admon import admon_plugin
from mdit_py_plugins.container import container_plugin
from mdit_py_plugins.footnote import footnote_plugin

_lenient_fence = make_fence_rule(disallow_marker_in_info=())


def _fence(state: StateBlock, start: int, end: int, silent: bool) -> bool:
    """CommonMark fences, except that backticks in the info string do not unmake a backtick fence."""
    pos = state.bMarks[start] + state.tShift[start]
    line = state.src[pos : state.eMarks[start]]
    if line.startswith("`"):
        run = len(line) - len(line.lstrip("`"))
        if "`" * run in line[run:]:
            return False  # ```x``` on one line: a code span, as CommonMark says
    return _lenient_fence(state, start, end, silent)


def _any_container(params: str, *_: Any) -> bool:
    """``:::note``, ``:::tip Заголовок``, ``:::info[Заголовок]``: any word opens a container."""
    word = params.strip().split(" ", 1)[0].split("[", 1)[0]
    return word.replace("-", "").replace("_", "").isalpha()


def _build(containers: bool) -> MarkdownIt:
    md = MarkdownIt("commonmark", {"html": True}).enable(["table", "strikethrough"])
    md.block.ruler.at("fence", _fence, {"alt": ["paragraph", "reference", "blockquote", "list"]})
    md.use(footnote_plugin)
    if containers:
        md.use(container_plugin, name="admonition", validate=_any_container)
        md.use(admon_plugin)
    md.disable("inline")
    return md


@lru_cache(maxsize=2)
def _parser(containers: bool) -> MarkdownIt:
    return _build(containers)


@lru_cache(maxsize=1)
def _inline_parser() -> MarkdownIt:
    return MarkdownIt("commonmark").enable(["strikethrough"])


def block_tokens(text: str, containers: bool = False) -> tuple[Token, ...]:
    """Block tokens of ``text`` (not to be modified: the last few parses are shared); line
    numbers in ``Token.map`` count ``\\n`` only.

    A lone ``\\r`` (a line break to markdown-it, not to the chunker's line table) becomes a
    space first, so both agree on line numbers. The title and the chunker parse the same text
    right after each other: the last few parses are remembered."""
    key = (text, containers)
    with _LOCK:
        got = _RECENT.get(key)
        if got is not None:
            _RECENT.move_to_end(key)
            return got
    tokens = tuple(_parser(containers).parse(text.replace("\r", " ") if "\r" in text else text))
    _remember(key, tokens)
    return tokens


def share_tokens(text: str, tokens: tuple[Token, ...]) -> bool:
    """Offer the reader's parse (containers on) of ``text`` as its plain parse, so the chunker and
    the title do not parse the same text again. Taken only when the parse holds no container or
    admonition token: then the two parsers, which differ only by those rules, agree token for
    token. Returns whether it was taken."""
    if any(t.type.startswith(("container_", "admonition_")) for t in tokens):
        return False
    _remember((text, False), tokens)
    return True


#: How many parses are remembered (keyed by text and parser).
RECENT_PARSES = 4
_RECENT: OrderedDict[tuple[str, bool], tuple[Token, ...]] = OrderedDict()
_LOCK = threading.Lock()


def _remember(key: tuple[str, bool], tokens: tuple[Token, ...]) -> None:
    with _LOCK:
        _RECENT[key] = tokens
        _RECENT.move_to_end(key)
        while len(_RECENT) > RECENT_PARSES:
            _RECENT.popitem(last=False)


def inline_text(source: str) -> str:
    """The visible text of one line of inline Markdown (a heading): emphasis, code and link
    markup dropped, their text kept; images give their alt text."""
    out: list[str] = []
    for tok in _inline_parser().parseInline(source):
        for child in tok.children or ():
            if child.type in ("text", "code_inline"):
                out.append(child.content)
            elif child.type in ("softbreak", "hardbreak"):
                out.append(" ")
            elif child.type == "image":
                out.append(child.content)
            elif child.type == "html_inline":
                continue
    return " ".join("".join(out).split())
