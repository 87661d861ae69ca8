"""Bad input, as a table: each row is one thing a user can get wrong and the one-line error it gets.

Front matter (per-file errors naming the field), search filters, questions (API and CLI) and
token counts. Nothing here needs a node: every row must fail before a request is sent.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from osrag.chunking.model import MAX_CHARS_PER_TOKEN, bounded_token_count, simple_token_count
from osrag.errors import DocumentError, InputError
from osrag.ingest.documents import read_document
from osrag.search.query import parse_filters, validate_question

# ------------------------------------------------------------------ front matter
FRONT_MATTER_ERRORS = [
    ("---\ndoc_id: x\nacl: groupB\n\nтело без закрывающей черты\n", "no closing '---' line"),
    ("---\narchived: да\n---\n", "field 'archived' must be true or false, got 'да'"),
    ("---\narchived: on\n---\n", "field 'archived' must be true or false, got 'on'"),
    ("---\narchived: yes\n---\n", "field 'archived' must be true or false, got 'yes'"),
    ("---\narchived: maybe\n---\n", "field 'archived' must be true or false, got 'maybe'"),
    ("---\narchived: 1\n---\n", "field 'archived' must be true or false, got '1'"),
    ('---\narchived: "true"\n---\n', "field 'archived' must be true or false"),
    ("---\narchived:\n---\n", "field 'archived' must be true or false"),
    ("---\nupdated_at: not-a-date\n---\n", "field 'updated_at' must be a date YYYY-MM-DD, got 'not-a-date'"),
    ("---\nupdated_at: 2026-13-01\n---\n", "field 'updated_at' cannot be read"),
    ("---\nacl: 123\n---\n", "field 'acl' must be a list of group names, got a number 123"),
    ("---\nacl: [[groupB]]\n---\n", "field 'acl' must hold group names, got a list"),
    ("---\nacl: {a: 1}\n---\n", "field 'acl' must be a list of group names, got a mapping"),
    ("---\nacl: [group B]\n---\n", "field 'acl' has a bad group name 'group B'"),
    ("---\nacl: [groupB\n---\n", "front matter is not valid YAML"),
    ("---\nacls: groupB\n---\n", "field 'acls' is unknown"),
    ("---\ncategroy: promo\n---\n", "field 'categroy' is unknown: did you mean 'category'?"),
    ("---\nacl: a\nACL: b\n---\n", "field 'acl' is given twice"),
    ("---\ncategory: 12\n---\n", "field 'category' must be text, got a number 12 (quote it)"),
    ("---\ntenant: two words\n---\n", "field 'tenant' must be one name"),
    ("---\n- a\n- b\n---\n", "front matter must be 'key: value' lines"),
    ('---\ndoc_id: ""\n---\n', "field 'doc_id' is empty"),
]


@pytest.mark.parametrize(
    ("front", "message"), FRONT_MATTER_ERRORS, ids=[r[1][:40] for r in FRONT_MATTER_ERRORS]
)
def test_bad_front_matter_is_a_per_file_error_naming_the_field(
    tmp_path: Path, front: str, message: str
) -> None:
    p = tmp_path / "doc.md"
    p.write_text(front + "# Заголовок\n\nтекст\n", encoding="utf-8")
    with pytest.raises(DocumentError) as err:
        read_document(p, tmp_path, 1_000_000)
    assert err.value.path == str(p)
    assert message in err.value.reason
    assert "\n" not in str(err.value)


@pytest.mark.parametrize(
    ("front", "field", "want"),
    [
        ("acl: [groupB]", "acl", ["groupB"]),
        ("ACL: [groupB]", "acl", ["groupB"]),
        ("Acl:\n  - groupA\n  - groupB", "acl", ["groupA", "groupB"]),
        ("acl: groupA, groupB", "acl", ["groupA", "groupB"]),
        ("acl: 'g-1'", "acl", ["g-1"]),
        ("Archived: true", "archived", True),
        ("ARCHIVED: False", "archived", False),
        ("updated_at: 2026-09-01", "updated_at", "2026-09-01"),
        ("updated_at: 2026-09-01T10:00:00", "updated_at", "2026-09-01"),
        ("Tenant: acme", "tenant", "acme"),
        ("title: 'Заголовок: с двоеточием'", "title", "Заголовок: с двоеточием"),
    ],
)
def test_front_matter_fields_as_yaml_with_any_key_case(
    tmp_path: Path, front: str, field: str, want: Any
) -> None:
    p = tmp_path / "doc.md"
    p.write_text(f"---\n{front}\n---\n# Заголовок\n\nтекст\n", encoding="utf-8")
    doc = read_document(p, tmp_path, 1_000_000)
    got = doc.title if field == "title" else doc.metadata[field]
    assert got == want


# ------------------------------------------------------------------ filters
FILTER_ERRORS = [
    ({"include_archived": "maybe"}, "filter include_archived wants true or false, got 'maybe'"),
    ({"include_archived": "yes"}, "filter include_archived wants true or false, got 'yes'"),
    ({"include_archived": 1}, "filter include_archived wants true or false, got 1"),
    ({"include_archived": None}, "filter include_archived wants true or false, got None"),
    ({"updated_after": "not-a-date"}, "filter updated_after wants a date YYYY-MM-DD"),
    ({"updated_before": "2026-01-01junk"}, "filter updated_before wants a date YYYY-MM-DD"),
    ({"category": 123}, "filter category wants text or a list of texts, got 123"),
    ({"category": [["promo"]]}, "filter category wants text or a list of texts"),
    ({"tenant": {"a": 1}}, "filter tenant wants text or a list of texts"),
    ({"doc_id": ""}, "filter doc_id is empty"),
    ({"acl": "groupB"}, "acl is not a filter: pass the caller's groups as principal="),
    ({"colour": "red"}, "unknown filter 'colour'"),
]


@pytest.mark.parametrize(("raw", "message"), FILTER_ERRORS, ids=[r[1][:40] for r in FILTER_ERRORS])
def test_bad_filters_are_input_errors(raw: dict[str, Any], message: str) -> None:
    with pytest.raises(InputError) as err:
        parse_filters(raw)
    assert message in str(err.value)


# ------------------------------------------------------------------ questions
@pytest.mark.parametrize("question", ["\ud800", "чай \udcff", "\udfff конец"])
def test_lone_surrogates_are_one_input_error(question: str) -> None:
    with pytest.raises(InputError, match="question is not valid Unicode text: lone surrogate U\\+D"):
        validate_question(question)


def _cli(*args: str | bytes) -> subprocess.CompletedProcess[bytes]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("OSRAG_")}
    env.update(OSRAG_URL="http://127.0.0.1:9", OSRAG_TIMEOUT_S="1", OSRAG_MAX_RETRIES="0")
    return subprocess.run(
        [sys.executable, "-m", "osrag.cli", *args], capture_output=True, env=env, timeout=120
    )


@pytest.mark.parametrize(
    ("args", "message"),
    [
        ((b"\xff", "--public-only"), b"question is not valid Unicode text: lone surrogate U+DCFF"),
        ((b"\xd1\x87\xd0\xb0\xff", "--public-only"), b"lone surrogate U+DCFF at position 2"),
        (("чай", "--public-only", "--group", "a"), b"--public-only takes no --group"),
        (("чай", "--all-access", "--tenant", "t"), b"--all-access sees everything"),
        (
            ("чай", "--public-only", "--filter", "include_archived=maybe"),
            b"include_archived wants true or false",
        ),
        (("чай", "--public-only", "--filter", "acl=groupB"), b"acl is not a filter"),
    ],
)
def test_cli_bad_questions_and_principals_are_one_line(args: tuple[str | bytes, ...], message: bytes) -> None:
    p = _cli("search", *args)
    assert p.returncode == 1, p.stderr
    assert b"Traceback" not in p.stderr
    lines = p.stderr.strip().splitlines()
    assert len(lines) == 1 and message in lines[0], p.stderr


@pytest.mark.parametrize("command", [("search", "чай"), ("section", "groupB#0")])
def test_cli_reads_need_a_caller_said_with_the_cli_s_own_flags(command: tuple[str, str]) -> None:
    p = _cli(*command)
    assert p.returncode == 2 and b"Traceback" not in p.stderr  # a usage error, like click's own
    assert b"no caller: say who is asking with --group G" in p.stderr
    assert b"--public-only" in p.stderr and b"--all-access" in p.stderr
    assert b"principal=" not in p.stderr  # the API's words are not the CLI's


# ------------------------------------------------------------------ token counts
def test_one_giant_word_is_charged_what_it_costs() -> None:
    word = "ж" * 2_500_000
    assert simple_token_count(word) == 2_500_000 // MAX_CHARS_PER_TOKEN
    assert bounded_token_count(2, word) == 250_000
    # ordinary text keeps its tokenizer's count
    text = "Скидка 10 % на чай при заказе от двух пачек."
    assert bounded_token_count(11, text) == 11
    assert bounded_token_count(0, "") == 0


def test_model_counts_are_bounded_in_the_one_counter() -> None:
    from osrag.embedding import count_tokens_with

    class OneTokenPerWord:  # a transformers-style tokenizer that sees one token in any word
        def __call__(self, text: str, add_special_tokens: bool = False) -> dict[str, list[int]]:
            return {"input_ids": [0] * len(text.split())}

    assert count_tokens_with(OneTokenPerWord(), "ж" * 2_500_000) == 250_000
    assert count_tokens_with(OneTokenPerWord(), "чай зелёный") == 2


@pytest.mark.parametrize("name", ["", " ", "two words"])
def test_a_bad_collection_name_is_refused_before_any_io(name: str) -> None:
    from osrag.errors import ConfigError
    from osrag.ingest.indexing import Ingester
    from osrag.settings import Settings

    ingester = Ingester(Settings(url="http://127.0.0.1:9", _env_file=None))
    with pytest.raises(ConfigError, match="must be a name without spaces"):
        ingester.ingest(["."], collection=name)
