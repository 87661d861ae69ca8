"""Include files of a docs tree, for the Markdown reader (``osrag.chunking.dialects``).

The reader is pure; this is its one door to the file system. A target is resolved relative to the
including file; a target starting with ``/`` (``/ru/_includes/_x.md``, site-absolute) from the
ingest root, dropping leading folders the site adds (a locale such as ``ru/``) until a file is
found. Nothing outside the root is read. ``.md`` is added when the target has no suffix. Included
files lose their front matter; the key of a file is its path relative to the root.
"""

from __future__ import annotations

import logging
from pathlib import Path, PurePosixPath

from osrag.ingest.frontmatter import FrontMatterError, normalise_newlines, split_front_matter

logger = logging.getLogger(__name__)


class FileIncludes:
    """``include(target, including_key) -> (key, text) | None`` over the files below ``root``."""

    def __init__(self, root: Path, max_bytes: int = 20_000_000) -> None:
        self.root = root.resolve()
        self.max_bytes = max_bytes

    def key_of(self, path: Path) -> str:
        try:
            return path.resolve().relative_to(self.root).as_posix()
        except ValueError:
            return path.name

    def __call__(self, target: str, including: str) -> tuple[str, str] | None:
        target = target.split("#", 1)[0].strip()
        if not target or "://" in target:
            return None
        for cand in self._candidates(target, including):
            try:
                path = (self.root / cand).resolve()
            except (OSError, ValueError):
                continue
            if not path.is_relative_to(self.root):
                continue
            for p in (path,) if path.suffix else (path, path.with_suffix(".md")):
                if p.is_file() and p.stat().st_size <= self.max_bytes:
                    return self._read(p)
        return None

    def _candidates(self, target: str, including: str) -> list[PurePosixPath]:
        t = PurePosixPath(target)
        if target.startswith("/"):
            parts = t.parts[1:]
            return [PurePosixPath(*parts[i:]) for i in range(len(parts))]
        base = PurePosixPath(including).parent if including else PurePosixPath()
        return [base / t]

    def _read(self, path: Path) -> tuple[str, str] | None:
        try:
            text = normalise_newlines(path.read_bytes().decode("utf-8-sig"))
        except (OSError, UnicodeDecodeError) as exc:
            logger.warning("include %s not read: %s", path, exc)
            return None
        try:
            _, text = split_front_matter(text)
        except FrontMatterError:
            pass  # an include with a broken header is still text
        return self.key_of(path), text
