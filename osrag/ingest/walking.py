"""Walking the roots of an ingest: which files are inputs, in a deterministic order.

Regular files only; symlinks that leave a root are not followed unless asked; a folder is never
entered twice (a symlink loop ends); a file reached twice is listed once; the rules file's
exclusions apply. Reading what is found is ``osrag.ingest.documents``' job; this module only lists
(``Found``), and says why an input is left out (``skip``) or cannot be read (``fail``).
"""

from __future__ import annotations

import logging
import os
import stat
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path

from osrag.ingest.convert import SUFFIXES
from osrag.ingest.rules import Rules

log = logging.getLogger(__name__)


def display_path(path: Path | str) -> str:
    """A path as it may be printed and stored: bytes that are not UTF-8 as ``\\xNN`` escapes."""
    return os.fsencode(path).decode("utf-8", "backslashreplace")


def utf8_problem(path: Path) -> str | None:
    """Why a file name cannot be a document id (not UTF-8), or None."""
    try:
        str(path).encode("utf-8")
    except UnicodeEncodeError:
        return "file name is not valid UTF-8 (shown with \\x escapes); rename the file to index it"
    return None


_KINDS = (
    (stat.S_ISFIFO, "a FIFO"),
    (stat.S_ISSOCK, "a socket"),
    (stat.S_ISCHR, "a character device"),
    (stat.S_ISBLK, "a block device"),
    (stat.S_ISDIR, "a directory"),
)


def not_regular(mode: int) -> str | None:
    if stat.S_ISREG(mode):
        return None
    kind = next((name for test, name in _KINDS if test(mode)), "not a regular file")
    return f"not a regular file ({kind}); only regular files are read"


@dataclass(frozen=True)
class Found:
    """One input the walk met: read it, or say why not (``skip``: by design; ``fail``: a fault)."""

    path: Path
    root: Path
    skip: str | None = None
    fail: str | None = None
    #: Found by walking a folder (False: named itself, so no folder rules file applies).
    in_tree: bool = True


def _inside(target: Path, root_real: Path) -> bool:
    return target == root_real or root_real in target.parents


def walk(
    paths: Iterable[str | Path],
    *,
    follow_symlinks: bool = False,
    rules_for: Callable[[Path], Rules | None] = lambda root: None,
    on_excluded: Callable[[str], None] | None = None,
) -> Iterator[Found]:
    """Every input under ``paths`` in a deterministic order (sorted per root).

    Directories are walked without following symlinks that leave the root (unless
    ``follow_symlinks``), never into a folder twice (a symlink loop ends); a file reached twice
    (a symlink to a file of the tree, two roots holding one file) is listed once, under its
    own path rather than a link's. Files of unknown suffixes are passed over silently; special
    files and links leaving the root that look like documents are listed with ``skip``."""
    seen_files: set[tuple[int, int]] = set()
    for raw in paths:
        p = Path(raw)
        try:
            is_dir = p.is_dir()
        except OSError:
            is_dir = False
        if not is_dir:
            yield from _explicit(p, seen_files)
            continue
        rules = rules_for(p)
        yield from _walk_root(p, rules, follow_symlinks, seen_files, on_excluded)


def _explicit(p: Path, seen: set[tuple[int, int]]) -> Iterator[Found]:
    """A file named on the command line: listed even with an unknown suffix (read_document says why)."""
    root = p.parent
    try:
        st = p.stat()
    except OSError:
        yield Found(p, root, in_tree=False)  # read_document reports "cannot read"
        return
    key = (st.st_dev, st.st_ino)
    if key in seen:
        return
    seen.add(key)
    yield Found(p, root, skip=not_regular(st.st_mode), in_tree=False)


def _walk_root(
    root: Path,
    rules: Rules | None,
    follow: bool,
    seen_files: set[tuple[int, int]],
    on_excluded: Callable[[str], None] | None,
) -> Iterator[Found]:
    root_real = root.resolve()
    seen_dirs: set[tuple[int, int]] = set()
    found: list[tuple[Path, bool, Found, tuple[int, int] | None]] = []  # (path, via link, found, inode)

    def visit(folder: Path, rel_folder: str) -> None:
        try:
            st = folder.stat()
        except OSError as exc:
            log.warning("cannot list %s: %s", display_path(folder), exc)
            return
        if (st.st_dev, st.st_ino) in seen_dirs:
            return  # a symlink loop, or a folder reached twice
        seen_dirs.add((st.st_dev, st.st_ino))
        try:
            entries = sorted(os.scandir(folder), key=lambda e: e.name)
        except OSError as exc:
            log.warning("cannot list %s: %s", display_path(folder), exc)
            return
        for entry in entries:
            path = Path(entry.path)
            rel = f"{rel_folder}{entry.name}"
            try:
                is_link = entry.is_symlink()
                is_dir = entry.is_dir(follow_symlinks=True)
            except OSError:
                continue
            if rules is not None:
                hit = rules.excluded_by(rel + "/" if is_dir else rel)
                if hit is not None:
                    if on_excluded is not None:
                        on_excluded(hit)
                    continue
            looks_like_doc = path.suffix.lower() in SUFFIXES
            if is_link:
                target = path.resolve()
                if not target.exists():
                    if looks_like_doc:
                        found.append((path, True, Found(path, root, skip="broken symlink"), None))
                    continue
                if not _inside(target, root_real):
                    if not follow:
                        if is_dir or looks_like_doc:
                            found.append(
                                (
                                    path,
                                    True,
                                    Found(
                                        path,
                                        root,
                                        skip="symlink leaves the ingest root; not followed "
                                        "(--follow-symlinks follows it)",
                                    ),
                                    None,
                                )
                            )
                        continue
                elif is_dir:
                    continue  # a folder of this root: walked under its own path
            if is_dir:
                visit(path, rel + "/")
                continue
            if not looks_like_doc:
                continue
            try:
                st_file = path.stat()
            except OSError:
                found.append((path, is_link, Found(path, root), None))  # read_document says why
                continue
            problem = not_regular(st_file.st_mode)
            if problem:
                found.append((path, is_link, Found(path, root, skip=problem), None))
                continue
            found.append(
                (path, is_link, Found(path, root, fail=utf8_problem(path)), (st_file.st_dev, st_file.st_ino))
            )

    visit(root, "")
    # Of one file reached twice, its own path wins over a link's, then the first in order.
    by_inode: dict[tuple[int, int], Path] = {}
    for path, _link, _, inode in sorted(found, key=lambda x: (x[1], str(x[0]))):
        if inode is not None and inode not in by_inode and inode not in seen_files:
            by_inode[inode] = path
    for path, _, item, inode in sorted(found, key=lambda x: str(x[0])):
        if inode is not None:
            if by_inode.get(inode) != path:
                log.debug("%s: the same file as %s, read once", display_path(path), by_inode.get(inode))
                continue
            seen_files.add(inode)
        yield item


def find_files(paths: Iterable[str | Path], follow_symlinks: bool = False) -> Iterator[tuple[Path, Path]]:
    """(file, root) pairs of the regular files under ``paths`` that are read, sorted for determinism."""
    for f in walk(paths, follow_symlinks=follow_symlinks):
        if f.skip is None:
            yield f.path, f.root


def collection_of(root: Path) -> str:
    """The default collection of files found under ``root``: the root folder's own name.

    Chosen over "no collection" so that two roots holding the same relative names
    (``teamA/faq.md``, ``teamB/faq.md``) give different ids without any flag.
    """
    return root.resolve().name or "root"


__all__ = ["Found", "collection_of", "display_path", "find_files", "not_regular", "utf8_problem", "walk"]
