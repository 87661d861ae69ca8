"""Fakes the unit tests share: the real client's interface (``Mock(spec=OpenSearch)``), no server.

``fake_client`` is an ``opensearchpy.OpenSearch`` mock whose methods a test scripts
(``fake_client.bulk.side_effect = ...``); each namespaced client (``indices``, ``cluster``,
``cat``, ``ingest``, ...) is a mock spec'd by its own class, so a call the real client
does not have fails the test. ``fake_cluster`` wraps it in osrag's ``Cluster`` exactly as
production code receives it.

``node`` gives the fake a small memory where scripting every answer would only restate
the code: documents (``get``/``index``/``delete`` with ``op_type=create`` and ``if_seq_no``),
aliases (``indices.get_alias``/``update_aliases``) and each index's ``_meta``
(``indices.get_mapping``/``put_mapping``). Searches, scripted updates and bulk requests
stay for each test to answer (``bulk_server`` answers bulk requests).
"""

from __future__ import annotations

import inspect
import json
from collections.abc import Callable
from typing import Any
from unittest.mock import AsyncMock, Mock

import opensearchpy
import pytest
from opensearchpy.client.utils import NamespacedClient
from opensearchpy.exceptions import ConflictError, NotFoundError, RequestError
from opensearchpy.serializer import JSONSerializer

from osrag.connection import Cluster
from osrag.settings import Settings


def _namespaced_clients() -> dict[str, type]:
    """The namespaced clients a real ``OpenSearch`` carries (instance attributes the class spec
    does not list), by attribute name; building a client does no I/O."""
    real = opensearchpy.OpenSearch("http://127.0.0.1:1")
    return {k: type(v) for k, v in vars(real).items() if isinstance(v, NamespacedClient)}


NAMESPACES = _namespaced_clients()


def spec_client() -> Any:
    """A fresh ``Mock(spec=OpenSearch)`` with every namespaced client spec'd by its class."""
    client = Mock(spec=opensearchpy.OpenSearch)
    for name, cls in NAMESPACES.items():
        setattr(client, name, Mock(spec=cls))
    # The transport's serializer is what opensearch-py's bulk helpers use to write each action line.
    client.transport = Mock(spec=opensearchpy.Transport)
    client.transport.serializer = JSONSerializer()
    return client


@pytest.fixture
def fake_client() -> Any:
    return spec_client()


@pytest.fixture
def fake_async_client() -> Any:
    """A ``Mock(spec=AsyncOpenSearch)`` whose public methods are awaitable (``AsyncMock``): the
    real ones are wrapped by a plain decorator, so the spec alone would make them synchronous."""
    client = Mock(spec=opensearchpy.AsyncOpenSearch)
    for name, fn in inspect.getmembers(opensearchpy.AsyncOpenSearch, inspect.isfunction):
        if not name.startswith("_"):
            setattr(client, name, AsyncMock(spec=fn))
    return client


def cluster_on(client: Any, **settings: Any) -> Cluster:
    """osrag's ``Cluster`` over ``client`` (no connection is ever made)."""
    base: dict[str, Any] = {"url": "http://127.0.0.1:1", "bulk_chunk_size": 200, "bulk_concurrency": 1}
    cluster = Cluster(Settings(**{**base, **settings}, _env_file=None))
    cluster._client = client
    return cluster


@pytest.fixture
def fake_cluster(fake_client: Any) -> Cluster:
    return cluster_on(fake_client)


@pytest.fixture
def make_cluster(fake_client: Any) -> Callable[..., Cluster]:
    """``Cluster`` over ``fake_client`` with other settings (``make_cluster(bulk_chunk_size=3)``)."""
    return lambda **settings: cluster_on(fake_client, **settings)


