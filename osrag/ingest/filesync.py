"""The read stage of an ingest: the files under its roots as ``Item``s, unchanged files skipped unread.

``FileSync`` is the file side of an ingest (``osrag.ingest.stamps``): it stamps each file before it is
read, skips a file whose stamp is the one its stored document was written from (the item then
carries no document), remembers which files it found and which doc_id each gave, and afterwards
prunes the documents whose file is gone. Documents built in memory are items too
(``Item(path, document)``), on the same path from the parse stage on (``osrag.ingest.batches``).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

from osrag.chunking import Chunk, Document
from osrag.errors import DocumentError
from osrag.ingest.documents import ReadOptions, ReadReport, plan_tree
from osrag.ingest.readpool import ChunkPlan, ReadPool
from osrag.ingest.report import FileOutcome
from osrag.ingest.rules import Rules
from osrag.ingest.stamps import (
    FileStamp,
    StoredFile,
    Unchanged,
    bytes_digest,
    origin_of,
    root_key,
    stamp_file,
    stored_files,
    unchanged,
    with_includes,
)
from osrag.ingest.walking import collection_of, display_path
from osrag.names import visibility_filter
from osrag.store.versions import VersionStore, guarded_remove

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Item:
    """One input of the read loop: a document read (or its error), or a file skipped unread
    because its bytes are the stored ones (``doc`` None)."""

    path: str
    doc: Document | DocumentError | None
    stamp: FileStamp | None = None
    doc_id: str | None = None  # a skipped file: the doc_id its stored document has
    #: chunked where it was read (a worker, ``osrag.ingest.readpool``): its chunks or the outcome
    #: chunking gave; None: to be chunked by the ingest's thread
    chunked: list[Chunk] | FileOutcome | None = None


class FileSync:
    """The file side of an ingest (``osrag.ingest.stamps``): stamps files, skips the unchanged ones unread,
    remembers which files it found, and prunes the documents whose file is gone."""

    def __init__(
        self,
        store: VersionStore,
        recipe_key: Callable[[str, str, str], str],
        options: ReadOptions,
        read_report: ReadReport,
        replace: bool = False,
    ) -> None:
        self.store = store
        #: ``--replace``: a root may replace (and, with ``--prune``, remove) another root's documents
        self.replace = replace
        #: (model name, collection, how files are read) -> the recipe of ``osrag.ingest.stamps``
        self.recipe_key = recipe_key
        self.options = options
        self.read_report = read_report
        self.index = ""
        self.model_name = ""
        self.stored: dict[str, dict[str, list[StoredFile]]] = {}  # collection -> origin -> docs
        self.found: dict[str, set[str]] = {}  # collection -> origins found in this run
        self.read_as: dict[str, str] = {}  # origin -> the doc_id it gave in this run
        #: shown path -> (collection, origin, root_id) of every input, one left out or failing too
        self.origins: dict[str, tuple[str, str, str]] = {}
        self.walked: dict[str, set[str]] = {}  # collection -> root_ids of the roots walked
        self._root_ids: dict[Path, str] = {}
        self._conflicts: dict[tuple[str, str], str | None] = {}  # (collection, root_id) -> why refused
        self.conflicted: set[str] = set()  # shown paths refused as another root's
        #: origin -> (collection, root_id): files whose new version failed or gave no text; their
        #: stored documents are withdrawn at the end (``withdraw_failed``)
        self.failing: dict[str, tuple[str, str]] = {}
        self._stamps: dict[str, tuple[FileStamp, Callable[[str], str]]] = {}  # shown path -> stamp
        self._recipes: dict[tuple[str, int], str] = {}  # (collection, rules) -> recipe
        self._digests: dict[Path, Callable[[str], str]] = {}  # per root: include files' bytes hashes
        #: What a worker needs to chunk (asked once, when a pool starts; None: chunk in process).
        self.chunk_plan: Callable[[], ChunkPlan | None] = lambda: None

    def begin(self, index: str, model_name: str) -> None:
        """Called under the write lock, before the first file is stamped."""
        self.index, self.model_name = index, model_name

    def _stored(self, collection: str) -> dict[str, list[StoredFile]]:
        if collection not in self.stored:
            vis = [visibility_filter(self.store.alias)]
            self.stored[collection] = stored_files(self.store.cluster, self.index, collection, vis)
        return self.stored[collection]

    def items(self, paths: Sequence[str | Path], pool: ReadPool | None = None) -> Iterator[Item]:
        """The files under ``paths`` as ``osrag.ingest.documents.read_tree`` reads them (by the
        ``pool``'s workers, chunked there too, when it has some), except that a file whose stamp is
        the stored one is not read at all (``before_read``)."""
        planned = plan_tree(paths, self.options, self.read_report, self.before_read, self._found)
        pool = pool if pool is not None else ReadPool(0)
        for shown, got, chunked in pool.map(planned, self.read_report, self.chunk_plan):
            if isinstance(got, Unchanged):
                yield Item(shown, None, got.stamp, doc_id=got.doc_id)
                continue
            stamped = self._stamps.pop(shown, None)
            stamp = None
            if stamped is not None and isinstance(got, Document):
                # The stamp covers the files its includes read (an edited include changes it).
                stamp = with_includes(stamped[0], got.metadata.get("includes") or (), stamped[1])
                self.read_as[stamp.origin] = got.doc_id
            yield Item(shown, got, stamp, chunked=chunked if isinstance(got, Document) else None)

    def _found(self, shown: str, path: Path, root: Path) -> None:
        """Every input of the walk, one left out or failing included: its origin is known, so its
        stored document can be withdrawn, and ``--prune`` does not count it as gone."""
        coll = self.options.collection or collection_of(root)
        origin = origin_of(path, root, coll)
        rid = self._root_id(root)
        self.origins[shown] = (coll, origin, rid)
        self.found.setdefault(coll, set()).add(origin)
        self.walked.setdefault(coll, set()).add(rid)

    def _root_id(self, root: Path) -> str:
        if root not in self._root_ids:
            self._root_ids[root] = root_key(root)
        return self._root_ids[root]

    def _own(self, coll: str, origin: str, rid: str) -> list[StoredFile]:
        """The stored documents of ``origin`` that this root may replace or withdraw: its own, those
        written before roots were stored, and with ``--replace`` any."""
        docs = self._stored(coll).get(origin, [])
        return [d for d in docs if self.replace or d.root_id is None or d.root_id == rid]

    def conflict(self, coll: str, rid: str) -> str | None:
        """Why files of root ``rid`` may not write into collection ``coll`` (None: they may): the
        collection holds documents of another folder of the same name, or another root of this
        ingest gives the same collection -- their files would replace each other's by path."""
        key = (coll, rid)
        if key not in self._conflicts:
            why = None
            if not self.replace:
                others = {
                    d.root_id
                    for docs in self._stored(coll).values()
                    for d in docs
                    if d.root_id not in (None, rid)
                }
                in_run = self.walked.get(coll, set()) - {rid}
                if others or in_run:
                    where = "another folder in this ingest" if in_run and not others else "another folder"
                    why = (
                        f"collection {coll!r} holds documents from {where} named {coll!r}; "
                        "--collection NAME keeps this folder apart, --replace lets it replace them "
                        "(--replace --prune: take the collection over)"
                    )
            self._conflicts[key] = why
        return self._conflicts[key]

    def stored_ids_of(self, shown: str) -> list[str]:
        """The doc_ids readers see now from the file shown as ``shown`` ([] for a new file)."""
        where = self.origins.get(shown)
        if where is None or shown in self.conflicted:
            return []
        coll, origin, rid = where
        return sorted({d.doc_id for d in self._own(coll, origin, rid)})

    def failed(self, shown: str) -> list[str]:
        """The file's new version cannot be indexed (unreadable, unparsable, binary, emptied, no
        text, a link out of the tree): its stored documents, returned, are withdrawn at the end --
        they may be more public than the file's current bytes allow (fail closed)."""
        ids = self.stored_ids_of(shown)
        if ids:
            coll, origin, rid = self.origins[shown]
            self.failing[origin] = (coll, rid)
        return ids

    def withdraw_failed(self, index: str) -> list[str]:
        """Remove (as ``osrag delete`` does, atomically per document) the stored documents of the
        files ``failed`` named. Returns the doc_ids removed."""
        keys: set[str] = set()
        ids: set[str] = set()
        for origin, (coll, rid) in self.failing.items():
            for d in self._own(coll, origin, rid):
                keys.add(d.version_key)
                ids.add(d.doc_id)
        if not keys:
            return []
        left = guarded_remove(self.store.cluster, self.store, index, sorted(keys), "osrag ingest (withdraw)")
        if left:
            log.warning("withdraw: %d version(s) kept hidden, their chunks could not be deleted", len(left))
        # Withdrawn here: prune has nothing more to do for them.
        for origin, (coll, rid) in self.failing.items():
            stored = self._stored(coll)
            stored[origin] = [d for d in stored.get(origin, []) if d not in self._own(coll, origin, rid)]
        return sorted(ids)

    def before_read(self, path: Path, root: Path, rules: Rules | None) -> DocumentError | None:
        """Asked by ``read_tree`` before it reads a file: ``Unchanged`` when the file's stamp is
        its stored document's (the file is then not read), else None (its stamp is kept for
        the item)."""
        opts = self.options
        coll = opts.collection or collection_of(root)
        self.found.setdefault(coll, set()).add(origin_of(path, root, coll))
        rid = self._root_id(root)
        why = self.conflict(coll, rid)
        if why is not None:
            self.conflicted.add(display_path(path))
            return DocumentError(display_path(path), why)
        key = (coll, id(rules))
        if key not in self._recipes:
            self._recipes[key] = self.recipe_key(self.model_name, coll, repr((rules, opts.base_url)))
        stamp = stamp_file(path, root, coll, self._recipes[key], opts.max_bytes)
        if stamp is None:
            return None
        if root not in self._digests:
            self._digests[root] = bytes_digest(root.resolve(), opts.max_bytes)
        known = self._own(coll, stamp.origin, rid)
        if unchanged(stamp, known, self._digests[root]):
            return Unchanged(display_path(path), stamp, known[0].doc_id)
        self._stamps[display_path(path)] = (stamp, self._digests[root])
        return None

    def prune(self, index: str) -> list[str]:
        """Remove (atomically per document, ``VersionStore.remove``) the documents of the roots
        walked in this run (any root's with ``--replace``) whose file was not found, or that the
        file no longer gives (its front matter names another doc_id now). A file that failed to
        read is ``withdraw_failed``'s (run first). Returns the doc_ids removed."""
        doomed: dict[str, set[str]] = {}  # doc_id -> version keys
        for coll, found in self.found.items():
            walked = self.walked.get(coll, set())
            for origin, docs in self._stored(coll).items():
                now = self.read_as.get(origin)
                for d in docs:
                    if not (self.replace or d.root_id is None or d.root_id in walked):
                        continue  # another folder's document: not this ingest's to prune
                    if origin not in found or (now is not None and d.doc_id != now):
                        doomed.setdefault(d.doc_id, set()).add(d.version_key)
        if not doomed:
            return []
        keys = sorted(k for ks in doomed.values() for k in ks)
        left = guarded_remove(self.store.cluster, self.store, index, keys, "osrag ingest --prune")
        if left:
            log.warning("prune: %d version(s) kept hidden, their chunks could not be deleted", len(left))
        return sorted(doomed)


__all__ = ["FileSync", "Item"]
