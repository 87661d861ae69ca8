"""The write side and the network surfaces fail closed (issue #36), the cases that need no cluster.

Front matter is parsed within bounds (alias bombs, nesting, size); every kind of bad new version of
a file is a per-file error or skip (what ``osrag ingest`` then withdraws -- end to end in
tests/integration/test_writeside.py); a rollback's difference is counted; the CLI prints one line
per error; HTTP and MCP refuse coercions, repeated identity headers and clause overflows with one
line, and a 5xx body names no host, user or path.
"""

from __future__ import annotations

import io
import logging
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from osrag.admin.reindex import RollbackDiff, rollback_diff
from osrag.errors import (
    ClusterError,
    ClusterUnavailable,
    ConfigError,
    DocumentError,
    DocumentSkipped,
    IndexStateError,
    InputError,
    ModelError,
)
from osrag.ingest.documents import ReadOptions, read_document, read_tree
from osrag.ingest.frontmatter import (
    MAX_FRONT_MATTER_CHARS,
    MAX_FRONT_MATTER_DEPTH,
    MAX_FRONT_MATTER_NODES,
    FrontMatterError,
    read_front_matter,
)
from osrag.observability import configure_cli_logging, observe_search
from osrag.search.query import MAX_FILTERS, parse_filters
from osrag.steps import Call, Inline, drive


# ================================================================== item 4: bounded front matter
def alias_bomb(levels: int, width: int, key: str = "a") -> str:
    lines = [f"{key}0: &{key}0 [" + ", ".join(["x"] * width) + "]"]
    for i in range(1, levels):
        lines.append(f"{key}{i}: &{key}{i} [" + ", ".join([f"*{key}{i - 1}"] * width) + "]")
    return "\n".join(lines)


def mapping_bomb(levels: int, width: int) -> str:
    lines = ["m0: &m0 {" + ", ".join(f"k{j}: v" for j in range(width)) + "}"]
    for i in range(1, levels):
        lines.append(f"m{i}: &m{i} {{" + ", ".join(f"k{j}: *m{i - 1}" for j in range(width)) + "}")
    return "\n".join(lines)


def block(body: str, *, acl: bool = False) -> str:
    return "---\n" + ("acl: [staff]\n" if acl else "") + body + "\n---\n# Заголовок\n\nТекст.\n"


def nested_list(depth: int) -> str:
    return "x: " + "[" * depth + "1" + "]" * depth


def nested_map(depth: int) -> str:
    return "x: " + "{a: " * depth + "1" + "}" * depth


def nested_block(depth: int) -> str:
    return "\n".join("  " * i + f"k{i}:" for i in range(depth)) + " end"


BOMBS: dict[str, str] = {
    **{f"list-bomb-{lv}x{w}": alias_bomb(lv, w) for lv in (5, 6, 7, 9) for w in (9, 10)},
    **{f"list-bomb-{lv}x{w}": alias_bomb(lv, w) for lv, w in ((14, 2), (20, 2), (4, 12), (3, 40))},
    **{f"map-bomb-{lv}x{w}": mapping_bomb(lv, w) for lv, w in ((5, 9), (9, 9), (14, 2), (4, 12))},
    "recursive-list": "x: &a [*a]",
    "recursive-map": "x: &a {k: *a}",
    "recursive-deep": "x: &a [1, [2, [3, *a]]]",
    "recursive-in-map-value": "x: &a {k: [1, {j: *a}]}",
    **{f"nested-list-{d}": nested_list(d) for d in (21, 50, 500, 5000)},
    **{f"nested-map-{d}": nested_map(d) for d in (21, 50, 500)},
    **{f"nested-block-{d}": nested_block(d) for d in (22, 60)},
    "too-many-values": "x: [" + ", ".join(["1"] * (MAX_FRONT_MATTER_NODES + 5)) + "]",
    "too-many-keys": "\n".join(f"k{i}: v" for i in range(MAX_FRONT_MATTER_NODES)),
    "too-long": "x: '" + "a" * (MAX_FRONT_MATTER_CHARS + 10) + "'",
}


@pytest.mark.parametrize("acl", [False, True], ids=["public", "with-acl"])
@pytest.mark.parametrize("name", sorted(BOMBS))
def test_front_matter_past_its_bounds_is_one_line_error_at_once(name: str, acl: bool) -> None:
    # CPU time of this process, not wall time: other work on the machine must not fail the test,
    # while an expansion the loader failed to bound costs CPU seconds here whatever the load.
    started = time.process_time()
    with pytest.raises(FrontMatterError) as got:
        read_front_matter(block(BOMBS[name], acl=acl))
    assert time.process_time() - started < 2.0
    msg = str(got.value)
    assert "\n" not in msg and len(msg) < 300, msg
    assert msg.startswith("front matter"), msg


