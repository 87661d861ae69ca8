"""orjson through opensearch-py's serializer hook: the same JSON as the default serializer."""

from __future__ import annotations

import datetime as dt
import json
import logging
from typing import Any

import numpy as np
import pytest
import urllib3
from opensearchpy import OpenSearch
from opensearchpy.exceptions import NotFoundError, SerializationError
from opensearchpy.serializer import JSONSerializer

from osrag import jsonio
from osrag.connection import client_options
from osrag.jsonio import OrjsonConnection, OrjsonSerializer, Utf8Answer
from osrag.settings import Settings


def test_it_writes_what_the_default_serializer_writes_and_reads_it_back() -> None:
    fast, slow = OrjsonSerializer(), JSONSerializer()
    body = {
        "query": {"match": {"text": {"query": 'ёлка «TEA15» \u2028 \\ "'}}},
        "vector": [0.1, -2.5, 1e-30, 3.0],
        "n": 2**53,
        "ok": True,
        "none": None,
        "date": dt.date(2024, 1, 2),
        "when": dt.datetime(2024, 1, 2, 3, 4, 5, tzinfo=dt.UTC),
        "np": [np.int64(3), np.float64(0.25), np.bool_(True)],
    }
    assert json.loads(fast.dumps(body)) == json.loads(slow.dumps(body))
    assert isinstance(fast.dumps(body), str)  # the bulk helpers join lines as text
    assert fast.dumps("already json") == "already json"
    raw = slow.dumps(body)
    assert fast.loads(raw) == slow.loads(raw) and fast.loads(raw.encode()) == slow.loads(raw)
    assert fast.dumps({"v": np.asarray([0.5, 2.0], dtype=np.float32)}) == '{"v":[0.5,2.0]}'


def test_bad_json_is_opensearch_py_s_serialization_error() -> None:
    with pytest.raises(SerializationError):
        OrjsonSerializer().loads("{not json")
    with pytest.raises(SerializationError):
        OrjsonSerializer().dumps({"x": object()})


def test_both_clients_are_built_with_it() -> None:
    opts = client_options(Settings(url="http://127.0.0.1:1", _env_file=None))
    assert isinstance(opts["serializer"], OrjsonSerializer)


def _answer(body: bytes, status: int = 200, ctype: str = "application/json; charset=UTF-8") -> Any:
    return urllib3.HTTPResponse(
        body=body, headers={"content-type": ctype}, status=status, preload_content=True
    )


class _FakePool:
    def __init__(self, response: Any) -> None:
        self.response = response

    def urlopen(self, *args: Any, **kwargs: Any) -> Any:
        return self.response

    def close(self) -> None:
        pass


def _connection(response: Any) -> OrjsonConnection:
    conn = OrjsonConnection(host="127.0.0.1", port=1)
    conn.pool._pool = _FakePool(response)  # type: ignore[union-attr]
    return conn


def test_a_json_answer_reaches_the_serializer_as_its_bytes() -> None:
    text = '{"hits": {"hits": [{"_source": {"text": "ёлка «TEA15»"}}]}}'
    status, _, data = _connection(_answer(text.encode())).perform_request("POST", "/i/_search", body=b"{}")
    assert status == 200 and isinstance(data, Utf8Answer) and bytes(data) == text.encode()
    assert str(data) == text  # a debug log line shows the answer as text
    assert OrjsonSerializer().loads(data) == json.loads(text)


def test_the_request_trace_at_debug_reads_the_answer_as_text() -> None:
    """opensearch-py's trace logger pretty-prints answers as text; on bytes it failed the request."""
    tracer = logging.getLogger("opensearchpy.trace")
    lines: list[str] = []
    handler = logging.Handler()
    handler.emit = lambda record: lines.append(record.getMessage())  # type: ignore[method-assign]
    old_level = tracer.level
    tracer.addHandler(handler)
    tracer.setLevel(logging.DEBUG)
    try:
        text = '{"hits": {"total": 1}, "note": "ёлка"}'
        status, _, data = _connection(_answer(text.encode())).perform_request("GET", "/i/_search")
    finally:
        tracer.removeHandler(handler)
        tracer.setLevel(old_level)
    assert status == 200 and isinstance(data, Utf8Answer)
    assert any('"total": 1' in line for line in lines), lines


def test_an_error_or_a_text_answer_stays_text() -> None:
    err = _answer(b'{"error": {"type": "index_not_found_exception"}, "status": 404}', status=404)
    with pytest.raises(NotFoundError) as exc:
        _connection(err).perform_request("GET", "/missing/_search")
    assert exc.value.info["error"]["type"] == "index_not_found_exception"
    _, _, data = _connection(_answer(b"green open i", ctype="text/plain")).perform_request(
        "GET", "/_cat/indices"
    )
    assert type(data) is str and data == "green open i"


def test_the_sync_client_uses_the_connection_and_the_async_one_its_own() -> None:
    settings = Settings(url="http://127.0.0.1:1", _env_file=None)
    assert client_options(settings)["connection_class"] is OrjsonConnection
    assert "connection_class" not in client_options(settings, asynchronous=True)
    client = OpenSearch(**client_options(settings))
    assert all(isinstance(c, OrjsonConnection) for c in client.transport.connection_pool.connections)


class _Socket:
    def __init__(self) -> None:
        self.sent: list[bytes] = []

    def sendall(self, data: bytes) -> None:
        self.sent.append(bytes(data))

    def settimeout(self, timeout: Any) -> None:
        pass


@pytest.mark.parametrize("body", [b'{"query": {"match_all": {}}}', '{"text": "ёлка"}', None, b""])
def test_a_request_goes_out_in_one_write(body: Any) -> None:
    conn = jsonio._HTTPConnection("127.0.0.1", 1)
    sock = _Socket()
    conn.sock = sock  # type: ignore[assignment]
    conn.request("POST", "/i/_search", body=body, headers={"content-type": "application/json"})
    assert len(sock.sent) == 1
    head, _, rest = sock.sent[0].partition(b"\r\n\r\n")
    assert head.startswith(b"POST /i/_search HTTP/1.1")
    want = body.encode() if isinstance(body, str) else (body or b"")
    assert rest == want and (not want or f"content-length: {len(want)}".encode() in head.lower())
    get = jsonio._HTTPConnection("127.0.0.1", 1)
    get.sock = sock  # type: ignore[assignment]
    get.request("GET", "/", headers={})  # no body: the headers alone, at once
    assert len(sock.sent) == 2 and sock.sent[1].startswith(b"GET / HTTP/1.1")
    assert sock.sent[1].endswith(b"\r\n\r\n")


def test_the_pool_makes_one_write_connections() -> None:
    http = OrjsonConnection(host="127.0.0.1", port=1)
    assert http.pool._pool.ConnectionCls is jsonio._HTTPConnection  # type: ignore[union-attr]
    https = OrjsonConnection(host="127.0.0.1", port=1, use_ssl=True, verify_certs=False, ssl_show_warn=False)
    assert https.pool._pool.ConnectionCls is jsonio._HTTPSConnection  # type: ignore[union-attr]
