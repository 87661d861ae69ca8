"""osrag eval's defaults: a new report folder each run, chunking variants only when asked, and
an ingest's progress told as log lines (not counted as steps)."""

from __future__ import annotations

from pathlib import Path

import pytest

from osrag.cli.evaluate import eval_cmd, new_report_dir
from osrag.evaluation.runs import PROGRESS_MARK, IngestLog
from osrag.evaluation.suite import EvalConfig


def test_the_default_report_folder_is_new_each_time(tmp_path: Path) -> None:
    first = new_report_dir(tmp_path)
    assert first.parent == tmp_path / "osrag-eval" and not first.exists()
    first.mkdir(parents=True)
    second = new_report_dir(tmp_path)
    assert second != first and not second.exists() and second.name.startswith(first.name)


def test_chunking_variants_are_off_unless_asked() -> None:
    assert EvalConfig().chunking_variants is False
    flag = next(p for p in eval_cmd.params if p.name == "chunking_variants")
    assert flag.default is False
    out = next(p for p in eval_cmd.params if p.name == "out_dir")
    assert out.default is None  # resolved to new_report_dir at run time, never report/ by the golden file


def test_an_eval_ingest_logs_its_progress_with_an_eta() -> None:
    lines: list[str] = []
    now = [0.0]
    watch = IngestLog("golden/main", 10, lines.append, every_s=5, clock=lambda: now[0])
    watch.start("osrag-eval-golden-main-abc")
    assert lines == [f"{PROGRESS_MARK}golden/main: ingesting 10 documents into osrag-eval-golden-main-abc"]
    watch.embedded(0, 100, 10)
    now[0] = 6
    watch.embedded(30, 100, 10)  # 3 documents' worth in 6 s: 7 left at 0.5/s
    assert lines[-1] == f"{PROGRESS_MARK}golden/main: 3/10 documents embedded, ETA 0:14"
    now[0] = 7
    watch.embedded(40, 100, 10)
    assert len(lines) == 2  # at most one line per every_s
    now[0] = 20
    watch.embedded(100, 100, 10)
    assert lines[-1].startswith(f"{PROGRESS_MARK}golden/main: 10/10 documents embedded")


@pytest.mark.parametrize("total", [None])
def test_an_unknown_total_still_logs_progress(total: int | None) -> None:
    lines: list[str] = []
    now = [0.0]
    watch = IngestLog("set/main", total, lines.append, every_s=1, clock=lambda: now[0])
    watch.start("a")
    now[0] = 2
    watch.embedded(5, 5, 4)
    assert lines == [
        f"{PROGRESS_MARK}set/main: ingesting the corpus into a",
        f"{PROGRESS_MARK}set/main: 4 documents embedded",
    ]
