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
import shlex
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field

from osrag.chunking.parser import block_tokens

logger = logging.getLogger(__name__)

#: ``include(target, including_key) -> (included_key, text)``, or None when there is no such file.
IncludeLoader = Callable[[str, str], "tuple[str, str] | None"]

#: Admonition types -> the label a Russian reader sees.
LABELS: Mapping[str, str] = {
    **dict.fromkeys(
        ("note", "info", "information", "notice", "abstract", "summary", "seealso"), "Примечание"
    ),
    **dict.fromkeys(("tip", "hint", "success", "check"), "Совет"),
    **dict.fromkeys(("warn", "warning", "caution", "attention"), "Внимание"),
    **dict.fromkeys(("err", "error", "danger", "alert", "important", "critical", "failure", "bug"), "Важно"),
    "example": "Пример",
    "question": "Вопрос",
}

MAX_INCLUDE_DEPTH = 8

# Component/tag names that are markup, not placeholders (<ID_СЕТИ>, <token> stay text).
_HTML_TAGS = frozenset(
    [
        "a",
        "abbr",
        "b",
        "big",
        "blockquote",
        "br",
        "center",
        "code",
        "del",
        "details",
        "dfn",
        "div",
        "em",
        "font",
        "hr",
        "i",
        "iframe",
        "img",
        "ins",
        "kbd",
        "li",
        "mark",
        "nobr",
        "ol",
        "p",
        "pre",
        "s",
        "samp",
        "section",
        "small",
        "source",
        "span",
        "strike",
        "strong",
        "sub",
        "summary",
        "sup",
        "table",
        "tbody",
        "td",
        "tfoot",
        "th",
        "thead",
        "tr",
        "u",
        "ul",
        "var",
        "video",
        "audio",
        "figure",
        "figcaption",
        "picture",
        "nav",
        "aside",
        "article",
        "header",
        "footer",
        "main",
        "caption",
        "col",
        "colgroup",
        "dl",
        "dt",
        "dd",
        "wbr",
    ]
)
_VOID_TAGS = frozenset(["br", "hr", "img", "wbr", "source", "col"])
_BREAK_TAGS = frozenset(["br", "hr", "p", "div", "li", "tr", "td", "th", "dt", "dd"])
# Tutorial-engine tags read as block markers (javascript.info style).
_BB_TAGS = frozenset(
    [
        "cut",
        "smart",
        "warn",
        "info",
        "summary",
        "head",
        "online",
        "offline",
        "edit",
        "iframe",
        "codetabs",
        "demo",
        "compare",
        "importance",
        "libs",
        "task",
        "recent",
        "quote",
        "spoiler",
        "hint",
        "tip",
        "note",
    ]
)
_BB_DROP_CONTENT = frozenset({"head"})
_TITLE_ATTRS = ("title", "label", "header", "heading", "name", "caption", "summary")
_FALSE = frozenset({"", "0", "false", "no", "off"})
_IDENT = re.compile(r"[A-Za-z][\w-]*")
_YFM_VAR = re.compile(r"\{\{\s*([\w.-]+)\s*\}\}")
_TAG = re.compile(r"<(/?)([A-Za-z][\w.:-]*)((?:\s+(?:[^<>\"'{}]|\"[^\"]*\"|'[^']*'|\{[^{}]*\})*)?)\s*(/?)>")
_ATTR = re.compile(r"""([\w:-]+)\s*=\s*(?:"([^"]*)"|'([^']*)'|\{["'`]([^"'`]*)["'`]\})""")
_BB_LINE = re.compile(r"\[(/?)([a-z][\w-]*)((?:\s[^\]]*)?)\]")
_MDX_ESM = re.compile(
    r"(?:import\s.+\sfrom\s+['\"].+['\"]|import\s+['\"].+['\"]|export\s+(?:const|default|function)\b.*);?"
)
_LIST_START = re.compile(r"(?:[-*+]|\d{1,9}[.)])(?:\s|$)")
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


@dataclass
class _Ctx:
    variables: Mapping[str, str]
    include: IncludeLoader | None
    notes: list[str] = field(default_factory=list)
    counters: dict[str, int] = field(default_factory=dict)
    numbers: dict[str, str] = field(default_factory=dict)

    def note(self, msg: str) -> None:
        if msg not in self.notes:
            self.notes.append(msg)


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
    ctx = _Ctx(dict(variables or {}), include)
    out = _read(text, ctx, key, (key,), None)
    for msg in ctx.notes:
        logger.debug("%s: %s", key or "document", msg)
    return Reading(out, tuple(ctx.notes))


