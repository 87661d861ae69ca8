from __future__ import annotations

import os
import subprocess
import sys

from click.testing import CliRunner

from osrag import __version__
from osrag.cli import cli


def test_version_and_help() -> None:
    r = CliRunner().invoke(cli, ["--version"])
    assert r.exit_code == 0 and __version__ in r.output
    r = CliRunner().invoke(cli, ["--help"])
    for cmd in (
        "dev",
        "install",
        "analyze",
        "ingest",
        "search",
        "eval",
        "reindex",
        "rollback",
        "cleanup",
        "status",
        "demo",
        "study",
    ):
        assert cmd in r.output


def _run(*args: str, **env: str) -> subprocess.CompletedProcess[str]:
    full = {k: v for k, v in os.environ.items() if not k.startswith("OSRAG_")}
    full.update(env)
    return subprocess.run(
        [sys.executable, "-m", "osrag.cli", *args], capture_output=True, text=True, env=full, timeout=120
    )


def test_unreachable_cluster_is_one_line_not_a_traceback() -> None:
    p = _run("status", OSRAG_URL="http://127.0.0.1:9")
    assert p.returncode == 1
    lines = p.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith(
        "osrag: error: cannot reach OpenSearch at http://127.0.0.1:9"
    )
    assert "Traceback" not in p.stderr


def test_invalid_setting_names_the_variable() -> None:
    p = _run("status", OSRAG_URL="localhost:9200")
    assert p.returncode != 0
    assert "OSRAG_URL" in p.stderr and "Traceback" not in p.stderr


def test_no_heavy_imports_for_help() -> None:
    code = "import sys; from osrag.cli import cli; import osrag.search.client, osrag.store.alias; print('torch' in sys.modules)"
    p = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert p.stdout.strip() == "False", p.stderr
