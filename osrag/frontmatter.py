"""Front matter: the YAML block between ``---`` lines at the top of a Markdown/text file.

Strict, because front matter decides who may read a document: an ``acl`` that is
dropped or mangled makes a restricted document public. So the block is parsed as
YAML (lists, quoting and comments as a reader expects), keys are case-insensitive
(``ACL:`` is ``acl:``), and anything osrag would otherwise have to guess at -- an
unknown key, a block without its closing ``---``, ``archived: on``, an unreadable
date, ``acl: 123`` -- is a ``FrontMatterError`` naming the field, which ingest
reports as a per-file error. Nothing is coerced silently.

Pure: text in, typed values out.
"""

from __future__ import annotations

import datetime as dt
import re
from typing import Any

import yaml

#: The keys osrag reads; any other key is an error (a typo such as ``acls:`` must not go unseen).
KNOWN_KEYS = ("doc_id", "title", "category", "archived", "tenant", "acl", "updated_at", "source")
_TEXT_KEYS = ("doc_id", "title", "category", "tenant", "source")
#: A group name in ``acl`` (and a tenant): no spaces, no commas.
_NAME = re.compile(r"^[^\s,]{1,200}$")
#: The only spellings of a boolean: YAML 1.1 also reads on/off/yes/no/y/n, which is a guess.
_BOOLEAN_WORDS = {"true": True, "false": False}


class FrontMatterError(ValueError):
    """The front matter cannot be read as osrag's fields; the message names the field."""


def split_front_matter(text: str) -> tuple[str | None, str]:
    """(the YAML block or None, the body). A first line ``---`` opens a block that must close."""
    lines = text.split("\n")
    if lines[0].strip() != "---":
        return None, text
    for i in range(1, len(lines)):
        if lines[i].rstrip() == "---":
            return "\n".join(lines[1:i]), "\n".join(lines[i + 1 :]).lstrip("\n")
    raise FrontMatterError("front matter has no closing '---' line")


def parse_front_matter(text: str) -> tuple[dict[str, Any], str]:
    """Validated fields (lower-case keys; ``acl`` a list of groups, ``archived`` a bool,
    ``updated_at`` an ISO date) and the body without the block."""
    raw, body = split_front_matter(text)
    if raw is None:
        return {}, text
    return read_fields(raw), body


def read_fields(raw: str) -> dict[str, Any]:
    """The YAML block as osrag's typed fields, or a ``FrontMatterError`` naming the first bad one."""
    try:
        node = yaml.compose(raw, Loader=yaml.SafeLoader)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f" (line {mark.line + 2})" if mark is not None else ""
        problem = getattr(exc, "problem", None) or "invalid YAML"
        raise FrontMatterError(f"front matter is not valid YAML{where}: {problem}") from exc
    try:
        data = yaml.safe_load(raw)
    except (yaml.YAMLError, ValueError) as exc:  # e.g. a timestamp such as 2026-13-01
        bad = _unconstructable(node)
        raise FrontMatterError(
            f"front matter field {bad[0]!r} cannot be read: {bad[1]!r}" if bad else f"front matter: {exc}"
        ) from exc
    if data is None:
        return {}
    if not isinstance(data, dict) or not isinstance(node, yaml.MappingNode):
        raise FrontMatterError("front matter must be 'key: value' lines")
    raw_values = {str(k.value).strip().lower(): v for k, v in node.value if isinstance(k, yaml.ScalarNode)}
    out: dict[str, Any] = {}
    for key, value in data.items():
        name = str(key).strip().lower()
        if name not in KNOWN_KEYS:
            raise FrontMatterError(f"front matter field {key!r} is unknown; known: {', '.join(KNOWN_KEYS)}")
        if name in out:
            raise FrontMatterError(f"front matter field {name!r} is given twice")
        out[name] = _field(name, value, raw_values.get(name))
    return {k: v for k, v in out.items() if v is not None}


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
    if name == "acl":
        return acl_groups(value)
    if name == "updated_at":
        return _date(name, value)
    if value is None:
        return None
    if not isinstance(value, str):
        raise FrontMatterError(
            f"front matter field {name!r} must be text, got {_kind(value)} {value!r} (quote it)"
        )
    if name == "tenant" and not _NAME.match(value.strip()):
        raise FrontMatterError(f"front matter field 'tenant' must be one name without spaces, got {value!r}")
    if name == "doc_id" and not value.strip():
        raise FrontMatterError("front matter field 'doc_id' is empty")
    return value.strip()


def _boolean(name: str, node: Any) -> bool:
    """``true`` or ``false`` as written (any case); YAML 1.1's ``on``/``yes``/``y`` are refused."""
    raw = node.value.strip().lower() if isinstance(node, yaml.ScalarNode) else None
    if raw not in _BOOLEAN_WORDS or (node.style not in (None, "")):
        shown = node.value if isinstance(node, yaml.ScalarNode) else "a list or mapping"
        raise FrontMatterError(f"front matter field {name!r} must be true or false, got {shown!r}")
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
            f"front matter field 'acl' must be a list of group names, got {_kind(value)} {value!r}"
        )
    groups: list[str] = []
    for item in items:
        if not isinstance(item, str):
            raise FrontMatterError(
                f"front matter field 'acl' must hold group names, got {_kind(item)} {item!r}"
            )
        name = item.strip()
        if not name and isinstance(value, str):
            continue  # "a, b," -- a trailing comma in the text form
        if not _NAME.match(name):
            raise FrontMatterError(f"front matter field 'acl' has a bad group name {item!r}")
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
    raise FrontMatterError(f"front matter field {name!r} must be a date YYYY-MM-DD, got {value!r}")


def _kind(value: Any) -> str:
    return {bool: "a boolean", int: "a number", float: "a number", list: "a list", dict: "a mapping"}.get(
        type(value), type(value).__name__
    )


__all__ = ["KNOWN_KEYS", "FrontMatterError", "acl_groups", "parse_front_matter", "split_front_matter"]