# --------------------------------------------------------------------------
# Lines: code verbatim, prose through the directive scanner
# --------------------------------------------------------------------------


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


def _read(text: str, ctx: _Ctx, key: str, stack: tuple[str, ...], tags: frozenset[str] | None) -> str:
    text = _strip_libs(text.replace("\r\n", "\n"))
    tokens = block_tokens(text, containers=True)
    if "|===" in text:  # AsciiDoc tables first: their rows are not Markdown, the parser misreads them
        fenced = {k for t in tokens if t.type == "fence" and t.map for k in range(*t.map)}
        converted = _adoc_tables(text, fenced)
        if converted != text:
            text, tokens = converted, block_tokens(converted, containers=True)
    lines = text.split("\n")
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
    out = _Out()
    render = _Renderer(ctx, key, stack, tags, out)
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
    return result.rstrip("\n") + "\n" * (len(text) - len(text.rstrip("\n")) or bool(unclosed))


# --------------------------------------------------------------------------
# Output with a pending label ("Примечание:" waits for the text it introduces)
# --------------------------------------------------------------------------


class _Out:
    def __init__(self) -> None:
        self.parts: list[str] = []
        self.soft = False  # the last thing added came from a directive, not from the file

    def add(self, s: str, soft: bool = True) -> None:
        if s:
            self.parts.append(s)
            self.soft = soft

    def ends_blank(self) -> bool:
        tail = "".join(self.parts[-3:])
        return not tail.strip() or tail.endswith("\n\n")

    def text(self) -> str:
        return "".join(self.parts)


def _is_plain_start(line: str) -> bool:
    """Whether a line starts a plain paragraph (a label can go in front of it)."""
    s = line.lstrip()
    return bool(s) and not (_LIST_START.match(s) or s[0] in "|#>`~<" or s.startswith(":::"))


@dataclass
class _Open:
    name: str  # dialect-qualified: b:note, y:cut, h:tab, j:TabItem, x:smart, c:container
    hide: bool = False  # a false condition, or content no reader sees
    select: bool = False  # an included part whose tag was asked for
    cond: str = ""


# One scanned piece of a prose line: literal text, or a directive rendered as (text, is_block).
@dataclass(frozen=True)
class _Dir:
    kind: str  # open | close | single
    name: str
    text: str = ""  # what a reader sees
    label: bool = False  # text is a label to put before the next paragraph
    block: bool = False  # text is a title line of its own ("Личный кабинет:")
    hide: bool = False
    tag: str = ""  # includetag: its name, selected when an include asked for it
    cond: str = ""  # an undecided ifdef/ifndef: "ifdef:names", to spot an inline else-branch
    include: tuple[str, frozenset[str] | None] | None = None


