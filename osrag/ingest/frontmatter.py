"""Front matter: the YAML block between ``---`` lines at the top of a Markdown/text file.

Strict about osrag's own keys, because front matter decides who may read a document: an
``acl`` that is dropped or mangled makes a restricted document public. So the block is parsed
as YAML (lists, quoting and comments as a reader expects), keys are case-insensitive (``ACL:``
is ``acl:``), and anything osrag would otherwise have to guess at -- a key given twice, a block
without its closing ``---``, ``archived: on``, an unreadable date, ``acl: 123``, a key one edit
away from an osrag key (``acls:``, ``categroy:``) -- is a ``FrontMatterError`` naming the field,
which ingest reports as a per-file error. Nothing is coerced silently.

Never fail open: a block preceded by blank lines, or written with CR-only line ends, is still
read as front matter (line ends normalised); a block that cannot be read as front matter but
carries an access key (``acl``, ``tenant``) is an error, never body text.

Keys osrag does not know (``description``, ``slug``, ``tags``, ``sidebar_position``, ...) are
what real documentation carries: they are kept, as text, in ``FrontMatter.meta`` (stored and
filterable as ``meta.KEY``), not errors.

Pure: text in, typed values out.
"""

from __future__ import annotations

import datetime as dt
import re
from dataclasses import dataclass, field
from typing import Any

import yaml

#: The keys osrag reads and types strictly.
KNOWN_KEYS = ("doc_id", "title", "category", "archived", "tenant", "acl", "updated_at", "source")
#: Keys that decide who may read a document: a block carrying one of them is never body text.
ACCESS_KEYS = ("acl", "tenant")
#: A group name in ``acl`` (and a tenant): no spaces, no commas.
_NAME = re.compile(r"^[^\s,]{1,200}$")
#: The only spellings of a boolean: YAML 1.1 also reads on/off/yes/no/y/n, which is a guess.
_BOOLEAN_WORDS = {"true": True, "false": False}
#: Longest value of a keyword field (doc_id, category, source): far below OpenSearch's 32 KB term.
MAX_KEYWORD_CHARS = 1000
#: A stored ``meta`` value longer than this is left out (and counted): meta is for filtering.
MAX_META_CHARS = 1000
#: Front matter is a few lines of metadata; a longer block is refused before YAML reads it.
MAX_FRONT_MATTER_CHARS = 64_000
#: Nodes of the block once every alias is expanded: nine levels of ``&a [*a, *a, ...]`` are
#: billions of nodes from a few hundred bytes, and kept unknown keys copy every one of them.
MAX_FRONT_MATTER_NODES = 10_000
#: Nesting of lists and mappings: real front matter nests two or three levels.
MAX_FRONT_MATTER_DEPTH = 20
#: A line that sets an access key, as YAML would read it (any case, optional quotes).
_ACCESS_LINE = re.compile(r"^\s*[\"']?(acl|tenant)[\"']?\s*:", re.IGNORECASE | re.MULTILINE)


class FrontMatterError(ValueError):
    """The front matter cannot be read as osrag's fields; the message names the field."""


class BoundedLoader(yaml.SafeLoader):
    """``yaml.SafeLoader`` that stops at ``MAX_FRONT_MATTER_NODES`` nodes counted with every alias
    expanded, at ``MAX_FRONT_MATTER_DEPTH`` levels of nesting, and at an alias that refers to the
    node it is inside of (a recursive structure): a ``FrontMatterError``, while composing, before
    anything is built. The count is what a consumer walking the data would visit, so nothing
    downstream (the kept ``meta`` copies included) can grow past it."""

    def __init__(self, stream: Any) -> None:
        super().__init__(stream)
        self._expanded = 0
        self._depth = 0
        self._open: set[str] = set()  # anchors whose node is being composed
        self._weight: dict[str, int] = {}  # anchor -> expanded nodes under it

    def _grow(self, nodes: int) -> None:
        self._expanded += nodes
        if self._expanded > MAX_FRONT_MATTER_NODES:
            raise FrontMatterError(
                f"front matter expands to more than {MAX_FRONT_MATTER_NODES:,} values "
                "(aliases '*name' repeat what they refer to); write it out plainly"
            )

    def compose_node(self, parent: Any, index: Any) -> Any:
        if self.check_event(yaml.AliasEvent):
            anchor = self.peek_event().anchor
            if anchor in self._open:
                raise FrontMatterError(f"front matter alias *{anchor} refers to a value that contains it")
            node = super().compose_node(parent, index)  # an undefined alias fails here, as YAML does
            self._grow(self._weight.get(anchor, 1))
            return node
        self._depth += 1
        if self._depth > MAX_FRONT_MATTER_DEPTH:
            raise FrontMatterError(f"front matter nests deeper than {MAX_FRONT_MATTER_DEPTH} levels")
        anchor = self.peek_event().anchor
        before = self._expanded
        self._grow(1)
        if anchor is not None:
            self._open.add(anchor)
        node = super().compose_node(parent, index)
        if anchor is not None:
            self._open.discard(anchor)
            self._weight[anchor] = self._expanded - before
        self._depth -= 1
        return node


