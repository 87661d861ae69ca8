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


def golden_questions() -> list[str]:
    """The questions of ``golden/golden.jsonl``, in file order."""
    lines = GOLDEN.read_text(encoding="utf-8").splitlines()
    return [json.loads(line)["question"] for line in lines if line.strip()]
