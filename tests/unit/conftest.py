"""Fakes the unit tests share: the real client's interface (``Mock(spec=OpenSearch)``), no server.

``fake_client`` is an ``opensearchpy.OpenSearch`` mock whose methods a test scripts
(``fake_client.bulk.side_effect = ...``); ``fake_cluster`` wraps it in osrag's ``Cluster``
exactly as production code receives it.
"""

from __future__ import annotations

from typing import Any
from unittest.mock import Mock

import opensearchpy
import pytest
from opensearchpy.serializer import JSONSerializer

from osrag.connection import Cluster
from osrag.settings import Settings


@pytest.fixture
def fake_client() -> Any:
    client = Mock(spec=opensearchpy.OpenSearch)
    # Instance attributes the spec (the class) does not list: the transport's serializer is
    # what opensearch-py's bulk helpers use to write each action line.
    client.transport = Mock(spec=opensearchpy.Transport)
    client.transport.serializer = JSONSerializer()
    client.indices = Mock(spec=opensearchpy.client.indices.IndicesClient)
    return client


@pytest.fixture
def fake_cluster(fake_client: Any) -> Cluster:
    cluster = Cluster(
        Settings(url="http://127.0.0.1:1", bulk_chunk_size=200, bulk_concurrency=1, _env_file=None)
    )
    cluster._client = fake_client
    return cluster
