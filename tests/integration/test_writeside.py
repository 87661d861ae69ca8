"""The write side fails closed (issue #36), end to end on the real node: a rollback that would
republish, restore or drop documents is refused; a file whose new version cannot be indexed has its
previous document withdrawn; two roots that share a folder name do not replace each other.

Every check reads through the real query path as PUBLIC (what an anonymous reader would get) or
with the admin bypass (what is stored and visible at all).
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from osrag.access import PUBLIC, Principal
from osrag.admin.lifecycle import delete_documents
from osrag.admin.reindex import Reindexer
from osrag.errors import IndexStateError
from osrag.ingest.documents import ReadOptions
from osrag.ingest.indexing import Ingester
from osrag.search.client import SearchClient
from osrag.settings import Settings
from osrag.store.alias import AliasStore

ALL = Principal.admin_bypass()
WORD = "лампочкозаменитель"  # one made-up word: a BM25 hit means the text is served


def docs_for(settings: Settings, principal: Principal, word: str = WORD) -> set[str]:
    """doc_ids whose chunks ``principal`` gets for ``word`` (BM25 through the real read path)."""
    hits = SearchClient(settings).retrieve(word, mode="bm25", depth=50, principal=principal).hits
    return {h.source.doc_id for h in hits}


def cli(settings: Settings, cwd: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("OSRAG_")}
    env.update(OSRAG_URL=settings.url, OSRAG_ALIAS=settings.alias, OSRAG_CACHE_DIR=str(settings.cache_dir))
    return subprocess.run(
        [sys.executable, "-m", "osrag.cli", *args],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )


def page(text: str, acl: str | None = None) -> str:
    head = f"---\nacl: [{acl}]\n---\n" if acl else ""
    return f"{head}# Страница\n\n{text}\n"


# ------------------------------------------------------------------ item 1: rollback
def test_rollback_that_would_republish_restore_or_drop_is_refused(
    admin: AliasStore, settings: Settings, tmp_path: Path
) -> None:
    kb = tmp_path / "kb"
    kb.mkdir()
    (kb / "leak.md").write_text(page(f"Утечка {WORD} номер один."), encoding="utf-8")
    (kb / "open.md").write_text(page(f"Открытая страница {WORD} номер два."), encoding="utf-8")
    (kb / "same.md").write_text(page(f"Неизменная страница {WORD} номер три."), encoding="utf-8")
    Ingester(settings).ingest([kb])
    old = admin.current_index()
    new = Reindexer(settings).run().target
    assert new and new != old

    # After the switch: a page is restricted, one deleted, one added.
    (kb / "open.md").write_text(page(f"Открытая страница {WORD} номер два.", acl="staff"), encoding="utf-8")
    (kb / "added.md").write_text(page(f"Новая страница {WORD} номер четыре."), encoding="utf-8")
    Ingester(settings).ingest([kb])
    delete_documents(settings, ["kb/leak"])
    assert docs_for(settings, PUBLIC) == {"kb/same", "kb/added"}

    with pytest.raises(IndexStateError) as refused:
        Reindexer(settings).rollback()
    msg = str(refused.value)
    assert "3 document(s) differ" in msg and "--force" in msg, msg
    assert "1 deleted since would be served again (kb/leak)" in msg, msg
    assert "1 changed since" in msg and "kb/open" in msg, msg
    assert "1 added since would be gone (kb/added)" in msg, msg
    assert admin.current_index() == new
    assert docs_for(settings, PUBLIC) == {"kb/same", "kb/added"}  # nothing moved

    proc = cli(settings, tmp_path, "rollback")
    assert proc.returncode == 1 and proc.stderr.count("\n") == 1, proc.stderr
    assert proc.stderr.startswith("osrag: error: rollback refused: 3 document(s) differ")
    assert admin.current_index() == new

    proc = cli(settings, tmp_path, "rollback", "--force")
    assert proc.returncode == 0, proc.stderr
    assert f"{new} -> {old}" in proc.stdout and "forced: 3 document(s)" in proc.stdout
    assert admin.current_index() == old
    assert docs_for(settings, PUBLIC) == {"kb/leak", "kb/open", "kb/same"}  # what --force said


def test_rollback_with_nothing_changed_since_the_switch_goes_through(
    admin: AliasStore, settings: Settings, tmp_path: Path
) -> None:
    kb = tmp_path / "kb"
    kb.mkdir()
    (kb / "a.md").write_text(page(f"Страница {WORD}."), encoding="utf-8")
    Ingester(settings).ingest([kb])
    old = admin.current_index()
    new = Reindexer(settings).run().target
    assert Ingester(settings).ingest([kb]).skipped == 1  # unchanged: nothing differs
    assert Reindexer(settings).rollback() == (new, old)
    assert docs_for(settings, PUBLIC) == {"kb/a"}


# ------------------------------------------------------------------ item 3: withdraw
def _binary(p: Path) -> None:
    p.write_bytes(b"\x00\xff\xfe\x00PK\x03\x04" * 64)


def _symlink_out(p: Path) -> None:
    outside = p.parent.parent / "outside.md"
    outside.write_text(page(f"Чужой файл {WORD} вне дерева."), encoding="utf-8")
    p.unlink()
    p.symlink_to(outside)


def _bomb(p: Path) -> None:
    lines = ["a0: &a0 [x, x, x, x, x, x, x, x, x]"]
    lines += [f"a{i}: &a{i} [" + ", ".join([f"*a{i - 1}"] * 9) + "]" for i in range(1, 10)]
    p.write_text(
        "---\nacl: [staff]\n" + "\n".join(lines) + f"\n---\n# Страница\n\n{WORD}\n", encoding="utf-8"
    )


BAD_NEW_VERSIONS: dict[str, Any] = {
    "only-restricting-front-matter": lambda p: p.write_text("---\nacl: [staff]\n---\n", encoding="utf-8"),
    "restricting-edit-that-does-not-parse": lambda p: p.write_text(
        f"---\nacl: [staff\n---\n# Страница\n\n{WORD}\n", encoding="utf-8"
    ),
    "restricting-edit-with-a-typo-key": lambda p: p.write_text(
        f"---\nacls: [staff]\n---\n# Страница\n\n{WORD}\n", encoding="utf-8"
    ),
    "emptied": lambda p: p.write_text("", encoding="utf-8"),
    "whitespace-only": lambda p: p.write_text("\n\n   \n", encoding="utf-8"),
    "headings-only": lambda p: p.write_text("# Страница\n\n## Раздел\n", encoding="utf-8"),
    "binary": _binary,
    "symlink-out-of-the-tree": _symlink_out,
    "alias-bomb-with-acl": _bomb,
    "too-large": lambda p: p.write_text(page(WORD + " слово" * 40_000), encoding="utf-8"),
}


@pytest.mark.parametrize("prune", [False, True], ids=["no-prune", "prune"])
@pytest.mark.parametrize("kind", sorted(BAD_NEW_VERSIONS))
def test_a_file_whose_new_version_cannot_be_indexed_is_withdrawn(
    admin: AliasStore, settings: Settings, tmp_path: Path, kind: str, prune: bool
) -> None:
    kb = tmp_path / "kb"
    kb.mkdir()
    target = kb / "p.md"
    target.write_text(page(f"Публичная страница {WORD}."), encoding="utf-8")
    (kb / "other.md").write_text(page(f"Другая страница {WORD}."), encoding="utf-8")
    options = ReadOptions(max_bytes=100_000)
    Ingester(settings).ingest([kb], options=options)
    assert docs_for(settings, PUBLIC) == {"kb/p", "kb/other"}

    BAD_NEW_VERSIONS[kind](target)
    report = Ingester(settings).ingest([kb], prune=prune, options=options)

    assert report.withdrawn == ["kb/p"], report.summary()
    said = [r for p, r in [*report.failed, *report.skips] if p.endswith("p.md")]
    assert len(said) == 1 and "previous version (kb/p) is withdrawn from search" in said[0], said
    assert docs_for(settings, PUBLIC) == {"kb/other"}
    assert docs_for(settings, ALL) == {"kb/other"}  # withdrawn, not merely restricted
    # The other file is untouched (skipped unread as unchanged).
    assert report.skipped == 1


def test_withdrawn_file_comes_back_when_fixed_and_cli_says_withdrawn(
    admin: AliasStore, settings: Settings, tmp_path: Path
) -> None:
    kb = tmp_path / "kb"
    kb.mkdir()
    target = kb / "p.md"
    target.write_text(page(f"Публичная страница {WORD}."), encoding="utf-8")
    Ingester(settings).ingest([kb])
    target.write_text("---\nacl: [staff]\n---\n", encoding="utf-8")
    proc = cli(settings, tmp_path, "ingest", str(kb))
    assert "withdrawn 1" in proc.stdout, proc.stdout + proc.stderr
    assert "kb/p) is withdrawn from search" in proc.stderr, proc.stderr
    target.write_text(page(f"Теперь закрытая {WORD}.", acl="staff"), encoding="utf-8")
    report = Ingester(settings).ingest([kb])
    assert report.indexed == 1 and report.withdrawn == []
    assert docs_for(settings, PUBLIC) == set()
    assert docs_for(settings, Principal(groups=["staff"])) == {"kb/p"}


# ------------------------------------------------------------------ item 2: roots sharing a folder name
def two_roots(tmp_path: Path) -> tuple[Path, Path]:
    a, b = tmp_path / "teamA" / "docs", tmp_path / "teamB" / "docs"
    a.mkdir(parents=True)
    b.mkdir(parents=True)
    (a / "faq.md").write_text(page(f"Секрет команды А {WORD}.", acl="teamA"), encoding="utf-8")
    (a / "only-a.md").write_text(page(f"Только у А {WORD}.", acl="teamA"), encoding="utf-8")
    (b / "faq.md").write_text(page(f"Публичный ответ команды Б {WORD}."), encoding="utf-8")
    return a, b


def faq_text(settings: Settings) -> str:
    hits = SearchClient(settings).retrieve(WORD, mode="bm25", depth=50, principal=ALL).hits
    return " ".join(h.source.text for h in hits if h.source.doc_id == "docs/faq")


@pytest.mark.parametrize("together", [False, True], ids=["two-runs", "one-run"])
def test_a_second_root_with_the_same_folder_name_is_refused(
    admin: AliasStore, settings: Settings, tmp_path: Path, together: bool
) -> None:
    a, b = two_roots(tmp_path)
    if together:
        report = Ingester(settings).ingest([a, b])
        assert report.indexed == 2, report.summary()
    else:
        assert Ingester(settings).ingest([a]).indexed == 2
        report = Ingester(settings).ingest([b])
    assert [(Path(p).parent.parent.name, "another folder" in r) for p, r in report.failed] == [
        ("teamB", True)
    ]
    assert "--collection NAME" in report.failed[0][1] and "--replace" in report.failed[0][1]
    assert "Секрет команды А" in faq_text(settings)  # teamA's text is still there ...
    assert docs_for(settings, PUBLIC) == set()  # ... and still restricted
    assert docs_for(settings, Principal(groups=["teamA"])) == {"docs/faq", "docs/only-a"}


def test_collection_keeps_a_second_root_apart_and_prune_touches_only_its_own(
    admin: AliasStore, settings: Settings, tmp_path: Path
) -> None:
    a, b = two_roots(tmp_path)
    Ingester(settings).ingest([a])
    report = Ingester(settings).ingest([b], options=ReadOptions(collection="docs-b"), prune=True)
    assert report.failed == [] and report.indexed == 1 and report.pruned == []
    assert docs_for(settings, PUBLIC) == {"docs-b/faq"}
    # --prune of teamA's root with one file gone removes only teamA's document.
    (a / "only-a.md").unlink()
    report = Ingester(settings).ingest([a], prune=True)
    assert report.pruned == ["docs/only-a"]
    assert docs_for(settings, ALL) == {"docs/faq", "docs-b/faq"}


def test_prune_of_one_root_leaves_the_other_roots_documents(
    admin: AliasStore, settings: Settings, tmp_path: Path
) -> None:
    a, b = two_roots(tmp_path)
    Ingester(settings).ingest([a])
    (b / "faq.md").unlink()
    (b / "b-only.md").write_text(page(f"Только у Б {WORD}."), encoding="utf-8")
    report = Ingester(settings).ingest([b], prune=True)
    assert report.pruned == [] and len(report.failed) == 1  # refused: nothing of teamA removed
    assert docs_for(settings, ALL) == {"docs/faq", "docs/only-a"}


def test_replace_lets_a_second_root_take_the_collection_over(
    admin: AliasStore, settings: Settings, tmp_path: Path
) -> None:
    a, b = two_roots(tmp_path)
    Ingester(settings).ingest([a])
    report = Ingester(settings, replace=True).ingest([b], prune=True)
    assert report.failed == [] and report.indexed == 1 and report.pruned == ["docs/only-a"]
    assert "Публичный ответ команды Б" in faq_text(settings)
    assert docs_for(settings, PUBLIC) == {"docs/faq"}
    # Taken over: the next plain ingest of teamB is at home, and teamA's is now the one refused.
    assert Ingester(settings).ingest([b]).skipped == 1
    assert len(Ingester(settings).ingest([a]).failed) == 2


# ------------------------------------------------------------------ item 5: one line on a live node
MISSING_ALIAS = [
    ("search", "--public-only", "вопрос"),
    ("search", "--group", "staff", "--json", "вопрос"),
    ("section", "--public-only", "kb/x#s"),
    ("rollback",),
    ("reindex", "--dry-run"),
    ("delete", "--doc", "kb/x"),
    ("analyze", "текст"),
]


@pytest.mark.parametrize("args", MISSING_ALIAS, ids=lambda a: "-".join(a[:2]))
def test_cli_error_for_a_missing_alias_is_exactly_one_line(
    settings: Settings, tmp_path: Path, args: tuple[str, ...]
) -> None:
    proc = cli(settings, tmp_path, *args)  # this test's alias was never installed
    lines = proc.stderr.splitlines()
    assert proc.returncode != 0 and len(lines) == 1 and lines[0].startswith("osrag: error:"), proc.stderr