class _Renderer:
    def __init__(
        self, ctx: _Ctx, key: str, stack: tuple[str, ...], tags: frozenset[str] | None, out: _Out
    ) -> None:
        self.ctx, self.key, self.stack, self.tags, self.out = ctx, key, stack, tags, out
        self.open: list[_Open] = []
        self._emitting = tags is None
        self.pending: tuple[str, str, str] | None = None  # (label, indent, the directive it belongs to)

    # ---- state -----------------------------------------------------------

    def emitting(self) -> bool:
        return self._emitting

    def _update(self) -> None:
        hidden = any(o.hide for o in self.open)
        self._emitting = not hidden and (self.tags is None or any(o.select for o in self.open))

    def push(self, d: _Dir) -> None:
        self.open.append(_Open(d.name, d.hide, self.tags is not None and d.tag in self.tags, d.cond))
        self._update()

    def pop(self, name: str) -> None:
        for i in range(len(self.open) - 1, -1, -1):
            if self.open[i].name == name:
                del self.open[i:]
                self._update()
                return

    def flush_label(self) -> None:
        if self.pending:
            label, indent, _ = self.pending
            self.pending = None
            self.block(f"{label}:", indent)

    def block(self, s: str, indent: str) -> None:
        """``s`` as a paragraph of its own, at ``indent``."""
        if not self.emitting() or not s.strip():
            return
        if not self.out.ends_blank():
            self.out.add("\n")
        self.out.add("\n".join(indent + ln if ln.strip() else "" for ln in s.split("\n")) + "\n\n")

    # ---- lines -------------------------------------------------------------

    def code_line(self, line: str) -> None:
        self.flush_label()
        if self.emitting():
            self.out.add(line + "\n", soft=False)

    def container(self, kind: str, info: str, indent: str) -> None:
        if kind == "skip":
            return
        if kind == "close":
            self.flush_label()
            self.pop("c:container")
            self.out.add("\n" if self.emitting() else "")
            return
        word, _, rest = info.partition(" ")
        if kind == "admon":  # warning "Осторожно"
            self.flush_label()
            title = rest.strip().strip('"').strip()
            self.pending = (title or LABELS.get(word.lower(), word.capitalize()), indent, "admon")
            return
        if "[" in word:  # :::info[Заголовок]
            word, _, more = info.partition("[")
            rest = more.rsplit("]", 1)[0]
        self.flush_label()
        self.open.append(_Open("c:container"))
        self._update()
        title = rest.strip()
        self.pending = (title or LABELS.get(word.lower(), word.capitalize()), indent, "c:container")

    def prose(self, segment: str) -> None:
        segment = _drop_comments(segment)
        for line in segment.split("\n"):
            self.line(line)

    def line(self, line: str) -> None:
        if not line.strip():  # kept as written, unless directives already left a blank line
            if self.pending is None and self.emitting() and not (self.out.soft and self.out.ends_blank()):
                self.out.add(line + "\n", soft=False)
            return
        if not line[:1].isspace() and _MDX_ESM.fullmatch(line.strip()):
            return
        items = _scan_line(line, self.ctx)
        indent = line[: len(line) - len(line.lstrip())]
        if all(isinstance(it, _Dir) or not it.strip() for it in items):
            for it in items:
                if isinstance(it, _Dir):
                    self.alone(it, indent)
            return
        parts: list[str] = []
        closed = ""  # the undecided condition closed just before, if nothing came since
        for it in items:
            if isinstance(it, str):
                if self.emitting():
                    parts.append(it)
                closed = closed if not it.strip() else ""
                continue
            if it.cond and closed and _else_branch(closed, it.cond):
                it = _Dir("open", it.name, hide=True)  # one sentence shows one of the variants
            if it.kind == "close" and self.open and self.open[-1].name == it.name:
                closed = self.open[-1].cond
            else:
                closed = ""
            parts.append(self.inline(it))
        text = "".join(parts)
        if not self.emitting() and not text.strip():
            return
        if self.pending:
            label = self.pending[0]
            if _is_plain_start(text):
                self.pending = None
                lead = text[: len(text) - len(text.lstrip())]
                text = f"{lead}{label}: {text.lstrip()}"
            else:
                self.flush_label()
        if text.strip() or self.emitting():
            self.out.add((text if len(items) == 1 else text.rstrip()) + "\n", soft=False)

    # ---- directives --------------------------------------------------------

    def alone(self, d: _Dir, indent: str) -> None:
        """A directive on a line of its own: labels wait for their paragraph, titles are lines."""
        if d.kind == "close":
            if self.pending and self.pending[2] == d.name:
                self.pending = None  # a note with nothing in it says nothing
            self.pop(d.name)
            if self.emitting() and not self.out.ends_blank():
                self.out.add("\n")
            return
        if d.include is not None:
            self.flush_label()
            self.block(self.included(*d.include), indent)
            return
        if d.kind == "open":
            if d.text:
                self.flush_label()
            self.push(d)
        if d.label and d.text:
            self.pending = (d.text, indent, d.name) if self.emitting() else None
        elif d.text:
            self.flush_label()
            self.block(d.text + (":" if d.block and not d.text.endswith(":") else ""), indent)
        elif self.emitting() and not self.out.ends_blank() and d.kind != "single":
            self.out.add("\n")

    def inline(self, d: _Dir) -> str:
        """A directive inside a line of text: its words, no line of its own."""
        was = self.emitting()
        if d.kind == "close":
            self.pop(d.name)
            return ""
        if d.kind == "open":
            self.push(d)
        if d.include is not None:
            return " ".join(self.included(*d.include).split()) if was else ""
        if not was:
            return ""
        return f"{d.text}:" if d.label and d.text else d.text

    def included(self, target: str, tags: frozenset[str] | None) -> str:
        if not self.emitting():
            return ""
        ctx = self.ctx
        who = self.key or "document"
        if ctx.include is None:
            ctx.note(f"{who}: include {target} not read (no include resolver)")
            return ""
        got = ctx.include(target, self.key)
        if got is None:
            ctx.note(f"{who}: include {target} not found")
            return ""
        inc_key, inc_text = got
        if inc_key in self.stack:
            ctx.note(f"{who}: include cycle {' -> '.join((*self.stack, inc_key))}; not included again")
            return ""
        if len(self.stack) > MAX_INCLUDE_DEPTH:
            ctx.note(f"{who}: include {target} deeper than {MAX_INCLUDE_DEPTH} levels; not included")
            return ""
        if tags is not None:
            inc_text = _tagged_parts(inc_text, tags)
        return _read(inc_text, ctx, inc_key, (*self.stack, inc_key), None).strip("\n")

    def finish(self) -> None:
        self.flush_label()


