"""The renderer: scanned prose lines and code lines -> readable Markdown.

It keeps the stack of open directives (a false condition or an unselected include part hides what
is inside), holds a label ("Примечание") until the paragraph it introduces, writes titles as lines
of their own, and inlines includes through the reader function it is given (so this module does
not import the reader that imports it).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import lru_cache

from osrag.chunking.directive import LABELS, MAX_INCLUDE_DEPTH, Directive, ReadContext
from osrag.chunking.inclusion import Reader, read_included
from osrag.chunking.scanner import drop_comments, scan_line

_MDX_ESM = re.compile(
    r"(?:import\s.+\sfrom\s+['\"].+['\"]|import\s+['\"].+['\"]|export\s+(?:const|default|function)\b.*);?"
)
_LIST_START = re.compile(r"(?:[-*+]|\d{1,9}[.)])(?:\s|$)")
_INCLUDETAG = re.compile(r"\{includetag\(([^)]*)\)\}|\{/includetag\}")


class Out:
    """Output with a pending label ("Примечание:" waits for the text it introduces)."""

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


class Renderer:
    """One file's prose and code lines, in order, into ``out``; ``read`` reads an included file."""

    def __init__(
        self,
        ctx: ReadContext,
        key: str,
        stack: tuple[str, ...],
        tags: frozenset[str] | None,
        out: Out,
        read: Reader,
    ) -> None:
        self.ctx, self.key, self.stack, self.tags, self.out, self.read = ctx, key, stack, tags, out, read
        self.open: list[_Open] = []
        self._emitting = tags is None
        self.pending: tuple[str, str, str] | None = None  # (label, indent, the directive it belongs to)

    # ---- state -----------------------------------------------------------

    def emitting(self) -> bool:
        return self._emitting

    def _update(self) -> None:
        hidden = any(o.hide for o in self.open)
        self._emitting = not hidden and (self.tags is None or any(o.select for o in self.open))

    def push(self, d: Directive) -> None:
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
        segment = drop_comments(segment)
        for line in segment.split("\n"):
            self.line(line)

    def line(self, line: str) -> None:
        if not line.strip():  # kept as written, unless directives already left a blank line
            if self.pending is None and self.emitting() and not (self.out.soft and self.out.ends_blank()):
                self.out.add(line + "\n", soft=False)
            return
        if not line[:1].isspace() and _MDX_ESM.fullmatch(line.strip()):
            return
        items = scan_line(line, self.ctx)
        indent = line[: len(line) - len(line.lstrip())]
        if all(isinstance(it, Directive) or not it.strip() for it in items):
            for it in items:
                if isinstance(it, Directive):
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
                it = Directive("open", it.name, hide=True)  # one sentence shows one of the variants
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

    def alone(self, d: Directive, indent: str) -> None:
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

    def inline(self, d: Directive) -> str:
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
        return read_included(self.read, inc_text, ctx, inc_key, (*self.stack, inc_key)).strip("\n")

    def finish(self) -> None:
        self.flush_label()


def _else_branch(before: str, now: str) -> bool:
    """``{ifdef(x)}A{/ifdef}{ifndef(x)}B{/ifndef}``: B is A's alternative, never shown beside it."""
    (k1, n1), (k2, n2) = before.split(":", 1), now.split(":", 1)
    return n1 == n2 and k1 != k2


#: Include texts up to this many characters have their tag index remembered (32 texts).
TAGGED_CACHE_CHARS = 1_000_000


def _tagged_parts(text: str, tags: frozenset[str]) -> str:
    """The parts of an include file inside the ``{includetag(…)}`` regions asked for, markers
    removed. Like the docs portal, a preprocessor over the text: a region may cut through a code
    block. A snippet file is included by hundreds of pages, each asking for other tags: its
    regions are found once (``_tag_index``, a pure function of the text, remembered) and each
    selection only filters them."""
    index = _remembered_index(text) if len(text) <= TAGGED_CACHE_CHARS else _tag_index(text)
    out: list[str] = []
    for regions, part in index:
        if isinstance(part, str):  # whole lines inside the same regions
            if not regions.isdisjoint(tags):
                out.append(part)
            continue
        kept = "".join(piece for inside, piece in part if not inside.isdisjoint(tags))
        if kept.strip():
            out.append(kept)
    return "\n".join(out)


#: One entry of a tag index: whole lines (the tags of the regions they are in, the lines), or one
#: line with markers (its pieces, each with the tags of the regions it is in).
_Indexed = tuple[frozenset[str], "str | tuple[tuple[frozenset[str], str], ...]"]


@lru_cache(maxsize=32)
def _remembered_index(text: str) -> tuple[_Indexed, ...]:
    return _tag_index(text)


def _tag_index(text: str) -> tuple[_Indexed, ...]:
    """``text`` as runs of lines inside the same ``{includetag}`` regions and lines with markers
    cut into pieces: a part shows when a region it is in was asked for. A closing marker with no
    region open closes nothing."""
    index: list[_Indexed] = []
    run: list[str] = []
    run_tags: frozenset[str] = frozenset()
    open_: list[str] = []

    def end_run() -> None:
        if run:
            index.append((run_tags, "\n".join(run)))
            run.clear()

    for line in text.split("\n"):
        marks = list(_INCLUDETAG.finditer(line))
        if not marks:
            inside = frozenset(open_)
            if inside != run_tags:
                end_run()
                run_tags = inside
            if inside:
                run.append(line)
            continue
        end_run()
        pieces: list[tuple[frozenset[str], str]] = []
        pos = 0
        for m in marks:
            if open_:
                pieces.append((frozenset(open_), line[pos : m.start()]))
            if m.group(1) is not None:
                open_.append(m.group(1).strip())
            elif open_:
                open_.pop()
            pos = m.end()
        if open_:
            pieces.append((frozenset(open_), line[pos:]))
        index.append((frozenset(), tuple(pieces)))
    end_run()
    return tuple(index)
