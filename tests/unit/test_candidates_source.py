"""search() asks only ``records.PASSAGE_FIELDS`` of each candidate's ``_source``: its passages must
come out the same as from the whole stored chunk, and retrieve() still gets the whole chunk."""

from __future__ import annotations

from osrag.envelope import passage_of
from osrag.records import LOCATION_FIELDS, PASSAGE_FIELDS, ChunkSource
from osrag.search.candidates import VECTOR_FIELD
from osrag.search.query import candidates_body, vectors_in_source

FULL = {
    "chunk_id": "d1:3",
    "doc_id": "d1",
    "title": "Возврат",
    "heading_path": ["Возврат", "Сроки"],
    "breadcrumb": "Возврат > Сроки",
    "context": "Документ о возврате.",
    "source": "kb/d1.md",
    "section_id": "d1#2",
    "parent_section_id": "d1#1",
    "kind": "table",
    "text": "Срок возврата 14 дней.",
    "token_count": 9,
    "start": 10,
    "end": 42,
    "ordinal": 3,
    "tenant": "t1",
    "acl": ["g1"],
    "archived": False,
    "updated_at": "2026-01-02",
    "ingested_at": "2026-01-03T00:00:00+00:00",
    "version": "abc",
    "version_key": "d1@abc",
    "content_hash": "ff00",
    "category": "kb",
    "meta": {"owner": "x"},
    **{k: (f"v-{k}" if k in ("source_format", "anchor", "url") else 2) for k in LOCATION_FIELDS},
}


def test_a_passage_from_the_asked_fields_is_the_passage_from_the_whole_chunk() -> None:
    asked = {k: v for k, v in FULL.items() if k in PASSAGE_FIELDS}
    assert len(asked) < len(FULL)  # something is left on the server
    whole = passage_of(ChunkSource.of(FULL), 1, tokens=9)
    lean = passage_of(ChunkSource.of(asked), 1, tokens=9)
    assert lean == whole
    # and the collapse's fallback key is there
    assert ChunkSource.of(asked).content_hash == "ff00"


def test_search_asks_for_the_passage_fields_and_retrieve_for_the_whole_chunk() -> None:
    lean = candidates_body("hybrid", "возврат", [0.1, 0.2], 10, [], source_fields=PASSAGE_FIELDS)
    assert lean["_source"] == {"includes": list(PASSAGE_FIELDS)} and VECTOR_FIELD in lean["script_fields"]
    # A cluster without inline scripts: the vector comes in _source, with the same fields.
    assert vectors_in_source(lean)["_source"] == {"includes": [*PASSAGE_FIELDS, "embedding"]}
    src = candidates_body(
        "hybrid", "возврат", [0.1, 0.2], 10, [], vectors="source", source_fields=PASSAGE_FIELDS
    )
    assert src["_source"] == {"includes": [*PASSAGE_FIELDS, "embedding"]} and "script_fields" not in src
    whole = candidates_body("hybrid", "возврат", [0.1, 0.2], 10, [])
    assert whole["_source"] == {"excludes": ["body", "embedding"]}
