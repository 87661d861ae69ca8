"""The reading side of ingest (no server): front matter, file checks, file order, chunk fields."""

from __future__ import annotations

from pathlib import Path

import pytest

from osrag.chunking import Chunk, Document
from osrag.errors import DocumentError
from osrag.ingest.convert import SUFFIXES
from osrag.ingest.documents import read_document
from osrag.ingest.frontmatter import parse_front_matter
from osrag.ingest.prepared import chunk_source
from osrag.ingest.walking import find_files
from osrag.names import content_hash, state_index, visibility_filter

LIMIT = 1_000_000


def write(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
    return path


# ------------------------------------------------------------------ front matter
def test_front_matter_parsed_and_stripped() -> None:
    meta, body = parse_front_matter(
        '---\ndoc_id: promo-tea10\ntitle: "Промокод TEA10"\nsource: http://x/y:1\narchived: true\n---\n\n# Заголовок\nтекст\n'
    )
    assert meta == {
        "doc_id": "promo-tea10",
        "title": "Промокод TEA10",
        "source": "http://x/y:1",
        "archived": True,
    }
    assert body == "# Заголовок\nтекст\n"


def test_no_front_matter_returns_text_unchanged() -> None:
    text = "# Заголовок\n\nдоставка лампы\n"
    assert parse_front_matter(text) == ({}, text)


def test_horizontal_rule_first_line_is_not_front_matter() -> None:
    text = "----\nтекст\n"
    assert parse_front_matter(text) == ({}, text)


def test_unterminated_front_matter_is_a_per_file_error(tmp_path: Path) -> None:
    p = write(tmp_path / "open.md", "---\ndoc_id: x\nacl: staff\n\nтекст без закрывающей черты\n")
    with pytest.raises(DocumentError, match="front matter has no closing '---' line"):
        read_document(p, tmp_path, LIMIT)


# ------------------------------------------------------------------ read_document
def test_read_document_with_front_matter(tmp_path: Path) -> None:
    p = write(
        tmp_path / "docs" / "promo.md",
        "---\ndoc_id: promo-tea10\ntitle: Промокод TEA10\ncategory: promo\ntenant: public\n"
        "updated_at: 2026-09-01\nacl: staff, partners\nsource: https://wiki/promo\n---\n"
        "# Промокод\n\nСкидка 10 % на чай.\n",
    )
    doc = read_document(p, tmp_path / "docs", LIMIT)
    assert doc.doc_id == "promo-tea10"
    assert doc.title == "Промокод TEA10"
    assert doc.text == "# Промокод\n\nСкидка 10 % на чай.\n"
    assert doc.source == "https://wiki/promo"
    assert doc.metadata["category"] == "promo"
    assert doc.metadata["tenant"] == "public"
    assert doc.metadata["updated_at"] == "2026-09-01"
    assert doc.metadata["acl"] == ["staff", "partners"]
    assert doc.metadata["archived"] is False
    assert doc.metadata["format"] == "markdown"


def test_read_document_defaults_doc_id_to_relative_path(tmp_path: Path) -> None:
    root = tmp_path / "kb"
    p = write(root / "delivery" / "zones.md", "# Зоны доставки\n\nМосква и область.\n")
    doc = read_document(p, root, LIMIT)
    assert doc.doc_id == "kb/delivery/zones"  # the collection (the root's name), then the path
    assert doc.title == "Зоны доставки"  # first heading
    assert doc.source == "kb/delivery/zones.md"  # relative to the root, in its collection: no local path
    # A file outside the root falls back to its own name in the collection.
    other = write(tmp_path / "elsewhere" / "note.txt", "просто текст\n")
    doc2 = read_document(other, root, LIMIT)
    assert doc2.doc_id == "kb/note"
    assert read_document(other, root, LIMIT, collection="notes").doc_id == "notes/note"
    assert doc2.title == "note"  # no heading: the file stem
    assert doc2.metadata["format"] == "text"


def test_same_relative_name_under_two_roots_gets_two_ids(tmp_path: Path) -> None:
    a = write(tmp_path / "teamA" / "faq.md", "# FAQ A\n\nтекст\n")
    b = write(tmp_path / "teamB" / "faq.md", "# FAQ B\n\nтекст\n")
    ids = {
        read_document(a, tmp_path / "teamA", LIMIT).doc_id,
        read_document(b, tmp_path / "teamB", LIMIT).doc_id,
    }
    assert ids == {"teamA/faq", "teamB/faq"}


def test_read_document_crlf_and_bom(tmp_path: Path) -> None:
    p = tmp_path / "win.md"
    p.write_bytes("\ufeff---\r\ndoc_id: win\r\n---\r\n# Окно\r\nтекст\r\n".encode())
    doc = read_document(p, tmp_path, LIMIT)
    assert doc.doc_id == "win"
    assert doc.text == "# Окно\nтекст\n"


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ("true", True),
        ("True", True),
        ("false", False),
        ("FALSE", False),
        (None, False),
    ],
)
def test_archived_parsing(tmp_path: Path, value: str | None, expected: bool) -> None:
    front = f"---\narchived: {value}\n---\n" if value is not None else ""
    p = write(tmp_path / "a.md", front + "# Архив\n\nстарая версия правил\n")
    assert read_document(p, tmp_path, LIMIT).metadata["archived"] is expected