WITHIN: dict[str, tuple[str, dict[str, Any]]] = {
    "small-alias": ("tags: &t [a, b]\nmore: *t", {"tags": ["a", "b"], "more": ["a", "b"]}),
    "alias-of-scalar": ("a: &v x\nb: *v", {"a": "x", "b": "x"}),
    "two-level-bomb": (alias_bomb(2, 9), None),
    "three-level-bomb": (alias_bomb(3, 9), None),
    "merge-key": ("base: &b {x: 1}\nother:\n  <<: *b\n  y: 2", {"other": {"x": "1", "y": "2"}}),
    "depth-at-limit": (nested_list(MAX_FRONT_MATTER_DEPTH - 2), None),
    "nested-meta": ("nav: {parent: guide, order: [1, 2]}", {"nav": {"parent": "guide", "order": ["1", "2"]}}),
    "many-keys-under-cap": ("\n".join(f"k{i}: v" for i in range(500)), None),
}


@pytest.mark.parametrize("name", sorted(WITHIN))
def test_front_matter_within_its_bounds_is_read(name: str) -> None:
    raw, meta = WITHIN[name]
    front, body = read_front_matter(block(raw, acl=True))
    assert front.fields["acl"] == ["staff"] and body.startswith("# Заголовок")
    for key, value in (meta or {}).items():
        assert front.meta[key] == value