# --------------------------------------------------------------------------
# The directive scanner (one prose line at a time)
# --------------------------------------------------------------------------


# A cell and its spec: [colspan][.rowspan](+|*)[align][style]| ("2+|", ".2+|", "a|", "^.^|")
_ADOC_CELL = re.compile(r"(?:\d*(?:\.\d+)?[+*])?(?:[<^>]?(?:\.[<^>])?)?[adehlmsv]?\|")


def _adoc_tables(text: str, fenced: set[int]) -> str:
    """AsciiDoc tables inside Markdown (``[cols="2,5", options="header"]`` + ``|===`` … ``|===``)
    become GFM pipe tables, which the chunker splits by rows; not inside fenced code."""
    lines = text.split("\n")
    out: list[str] = []
    k = 0
    while k < len(lines):
        if k not in fenced and lines[k].strip().startswith("[cols=") and k + 1 < len(lines):
            nxt = next((j for j in range(k + 1, len(lines)) if lines[j].strip()), k)
            if nxt - 1 > k and lines[nxt].lstrip().startswith("|") and lines[nxt].strip() != "|===":
                lines[nxt - 1] = "|==="  # the opening line is missing: the blank line before the rows opens
        if k in fenced or lines[k].strip() != "|===":
            out.append(lines[k])
            k += 1
            continue
        end = next(
            (j for j in range(k + 1, len(lines)) if lines[j].strip() == "|===" and j not in fenced), -1
        )
        if end < 0:
            out.append(lines[k])
            k += 1
            continue
        attrs = ""
        if out and out[-1].strip().startswith("[") and "cols" in out[-1]:
            attrs = out.pop().strip()
        indent = lines[k][: len(lines[k]) - len(lines[k].lstrip())]
        out.extend(indent + row for row in _adoc_rows(lines[k + 1 : end], attrs))
        k = end + 1
    return "\n".join(out)


def _adoc_rows(body: Sequence[str], attrs: str) -> list[str]:
    cells: list[str] = []
    first_row_len = 0
    header_gap = False
    for n, raw in enumerate(body):
        line = raw.strip()
        if not line:
            if cells and not first_row_len:
                first_row_len, header_gap = len(cells), True
            continue
        m = _ADOC_CELL.match(line)
        if m is None:
            if cells:
                cells[-1] = f"{cells[-1]} {line}".strip()
            continue
        parts = _ADOC_CELL.split(line[m.end() :]) if n >= 0 else []
        cells.extend(p.strip() for p in parts)
    cols = re.search(r'cols\s*=\s*"([^"]*)"', attrs)
    spec = cols.group(1) if cols else ""
    width = (
        sum(int(x.split("*")[0]) if "*" in x and x.split("*")[0].isdigit() else 1 for x in spec.split(","))
        if spec
        else 0
    )
    width = width or first_row_len or len(cells) or 1
    rows = [cells[i : i + width] for i in range(0, len(cells), width)]
    if not rows:
        return []
    rows[-1] += [""] * (width - len(rows[-1]))
    header = "header" in attrs or header_gap
    head, rest = (rows[0], rows[1:]) if header else ([""] * width, rows)

    def fmt(r: Sequence[str]) -> str:
        return "| " + " | ".join(c.replace("|", "\\|") for c in r) + " |"

    return [fmt(head), "|" + "---|" * width, *(fmt(r) for r in rest)]


def _else_branch(before: str, now: str) -> bool:
    """``{ifdef(x)}A{/ifdef}{ifndef(x)}B{/ifndef}``: B is A's alternative, never shown beside it."""
    (k1, n1), (k2, n2) = before.split(":", 1), now.split(":", 1)
    return n1 == n2 and k1 != k2


