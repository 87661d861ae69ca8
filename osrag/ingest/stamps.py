"""Sync: which files of a tree changed since the last ingest, and which documents lost their file.

An ingest that re-reads a docs tree every night must not re-parse, re-chunk, re-count and
re-embed 849 unchanged files to find out they are unchanged. So every chunk of a document read
from a file carries three keywords:

* ``collection`` -- the collection the file was ingested into (the scope of ``--prune`` and of
  ``osrag delete --collection``);
* ``origin`` -- ``{collection}/{path relative to the ingest root}``: the file, whatever ``doc_id``
  its front matter gives;
* ``file_hash`` -- a hash of the file's raw bytes and of the *recipe* (everything else that
  shapes its chunks: chunking settings, strategy, model, osrag's version, reader options), and
  of the raw bytes of every file its include directives read;
* ``includes`` -- those files (paths relative to the ingest root), so that an edited include
  file makes every document that includes it "changed" without parsing anything;
* ``root_id`` -- a hash of the ingest root's resolved path (never the path itself): two folders
  that share a name (``teamA/docs``, ``teamB/docs``) give one collection and the same origins, and
  this is how an ingest tells them apart (``osrag.ingest.filesync`` refuses the second).

Before anything is parsed, one paged aggregation per collection reads ``origin`` ->
(``file_hash``, ``doc_id``, ``version_key``) over the chunks readers see; a file whose hash is
the stored one is skipped from its bytes alone. ``--prune`` then removes the documents of the
roots walked (``root_id``) whose ``origin`` was not found in this run.

Pure apart from reading files (``stamp_file``) and the one aggregation (``stored_files``).
"""

from __future__ import annotations

import hashlib
import os
import stat
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from osrag.connection import Cluster
from osrag.errors import DocumentSkipped

#: Buckets per page of the stored-files aggregation.
PAGE = 2000


@dataclass(frozen=True)
class FileStamp:
    """Where a document came from, and its file's hash (with the recipe) at this ingest."""

    collection: str
    origin: str
    file_hash: str
    includes: tuple[str, ...] = ()
    #: ``root_key`` of the root the file was found under ("" for none known)
    root_id: str = ""


class Unchanged(DocumentSkipped):
    """A file skipped unread: its stamp is the one its stored document was written from."""

    def __init__(self, path: str, stamp: FileStamp, doc_id: str) -> None:
        super().__init__(path, "unchanged since the last ingest")
        self.stamp = stamp
        self.doc_id = doc_id


@dataclass(frozen=True)
class StoredFile:
    """One visible document of a file, as the index holds it."""

    doc_id: str
    file_hash: str
    version_key: str
    includes: tuple[str, ...] = ()
    #: the root it was ingested from (None: written before osrag stored roots)
    root_id: str | None = None


def root_key(root: Path) -> str:
    """Which folder an ingest root is, as stored: a hash of its resolved path (the path itself,
    a local detail, never reaches the index). A tree moved elsewhere is another root."""
    try:
        where = str(root.resolve())
    except (OSError, RuntimeError):
        where = os.path.abspath(root)
    return hashlib.sha256(os.fsencode(where)).hexdigest()[:16]


def recipe(*parts: Any) -> str:
    """A short fingerprint of the settings that shape chunks besides the file's bytes."""
    return hashlib.sha256(repr(parts).encode("utf-8")).hexdigest()[:16]


def origin_of(path: Path, root: Path, collection: str) -> str:
    try:
        rel = path.relative_to(root).as_posix()
    except ValueError:
        rel = path.name
    return f"{collection}/{rel}"


def stamp_file(path: Path, root: Path, collection: str, recipe_key: str, max_bytes: int) -> FileStamp | None:
    """The file's stamp from its raw bytes; None when it is not a regular file within the size
    limit or cannot be read (the reader then reports why; nothing is skipped on a guess).

    ``stat`` before ``open``: opening a FIFO would block, a device could stream forever."""
    try:
        st = os.stat(path)
        if not stat.S_ISREG(st.st_mode) or st.st_size > max_bytes:
            return None
        h = hashlib.sha256(recipe_key.encode("ascii"))
        with open(path, "rb") as fh:
            h.update(fh.read(max_bytes + 1))
    except (OSError, ValueError):
        return None
    return FileStamp(
        collection, origin_of(path, root, collection), h.hexdigest()[:32], root_id=root_key(root)
    )


