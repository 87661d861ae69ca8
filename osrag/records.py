"""The records that cross module boundaries, typed once: an index's ``_meta.osrag`` and a chunk's ``_source``.

Every module that reads or writes them goes through these types, so a renamed key fails here, at
the seam, and not at run time somewhere else.

- ``IndexMeta``: what an index says of itself (its pinned model, template, last ingest ...).
  Versioned (``schema``); ``IndexMeta.from_mapping`` reads what any osrag wrote, migrating the
  unversioned records of older releases, and keeps keys it does not know (a newer osrag's) so a
  read-modify-write never drops them.
- ``StoredChunk``: one stored chunk's ``_source``, every field with its mapping type -- the one
  definition of a stored chunk: the writer (``osrag.ingest.prepared.chunk_source``) builds it, the
  reader (``ChunkSource.of``) reads it, and a test holds it against the strict mapping
  (``index_templates/osrag-chunks.json``).
- ``ChunkSource``: one stored chunk as the read path sees it, built once per hit by
  ``ChunkSource.of`` (a frozen slotted dataclass, not a pydantic model: it is made for every
  candidate of every search, and validation there would cost more than the search's own work).
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Annotated, Any, TypedDict, get_type_hints

import numpy as np
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from osrag.errors import IndexStateError

log = logging.getLogger(__name__)

#: The ``_meta.osrag`` layout this osrag writes. 1: the unversioned records of earlier releases.
META_SCHEMA = 2


class TokenCounterId(BaseModel):
    """Which tokenizer counted an index's stored ``token_count`` values."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    name: str | None = None
    kind: str = "embedding-model"
    fingerprint: str | None = None


class IndexMeta(BaseModel):
    """An index's ``_meta.osrag``: written at creation, updated by ingest and reindex."""

    schema_version: int = Field(default=META_SCHEMA, alias="schema")
    embedding_model: str | None = None
    #: The model files' hash: an embedder for this index refuses other files under the same name.
    embedding_fingerprint: str | None = None
    #: How the model was chosen (``osrag.model_defaults.ModelChoice.line``): configured, the
    #: production default, or the offline fallback and why. None: named by the caller, or older.
    embedding_model_source: str | None = None
    dimension: int | None = None
    #: None: not recorded (an older index); the settings' prefix applies.
    query_prefix: str | None = None
    passage_prefix: str | None = None
    template_version: int | None = None
    fingerprint: str | None = None
    stemmer: str | None = None
    created_at: str | None = None
    last_ingest_at: str | None = None
    #: Every chunk written into this index carries ``content_hash`` (readers may collapse on it).
    content_hash: bool = False
    token_counter: TokenCounterId | None = None
    previous_index: str | None = None
    reindexed_from: str | None = None
    #: The refresh interval an ingest in progress turned off, to restore after a crash.
    saved_refresh_interval: dict[str, Any] | None = None

    # A key this osrag does not know (written by a newer one) is kept, not refused or dropped.
    model_config = ConfigDict(extra="allow", validate_assignment=True, populate_by_name=True)

    @classmethod
    def from_meta(cls, raw: Mapping[str, Any] | None) -> IndexMeta:
        """The record from a stored ``_meta.osrag`` object, migrated to ``META_SCHEMA``."""
        data = dict(raw or {})
        version = data.get("schema") or 1
        if not isinstance(version, int) or isinstance(version, bool):
            raise IndexStateError(f"index _meta.osrag: schema {version!r} is not a version number")
        if version > META_SCHEMA:
            log.warning(
                "index _meta written by a newer osrag (schema %s, this one reads %s)", version, META_SCHEMA
            )
        if version < 2:
            data = _migrate_1_to_2(data)
        try:
            return cls.model_validate(data)
        except ValidationError as exc:
            raise IndexStateError(f"index _meta.osrag is not a record osrag can read: {_first(exc)}") from exc

    @classmethod
    def from_mapping(cls, mapping: Mapping[str, Any] | None) -> IndexMeta:
        """The record from an index's ``mappings`` (as ``GET _mapping`` gives it)."""
        return cls.from_meta(((mapping or {}).get("_meta") or {}).get("osrag"))

    @property
    def known(self) -> bool:
        """Whether an osrag wrote this (an index without ``_meta.osrag`` names no model)."""
        return self.embedding_model is not None

    @property
    def counter(self) -> TokenCounterId:
        """The tokenizer behind the stored counts (an index older than the record: its model)."""
        return self.token_counter or TokenCounterId(name=self.embedding_model)

    def to_meta(self) -> dict[str, Any]:
        """The ``_meta.osrag`` object to store (the server replaces the whole ``_meta``)."""
        return self.model_dump(by_alias=True, mode="json")

    def updated(self, **changes: Any) -> IndexMeta:
        """A copy with ``changes`` validated like a fresh record."""
        return type(self).model_validate({**self.to_meta(), **changes})