_INCLUDETAG = re.compile(r"\{includetag\(([^)]*)\)\}|\{/includetag\}")


def _tagged_parts(text: str, tags: frozenset[str]) -> str:
    """The parts of an include file inside the ``{includetag(…)}`` regions asked for, markers
    removed. Like the docs portal, a preprocessor over the text: a region may cut through a code
    block, and a 2,700-line snippet file included by 200 pages is not read whole each time."""
    out: list[str] = []
    selected: list[bool] = []
    for line in text.split("\n"):
        keep = any(selected)
        pieces: list[str] = []
        pos = 0
        for m in _INCLUDETAG.finditer(line):
            if any(selected):
                pieces.append(line[pos : m.start()])
            if m.group(1) is not None:
                selected.append(m.group(1).strip() in tags)
            elif selected:
                selected.pop()
            pos = m.end()
            keep = keep or any(selected)
        if any(selected):
            pieces.append(line[pos:])
        if pos == 0:
            if keep:
                out.append(line)
        elif "".join(pieces).strip():
            out.append("".join(pieces))
    return "\n".join(out)


def _drop_comments(s: str) -> str:
    """HTML comments go (a comment over several lines leaves its line breaks)."""
    out: list[str] = []
    pos = 0
    while True:
        a = _find_outside_code(s, "<!--", pos)
        if a < 0:
            out.append(s[pos:])
            return "".join(out)
        b = s.find("-->", a + 4)
        end = len(s) if b < 0 else b + 3
        out.append(s[pos:a])
        out.append("\n" * s.count("\n", a, end))
        pos = end


def _find_outside_code(s: str, needle: str, pos: int) -> int:
    while True:
        a = s.find(needle, pos)
        if a < 0:
            return -1
        tick = s.find("`", pos, a)
        if tick < 0:
            return a
        end = _code_span_end(s, tick)
        pos = end if end > tick else tick + 1
        if end > a:
            continue
        return _find_outside_code(s, needle, pos)


def _code_span_end(s: str, p: int) -> int:
    """End of the inline code span opening at ``p`` (a backtick run), or ``p + run`` if unclosed."""
    run = 1
    while p + run < len(s) and s[p + run] == "`":
        run += 1
    q = p + run
    while True:
        a = s.find("`" * run, q)
        if a < 0:
            return p + run
        b = a
        while b < len(s) and s[b] == "`":
            b += 1
        if b - a == run:
            return b
        q = b


def _balanced(s: str, p: int, close: str) -> int:
    """Index after the bracket closing the one at ``p``; -1 if the line ends first."""
    pairs = {"(": ")", "[": "]", "{": "}"}
    want = [close]
    q = p + 1
    while q < len(s):
        ch = s[q]
        if ch in pairs:
            want.append(pairs[ch])
        elif want and ch == want[-1]:
            want.pop()
            if not want:
                return q + 1
        q += 1
    return -1


def _loose_link(s: str, p: int, name: str) -> tuple[int, _Dir] | None:
    """A link directive with its brackets out of order (``{linkto(#x[text=Слова]})``): its text."""
    end = s.find("}", p)
    if name == "linkto" and (end < 0 or "text=" not in s[p:end]):  # never closed: the target goes
        close = s.find(")", p)
        return (close + 1, _Dir("single", f"b:{name}")) if close > 0 else None
    if name != "linkto":
        return None
    text = s[s.index("text=", p) + 5 : end].split("]", 1)[0]
    return end + 1 + s.startswith(")", end + 1), _Dir("single", f"b:{name}", text.strip())


def _loose_paren_end(s: str, q: int) -> int:
    """For an argument with a stray bracket (``{heading(A (b)[id=x]}``): after the first ``)`` that
    a ``}`` or a ``[…]}`` follows; -1 when there is none."""
    e = s.find(")", q)
    while e >= 0:
        if s.startswith("}", e + 1):
            return e + 1
        if s.startswith("[", e + 1):
            b = s.find("]", e + 1)
            if b >= 0 and s.startswith("}", b + 1):
                return e + 1
        e = s.find(")", e + 1)
    return -1


