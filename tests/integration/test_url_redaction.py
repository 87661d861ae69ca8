"""A password inside ``OSRAG_URL`` works for connecting and is never printed by ``status``.

The session node has no security plugin, so it ignores the credentials; what is checked here
is the output of a command that *succeeded* with them (the error paths are unit tests).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from osrag.admin.status import status
from osrag.settings import Settings

pytestmark = pytest.mark.integration

SECRET = "s3cret-in-url"


def _with_password(url: str) -> str:
    scheme, rest = url.split("://", 1)
    return f"{scheme}://reader:{SECRET}@{rest}"


def test_status_never_prints_the_url_password(opensearch_url: str, unique_name: str, tmp_path: Path) -> None:
    url = _with_password(opensearch_url)
    st = status(Settings(url=url, alias=unique_name, _env_file=None))
    data = json.dumps(st, default=str) if isinstance(st, dict) else repr(st)
    assert SECRET not in data and "reader:***@" in data

    env = {k: v for k, v in os.environ.items() if not k.startswith("OSRAG_")}
    env.update(OSRAG_URL=url, OSRAG_ALIAS=unique_name)
    for args in (["status"], ["status", "--json"]):
        p = subprocess.run(
            [sys.executable, "-m", "osrag.cli", *args],
            capture_output=True,
            text=True,
            env=env,
            cwd=tmp_path,
            timeout=120,
        )
        assert p.returncode == 0, p.stderr
        assert "reader:***@" in p.stdout
        assert SECRET not in p.stdout + p.stderr