def compose_bounded(text: str) -> Any:
    """The YAML node graph of ``text`` (None when empty) within the front-matter bounds, or a
    ``FrontMatterError``; a ``yaml.YAMLError`` for text that is not YAML."""
    if len(text) > MAX_FRONT_MATTER_CHARS:
        raise FrontMatterError(
            f"front matter is {len(text):,} characters long (limit {MAX_FRONT_MATTER_CHARS:,})"
        )
    return yaml.compose(text, Loader=BoundedLoader)


def load_bounded(text: str) -> Any:
    """``yaml.safe_load`` of ``text`` within the front-matter bounds (``compose_bounded``)."""
    if len(text) > MAX_FRONT_MATTER_CHARS:
        raise FrontMatterError(
            f"front matter is {len(text):,} characters long (limit {MAX_FRONT_MATTER_CHARS:,})"
        )
    return yaml.load(text, Loader=BoundedLoader)


@dataclass(frozen=True)
class FrontMatter:
    """A file's front matter: osrag's typed ``fields`` and the other keys as text (``meta``)."""

    fields: dict[str, Any] = field(default_factory=dict)
    #: Unknown keys as written, values as text (lists of text; nested mappings kept nested).
    meta: dict[str, Any] = field(default_factory=dict)
    #: Unknown keys whose value was too long to store (over ``MAX_META_CHARS``).
    meta_too_long: tuple[str, ...] = ()


def normalise_newlines(text: str) -> str:
    """CRLF and CR-only line ends as ``\\n`` (a classic-Mac file is one 'line' otherwise)."""
    return text.replace("\r\n", "\n").replace("\r", "\n")


def split_front_matter(text: str) -> tuple[str | None, str]:
    """(the YAML block or None, the body).

    A first non-blank line ``---`` opens a block. At line 1 it must close (else an error);
    after blank lines it is front matter when it closes and reads as ``key: value`` lines,
    an error when it carries an access key but does not, and body text (a thematic break)
    otherwise. Line ends are expected normalised (``normalise_newlines``).
    """
    lines = text.split("\n")
    first = next((i for i, line in enumerate(lines) if line.strip()), None)
    if first is None or lines[first].strip() != "---":
        return None, text
    close = next((i for i in range(first + 1, len(lines)) if lines[i].rstrip() == "---"), None)
    if first == 0:
        if close is None:
            raise FrontMatterError("front matter has no closing '---' line")
        return "\n".join(lines[1:close]), "\n".join(lines[close + 1 :]).lstrip("\n")
    # Blank lines before the opening '---': an editor's or a template's leftover, not a rule.
    block = "\n".join(lines[first + 1 : close if close is not None else len(lines)])
    carries_access = bool(_ACCESS_LINE.search(block))
    if close is not None and _is_mapping(block):
        return block, "\n".join(lines[close + 1 :]).lstrip("\n")
    if carries_access:
        where = f"line {first + 1}"
        if close is None:
            raise FrontMatterError(f"front matter opened at {where} has no closing '---' line")
        raise FrontMatterError(f"front matter at {where} (after blank lines) is not 'key: value' lines")
    return None, text


def _is_mapping(block: str) -> bool:
    try:
        node = compose_bounded(block)
    except yaml.YAMLError:
        return False
    return isinstance(node, yaml.MappingNode)


def parse_front_matter(text: str) -> tuple[dict[str, Any], str]:
    """Validated fields (lower-case keys; ``acl`` a list of groups, ``archived`` a bool,
    ``updated_at`` an ISO date) and the body without the block. Unknown keys are dropped
    here; ``read_front_matter`` keeps them."""
    front, body = read_front_matter(text)
    return front.fields, body


def read_front_matter(text: str) -> tuple[FrontMatter, str]:
    """The front matter (typed fields and kept unknown keys) and the body without the block."""
    raw, body = split_front_matter(normalise_newlines(text))
    if raw is None:
        return FrontMatter(), body
    return read_block(raw), body


def read_fields(raw: str) -> dict[str, Any]:
    """The YAML block as osrag's typed fields, or a ``FrontMatterError`` naming the first bad one."""
    return read_block(raw).fields


