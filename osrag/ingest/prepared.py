"""A document on its way into the store: chunked, embedded, and each chunk's stored ``_source``.

Ingest builds these (``osrag.ingest.batches``) and hands them to the versioned chunk store
(``osrag.store.versions.VersionStore``), which only hides, writes and flips them: the store knows
a version by its key and its chunks by their bulk actions, never how a file became a chunk. The
fields a chunk is stored with are those of ``osrag.records.StoredChunk``.
"""

from __future__ import annotations

import datetime as dt
import hashlib
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any, cast

from osrag.chunking import Chunk, Document
from osrag.ingest.convert import TEXT_FORMATS
from osrag.ingest.frontmatter import acl_groups
from osrag.ingest.stamps import FileStamp
from osrag.mlcommons.pipelines import EMBED_INPUT_FIELD
from osrag.names import content_hash
from osrag.records import StoredChunk, embedding_text
from osrag.store.versions import bounded_id


@dataclass
class PreparedDoc:
    """A chunked document on its way into the store (vectors attached once embedded)."""

    doc: Document
    path: str
    version_key: str
    chunks: list[Chunk]
    #: One embedding per chunk; None for a chunk the cluster embeds (``osrag.mlcommons.pipelines``).
    vectors: Any = None
    stamp: FileStamp | None = (
        None  # the file it was read from (osrag.ingest.stamps); None for in-memory documents
    )
    contexts: list[str] | None = None  # one context per chunk (osrag.ingest.context); None: no context

    @property
    def doc_id(self) -> str:
        return self.doc.doc_id

    def actions(self, index: str, now: str) -> Iterator[dict[str, Any]]:
        """The bulk actions that write this version's chunks (``chunk_action``), in order."""
        contexts = self.contexts or [""] * len(self.chunks)
        for c, vector, context in zip(self.chunks, self.vectors, contexts):
            yield chunk_action(index, self.doc, c, self.version_key, vector, now, self.stamp, context)


def document_version(
    doc: Document,
    strategy: str,
    config: Any,
    model_name: str,
    stamp: FileStamp | None = None,
    context_recipe: str = "",
) -> str:
    """The version's hash: the document's text, metadata and the settings that shape its chunks
    (``strategy``, the chunking ``config``, the model) -- and, for a file, its stamp, so the stored
    stamp always belongs to the version. Ingest and the benches key versions with it alike."""
    h = hashlib.sha256()
    h.update(doc.text.encode("utf-8"))
    h.update(repr(sorted((k, str(v)) for k, v in doc.metadata.items())).encode("utf-8"))
    h.update(repr((strategy, config, model_name, doc.title, doc.source)).encode("utf-8"))
    h.update(repr(sorted(doc.variables.items())).encode("utf-8"))  # they change the chunk text
    if stamp is not None:
        h.update(repr((stamp.collection, stamp.origin, stamp.file_hash)).encode("utf-8"))
        if stamp.root_id:  # the same bytes from another root are another version (its owner changes)
            h.update(f"root={stamp.root_id}".encode())
    if context_recipe:  # the contexts change what is embedded (none adds nothing)
        h.update(f"context={context_recipe}".encode())
    return h.hexdigest()[:16]


def chunk_action(
    index: str,
    doc: Document,
    c: Chunk,
    version_key: str,
    vector: Any,
    now: str,
    stamp: FileStamp | None = None,
    context: str = "",
) -> dict[str, Any]:
    """The bulk action that writes one chunk (``chunk_source``) under ``{version_key}:{ordinal}``,
    bounded to the ``_id`` limit (``bounded_id``; the full id is then kept in ``full_id``)."""
    full = f"{version_key}:{c.ordinal}"
    _id = bounded_id(full)
    src = chunk_source(doc, c, version_key, vector, now, stamp, context)
    if _id != full:
        src["full_id"] = full
    return {"_op_type": "index", "_index": index, "_id": _id, "_source": src}


def chunk_source(
    doc: Document,
    c: Chunk,
    version_key: str,
    vector: Any,
    now: str,
    stamp: FileStamp | None = None,
    context: str = "",
) -> StoredChunk:
    """The stored ``_source`` of one chunk (fields the strict mapping knows; None left out);
    a document read from a file also carries its ``collection``, ``origin`` and ``file_hash``
    (``osrag.ingest.stamps``)."""
    md = doc.metadata
    acl = md.get("acl")
    # Converted files say where the chunk came from (page/slide/anchor); Markdown and text
    # files add no field, so an index built before these fields existed still takes them.
    fmt = md.get("format")
    locations = md.get("locations")
    where = locations.locate(c.start, c.end) if locations is not None else {}
    src: dict[str, Any] = {
        "chunk_id": c.chunk_id,
        "doc_id": doc.doc_id,
        "ordinal": c.ordinal,
        "section_id": c.section_id,
        "parent_section_id": c.parent_section_id,
        "kind": c.kind,
        "title": doc.title,
        "breadcrumb": " > ".join(c.heading_path),
        "heading_path": list(c.heading_path),
        "text": c.text,
        "context": context or None,  # osrag.ingest.context: embedded with the text, its own BM25 field
        "body": c.body,
        "start": c.start,
        "end": c.end,
        "version": version_key.rsplit("@", 1)[1],
        "version_key": version_key,
        "content_hash": content_hash(c.body or c.text),
        "source": doc.source,
        "category": md.get("category"),
        "tenant": md.get("tenant"),
        "acl": acl_groups(acl),  # a list from front matter, or "a, b" from an in-memory Document
        "archived": bool(md.get("archived", False)),
        "token_count": c.token_count,
        "updated_at": _date_or_none(md.get("updated_at")),
        "ingested_at": now,
        # No vector: the cluster's ingest pipeline embeds this text into ``embedding`` and drops the field.
        **(
            {"embedding": [float(x) for x in vector]}
            if vector is not None
            else {EMBED_INPUT_FIELD: embedding_text(context, c.text)}
        ),
        "source_format": fmt if fmt not in TEXT_FORMATS else None,
        **where,
    }
    if stamp is not None:
        src.update(collection=stamp.collection, origin=stamp.origin, file_hash=stamp.file_hash)
        if stamp.root_id:
            src["root_id"] = stamp.root_id
        if stamp.includes:
            src["includes"] = list(stamp.includes)
    # The read side (osrag.ingest.documents): front-matter keys osrag does not read, and the passage's
    # link -- the page URL (--base-url) with the chunk's heading anchor (Markdown chunks carry one).
    # (a converted file's own anchors come from its locations; its Markdown headings are not in the original)
    anchor = src.get("anchor") or (getattr(c, "anchor", None) if fmt in TEXT_FORMATS or fmt is None else None)
    if anchor and "anchor" not in src:
        src["anchor"] = anchor
    if md.get("meta"):
        src["meta"] = md["meta"]
    if md.get("url"):
        src["url"] = f"{md['url']}#{anchor}" if anchor else md["url"]
    return cast(StoredChunk, {k: v for k, v in src.items() if v is not None})


def _date_or_none(value: Any) -> str | None:
    if not value:
        return None
    try:
        return dt.date.fromisoformat(str(value)[:10]).isoformat()
    except ValueError:
        return None


__all__ = ["PreparedDoc", "chunk_action", "chunk_source", "document_version"]
