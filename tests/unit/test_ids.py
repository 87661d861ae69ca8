"""Ids within OpenSearch's limits by construction (issue 29, item 3), and the sync stamp."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from osrag.chunking import Chunk, Document
from osrag.ingest.prepared import PreparedDoc, chunk_source
from osrag.ingest.stamps import FileStamp, origin_of, recipe, stamp_file, unchanged
from osrag.ingest.stamps import StoredFile as Stored
from osrag.store.versions import MAX_ID_BYTES, VersionStore, bounded_id


def chunk(doc_id: str, ordinal: int = 0) -> Chunk:
    return Chunk(
        doc_id=doc_id,
        ordinal=ordinal,
        text="Текст",
        body="Текст",
        heading_path=("Раздел",),
        section_id="s0",
        parent_section_id=None,
        kind="text",
        start=0,
        end=5,
        token_count=1,
    )


def test_short_ids_stay_as_they_are() -> None:
    assert bounded_id("kb/faq@0123:4") == "kb/faq@0123:4"
    exact = "a" * MAX_ID_BYTES
    assert bounded_id(exact) == exact


def test_long_ids_become_a_hash_within_the_limit() -> None:
    # ~267 Cyrillic characters of path: ~534 bytes in UTF-8, over the limit in bytes, not characters.
    long_path = "документация/" + "раздел-" * 38 + "страница"
    assert len(long_path) < MAX_ID_BYTES < len(long_path.encode("utf-8"))
    a, b = bounded_id(long_path + "@v1:0"), bounded_id(long_path + "@v1:1")
    assert a != b and a == bounded_id(long_path + "@v1:0")  # deterministic: a re-ingest overwrites
    assert a.startswith("~") and len(a.encode("utf-8")) <= MAX_ID_BYTES


def test_bulk_actions_of_a_long_doc_id_carry_the_full_id_and_fail_alone(
    fake_cluster: Any, fake_client: Any
) -> None:
    long_id = "коллекция/" + "очень-длинный-путь/" * 30 + "файл"
    docs = [
        PreparedDoc(Document(doc_id=d, text="t", source=d), d, f"{d}@v1", [chunk(d, 0), chunk(d, 1)])
        for d in ("kb/short", long_id)
    ]
    for p in docs:
        p.vectors = [[0.1, 0.2], [0.3, 0.4]]
    sent: list[dict[str, Any]] = []

    def server(body: str, **_: Any) -> dict[str, Any]:
        lines = [json.loads(x) for x in body.strip().split("\n")]
        items = []
        for meta, src in zip(lines[::2], lines[1::2]):
            sent.append({**meta["index"], "_source": src})
            _id = meta["index"]["_id"]
            assert len(_id.encode("utf-8")) <= MAX_ID_BYTES  # as the server requires
            bad = src["doc_id"] == long_id and src["ordinal"] == 1
            item = {"_index": "i", "_id": _id, "status": 400 if bad else 201}
            if bad:
                item["error"] = {"type": "mapper_parsing_exception", "reason": "bad"}
            items.append({"index": item})
        return {"took": 1, "errors": True, "items": items}

    fake_client.bulk.side_effect = server
    outcome = VersionStore(fake_cluster, "a")._bulk("i", docs, "2026-01-01T00:00:00+00:00")
    # The failure is mapped back to its document through the hashed _id: the short doc is not blamed.
    assert list(outcome.failed) == [f"{long_id}@v1"]
    assert "400" in outcome.failed[f"{long_id}@v1"]
    long_actions = [a for a in sent if a["_source"]["doc_id"] == long_id]
    assert [a["_source"]["full_id"] for a in long_actions] == [f"{long_id}@v1:0", f"{long_id}@v1:1"]
    assert all(a["_id"] == bounded_id(a["_source"]["full_id"]) for a in long_actions)
    assert all("full_id" not in a["_source"] for a in sent if a["_source"]["doc_id"] == "kb/short")


def test_stamp_covers_bytes_and_recipe_and_reads_only_regular_files(tmp_path: Path) -> None:
    root = tmp_path / "kb"
    root.mkdir()
    f = root / "a.md"
    f.write_bytes(b"# A\n\ntext\n")
    r1, r2 = recipe("0.1", "markdown", 350), recipe("0.1", "markdown", 200)
    s1 = stamp_file(f, root, "kb", r1, 1000)
    assert s1 is not None and s1.origin == "kb/a.md" and s1.collection == "kb"
    assert stamp_file(f, root, "kb", r1, 1000) == s1
    assert stamp_file(f, root, "kb", r2, 1000) != s1  # other chunk settings: not "unchanged"
    f.write_bytes(b"# A\n\ntext!\n")
    assert stamp_file(f, root, "kb", r1, 1000) != s1
    assert stamp_file(f, root, "kb", r1, 5) is None  # over the size limit: never read, never skipped
    assert stamp_file(root, root, "kb", r1, 1000) is None  # a folder
    assert stamp_file(root / "missing.md", root, "kb", r1, 1000) is None
    assert origin_of(Path("/x/y.md"), root, "kb") == "kb/y.md"  # outside the root: its name


def test_unchanged_only_when_one_stored_document_has_the_same_hash() -> None:
    st = FileStamp("kb", "kb/a.md", "h1")
    assert unchanged(st, [Stored("kb/a", "h1", "kb/a@1")])
    assert not unchanged(st, [Stored("kb/a", "h0", "kb/a@0")])
    assert not unchanged(st, [])
    assert not unchanged(st, [Stored("kb/a", "h1", "kb/a@1"), Stored("kb/b", "h1", "kb/b@1")])


def test_chunk_source_carries_the_stamp_only_for_files() -> None:
    doc = Document(doc_id="kb/a", text="t", source="kb/a.md")
    plain = chunk_source(doc, chunk("kb/a"), "kb/a@v", [0.0], "t")
    assert not {"collection", "origin", "file_hash"} & set(plain)
    stamped = chunk_source(doc, chunk("kb/a"), "kb/a@v", [0.0], "t", FileStamp("kb", "kb/a.md", "h"))
    assert (stamped["collection"], stamped["origin"], stamped["file_hash"]) == ("kb", "kb/a.md", "h")
