"""Files read and chunked by worker processes (issue 23 item 6, ``osrag.ingest.readpool``) give the ingest
that the ingest's own thread gives, against the real node: the same report (outcomes, skips, failures,
notes, what reading counted) and the same stored chunks."""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

import pytest

from osrag.ingest import indexing
from osrag.ingest.indexing import Ingester
from osrag.ingest.readpool import POOL_MIN_FILES, ReadPool
from osrag.names import visibility_filter
from osrag.settings import Settings
from osrag.store.alias import AliasStore
from tests.integration.conftest import drop_alias

pytestmark = pytest.mark.integration


def _tree(root: Path) -> Path:
    (root / "_includes").mkdir(parents=True)
    (root / "_includes" / "quota.md").write_text(
        "Квота: {var(limit)} запросов в секунду.\n", encoding="utf-8"
    )
    for i in range(POOL_MIN_FILES + 8):
        body = f"# Сервис {i}\n\n{{note:info}}\nПримечание к сервису {i}.\n{{/note}}\n\n## Лимиты\n\n"
        body += "{include(_includes/quota.md)}\n\n" + f"Сервис {i} работает с очередями и хранилищем. " * 12
        (root / f"service_{i}.md").write_text(body, encoding="utf-8")
    (root / "empty.md").write_text("", encoding="utf-8")
    (root / "broken.md").write_bytes(b"\xff not utf-8")
    (root / "front.md").write_text(
        "---\ntitle: Страница\nslug: p\n---\n\nТекст о доставке.\n", encoding="utf-8"
    )
    (root / "lost.md").write_text("Начало.\n\n{include(nowhere.md)}\n\nКонец.\n", encoding="utf-8")
    return root


def _chunks(admin: AliasStore) -> list[tuple[Any, ...]]:
    resp = admin.cluster.client.search(
        index=admin.alias,
        body={
            "size": 1000,
            "query": {"bool": {"filter": [visibility_filter(admin.alias)]}},
            "sort": ["chunk_id"],
        },
    )
    keep = ("chunk_id", "text", "token_count", "start", "end", "anchor", "title", "version_key", "meta")
    return [tuple(str(h["_source"].get(k)) for k in keep) for h in resp["hits"]["hits"]]


def test_workers_ingest_what_the_ingest_thread_ingests(
    settings: Settings, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    kb = _tree(tmp_path / "kb")
    pools: list[ReadPool] = []

    def waiting_pool(workers: int) -> ReadPool:  # the workers read every file (none read while they start)
        pools.append(ReadPool(workers, read_while_starting=False))
        return pools[-1]

    monkeypatch.setattr(indexing, "ReadPool", waiting_pool)
    got = []
    for workers in (2, 0):
        s = settings.model_copy(update={"alias": f"{settings.alias}-w{workers}", "ingest_workers": workers})
        admin = AliasStore(s)
        try:
            admin.install()
            report = Ingester(s).ingest([kb])
            summary = dataclasses.asdict(report.summary())
            for volatile in ("index", "seconds", "embed_seconds", "chunks_per_s"):
                summary.pop(volatile)
            got.append((summary, report.notes, _chunks(admin)))
        finally:
            drop_alias(admin.cluster.client, s.alias)
    assert pools[0].worker_reads == POOL_MIN_FILES + 8 + 5 and pools[1].worker_reads == 0
    (pooled, notes, chunks), (here, notes_here, chunks_here) = got
    assert pooled == here and notes == notes_here and chunks == chunks_here
    assert here["indexed"] == POOL_MIN_FILES + 8 + 3 and len(chunks) > POOL_MIN_FILES
    assert [f["path"].rsplit("/", 1)[-1] for f in here["failures"]] == ["broken.md"]
    assert [f["path"].rsplit("/", 1)[-1] for f in here["skips"]] == ["empty.md"]
    assert here["meta_keys"] == {"slug": 1} and here["notes"]