def test_empty_file_rejected(tmp_path: Path) -> None:
    p = tmp_path / "empty.md"
    p.write_bytes(b"")
    with pytest.raises(DocumentError) as ei:
        read_document(p, tmp_path, LIMIT)
    assert ei.value.path == str(p)
    assert ei.value.reason == "empty file"


def test_whitespace_only_and_front_matter_only_rejected(tmp_path: Path) -> None:
    blank = write(tmp_path / "blank.md", "  \n\n\t\n")
    with pytest.raises(DocumentError, match="empty file"):
        read_document(blank, tmp_path, LIMIT)
    front_only = write(tmp_path / "front.md", "---\ntitle: Пусто\n---\n\n")
    with pytest.raises(DocumentError, match="no text after front matter"):
        read_document(front_only, tmp_path, LIMIT)


def test_binary_file_rejected(tmp_path: Path) -> None:
    p = tmp_path / "image.md"
    p.write_bytes(b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR" + bytes(range(256)))
    with pytest.raises(DocumentError) as ei:
        read_document(p, tmp_path, LIMIT)
    assert "binary" in ei.value.reason and "NUL" in ei.value.reason


def test_non_utf8_file_rejected_with_offset(tmp_path: Path) -> None:
    p = tmp_path / "cp1251.md"
    p.write_bytes("# Доставка\n".encode("cp1251"))
    with pytest.raises(DocumentError) as ei:
        read_document(p, tmp_path, LIMIT)
    reason = ei.value.reason
    assert "not UTF-8" in reason
    assert "0xc4" in reason  # "Д" in cp1251
    assert "offset 2" in reason
    assert str(p) in str(ei.value)


def test_file_over_limit_rejected_by_size_without_reading(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    p = tmp_path / "big.md"
    with p.open("wb") as f:  # sparse: 2 MB apparent size, nothing written
        f.truncate(2_000_000)

    def no_read(self: Path) -> bytes:
        raise AssertionError("an oversize file must be rejected before it is read")

    monkeypatch.setattr(Path, "read_bytes", no_read)
    with pytest.raises(DocumentError) as ei:
        read_document(p, tmp_path, 1_500_000)
    reason = ei.value.reason
    assert "too large" in reason
    assert "(2 MB > limit 1.5 MB" in reason  # names the size and the limit
    assert "OSRAG_MAX_FILE_BYTES" in reason


def test_small_limit_is_printed_readably(tmp_path: Path) -> None:
    p = write(tmp_path / "a.md", "# A\n\n" + "слово " * 20_000)  # ~120 KB
    with pytest.raises(DocumentError) as ei:
        read_document(p, tmp_path, 50_000)
    assert "limit 0.05 MB" in ei.value.reason  # not "limit 0 MB"


def test_file_exactly_at_limit_is_read(tmp_path: Path) -> None:
    p = write(tmp_path / "a.md", "# A\n\nтекст\n")
    size = p.stat().st_size
    assert read_document(p, tmp_path, size).doc_id == f"{tmp_path.name}/a"
    with pytest.raises(DocumentError, match="too large"):
        read_document(p, tmp_path, size - 1)


def test_missing_file_rejected(tmp_path: Path) -> None:
    with pytest.raises(DocumentError, match="cannot read"):
        read_document(tmp_path / "nope.md", tmp_path, LIMIT)


# ------------------------------------------------------------------ find_files
def test_find_files_sorted_and_filtered_by_suffix(tmp_path: Path) -> None:
    for name in [
        "b.md",
        "a.txt",
        "sub/z.markdown",
        "sub/a.MD",
        "c.pdf",
        "d.md.bak",
        "image.png",
        "page.HTM",
        "sub/deeper/x.md",
    ]:
        write(tmp_path / name, "x")
    (tmp_path / "dir.md").mkdir()  # a directory named like a document is skipped
    got = [(f.relative_to(tmp_path).as_posix(), root) for f, root in find_files([tmp_path])]
    assert got == [
        ("a.txt", tmp_path),
        ("b.md", tmp_path),
        ("c.pdf", tmp_path),
        ("page.HTM", tmp_path),
        ("sub/a.MD", tmp_path),
        ("sub/deeper/x.md", tmp_path),
        ("sub/z.markdown", tmp_path),
    ]
    assert {".md", ".markdown", ".mdx", ".txt", ".pdf", ".docx", ".html", ".htm", ".pptx"} == set(SUFFIXES)


def test_find_files_deterministic_and_explicit_files_kept(tmp_path: Path) -> None:
    d1, d2 = tmp_path / "one", tmp_path / "two"
    for name in ["q.md", "p.md"]:
        write(d1 / name, "x")
        write(d2 / name, "x")
    single = write(tmp_path / "notes.rst", "x")  # an explicit file is listed (read_document refuses it)
    got = list(find_files([d2, single, d1]))
    assert got == [
        (d2 / "p.md", d2),
        (d2 / "q.md", d2),
        (single, tmp_path),
        (d1 / "p.md", d1),
        (d1 / "q.md", d1),
    ]
    assert list(find_files([d2, single, d1])) == got
    assert list(find_files([str(d1)])) == [(d1 / "p.md", d1), (d1 / "q.md", d1)]


# ------------------------------------------------------------------ chunk_source
def _chunk(**kw: object) -> Chunk:
    base = dict(
        doc_id="promo-tea10",
        ordinal=3,
        text="Промокод > Условия\n\nСкидка 10 %",
        body="Скидка 10 %",
        heading_path=("Промокод", "Условия"),
        section_id="s2",
        parent_section_id="s1",
        kind="text",
        start=120,
        end=131,
        token_count=7,
    )
    base.update(kw)
    return Chunk(**base)  # type: ignore[arg-type]


def test_chunk_source_maps_every_field() -> None:
    doc = Document(
        doc_id="promo-tea10",
        text="...",
        source="golden/promo-tea10.md",
        title="Промокод TEA10",
        metadata={
            "category": "promo",
            "tenant": "public",
            "acl": "staff, partners,, ",
            "archived": True,
            "updated_at": "2026-09-01T10:00:00",
            "format": "markdown",
        },
    )
    src = chunk_source(doc, _chunk(), "promo-tea10@abc123", [0.5, 0.25], "2026-11-30T00:00:00+00:00")
    assert src == {
        "chunk_id": "promo-tea10:3",
        "doc_id": "promo-tea10",
        "ordinal": 3,
        "section_id": "s2",
        "parent_section_id": "s1",
        "kind": "text",
        "title": "Промокод TEA10",
        "breadcrumb": "Промокод > Условия",
        "heading_path": ["Промокод", "Условия"],
        "text": "Промокод > Условия\n\nСкидка 10 %",
        "body": "Скидка 10 %",
        "start": 120,
        "end": 131,
        "version": "abc123",
        "version_key": "promo-tea10@abc123",
        "content_hash": content_hash("скидка 10"),
        "source": "golden/promo-tea10.md",
        "category": "promo",
        "tenant": "public",
        "acl": ["staff", "partners"],
        "archived": True,
        "token_count": 7,
        "updated_at": "2026-09-01",
        "ingested_at": "2026-11-30T00:00:00+00:00",
        "embedding": [0.5, 0.25],
    }
    assert all(type(x) is float for x in src["embedding"])


def test_chunk_source_drops_missing_optional_fields() -> None:
    import numpy as np

    doc = Document(
        doc_id="a@b",
        text="x",
        source="a.md",
        title="A",
        metadata={"updated_at": "not a date", "archived": False},
    )
    src = chunk_source(
        doc, _chunk(doc_id="a@b", parent_section_id=None), "a@b@v1", np.ones(3, dtype=np.float32), "t"
    )
    for absent in ("category", "tenant", "acl", "updated_at", "parent_section_id"):
        assert absent not in src
    assert src["archived"] is False
    assert src["version"] == "v1"  # the hash after the LAST @, even if doc_id has one
    assert src["embedding"] == [1.0, 1.0, 1.0] and all(type(x) is float for x in src["embedding"])


def test_visibility_filter_reads_the_state_index() -> None:
    f = visibility_filter("kb")
    lookup = f["bool"]["must_not"][0]["terms"]["version_key"]
    assert lookup == {"index": state_index("kb"), "id": "hidden", "path": "keys"}
    assert state_index("kb") == "kb.state"


def test_non_utf8_after_bom_reports_the_file_offset(tmp_path: Path) -> None:
    p = tmp_path / "bom.md"
    p.write_bytes(b"\xef\xbb\xbfab\xffcd")
    with pytest.raises(DocumentError) as ei:
        read_document(p, tmp_path, LIMIT)
    assert "invalid byte 0xff at offset 5" in ei.value.reason


def test_just_over_the_limit_is_shown_in_bytes(tmp_path: Path) -> None:
    p = tmp_path / "a.md"
    with p.open("wb") as f:
        f.truncate(20_000_001)
    with pytest.raises(DocumentError) as ei:
        read_document(p, tmp_path, 20_000_000)
    assert "20,000,001 bytes > limit 20,000,000 bytes" in ei.value.reason
