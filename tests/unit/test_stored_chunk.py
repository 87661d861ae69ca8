"""One stored chunk, said once: ``records.StoredChunk`` against the strict mapping, the writer and the reader."""

from __future__ import annotations

import dataclasses
import json
import typing
from pathlib import Path
from typing import Any

import pytest

from osrag import templates
from osrag.chunking import Chunk, Document
from osrag.ingest.convert import SourceMap
from osrag.ingest.prepared import chunk_action
from osrag.ingest.stamps import FileStamp
from osrag.ingest.target import ADDED_AFTER_CREATION
from osrag.records import LOCATION_FIELDS, PASSAGE_FIELDS, ChunkSource, StoredChunk, stored_fields

ROOT = Path(__file__).resolve().parents[2]
#: Mapped since the first template and never written by any osrag: dropping it from the JSON
#: would change every index's template fingerprint, so it stays mapped and unwritten.
MAPPED_NOT_WRITTEN = {"generation"}


def _mapped() -> dict[str, str]:
    """Every chunk field of the shipped mapping and its type (the vector from its own component)."""
    props = json.loads((ROOT / "index_templates" / "osrag-chunks.json").read_text(encoding="utf-8"))
    fields = {k: v["type"] for k, v in props["template"]["mappings"]["properties"].items()}
    knn = json.loads((ROOT / "index_templates" / "knn-field.json").read_text(encoding="utf-8"))
    fields.update({k: v["type"] for k, v in knn.items() if not k.startswith("_")})
    return fields


def test_the_record_and_the_mapping_name_the_same_fields_with_the_same_types() -> None:
    mapped = _mapped()
    record = stored_fields()
    assert set(mapped) - set(record) == MAPPED_NOT_WRITTEN
    assert set(record) - set(mapped) == set()
    assert {k: mapped[k] for k in record} == record


def test_the_shipped_properties_are_those_of_the_json() -> None:
    shipped = templates.chunk_properties()
    assert {k: v["type"] for k, v in shipped.items()} == {
        k: v for k, v in _mapped().items() if k != "embedding"
    }


def _everything() -> tuple[Document, Chunk, FileStamp]:
    doc = Document(
        doc_id="guide/" + "длинный-" * 40,  # an _id over 512 bytes: full_id is written
        text="Текст страницы.",
        source="guide.pdf",
        title="Руководство",
        metadata={
            "category": "guide",
            "tenant": "public",
            "acl": ["staff"],
            "archived": False,
            "updated_at": "2026-09-01",
            "format": "pdf",
            "locations": SourceMap("page", (0, 5), (1, 2)),
            "meta": {"team": "docs"},
            "url": "https://docs.example/guide",
        },
    )
    chunk = Chunk(
        doc_id=doc.doc_id,
        ordinal=0,
        text="Раздел\n\nТекст страницы.",
        body="Текст страницы.",
        heading_path=("Раздел",),
        section_id="s1",
        parent_section_id=None,
        kind="text",
        start=0,
        end=14,
        token_count=5,
    )
    return doc, chunk, FileStamp("kb", "guide.pdf", "h1", includes=("part.md",), root_id="r1")


def test_the_writer_writes_only_fields_of_the_record_with_their_types() -> None:
    doc, chunk, stamp = _everything()
    action = chunk_action(
        "i", doc, chunk, f"{doc.doc_id}@v1", [0.5], "2026-12-01T00:00:00", stamp, "Контекст."
    )
    src = action["_source"]
    hints = typing.get_type_hints(StoredChunk)
    assert set(src) <= set(hints), set(src) - set(hints)
    # this chunk carries every field but the ones only a parent or another format has
    assert set(hints) - set(src) == {"parent_section_id", "slide", "slide_end", "anchor"}
    for name, value in src.items():
        want = typing.get_origin(hints[name]) or hints[name]
        assert isinstance(value, want), (name, value)


@pytest.mark.parametrize(
    "names",
    [
        [f.name for f in dataclasses.fields(ChunkSource) if f.name not in ("location", "meta", "embedding")],
        list(LOCATION_FIELDS),
        list(PASSAGE_FIELDS),
        list(ADDED_AFTER_CREATION),
    ],
    ids=["reader", "locations", "passage", "added-later"],
)
def test_what_is_read_or_added_later_is_a_field_of_the_record(names: list[str]) -> None:
    assert set(names) <= set(stored_fields())


def test_the_reader_reads_what_the_writer_wrote() -> None:
    doc, chunk, stamp = _everything()
    src: Any = chunk_action("i", doc, chunk, f"{doc.doc_id}@v1", [0.5], "t", stamp)["_source"]
    got = ChunkSource.of(src)
    assert (got.chunk_id, got.doc_id, got.heading_path, got.acl) == (
        chunk.chunk_id,
        doc.doc_id,
        ("Раздел",),
        ("staff",),
    )
    assert got.location == {
        "source_format": "pdf",
        "page": 1,
        "page_end": 2,
        "url": "https://docs.example/guide",
    }
    assert got.meta == {"team": "docs"}
