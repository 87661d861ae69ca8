"""Small pieces the bench scripts share: a timestamped progress line, the golden questions."""

from __future__ import annotations

import datetime as dt
import json
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
GOLDEN = REPO / "golden" / "golden.jsonl"


def log(msg: str) -> None:
    """A progress line on stderr with the wall-clock time (a bench's stdout may be its report)."""
    print(f"[{dt.datetime.now().strftime('%H:%M:%S')}] {msg}", file=sys.stderr, flush=True)


def pct(xs: list[float], p: float) -> float:
    """The ``p``-th percentile of ``xs``."""
    import numpy as np

    return float(np.percentile(np.asarray(xs), p))


def golden_questions() -> list[str]:
    """The questions of ``golden/golden.jsonl``, in file order."""
    lines = GOLDEN.read_text(encoding="utf-8").splitlines()
    return [json.loads(line)["question"] for line in lines if line.strip()]


def machine(model_row: str, **extra: str) -> dict[str, str]:
    """The machine rows of a report header: CPU, RAM (``osrag.evaluation.report.machine_info``),
    then ``extra`` rows, the node's version, the embedding model (``model_row``) and Python."""
    import os
    import platform

    from osrag.evaluation.report import machine_info
    from osrag.settings import Settings
    from osrag.store.alias import AliasStore

    info = AliasStore(Settings()).cluster.client.info()
    return {
        "CPU": f"{platform.processor() or platform.machine()} × {os.cpu_count()} (nproc), shared with other jobs",
        "RAM": machine_info()["memory"] or "?",
        **extra,
        "OpenSearch": f"{info['version']['number']}, single local node on the same machine",
        "embedding model": model_row,
        "Python": platform.python_version(),
    }