def _first(exc: ValidationError) -> str:
    """The first problem of a validation error on one line: the field, what is wrong, the value."""
    err = exc.errors()[0]
    where = ".".join(str(p) for p in err["loc"]) or "record"
    more = f" (and {exc.error_count() - 1} more)" if exc.error_count() > 1 else ""
    return f"{where}: {err['msg']}, got {repr(err.get('input'))[:80]}{more}"


def _migrate_1_to_2(data: dict[str, Any]) -> dict[str, Any]:
    """Records of osrag before ``schema``: no key means no content hash and counts by the model."""
    out = dict(data)
    out["schema"] = 2
    out.setdefault("content_hash", False)
    if not out.get("token_counter") and out.get("embedding_model"):
        out["token_counter"] = {
            "name": out["embedding_model"],
            "kind": "embedding-model",
            "fingerprint": None,
        }
    return out


class StoredChunk(TypedDict, total=False):
    """One chunk's stored ``_source``: each field annotated with its type in the strict mapping.

    A field left out is absent (the writer drops None); the reader defaults it (``ChunkSource``).
    """

    chunk_id: Annotated[str, "keyword"]
    doc_id: Annotated[str, "keyword"]
    ordinal: Annotated[int, "integer"]
    section_id: Annotated[str, "keyword"]
    parent_section_id: Annotated[str, "keyword"]
    kind: Annotated[str, "keyword"]
    title: Annotated[str, "text"]
    #: The heading path joined with " > " (a BM25 field of its own).
    breadcrumb: Annotated[str, "text"]
    heading_path: Annotated[list[str], "keyword"]
    text: Annotated[str, "text"]
    #: What a contextualizer said of the chunk (``osrag.ingest.context``): embedded with the text.
    context: Annotated[str, "text"]
    body: Annotated[str, "text"]
    start: Annotated[int, "integer"]
    end: Annotated[int, "integer"]
    version: Annotated[str, "keyword"]
    version_key: Annotated[str, "keyword"]
    content_hash: Annotated[str, "keyword"]
    source: Annotated[str, "keyword"]
    category: Annotated[str, "keyword"]
    tenant: Annotated[str, "keyword"]
    acl: Annotated[list[str], "keyword"]
    archived: Annotated[bool, "boolean"]
    token_count: Annotated[int, "integer"]
    updated_at: Annotated[str, "date"]
    ingested_at: Annotated[str, "date"]
    embedding: Annotated[list[float], "knn_vector"]
    #: Where a converted file's chunk came from (``LOCATION_FIELDS``).
    source_format: Annotated[str, "keyword"]
    page: Annotated[int, "integer"]
    page_end: Annotated[int, "integer"]
    slide: Annotated[int, "integer"]
    slide_end: Annotated[int, "integer"]
    anchor: Annotated[str, "keyword"]
    url: Annotated[str, "keyword"]
    #: The file a chunk was read from (``osrag.ingest.stamps.FileStamp``).
    collection: Annotated[str, "keyword"]
    origin: Annotated[str, "keyword"]
    #: Which root folder the file was read from (a hash of its resolved path, never the path).
    root_id: Annotated[str, "keyword"]
    file_hash: Annotated[str, "keyword"]
    includes: Annotated[list[str], "keyword"]
    #: The ``_id`` in full when it was too long to be one (``osrag.store.versions.bounded_id``).
    full_id: Annotated[str, "keyword"]
    #: Front-matter keys osrag does not read (``meta.KEY`` filters).
    meta: Annotated[dict[str, Any], "flat_object"]


