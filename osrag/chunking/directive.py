"""What the reader's dialect scanners share: the read context, the scanned directive, labels.

A ``Directive`` is one directive of any dialect as the renderer sees it (open, close or single, the
text a reader sees, whether that text is a label or a title line); a ``ReadContext`` carries the
known variables, the include callback, counters and the notes of one read.
"""

from __future__ import annotations

import re
import shlex
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

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

#: Includes nested deeper than this are not read (a guard besides the cycle check).
MAX_INCLUDE_DEPTH = 8

#: Attributes that title a component, a shortcode or a BBCode tag, in order of preference.
TITLE_ATTRS = ("title", "label", "header", "heading", "name", "caption", "summary")
_FALSE = frozenset({"", "0", "false", "no", "off"})
_ATTR = re.compile(r"""([\w:-]+)\s*=\s*(?:"([^"]*)"|'([^']*)'|\{["'`]([^"'`]*)["'`]\})""")


@dataclass
class ReadContext:
    """One read of a file and its includes: known variables, the include callback, what was noted."""

    variables: Mapping[str, str]
    include: IncludeLoader | None
    notes: list[str] = field(default_factory=list)
    counters: dict[str, int] = field(default_factory=dict)
    numbers: dict[str, str] = field(default_factory=dict)
    #: How many times a directive read or wrote the document's counters: a read that did is
    #: not a pure function of its text (``osrag.chunking.inclusion`` does not remember it).
    stateful: int = 0

    def note(self, msg: str) -> None:
        if msg not in self.notes:
            self.notes.append(msg)


# One scanned piece of a prose line: literal text, or a directive rendered as (text, is_block).
@dataclass(frozen=True)
class Directive:
    kind: str  # open | close | single
    name: str
    text: str = ""  # what a reader sees
    label: bool = False  # text is a label to put before the next paragraph
    block: bool = False  # text is a title line of its own ("Личный кабинет:")
    hide: bool = False
    tag: str = ""  # includetag: its name, selected when an include asked for it
    cond: str = ""  # an undecided ifdef/ifndef: "ifdef:names", to spot an inline else-branch
    include: tuple[str, frozenset[str] | None] | None = None


def variable(name: str, ctx: ReadContext) -> str:
    """The value of a variable; an unknown one leaves its name and a note."""
    if name in ctx.variables:
        return ctx.variables[name]
    ctx.note(f"variable {name!r} has no value (pass --var {name}=VALUE or set it in the rules file)")
    return name


def condition(names: str, ctx: ReadContext) -> bool | None:
    """Whether ``names`` (a comma list) has a defined one; None when no name is known."""
    listed = [x.strip() for x in names.split(",") if x.strip()]
    known = [x for x in listed if x in ctx.variables]
    if not known:
        return None
    return any(ctx.variables[x].strip().lower() not in _FALSE for x in known)


def split_words(raw: str) -> list[str]:
    """Shell-like words of a directive (quoted titles stay one word); plain split if unbalanced."""
    try:
        return shlex.split(raw)
    except ValueError:
        return raw.split()


def parse_attrs(raw: str) -> dict[str, str]:
    """``key="value"`` attributes (also ``key={'value'}`` of JSX), keys lower-cased."""
    return {m.group(1).lower(): next(g for g in m.groups()[1:] if g is not None) for m in _ATTR.finditer(raw)}
