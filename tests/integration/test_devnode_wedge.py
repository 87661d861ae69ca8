"""A dev node that dies opening an index is named and repaired, on a node of its own.

Opt-in (``OSRAG_TEST_WEDGE=1``): it starts a 3.6.0 node on port 9260 under a temporary dev home
that reuses the downloaded distribution (symlinks to the shared install and Maven cache),
creates a faiss index there -- which the Maven-built node has no native library for -- and
checks that ``up`` names that index, ``up --repair`` moves its data aside and starts, and
``status`` says faiss does not work. Never touches the shared node on 9200.
"""

from __future__ import annotations

import json
import os
import shutil
import tempfile
import time
import urllib.request
from pathlib import Path

import pytest

from osrag.devnode import DevNode
from osrag.errors import LauncherError
from osrag.settings import Settings

pytestmark = [
    pytest.mark.integration,
    pytest.mark.skipif(not os.environ.get("OSRAG_TEST_WEDGE"), reason="opt-in: OSRAG_TEST_WEDGE=1 (minutes)"),
]
PORT = 9260


def _put(url: str, body: dict) -> int:
    req = urllib.request.Request(url, data=json.dumps(body).encode(), method="PUT")
    req.add_header("Content-Type", "application/json")
    try:
        with urllib.request.urlopen(req, timeout=60) as resp:
            return resp.status
    except OSError:
        return -1  # the node went down while answering


def test_a_faiss_index_wedges_the_node_and_repair_unwedges_it() -> None:
    shared = Settings(_env_file=None)
    # Not pytest's tmp_path: its parents are 0700, and the node runs as another user when root.
    home = Path(tempfile.mkdtemp(prefix="osrag-wedge-"))
    home.chmod(0o755)
    (home / "m2").symlink_to(Path(shared.dev_home) / "m2")
    install = Path(shared.dev_home) / "opensearch-3.6.0"
    if not (install / ".osrag-installed").exists():
        pytest.skip("the shared 3.6.0 install is not there (osrag dev up first)")
    (home / "opensearch-3.6.0").symlink_to(install)
    s = Settings(dev_home=home, dev_port=PORT, dev_heap="512m", _env_file=None)
    node = DevNode(s, log=print)
    try:
        node.up(wait_s=600)
        assert dict(node.status().engines)["faiss"] == "no"
        _put(
            f"{node.url}/vecs-faiss",
            {
                "settings": {"index": {"knn": True, "number_of_replicas": 0}},
                "mappings": {
                    "properties": {
                        "v": {
                            "type": "knn_vector",
                            "dimension": 4,
                            "method": {"name": "hnsw", "engine": "faiss"},
                        }
                    }
                },
            },
        )
        # One acknowledged document (in the translog): the next refresh loads faiss and kills the
        # node, and every start replays the translog and dies the same way (the wedge).
        req = urllib.request.Request(
            f"{node.url}/vecs-faiss/_doc/1",
            data=json.dumps({"v": [1, 2, 3, 4]}).encode(),
            method="PUT",
            headers={"Content-Type": "application/json"},
        )
        with urllib.request.urlopen(req, timeout=60) as resp:
            assert resp.status == 201
        deadline = time.monotonic() + 120
        while node.status().running and time.monotonic() < deadline:
            time.sleep(2)
        node.down()
        with pytest.raises(LauncherError) as err:
            node.up(wait_s=600)
        assert "vecs-faiss" in str(err.value) and "--repair" in str(err.value)
        st = node.up(wait_s=600, repair=True)
        assert st.running
        moved = list((home / "quarantine").iterdir())
        assert len(moved) == 1 and "vecs-faiss" in moved[0].name
    finally:
        node.down()
        shutil.rmtree(home, ignore_errors=True)