def stored_fields() -> dict[str, str]:
    """Each ``StoredChunk`` field and its mapping type (``keyword``, ``text`` ...)."""
    hints = get_type_hints(StoredChunk, include_extras=True)
    return {name: hint.__metadata__[0] for name, hint in hints.items()}


@dataclass(frozen=True, slots=True)
class ChunkSource:
    """One stored chunk as the read path uses it: the fields of ``StoredChunk`` that it reads."""

    chunk_id: str
    doc_id: str = ""
    title: str = ""
    heading_path: tuple[str, ...] = ()
    source: str = ""
    section_id: str | None = None
    parent_section_id: str | None = None
    kind: str = "text"
    text: str = ""
    token_count: int | None = None
    start: int | None = None
    end: int | None = None
    ordinal: int | None = None
    tenant: str | None = None
    acl: tuple[str, ...] = ()
    archived: bool = False
    updated_at: str | None = None
    version_key: str | None = None
    content_hash: str | None = None
    #: Where in the original a converted file's chunk came from, and the page URL (``cite``).
    location: Mapping[str, Any] = field(default_factory=dict)
    #: Front-matter keys osrag does not read (``meta.KEY`` filters).
    meta: Mapping[str, Any] = field(default_factory=dict)
    embedding: np.ndarray | None = field(default=None, compare=False, repr=False)
    category: str | None = None

    @classmethod
    def of(cls, src: Mapping[str, Any], *, chunk_id: str | None = None, embedding: Any = None) -> ChunkSource:
        """The one mapping of a stored ``_source`` (a ``StoredChunk``; a vector read apart from it) to a record."""
        get = src.get  # made for every candidate of every search: one bound lookup, positional fields
        vec = embedding if embedding is not None else get("embedding")
        if vec is not None and not isinstance(vec, np.ndarray):
            vec = np.asarray(vec, dtype=np.float32)
        count = get("token_count")
        acl = get("acl")
        meta = get("meta")
        return cls(
            str(get("chunk_id") or chunk_id or ""),
            str(get("doc_id") or ""),
            str(get("title") or ""),
            tuple(get("heading_path") or ()),
            str(get("source") or ""),
            get("section_id"),
            get("parent_section_id"),
            str(get("kind") or "text"),
            str(get("text") or ""),
            count if isinstance(count, int) and not isinstance(count, bool) else None,
            get("start"),
            get("end"),
            get("ordinal"),
            get("tenant"),
            (acl,) if isinstance(acl, str) else tuple(acl or ()),
            bool(get("archived", False)),
            get("updated_at"),
            get("version_key"),
            get("content_hash"),
            {k: v for k in LOCATION_FIELDS if (v := get(k)) is not None},
            dict(meta) if meta else {},
            vec,
            get("category"),
        )


def embedding_text(context: str, text: str) -> str:
    """What is embedded for a chunk: its context, a blank line, its text (the text alone without one)."""
    return f"{context}\n\n{text}" if context else text


#: The location fields a chunk's ``_source`` may carry (converted files, ``--base-url``).
LOCATION_FIELDS = ("source_format", "page", "page_end", "slide", "slide_end", "anchor", "url")
#: What ``search()`` reads of a candidate's ``_source``: its passage (``envelope.passage_of``) and
#: the hash the collapse falls back on. Asked by ``_source.includes``, so that neither the server
#: sends nor the client parses the rest (breadcrumb, context, tenant, acl, ingest times ...).
PASSAGE_FIELDS = (
    "chunk_id",
    "doc_id",
    "title",
    "heading_path",
    "source",
    "section_id",
    "parent_section_id",
    "kind",
    "text",
    "token_count",
    "start",
    "end",
    "content_hash",
    # the filterable fields a passage shows its reader (the adapters' metadata)
    "category",
    "tenant",
    *LOCATION_FIELDS,
)

__all__ = [
    "LOCATION_FIELDS",
    "META_SCHEMA",
    "PASSAGE_FIELDS",
    "ChunkSource",
    "IndexMeta",
    "StoredChunk",
    "TokenCounterId",
    "embedding_text",
    "stored_fields",
]