def test_bomb_stays_within_bounded_memory_in_a_process_of_its_own(tmp_path: Path) -> None:
    """Under a 512 MB address-space limit the nine-level bomb is refused (unbounded, it needs GBs)."""
    code = (
        "import resource, sys\n"
        "resource.setrlimit(resource.RLIMIT_AS, (512 * 2**20, 512 * 2**20))\n"
        "from osrag.ingest.frontmatter import read_front_matter, FrontMatterError\n"
        f"text = {block(alias_bomb(9, 9), acl=True)!r}\n"
        "try:\n    read_front_matter(text)\nexcept FrontMatterError as e:\n    print('refused', e)\n"
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0 and proc.stdout.startswith("refused front matter expands"), proc.stderr


@pytest.mark.parametrize("levels", [5, 7, 9])
def test_a_bomb_file_is_one_per_file_error_and_the_others_are_read(tmp_path: Path, levels: int) -> None:
    root = tmp_path / "kb"
    root.mkdir()
    for i in range(4):
        (root / f"ok{i}.md").write_text(f"# Страница {i}\n\nТекст {i}.\n", encoding="utf-8")
    (root / "bomb.md").write_text(block(alias_bomb(levels, 9), acl=True), encoding="utf-8")
    started = time.perf_counter()
    got = dict(read_tree([root], ReadOptions()))
    assert time.perf_counter() - started < 10
    errors = {Path(p).name: e for p, e in got.items() if isinstance(e, DocumentError)}
    assert list(errors) == ["bomb.md"] and "expands to more than" in errors["bomb.md"].reason
    assert len(got) - len(errors) == 4


# ================================================================== item 3: what a bad new version is
def _write(text: str | bytes) -> Any:
    def make(p: Path) -> None:
        if isinstance(text, bytes):
            p.write_bytes(text)
        else:
            p.write_text(text, encoding="utf-8")

    return make


def _symlink_out(p: Path) -> None:
    outside = p.parent.parent / "outside.md"
    outside.write_text("# Вне\n\nЧужой текст.\n", encoding="utf-8")
    p.symlink_to(outside)


def _fifo(p: Path) -> None:
    os.mkfifo(p)


BAD_VERSIONS: dict[str, Any] = {
    "only-acl-front-matter": _write("---\nacl: [staff]\n---\n"),
    "only-tenant-front-matter": _write("---\ntenant: acme\n---\n"),
    "acl-and-blank-body": _write("---\nacl: [staff]\n---\n\n\n   \n"),
    "acl-unclosed": _write("---\nacl: [staff]\n# Заголовок\n\nТекст.\n"),
    "acl-bad-yaml": _write("---\nacl: [staff\n---\n# З\n\nТекст.\n"),
    "acl-typo-key": _write("---\nacls: [staff]\n---\n# З\n\nТекст.\n"),
    "acl-number": _write("---\nacl: 123\n---\n# З\n\nТекст.\n"),
    "acl-empty": _write("---\nacl: []\n---\n# З\n\nТекст.\n"),
    "acl-twice": _write("---\nacl: [staff]\nacl: []\n---\n# З\n\nТекст.\n"),
    "acl-after-blank-lines-unclosed": _write("\n\n---\nacl: [staff]\n# З\n\nТекст.\n"),
    "archived-on": _write("---\narchived: on\n---\n# З\n\nТекст.\n"),
    "bad-date": _write("---\nupdated_at: 2026-13-01\n---\n# З\n\nТекст.\n"),
    "alias-bomb": _write(block(alias_bomb(9, 9), acl=True)),
    "recursive-alias": _write(block("x: &a [*a]", acl=True)),
    "deep-nesting": _write(block(nested_list(200), acl=True)),
    "emptied": _write(""),
    "whitespace-only": _write(" \n\t\n"),
    "headings-only": _write("# Заголовок\n\n## Раздел\n"),
    "binary-nul": _write(b"\x00\x01\x02\x00" * 100),
    "binary-zip": _write(b"PK\x03\x04" + bytes(range(256)) * 4),
    "invalid-utf8": _write(b"# \xff\xfe\xfd\n\n\xc3\x28 text\n"),
    "utf16-bom": _write("# Заголовок\n\nТекст.\n".encode("utf-16")),
    "too-large": _write("# З\n\n" + "слово " * 20_000),
    "symlink-out-of-tree": _symlink_out,
    "fifo": _fifo,
}


@pytest.mark.parametrize("kind", sorted(BAD_VERSIONS))
def test_every_bad_new_version_is_a_per_file_error_or_skip(tmp_path: Path, kind: str) -> None:
    """What the ingest turns into a withdrawal: the file gives no document, and says why in one line."""
    root = tmp_path / "kb"
    root.mkdir()
    (root / "other.md").write_text("# Другая\n\nТекст.\n", encoding="utf-8")
    BAD_VERSIONS[kind](root / "p.md")
    got = dict(read_tree([root], ReadOptions(max_bytes=50_000)))
    mine = {p: d for p, d in got.items() if Path(p).name == "p.md"}
    assert len(mine) == 1, got
    (outcome,) = mine.values()
    assert isinstance(outcome, (DocumentError, DocumentSkipped)), outcome
    assert outcome.reason and "\n" not in outcome.reason
    assert not any(isinstance(d, DocumentError) for p, d in got.items() if Path(p).name == "other.md")


def test_unreadable_file_is_a_per_file_error(tmp_path: Path) -> None:
    if os.geteuid() == 0:
        pytest.skip("root reads a chmod 000 file")
    p = tmp_path / "p.md"
    p.write_text("# З\n\nТекст.\n", encoding="utf-8")
    p.chmod(0)
    with pytest.raises(DocumentError):
        read_document(p, tmp_path)


# ================================================================== item 1: rollback's difference
ROLLBACK_CASES: dict[str, tuple[dict[str, set[str]], dict[str, set[str]], tuple[int, int, int]]] = {
    "same": ({"a": {"a@1"}}, {"a": {"a@1"}}, (0, 0, 0)),
    "both-empty": ({}, {}, (0, 0, 0)),
    "deleted-since": ({"a": {"a@1"}}, {"a": {"a@1"}, "leak": {"leak@1"}}, (0, 1, 0)),
    "added-since": ({"a": {"a@1"}, "new": {"new@1"}}, {"a": {"a@1"}}, (1, 0, 0)),
    "restricted-since": ({"a": {"a@2"}}, {"a": {"a@1"}}, (0, 0, 1)),
    "mid-flip-since": ({"a": {"a@1", "a@2"}}, {"a": {"a@1"}}, (0, 0, 1)),
    "all-kinds": (
        {"a": {"a@2"}, "new": {"new@1"}, "same": {"s@1"}},
        {"a": {"a@1"}, "leak": {"leak@1"}, "same": {"s@1"}},
        (1, 1, 1),
    ),
    "everything-deleted": ({}, {"a": {"a@1"}, "b": {"b@1"}}, (0, 2, 0)),
    "everything-new": ({"a": {"a@1"}, "b": {"b@1"}}, {}, (2, 0, 0)),
}


@pytest.mark.parametrize("name", sorted(ROLLBACK_CASES))
def test_rollback_diff_counts_each_kind(name: str) -> None:
    live, previous, (dropped, republished, reverted) = ROLLBACK_CASES[name]
    diff = rollback_diff(
        {k: frozenset(v) for k, v in live.items()}, {k: frozenset(v) for k, v in previous.items()}
    )
    assert (len(diff.dropped), len(diff.republished), len(diff.reverted)) == (dropped, republished, reverted)
    assert diff.total == dropped + republished + reverted
    text = diff.describe()
    assert "\n" not in text
    assert ("served again" in text) == bool(republished)
    assert ("would be gone" in text) == bool(dropped)
    assert ("older version" in text) == bool(reverted)


def test_rollback_diff_names_at_most_three_ids_of_a_kind() -> None:
    diff = RollbackDiff(republished=tuple(f"kb/d{i}" for i in range(10)))
    assert diff.describe() == "10 deleted since would be served again (kb/d0, kb/d1, kb/d2, ...)"


# ================================================================== item 5: CLI errors are one line
FAILURES = [
    ClusterUnavailable("cannot reach OpenSearch at http://127.0.0.1:1"),
    ClusterUnavailable("TLS handshake failed: certificate verify failed"),
    IndexStateError("alias x does not exist; run `osrag install` first"),
    ClusterError("search failed: 500 node dead"),
    ModelError("model not loaded"),
    ConfigError("bad setting"),
]


def _failing_search(exc: Exception) -> Any:
    def steps() -> Any:
        yield Call("search", "search", {})
        raise exc

    return steps()


def _run_observed(exc: Exception) -> None:
    transport = observe_search(Inline(lambda step: None), "вопрос")
    with pytest.raises(type(exc)):
        drive(_failing_search(exc), transport)


@pytest.mark.parametrize("exc", FAILURES, ids=lambda e: type(e).__name__ + ":" + str(e)[:12])
@pytest.mark.parametrize("verbosity", [0, 1, 2])
def test_a_failed_search_prints_no_record_at_default_verbosity(exc: Exception, verbosity: int) -> None:
    out = io.StringIO()
    handler = configure_cli_logging(verbosity, stream=out)
    try:
        _run_observed(exc)
    finally:
        logging.getLogger("osrag").removeHandler(handler)
    printed = out.getvalue()
    if verbosity == 0:
        assert printed == ""
    else:
        assert "failed after" in printed and type(exc).__name__ in printed


def test_other_warnings_still_print_at_default_verbosity() -> None:
    out = io.StringIO()
    handler = configure_cli_logging(0, stream=out)
    try:
        logging.getLogger("osrag.search").warning("degraded: bm25 only")
        logging.getLogger("osrag.ingest").warning("cannot list x")
    finally:
        logging.getLogger("osrag").removeHandler(handler)
    assert out.getvalue().count("\n") == 2


DEAD = {"OSRAG_URL": "http://127.0.0.1:9", "OSRAG_ALIAS": "h36-nothing-here"}
CLI_ON_A_DEAD_NODE = [
    ("search", "--public-only", "вопрос"),
    ("search", "--group", "staff", "вопрос"),
    ("search", "--public-only", "--json", "вопрос"),
    ("section", "--public-only", "kb/x#s"),
    ("status",),
    ("rollback",),
    ("rollback", "--force"),
    ("reindex", "--dry-run"),
    ("cleanup", "--keep", "1"),
    ("delete", "--doc", "kb/x"),
    ("install", "--check"),
    ("analyze", "текст"),
    ("ingest", "."),
]


@pytest.mark.parametrize("args", CLI_ON_A_DEAD_NODE, ids=lambda a: "-".join(a[:2]))
def test_cli_error_on_a_dead_node_is_exactly_one_line(tmp_path: Path, args: tuple[str, ...]) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith("OSRAG_")}
    env.update(DEAD, OSRAG_MAX_RETRIES="0")
    proc = subprocess.run(
        [sys.executable, "-m", "osrag.cli", *args],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode != 0
    lines = proc.stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith("osrag: error:"), proc.stderr


# ================================================================== item 5: filters and clause counts
@pytest.mark.parametrize("count", [MAX_FILTERS + 1, 100, 1000, 2000])
def test_more_filters_than_allowed_is_an_input_error(count: int) -> None:
    with pytest.raises(InputError, match=f"{count} filters given; at most {MAX_FILTERS}"):
        parse_filters({f"meta.k{i}": "v" for i in range(count)})


@pytest.mark.parametrize("count", [0, 1, 10, MAX_FILTERS])
def test_filters_up_to_the_cap_are_read(count: int) -> None:
    assert len(parse_filters({f"meta.k{i}": "v" for i in range(count)})) == count