def read_block(raw: str) -> FrontMatter:
    """The YAML block as a ``FrontMatter``, or a ``FrontMatterError`` naming the first bad key."""
    try:
        node = compose_bounded(raw)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f" (line {mark.line + 2})" if mark is not None else ""
        problem = getattr(exc, "problem", None) or "invalid YAML"
        raise FrontMatterError(f"front matter is not valid YAML{where}: {problem}") from exc
    if node is None:
        return FrontMatter()
    if not isinstance(node, yaml.MappingNode):
        raise FrontMatterError("front matter must be 'key: value' lines")
    _no_duplicate_keys(node)
    try:
        data = load_bounded(raw)
    except (yaml.YAMLError, ValueError) as exc:  # e.g. a timestamp such as 2026-13-01
        bad = _unconstructable(node)
        raise FrontMatterError(
            f"front matter field {bad[0]!r} cannot be read: {bad[1]!r}" if bad else f"front matter: {exc}"
        ) from exc
    if not isinstance(data, dict):
        raise FrontMatterError("front matter must be 'key: value' lines")
    raw_values = {str(k.value).strip().lower(): v for k, v in node.value if isinstance(k, yaml.ScalarNode)}
    out: dict[str, Any] = {}
    meta: dict[str, Any] = {}
    too_long: list[str] = []
    for key, value in data.items():
        name = str(key).strip().lower()
        if name in KNOWN_KEYS:
            out[name] = _field(name, value, raw_values.get(name))
            continue
        likely = likely_key(name)
        if likely is not None:
            raise FrontMatterError(
                f"front matter field {str(key)!r} is unknown: did you mean {likely!r}? "
                f"(osrag's keys: {', '.join(KNOWN_KEYS)})"
            )
        kept = _meta_value(value)
        if kept is None:
            continue
        if _longest(kept) > MAX_META_CHARS:
            too_long.append(str(key))
            continue
        meta[str(key).strip()] = kept
    return FrontMatter(
        fields={k: v for k, v in out.items() if v is not None}, meta=meta, meta_too_long=tuple(too_long)
    )


def _no_duplicate_keys(node: yaml.MappingNode) -> None:
    """YAML keeps the last of two equal keys: ``acl: [finance]`` then ``acl: []`` would be public."""
    seen: set[str] = set()
    for k, _ in node.value:
        if not isinstance(k, yaml.ScalarNode):
            raise FrontMatterError("front matter keys must be plain names")
        name = str(k.value).strip().lower()
        if name in seen:
            raise FrontMatterError(
                f"front matter field {name!r} is given twice (line {k.start_mark.line + 2})"
            )
        seen.add(name)


def likely_key(name: str) -> str | None:
    """The osrag key ``name`` is one edit away from (a typo: ``acls``, ``categroy``, ``doc-id``), or None."""
    for known in KNOWN_KEYS:
        if name != known and _one_edit(name, known):
            return known
    return None


def _one_edit(a: str, b: str) -> bool:
    """One insertion, deletion, substitution or swap of neighbours (Damerau-Levenshtein distance 1)."""
    if abs(len(a) - len(b)) > 1:
        return False
    if len(a) == len(b):
        diff = [i for i in range(len(a)) if a[i] != b[i]]
        if len(diff) == 1:
            return True
        return (
            len(diff) == 2
            and diff[1] == diff[0] + 1
            and a[diff[0]] == b[diff[1]]
            and a[diff[1]] == b[diff[0]]
        )
    short, long_ = (a, b) if len(a) < len(b) else (b, a)
    return any(long_[:i] + long_[i + 1 :] == short for i in range(len(long_)))


def _meta_value(value: Any) -> Any:
    """An unknown key's value as text: scalars as text, lists of them, mappings nested; None for empty."""
    if value is None:
        return None
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (dt.date, dt.datetime)):
        return value.isoformat()
    if isinstance(value, (list, tuple)):
        items = [v for v in (_meta_value(x) for x in value) if v is not None]
        return items or None
    if isinstance(value, dict):
        inner = {str(k): v for k, v in ((k, _meta_value(x)) for k, x in value.items()) if v is not None}
        return inner or None
    text = str(value).strip()
    return text or None


def _longest(value: Any) -> int:
    if isinstance(value, list):
        return max((_longest(v) for v in value), default=0)
    if isinstance(value, dict):
        return max((_longest(v) for v in value.values()), default=0)
    return len(str(value))


def _unconstructable(node: Any) -> tuple[str, str] | None:
    """The first (key, raw value) whose value YAML cannot construct."""
    if not isinstance(node, yaml.MappingNode):
        return None
    for k, v in node.value:
        try:
            yaml.SafeLoader("").construct_object(v, deep=True)
        except (yaml.YAMLError, ValueError):
            return str(k.value), str(getattr(v, "value", ""))
    return None