def _params(raw: str) -> dict[str, str]:
    """``text=Общими сетями`` / ``id=x;align=right`` -> dict (values may hold directives)."""
    out: dict[str, str] = {}
    depth = 0
    cur: list[str] = []
    items: list[str] = []
    for ch in raw:
        if ch in "({[":
            depth += 1
        elif ch in ")}]":
            depth -= 1
        if ch == ";" and depth == 0:
            items.append("".join(cur))
            cur = []
        else:
            cur.append(ch)
    items.append("".join(cur))
    for item in items:
        k, sep, v = item.partition("=")
        if sep:
            out[k.strip()] = v.strip()
    return out


_SPECIAL = re.compile(r"[`\\{<]")


def _scan_line(line: str, ctx: _Ctx) -> list[str | _Dir]:
    """Literal text and directives of one prose line; code spans are text, untouched."""
    if line.lstrip().startswith("["):
        bb = _bb_line(line, ctx)
        if bb is not None:
            return bb
    items: list[str | _Dir] = []
    buf: list[str] = []
    p, n = 0, len(line)
    while p < n:
        m = _SPECIAL.search(line, p)
        if m is None:
            buf.append(line[p:])
            break
        if m.start() > p:
            buf.append(line[p : m.start()])
            p = m.start()
        ch = line[p]
        if ch == "`":
            end = _code_span_end(line, p)
            buf.append(line[p:end])
            p = end
            continue
        if ch == "\\" and p + 1 < n:
            buf.append(line[p : p + 2])
            p += 2
            continue
        got: tuple[int, _Dir] | None = None
        if ch == "{":
            got = _brace(line, p, ctx)
        elif ch == "<":
            got = _tag(line, p)
        if got is None:
            buf.append(ch)
            p += 1
            continue
        end, d = got
        if buf:
            items.append("".join(buf))
            buf = []
        items.append(d)
        p = end
    if buf:
        items.append("".join(buf))
    return items


def _inline_text(s: str, ctx: _Ctx) -> str:
    """Directives inside a directive's argument (a caption's counter, a link text's variable)."""
    return "".join(it if isinstance(it, str) else it.text for it in _scan_line(s, ctx)).strip()


def _brace(s: str, p: int, ctx: _Ctx) -> tuple[int, _Dir] | None:
    if s.startswith("{%", p):
        end = s.find("%}", p + 2)
        return None if end < 0 else (end + 2, _yfm(s[p + 2 : end].strip(), ctx))
    if s.startswith("{{<", p) or s.startswith("{{%", p):
        close = ">}}" if s[p + 2] == "<" else "%}}"
        end = s.find(close, p + 3)
        return None if end < 0 else (end + 3, _hugo(s[p + 3 : end].strip(), ctx))
    if s.startswith("{{", p):
        m = _YFM_VAR.match(s, p)
        return None if m is None else (m.end(), _Dir("single", "var", _var(m.group(1), ctx)))
    if s.startswith("{/*", p):  # an MDX comment
        end = s.find("*/}", p)
        return None if end < 0 else (end + 3, _Dir("single", "comment"))
    q = p + 1
    if s.startswith("#", q):  # {#anchor}: kept on a heading line, where the chunker reads it
        end = s.find("}", q)
        if end < 0 or " " in s[q:end]:
            return None
        heading = s[:p].lstrip().startswith("#")
        return end + 1, _Dir("single", "anchor", s[p : end + 1] if heading else "")
    closing = s.startswith("/", q)
    m = _IDENT.match(s, q + closing)
    if m is None:
        return None
    name, q = m.group(), m.end()
    if closing:
        return (q + 1, _Dir("close", f"b:{name}")) if s.startswith("}", q) else None
    arg = params = ""
    if s.startswith(":", q):
        m2 = re.compile(r":([\w-]+)\}").match(s, q)
        if m2 is None or name != "note":
            return None
        return m2.end(), _Dir("open", "b:note", LABELS.get(m2.group(1).lower(), "Примечание"), label=True)
    if s.startswith("(", q):
        e = _balanced(s, q, ")")
        if e < 0:
            e = _loose_paren_end(s, q)
        if e < 0:
            return None
        arg, q = s[q + 1 : e - 1], e
    if s.startswith("[", q):
        e = _balanced(s, q, "]")
        if e < 0:
            return None
        params, q = s[q + 1 : e - 1], e
    if not s.startswith("}", q):
        return _loose_link(s, p, name)
    if not (arg or params) and name not in ("tabs", "swagger", "toc", "cut", "note", "anchor"):
        return None
    d = _brace_dir(name, arg, _params(params), ctx, bare=not (arg or params))
    return (q + 1, d) if d is not None else None


