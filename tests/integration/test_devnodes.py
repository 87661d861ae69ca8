"""The local launcher's other nodes, for real: 2.19.1, the secured 2.19.1 and a 3-node cluster.

Each starts JVMs for minutes, so these run only when asked:
``OSRAG_TEST_DEVNODES=1 .venv/bin/python -m pytest tests/integration/test_devnodes.py -m integration``.
A node already running is reused and left running; one these tests started is stopped after them.
"""

from __future__ import annotations

import json
import os
import ssl
import urllib.error
import urllib.request
import uuid
from collections.abc import Iterator

import pytest

from osrag.connection import make_client
from osrag.devnode import DevCluster, DevNode
from osrag.settings import Settings

pytestmark = [
    pytest.mark.integration,
    pytest.mark.slow,
    pytest.mark.skipif(
        not os.environ.get("OSRAG_TEST_DEVNODES"),
        reason="starts extra OpenSearch nodes; set OSRAG_TEST_DEVNODES=1",
    ),
]


def _started(launcher: DevNode | DevCluster) -> Iterator[DevNode | DevCluster]:
    was_running = launcher.status().running
    launcher.up()
    yield launcher
    if not was_running and not os.environ.get("OSRAG_TEST_KEEP_NODE"):
        launcher.down()


@pytest.fixture(scope="module")
def node_2191() -> Iterator[DevNode]:
    yield from _started(DevNode(Settings(), version="2.19.1"))  # type: ignore[misc]


@pytest.fixture(scope="module")
def secured_node() -> Iterator[DevNode]:
    yield from _started(DevNode(Settings(), version="2.19.1", security=True))  # type: ignore[misc]


@pytest.fixture(scope="module")
def cluster() -> Iterator[DevCluster]:
    yield from _started(DevCluster(Settings(), nodes=3))  # type: ignore[misc]


def _wait_green(client: object, index: str) -> None:
    health = client.cluster.health(  # type: ignore[attr-defined]
        index=index, params={"wait_for_status": "green", "timeout": "180s"}, request_timeout=200
    )
    assert health["status"] == "green", health


def test_2191_node_has_the_plugins_and_the_russian_analysis(node_2191: DevNode) -> None:
    st = node_2191.status()
    assert st.version == "2.19.1" and st.url == "http://127.0.0.1:9201"
    assert {"opensearch-knn", "opensearch-neural-search"} <= set(st.plugins)
    client = make_client(node_2191.client_settings())
    # analysis-common is not in the 2.x integ-test-zip; the launcher adds it from Maven.
    tokens = client.indices.analyze(
        body={
            "tokenizer": "standard",
            "filter": ["lowercase", {"type": "stemmer", "language": "russian"}],
            "text": "Отпуска сотрудников",
        }
    )
    assert [t["token"] for t in tokens["tokens"]] == ["отпуск", "сотрудник"]


def test_secured_node_refuses_anonymous_and_wrong_password_and_serves_admin(secured_node: DevNode) -> None:
    s = secured_node.client_settings()
    assert s.url == "https://127.0.0.1:9202" and s.user == "admin" and s.ca_certs is not None
    ctx = ssl.create_default_context(cafile=str(s.ca_certs))
    with pytest.raises(urllib.error.HTTPError) as anon:
        urllib.request.urlopen(s.url + "/", context=ctx, timeout=10)
    assert anon.value.code == 401
    info = make_client(s).info()
    assert info["version"]["number"] == "2.19.1"
    bad = secured_node.client_settings(password="not-the-password")
    with pytest.raises(Exception, match="401|Unauthorized|AuthenticationException"):
        make_client(bad).info()
    # Without our CA the server's certificate is not trusted.
    with pytest.raises(urllib.error.URLError, match="CERTIFICATE_VERIFY_FAILED"):
        urllib.request.urlopen(s.url + "/", context=ssl.create_default_context(), timeout=10)


def test_cluster_keeps_serving_while_one_node_is_stopped(cluster: DevCluster) -> None:
    st = cluster.status()
    assert st.number_of_nodes == 3 and st.health in ("green", "yellow")
    index = f"t-devcluster-{uuid.uuid4().hex[:8]}"
    c1 = make_client(cluster.client_settings(node=1))
    c1.indices.create(index=index, body={"settings": {"number_of_shards": 3, "number_of_replicas": 1}})
    docs = 60
    body = "".join(
        json.dumps({"index": {"_index": index}}) + "\n" + json.dumps({"n": i}) + "\n" for i in range(docs)
    )
    c1.bulk(body=body, refresh=True)
    _wait_green(c1, index)
    try:
        assert cluster.stop_node(2) is True
        down = cluster.status()
        assert [n.running for n in down.nodes] == [True, False, True]
        assert down.number_of_nodes == 2 and down.health == "yellow"
        counts = [make_client(cluster.client_settings(node=n)).count(index=index)["count"] for n in (1, 3)]
        print(
            f"node 2 stopped: health {down.health}; documents expected {docs}, found {counts} via nodes 1 and 3"
        )
        assert counts == [docs, docs]
        back = cluster.start_node(2)
        assert back.number_of_nodes == 3
        _wait_green(c1, index)
    finally:
        cluster.start_node(2)
        c1.indices.delete(index=index, ignore_unavailable=True)