def _field(name: str, value: Any, node: Any) -> Any:
    if name == "archived":
        return _boolean(name, node)
    if name in ACCESS_KEYS and (
        value is None or value == [] or (isinstance(value, str) and not value.strip())
    ):
        # An empty access key is a half-finished edit, not a decision: remove it for a public document.
        raise FrontMatterError(
            f"front matter field {name!r} is empty (remove the line for a public document)"
        )
    if name == "acl":
        groups = acl_groups(value)
        if groups is None:
            raise FrontMatterError(f"front matter field 'acl' has no group names, got {_short(value)}")
        return groups
    if name == "updated_at":
        return _date(name, value)
    if value is None:
        return None
    if not isinstance(value, str):
        raise FrontMatterError(
            f"front matter field {name!r} must be text, got {_kind(value)} {_short(value)} (quote it)"
        )
    if name == "tenant" and not _NAME.match(value.strip()):
        raise FrontMatterError(
            f"front matter field 'tenant' must be one name without spaces, got {_short(value)}"
        )
    if name == "doc_id" and not value.strip():
        raise FrontMatterError("front matter field 'doc_id' is empty")
    if name in ("doc_id", "category", "source") and len(value.strip()) > MAX_KEYWORD_CHARS:
        raise FrontMatterError(
            f"front matter field {name!r} is {len(value.strip()):,} characters long (limit {MAX_KEYWORD_CHARS:,})"
        )
    return value.strip()


def _boolean(name: str, node: Any) -> bool:
    """``true`` or ``false`` as written (any case); YAML 1.1's ``on``/``yes``/``y`` are refused."""
    raw = node.value.strip().lower() if isinstance(node, yaml.ScalarNode) else None
    if raw not in _BOOLEAN_WORDS or (node.style not in (None, "")):
        shown = node.value if isinstance(node, yaml.ScalarNode) else "a list or mapping"
        raise FrontMatterError(f"front matter field {name!r} must be true or false, got {_short(shown)}")
    return _BOOLEAN_WORDS[raw]


def acl_groups(value: Any) -> list[str] | None:
    """ACL groups from a YAML list of names or a comma-separated text; None for no groups.

    Anything else (a number, a nested list, a name with spaces) is a ``FrontMatterError``.
    """
    if value is None:
        return None
    if isinstance(value, str):
        items: list[Any] = value.split(",")
    elif isinstance(value, list):
        items = value
    else:
        raise FrontMatterError(
            f"front matter field 'acl' must be a list of group names, got {_kind(value)} {_short(value)}"
        )
    groups: list[str] = []
    for item in items:
        if not isinstance(item, str):
            raise FrontMatterError(
                f"front matter field 'acl' must hold group names, got {_kind(item)} {_short(item)}"
            )
        name = item.strip()
        if not name and isinstance(value, str):
            continue  # "a, b," -- a trailing comma in the text form
        if not _NAME.match(name):
            raise FrontMatterError(f"front matter field 'acl' has a bad group name {_short(item)}")
        groups.append(name)
    return list(dict.fromkeys(groups)) or None


def _date(name: str, value: Any) -> str | None:
    if value is None:
        return None
    if isinstance(value, dt.datetime):
        return value.date().isoformat()
    if isinstance(value, dt.date):
        return value.isoformat()
    if isinstance(value, str):
        for parse in (dt.date.fromisoformat, dt.datetime.fromisoformat):
            try:
                got = parse(value.strip())
            except ValueError:
                continue
            return (got.date() if isinstance(got, dt.datetime) else got).isoformat()
    raise FrontMatterError(f"front matter field {name!r} must be a date YYYY-MM-DD, got {_short(value)}")


def _short(value: Any, limit: int = 80) -> str:
    """``repr(value)`` cut to ``limit`` characters, so an error line stays one short line."""
    shown = repr(value)
    return shown if len(shown) <= limit else shown[: limit - 1] + "…"


def _kind(value: Any) -> str:
    return {bool: "a boolean", int: "a number", float: "a number", list: "a list", dict: "a mapping"}.get(
        type(value), type(value).__name__
    )


__all__ = [
    "ACCESS_KEYS",
    "KNOWN_KEYS",
    "MAX_FRONT_MATTER_CHARS",
    "MAX_FRONT_MATTER_DEPTH",
    "MAX_FRONT_MATTER_NODES",
    "BoundedLoader",
    "FrontMatter",
    "FrontMatterError",
    "acl_groups",
    "compose_bounded",
    "likely_key",
    "load_bounded",
    "normalise_newlines",
    "parse_front_matter",
    "read_front_matter",
    "split_front_matter",
]