def _condition(names: str, ctx: _Ctx) -> bool | None:
    """Whether ``names`` (a comma list) has a defined one; None when no name is known."""
    listed = [x.strip() for x in names.split(",") if x.strip()]
    known = [x for x in listed if x in ctx.variables]
    if not known:
        return None
    return any(ctx.variables[x].strip().lower() not in _FALSE for x in known)


def _brace_dir(name: str, arg: str, params: dict[str, str], ctx: _Ctx, bare: bool) -> _Dir | None:
    b = f"b:{name}"
    if name == "note":
        return _Dir("open", b, "Примечание", label=True)
    if name in ("tabs", "swagger", "toc", "anchor"):
        return _Dir("open" if name == "tabs" else "single", b)
    if name in ("tab", "cut"):
        return _Dir("open", b, _inline_text(arg, ctx), block=True)
    if name in ("ifdef", "ifndef"):
        cond = _condition(arg, ctx)
        hide = cond is not None and cond == (name == "ifndef")
        return _Dir("open", b, hide=hide, cond="" if cond is not None else f"{name}:{arg.replace(' ', '')}")
    if name == "includetag":
        return _Dir("open", b, tag=arg.strip())
    if name == "include":
        tags = params.get("tags")
        return _Dir(
            "single",
            b,
            include=(arg.strip(), frozenset(t.strip() for t in tags.split(",")) if tags else None),
        )
    if name == "var":
        return _Dir("single", b, _var(arg.strip(), ctx))
    if name == "linkto":
        return _Dir("single", b, _inline_text(params.get("text", ""), ctx))
    if name == "heading":
        anchor = params.get("id", "").strip()
        title = _inline_text(arg, ctx)
        return _Dir("single", b, f"{title} {{#{anchor}}}" if anchor else title)
    if name == "caption":
        return _Dir("open", b, _inline_text(arg, ctx))
    if name == "counter":
        ctx.counters[arg] = ctx.counters.get(arg, 0) + 1
        number = str(ctx.counters[arg])
        if params.get("id"):
            ctx.numbers[params["id"]] = number
        return _Dir("single", b, number)
    if name == "const":
        return _Dir("single", b, ctx.numbers.get(arg.strip(), ""))
    if name == "params" or bare:
        return _Dir("single", b)
    if "text" in params:  # an unknown link-like directive: its text
        return _Dir("single", b, _inline_text(params["text"], ctx))
    return None


def _var(name: str, ctx: _Ctx) -> str:
    if name in ctx.variables:
        return ctx.variables[name]
    ctx.note(f"variable {name!r} has no value (pass --var {name}=VALUE or set it in the rules file)")
    return name


def _words(raw: str) -> list[str]:
    try:
        return shlex.split(raw)
    except ValueError:
        return raw.split()


def _yfm(raw: str, ctx: _Ctx) -> _Dir:
    words = _words(raw)
    name = words[0].lower() if words else ""
    rest = words[1:]
    if name == "note":
        kind = rest[0].lower() if rest else "info"
        title = " ".join(rest[1:])
        return _Dir("open", "y:note", title or LABELS.get(kind, "Примечание"), label=True)
    if name == "cut":
        return _Dir("open", "y:cut", " ".join(rest), block=True)
    if name in ("hint", "callout", "admonition"):  # GitBook: {% hint style="warning" %}
        attrs = _attrs(raw)
        kind = (attrs.get("style") or attrs.get("type") or (rest[0] if rest else "info")).lower()
        return _Dir("open", f"y:{name}", attrs.get("title") or LABELS.get(kind, "Примечание"), label=True)
    if name == "tab":  # GitBook: {% tab title="Windows" %}
        return _Dir("open", "y:tab", _attrs(raw).get("title", ""), block=True)
    if name in ("list", "if", "ifdef", "changelog", "tabs"):
        return _Dir("open", f"y:{name}")
    if name.startswith("end"):
        return _Dir("close", f"y:{name[3:]}")
    if name == "include":
        m = re.search(r"\]\(([^)\s]+)\)", raw)
        return _Dir("single", "y:include", include=(m.group(1), None) if m else None)
    return _Dir("single", f"y:{name}")


def _attrs(raw: str) -> dict[str, str]:
    return {m.group(1).lower(): next(g for g in m.groups()[1:] if g is not None) for m in _ATTR.finditer(raw)}