class FakeNode:
    """The memory behind ``fake_client`` (module doc): what a test reads back and seeds."""

    def __init__(self, client: Any) -> None:
        self.client = client
        #: (index, id) -> [source, seq_no]
        self.docs: dict[tuple[str, str], list[Any]] = {}
        #: alias -> the concrete indices it points to
        self.aliases: dict[str, list[str]] = {}
        #: index -> its _meta (the indices that exist)
        self.metas: dict[str, dict[str, Any]] = {}
        self._seq = 0
        client.get.side_effect = self.get
        client.index.side_effect = self.index
        client.delete.side_effect = self.delete
        client.indices.exists.side_effect = self.exists
        client.indices.get_alias.side_effect = self.get_alias
        client.indices.update_aliases.side_effect = self.update_aliases
        client.indices.get_mapping.side_effect = self.get_mapping
        client.indices.put_mapping.side_effect = self.put_mapping
        client.indices.refresh.return_value = {"_shards": {"failed": 0}}

    # -- documents
    def put(self, index: str, doc_id: str, source: dict[str, Any]) -> None:
        self._seq += 1
        self.docs[(index, doc_id)] = [json.loads(json.dumps(source)), self._seq]

    def source(self, index: str, doc_id: str) -> dict[str, Any] | None:
        got = self.docs.get((index, doc_id))
        return got[0] if got else None

    def get(self, index: str, id: str, params: dict[str, Any] | None = None, **_: Any) -> dict[str, Any]:
        got = self.docs.get((index, id))
        if got is None:
            if (params or {}).get("ignore") == 404:
                return {"_index": index, "_id": id, "found": False}
            raise NotFoundError(404, "not_found", {"found": False})
        return {
            "_index": index,
            "_id": id,
            "found": True,
            "_source": got[0],
            "_seq_no": got[1],
            "_primary_term": 1,
        }

    def index(
        self, index: str, id: str, body: dict[str, Any], op_type: str = "index", **_: Any
    ) -> dict[str, Any]:
        if op_type == "create" and (index, id) in self.docs:
            raise ConflictError(
                409, "version_conflict_engine_exception", {"error": "document already exists"}
            )
        created = (index, id) not in self.docs
        self.put(index, id, body)
        return {"_index": index, "_id": id, "result": "created" if created else "updated"}

    def delete(self, index: str, id: str, if_seq_no: int | None = None, **_: Any) -> dict[str, Any]:
        got = self.docs.get((index, id))
        if got is None:
            raise NotFoundError(404, "not_found", {"result": "not_found"})
        if if_seq_no is not None and got[1] != if_seq_no:
            raise ConflictError(409, "version_conflict_engine_exception", {"error": "seq_no differs"})
        del self.docs[(index, id)]
        return {"_index": index, "_id": id, "result": "deleted"}

    # -- indices, aliases, _meta
    def add_index(self, name: str, meta: dict[str, Any] | None = None, alias: str | None = None) -> None:
        self.metas[name] = dict(meta or {})
        if alias:
            self.aliases[alias] = [name]

    def exists(self, index: str, **_: Any) -> bool:
        return index in self.metas or any(i == index for (i, _d) in self.docs)

    def get_alias(self, index: str, name: str | None = None, **_: Any) -> dict[str, Any]:
        targets = self.aliases.get(name or index, [])
        if not targets:
            return {"error": f"alias [{name or index}] missing", "status": 404}
        return {t: {"aliases": {name or index: {}}} for t in targets}

    def update_aliases(self, body: dict[str, Any], **_: Any) -> dict[str, Any]:
        for action in body["actions"]:
            ((op, spec),) = action.items()
            current = self.aliases.setdefault(spec["alias"], [])
            if op == "remove":
                current.remove(spec["index"])
            elif op == "add" and spec["index"] not in current:
                current.append(spec["index"])
        return {"acknowledged": True}

    def get_mapping(self, index: str, **_: Any) -> dict[str, Any]:
        if index not in self.metas:
            raise NotFoundError(404, "index_not_found_exception", {"index": index})
        return {index: {"mappings": {"_meta": json.loads(json.dumps(self.metas[index]))}}}

    def put_mapping(self, index: str, body: dict[str, Any], **_: Any) -> dict[str, Any]:
        if "_meta" in body:
            self.metas.setdefault(index, {}).update(body["_meta"])
        return {"acknowledged": True}


@pytest.fixture
def node(fake_client: Any) -> FakeNode:
    return FakeNode(fake_client)


def sent_ids(body: str) -> list[str]:
    """The ``_id``s of the actions in a bulk request body (NDJSON)."""
    lines = [json.loads(x) for x in body.strip().split("\n")]
    return [next(iter(line.values()))["_id"] for line in lines[::2]]


class BulkServer:
    """A bulk endpoint: refuses a whole request holding a ``bad*`` id (as OpenSearch does for a
    malformed action, e.g. an ``_id`` over 512 bytes), and answers single items with the statuses
    queued in ``item_status`` (then 201), a failed one with ``item_error`` (type, reason) when set.
    ``requests`` are the ids sent, ``sources`` what was written."""

    def __init__(self, item_status: dict[str, list[int]] | None = None) -> None:
        self.requests: list[list[str]] = []
        self.sources: dict[str, dict[str, Any]] = {}
        self.item_status = item_status or {}
        self.item_error: tuple[str, str] | None = None

    def __call__(self, body: str, **_: Any) -> dict[str, Any]:
        lines = [json.loads(x) for x in body.strip().split("\n")]
        ids = [next(iter(a.values()))["_id"] for a in lines[::2]]
        self.requests.append(ids)
        if any(i.startswith("bad") for i in ids):
            raise RequestError(400, "action_request_validation_exception", {"error": "id is too long"})
        items = []
        for i, src in zip(ids, lines[1::2]):
            statuses = self.item_status.get(i)
            status = statuses.pop(0) if statuses else 201
            item: dict[str, Any] = {"_index": "i", "_id": i, "status": status}
            if status >= 300:
                type_, reason = self.item_error or ("mapper_parsing_exception", f"bad {i}")
                item["error"] = {"type": type_, "reason": reason}
            else:
                self.sources[i] = src
            items.append({"index": item})
        return {"took": 1, "errors": any(x["index"]["status"] >= 300 for x in items), "items": items}


@pytest.fixture
def bulk_server(fake_client: Any) -> BulkServer:
    server = BulkServer()
    fake_client.bulk.side_effect = server
    return server
