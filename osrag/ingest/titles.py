"""Titles and headings of a document: the first heading outside code, sidecar titles, and the
cap on a heading's length (a keyword field: OpenSearch refuses terms over 32,766 bytes)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import yaml

from osrag.errors import DocumentError
from osrag.ingest.walking import display_path

#: Longest heading kept whole in a chunk's heading path (a keyword field: OpenSearch refuses
#: terms over 32,766 bytes, so a 100K-character heading would fail its whole batch).
MAX_HEADING_CHARS = 500


def capped(heading: str) -> str:
    """A title or heading within ``MAX_HEADING_CHARS`` (a 100K-character heading would be one
    immense term in the whole-identifier subfield and fail its batch)."""
    return heading if len(heading) <= MAX_HEADING_CHARS else heading[: MAX_HEADING_CHARS - 1] + "…"


_FENCES = ("```", "~~~")


def _outside_code(body: str) -> Iterator[str]:
    """The lines of ``body`` outside fenced code blocks (a ``# comment`` in code is no heading)."""
    fence: str | None = None
    for line in body.split("\n"):
        stripped = line.lstrip()
        if fence is None:
            opener = next((f for f in _FENCES if stripped.startswith(f)), None)
            if opener is not None:
                fence = stripped[: len(stripped) - len(stripped.lstrip(opener[0]))]
                continue
            yield line
        elif stripped.startswith(fence) and not stripped.strip(fence[0]).strip():
            fence = None


def _heading(line: str) -> tuple[int, str] | None:
    stripped = line.lstrip(" ")
    if len(line) - len(stripped) > 3 or not stripped.startswith("#"):
        return None
    level = len(stripped) - len(stripped.lstrip("#"))
    rest = stripped[level:]
    if level > 6 or (rest and not rest[0].isspace()):
        return None
    return level, rest.strip().rstrip("#").strip()


def first_heading(body: str) -> str | None:
    """The first H1 outside code, else the first heading of any level; None when there is none."""
    first_any: str | None = None
    for line in _outside_code(body):
        h = _heading(line)
        if h is None or not h[1]:
            continue
        if h[0] == 1:
            return h[1]
        first_any = first_any or h[1]
    return first_any


def headings_only(body: str) -> bool:
    """Only ATX headings (and blank lines): a landing page the portal fills with its children."""
    lines = [line for line in body.split("\n") if line.strip()]
    return bool(lines) and all(_heading(line) is not None for line in lines)


def sidecar_title(path: Path) -> str | None:
    """A title kept beside the file: ``NAME.meta.json`` (``{"title": ...}``), or the folder's
    ``_meta.yml`` / ``_meta.yaml`` / ``_meta.json`` mapping the file's name or stem to a title
    (text, or a mapping with ``title``). A sidecar that cannot be read is a ``DocumentError``."""
    own = path.with_name(path.stem + ".meta.json")
    if own.is_file():
        data = _load_sidecar(own, path)
        got = data.get("title") if isinstance(data, dict) else None
        if isinstance(got, str) and got.strip():
            return got.strip()
    for name in ("_meta.yml", "_meta.yaml", "_meta.json"):
        folder_meta = path.with_name(name)
        if not folder_meta.is_file():
            continue
        data = _load_sidecar(folder_meta, path)
        if not isinstance(data, dict):
            continue
        entry = data.get(path.name, data.get(path.stem))
        if isinstance(entry, dict):
            entry = entry.get("title")
        if isinstance(entry, str) and entry.strip():
            return entry.strip()
    return None


def _load_sidecar(sidecar: Path, doc: Path) -> Any:
    try:
        text = sidecar.read_text(encoding="utf-8")
        return json.loads(text) if sidecar.suffix == ".json" else yaml.safe_load(text)
    except (OSError, UnicodeDecodeError, ValueError, yaml.YAMLError) as exc:
        raise DocumentError(display_path(doc), f"title sidecar {sidecar.name} cannot be read: {exc}") from exc


__all__ = ["MAX_HEADING_CHARS", "capped", "first_heading", "headings_only", "sidecar_title"]