def _hugo(raw: str, ctx: _Ctx) -> _Dir:
    raw = raw.rstrip("/").strip()
    if raw.startswith("/"):
        return _Dir("close", f"h:{raw[1:].split()[0] if raw[1:].split() else ''}")
    words = _words(raw)
    name = words[0] if words else ""
    attrs = _attrs(raw)
    plain = [w for w in words[1:] if "=" not in w]
    title = next((attrs[a] for a in _TITLE_ATTRS if a in attrs), "")
    low = name.lower()
    if low in (
        "hint",
        "notice",
        "alert",
        "callout",
        "admonition",
        "note",
        "tip",
        "warning",
        "info",
        "danger",
    ):
        kind = (attrs.get("type") or (plain[0] if plain else low)).lower()
        return _Dir("open", f"h:{name}", title or LABELS.get(kind, "Примечание"), label=True)
    if low in ("tab", "tabs", "details", "expand", "collapse", "spoiler", "accordion"):
        return _Dir("open", f"h:{name}", title or (" ".join(plain) if low != "tabs" else ""), block=True)
    if low in ("figure", "img", "image"):
        return _Dir("single", f"h:{name}", attrs.get("caption") or attrs.get("alt") or title)
    if low == "param" and plain:
        return _Dir("single", "h:param", _var(plain[0], ctx))
    return _Dir("single", f"h:{name}")


def _tag(s: str, p: int) -> tuple[int, _Dir] | None:
    """An HTML tag of a known element, or a JSX component tag (``<TabItem label="…">``)."""
    m = _TAG.match(s, p)
    if m is None:
        return None
    closing, name, raw, selfclose = m.group(1), m.group(2), m.group(3) or "", m.group(4)
    if name.startswith("info:") and not raw:  # a tutorial's link to an article: <info:closure>
        return m.end(), _Dir("single", "j:info", name[5:].replace("-", " "))
    low = name.lower()
    component = name[0].isupper() and any(c.islower() for c in name) and "_" not in name
    if low not in _HTML_TAGS and not component:
        return None
    if component and not (closing or selfclose or raw.strip() or f"</{name}>" in s or name in _JSX_KNOWN):
        return None  # <Name> alone in prose is a placeholder, not a component
    qual = f"j:{name}"
    if closing:
        return m.end(), _Dir("close", qual, " " if low in _BREAK_TAGS else "")
    attrs = _attrs(raw)
    title = next((attrs[a] for a in _TITLE_ATTRS if a in attrs), "")
    if low in ("admonition", "callout", "note", "aside") or ("type" in attrs and component):
        kind = attrs.get("type", low).lower()
        return m.end(), _Dir("open", qual, title or LABELS.get(kind, "Примечание"), label=True)
    if low == "img":
        return m.end(), _Dir("single", qual, attrs.get("alt", ""))
    text = title or (" " if low in _BREAK_TAGS else "")
    kind = "single" if selfclose or low in _VOID_TAGS else "open"
    return m.end(), _Dir(kind, qual, text, block=bool(title) and component)


_JSX_KNOWN = frozenset(
    [
        "Tabs",
        "TabItem",
        "Tab",
        "Admonition",
        "Callout",
        "Note",
        "Tip",
        "Warning",
        "Details",
        "Summary",
        "CodeBlock",
        "Steps",
        "Step",
        "Card",
        "Cards",
    ]
)


def _bb_line(line: str, ctx: _Ctx) -> list[str | _Dir] | None:
    """A BBCode-like tag alone on its line: ``[smart header="…"]``, ``[/smart]``, ``[cut]``."""
    s = line.strip()
    m = _BB_LINE.fullmatch(s)
    if m is None or s.startswith("[^"):
        return None
    closing, name, raw = m.group(1), m.group(2), m.group(3) or ""
    if name not in _BB_TAGS and not closing:
        return None
    if closing:
        return [_Dir("close", f"x:{name}")]
    attrs = _attrs(raw)
    title = next((attrs[a] for a in _TITLE_ATTRS if a in attrs), "")
    if name in _BB_DROP_CONTENT:
        return [_Dir("open", f"x:{name}", hide=True)]
    if name in ("smart", "warn", "info", "summary", "quote", "spoiler", "hint", "tip", "note"):
        label = title or LABELS.get(name, "")
        return [_Dir("open", f"x:{name}", label, label=bool(label))]
    return [_Dir("single", f"x:{name}")]


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