def with_includes(stamp: FileStamp, includes: Sequence[str], digest: Callable[[str], str]) -> FileStamp:
    """``stamp`` covering the files ``includes`` too (``digest``: a file's bytes hash by its path
    relative to the root, ``""`` when it cannot be read)."""
    if not includes:
        return stamp
    deps = sorted(set(includes))
    h = hashlib.sha256(stamp.file_hash.encode("ascii"))
    for d in deps:
        h.update(f"\0{d}\0{digest(d)}".encode())
    return FileStamp(stamp.collection, stamp.origin, h.hexdigest()[:32], tuple(deps), stamp.root_id)


def bytes_digest(root: Path, max_bytes: int) -> Callable[[str], str]:
    """A cached ``digest`` for ``with_includes`` over the regular files below ``root``."""
    seen: dict[str, str] = {}

    def digest(rel: str) -> str:
        if rel not in seen:
            out = ""
            try:
                p = root / rel
                st = os.stat(p)
                if stat.S_ISREG(st.st_mode) and st.st_size <= max_bytes:
                    with open(p, "rb") as fh:
                        out = hashlib.sha256(fh.read(max_bytes + 1)).hexdigest()
            except (OSError, ValueError):
                out = ""
            seen[rel] = out
        return seen[rel]

    return digest


def unchanged(
    stamp: FileStamp, stored: Sequence[StoredFile], digest: Callable[[str], str] | None = None
) -> bool:
    """The file's one visible document already holds exactly these bytes under this recipe (and
    the files it includes hold the bytes they held then)."""
    if len(stored) != 1:
        return False
    if stored[0].includes and digest is not None:
        stamp = with_includes(stamp, stored[0].includes, digest)
    return stored[0].file_hash == stamp.file_hash


def stored_files(
    cluster: Cluster, index: str, collection: str, visible: Sequence[dict[str, Any]]
) -> dict[str, list[StoredFile]]:
    """origin -> the documents readers see from that file (normally one), for one collection.

    A composite aggregation paged ``PAGE`` buckets at a time: one request for a tree of up
    to ``PAGE`` files, and no bucket limit for a larger one."""
    out: dict[str, list[StoredFile]] = {}
    after: dict[str, Any] | None = None
    while True:
        comp: dict[str, Any] = {
            "size": PAGE,
            "sources": [
                {"o": {"terms": {"field": "origin"}}},
                {"h": {"terms": {"field": "file_hash"}}},
                {"d": {"terms": {"field": "doc_id"}}},
                {"v": {"terms": {"field": "version_key"}}},
                {"r": {"terms": {"field": "root_id", "missing_bucket": True}}},
                {"i": {"terms": {"field": "includes", "missing_bucket": True}}},
            ],
        }
        if after:
            comp["after"] = after
        resp = cluster.call(
            "read stored file hashes",
            cluster.client.search,
            index=index,
            body={
                "size": 0,
                "query": {"bool": {"filter": [{"term": {"collection": collection}}, *visible]}},
                "aggs": {"f": {"composite": comp}},
            },
            params={"request_cache": "false"},
        )
        agg = resp["aggregations"]["f"]
        for b in agg["buckets"]:
            k = b["key"]
            docs = out.setdefault(k["o"], [])
            inc = (k["i"],) if k.get("i") is not None else ()
            root = k.get("r")
            if docs and (docs[-1].doc_id, docs[-1].version_key, docs[-1].root_id) == (k["d"], k["v"], root):
                docs[-1] = StoredFile(k["d"], k["h"], k["v"], docs[-1].includes + inc, root)
            else:
                docs.append(StoredFile(k["d"], k["h"], k["v"], inc, root))
        after = agg.get("after_key")
        if not after or len(agg["buckets"]) < PAGE:
            return out


__all__ = [
    "FileStamp",
    "StoredFile",
    "Unchanged",
    "bytes_digest",
    "origin_of",
    "recipe",
    "root_key",
    "stamp_file",
    "stored_files",
    "unchanged",
    "with_includes",
]
