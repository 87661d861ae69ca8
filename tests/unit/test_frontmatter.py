"""Front matter never fails open (issue 29) and is read as real docs write it (issue 23).

Every row of the first table is a file that says it is restricted; on the old reader each came
back PUBLIC (no acl) with exit 0. Now each is either read with its acl, or a per-file error
naming the problem -- never a public document.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from osrag.errors import DocumentError
from osrag.ingest.documents import read_document
from osrag.ingest.frontmatter import likely_key, read_front_matter

BODY = "# Отчёт\n\nВыручка за квартал.\n"

# (file bytes, the acl it must come back with -- or the error it must raise)
NEVER_PUBLIC = [
    ("---\nacl: [finance]\nacl: []\n---\n" + BODY, "field 'acl' is given twice"),
    ("---\nacl: [finance]\nACL: []\n---\n" + BODY, "field 'acl' is given twice"),
    ("---\ntenant: acme\ntenant: globex\n---\n" + BODY, "field 'tenant' is given twice"),
    ("\n---\nacl: [finance]\n---\n" + BODY, ["finance"]),  # a blank line before the block
    ("\n\n  \n---\nacl: [finance]\n---\n" + BODY, ["finance"]),
    ("---\racl: [finance]\r---\r" + BODY.replace("\n", "\r"), ["finance"]),  # CR-only line ends
    ("\r---\racl: [finance]\r---\r" + BODY.replace("\n", "\r"), ["finance"]),
    ("---\r\nacl: [finance]\r\n---\r\n" + BODY, ["finance"]),
    ("\n---\nacl: [finance]\n\n" + BODY, "has no closing '---' line"),  # after blank lines, unclosed
    ("\n---\nacl: [finance] and some words: more\n---\n" + BODY, "is not 'key: value' lines"),
    ("---\nacl:\n---\n" + BODY, "field 'acl' is empty"),
    ("---\nacl: []\n---\n" + BODY, "field 'acl' is empty"),
    ("---\nacl: ','\n---\n" + BODY, "field 'acl' has no group names"),
    ("---\ntenant:\n---\n" + BODY, "field 'tenant' is empty"),
    ("---\nacls: [finance]\n---\n" + BODY, "did you mean 'acl'?"),
    ("---\ntenants: acme\n---\n" + BODY, "did you mean 'tenant'?"),
    ("---\nAcl : [finance]\n---\n" + BODY, ["finance"]),
]


@pytest.mark.parametrize(("text", "want"), NEVER_PUBLIC, ids=[f"row{i}" for i in range(len(NEVER_PUBLIC))])
def test_restricted_front_matter_never_comes_back_public(tmp_path: Path, text: str, want: object) -> None:
    p = tmp_path / "report.md"
    p.write_bytes(text.encode("utf-8"))
    if isinstance(want, str):
        with pytest.raises(DocumentError) as err:
            read_document(p, tmp_path)
        assert want in err.value.reason
        assert "\n" not in str(err.value)
        return
    doc = read_document(p, tmp_path)
    assert doc.metadata.get("acl") == want
    assert "acl" not in doc.text and "---" not in doc.text  # the block is never body text


def test_cr_only_body_is_normalised_and_spans_stay_true(tmp_path: Path) -> None:
    p = tmp_path / "mac.md"
    p.write_bytes(b"---\rtitle: Old Mac\r---\r# A\r\rline one\rline two\r")
    doc = read_document(p, tmp_path)
    assert doc.title == "Old Mac"
    assert doc.text == "# A\n\nline one\nline two\n"


def test_a_thematic_break_after_blank_lines_stays_body_text() -> None:
    text = "\n---\nПросто текст между линиями.\n---\nещё\n"
    front, body = read_front_matter(text)
    assert front.fields == {} and body == text


# ------------------------------------------------------------------ unknown keys (issue 23)
def test_unknown_keys_are_kept_as_text_not_errors(tmp_path: Path) -> None:
    p = tmp_path / "page.md"
    p.write_text(
        "---\ntitle: Быстрый старт\ndescription: Как начать\nslug: /start\nsidebar_position: 3\n"
        "editable: false\ntags: [intro, start]\ndate: 2026-01-02\nkeywords:\n  - a\n  - 7\n"
        "seo: {robots: noindex}\nempty:\n---\n" + BODY,
        encoding="utf-8",
    )
    doc = read_document(p, tmp_path)
    assert doc.title == "Быстрый старт"
    assert doc.metadata["meta"] == {
        "description": "Как начать",
        "slug": "/start",
        "sidebar_position": "3",
        "editable": "false",
        "tags": ["intro", "start"],
        "date": "2026-01-02",
        "keywords": ["a", "7"],
        "seo": {"robots": "noindex"},
    }
    assert "acl" not in doc.metadata


def test_an_over_long_meta_value_is_left_out_and_counted(tmp_path: Path) -> None:
    p = tmp_path / "page.md"
    p.write_text(f"---\ndescription: {'x' * 5000}\nslug: ok\n---\n" + BODY, encoding="utf-8")
    front, _ = read_front_matter(p.read_text(encoding="utf-8"))
    assert front.meta == {"slug": "ok"} and front.meta_too_long == ("description",)


@pytest.mark.parametrize(
    ("key", "likely"),
    [
        ("categroy", "category"),
        ("acls", "acl"),
        ("doc-id", "doc_id"),
        ("docid", "doc_id"),
        ("titel", "title"),
        ("archive", "archived"),
        ("updated-at", "updated_at"),
        ("sources", "source"),
        ("description", None),
        ("tags", None),
        ("slug", None),
        ("date", None),
        ("url", None),
        ("id", None),
    ],
)
def test_a_key_one_edit_from_an_osrag_key_is_a_typo(key: str, likely: str | None) -> None:
    assert likely_key(key) == likely


def test_over_long_keyword_fields_are_refused(tmp_path: Path) -> None:
    p = tmp_path / "a.md"
    p.write_text(f"---\ndoc_id: {'я' * 1001}\n---\n" + BODY, encoding="utf-8")
    with pytest.raises(DocumentError, match="'doc_id' is 1,001 characters long"):
        read_document(p, tmp_path)
