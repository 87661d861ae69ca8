"""JSON to and from OpenSearch through orjson, plugged into opensearch-py's serializer hook.

A search answer carries ~40 candidates with their texts and vectors; decoding it with the
standard library's ``json`` was a visible part of a search's client-side time, and encoding
the request (the question's vector as 300+ numbers, the gate's probes) another. orjson does
both in a fraction of it, with the same results: the same JSON types, UTF-8 text unescaped
(as the default serializer's ``ensure_ascii=False``), numpy numbers and arrays, dates as ISO
8601. Anything orjson refuses goes through the default serializer's ``default`` hook, and a
failure is opensearch-py's own ``SerializationError``.

``OrjsonConnection`` (the sync client's connection class) hands a JSON answer to the serializer
as the bytes that came: opensearch-py's connection decodes every answer to ``str`` first, which
orjson then encodes back to UTF-8 to parse -- for a ~150 KB search answer that round trip cost
more than the parse itself. Its urllib3 connections also write a request's headers and body in
one ``send`` (urllib3 writes them apart, and each write wakes the server's reader).
"""

from __future__ import annotations

import logging
from typing import Any

import orjson
import urllib3
from opensearchpy.connection import Urllib3HttpConnection
from opensearchpy.exceptions import SerializationError
from opensearchpy.serializer import JSONSerializer

_OPTIONS = orjson.OPT_SERIALIZE_NUMPY | orjson.OPT_NON_STR_KEYS
#: opensearch-py's curl-style request trace (``opensearchpy.trace``), which reads answers as text.
_TRACER = logging.getLogger("opensearchpy.trace")


class OrjsonSerializer(JSONSerializer):
    """``JSONSerializer`` with orjson underneath (``mimetype`` application/json, so the transport
    uses it for answers as well as requests)."""

    def loads(self, s: str | bytes) -> Any:
        data: str | bytes | memoryview = s
        if isinstance(s, Utf8Answer):
            data = memoryview(s)  # orjson takes bytes, not a subclass of them; a view copies nothing
        try:
            return orjson.loads(data)
        except orjson.JSONDecodeError as exc:
            raise SerializationError(s, exc) from exc

    def dumps(self, data: Any) -> Any:
        if isinstance(data, (str, bytes)):  # already serialized (a bulk body, a template, a model chunk)
            return data
        try:
            # str, as the default serializer returns: the bulk helpers join lines as text.
            return orjson.dumps(data, default=self.default, option=_OPTIONS).decode("utf-8")
        except (TypeError, orjson.JSONEncodeError) as exc:
            raise SerializationError(data, exc) from exc


class Utf8Answer(bytes):
    """A JSON answer's UTF-8 bytes, kept bytes where opensearch-py decodes them (``decode`` gives
    them back as they are); as text (``str``, a debug log line) they read as the decoded answer."""

    def decode(self, encoding: str = "utf-8", errors: str = "strict") -> Any:  # type: ignore[override]
        return self

    def __str__(self) -> str:
        return bytes.decode(self, "utf-8", "surrogatepass")


class _Answer:
    """A urllib3 response whose ``data`` is a ``Utf8Answer`` when it is a successful JSON answer
    (an error's body stays as it was: opensearch-py reads it as text)."""

    __slots__ = ("_response",)

    def __init__(self, response: Any) -> None:
        self._response = response

    def __getattr__(self, name: str) -> Any:
        return getattr(self._response, name)

    @property
    def data(self) -> Any:
        r = self._response
        raw = r.data
        json = str(r.headers.get("content-type", "")).startswith("application/json")
        return Utf8Answer(raw) if raw and json and 200 <= r.status < 300 else raw


class _Pool:
    """The connection's urllib3 pool, its answers wrapped as ``_Answer``."""

    __slots__ = ("_pool",)

    def __init__(self, pool: Any) -> None:
        self._pool = pool

    def __getattr__(self, name: str) -> Any:
        return getattr(self._pool, name)

    def urlopen(self, *args: Any, **kwargs: Any) -> _Answer:
        return _Answer(self._pool.urlopen(*args, **kwargs))


class _OneWrite:
    """A urllib3 connection that sends a request's headers with its body, in one write.

    urllib3 sends the headers (``endheaders``) and then the body; a request with a body of bytes
    or text has its headers held here until the body comes. One write instead of two: at 10K
    chunks a search's (wall - took) was ~0.4 ms lower with raw sockets, alternating, 2 cores.
    """

    _held: bytes | None = None
    _body_follows = False

    def request(self, method: str, url: str, body: Any = None, headers: Any = None, **kw: Any) -> None:
        self._body_follows = isinstance(body, (bytes, str)) and len(body) > 0 and not kw.get("chunked")
        try:
            super().request(method, url, body, headers, **kw)  # type: ignore[misc]
        except BaseException:
            self._held, self._body_follows = None, False
            raise
        held, self._held, self._body_follows = self._held, None, False
        if held is not None:  # no body was sent after all: the headers go alone
            super().send(held)  # type: ignore[misc]

    def send(self, data: Any) -> None:
        if self._body_follows and self._held is None:  # the headers: hold them for the body
            self._held = bytes(data)
            return
        if self._held is not None:
            data, self._held, self._body_follows = self._held + bytes(data), None, False
        super().send(data)  # type: ignore[misc]


class _HTTPConnection(_OneWrite, urllib3.connection.HTTPConnection):
    pass


class _HTTPSConnection(_OneWrite, urllib3.connection.HTTPSConnection):
    pass


class OrjsonConnection(Urllib3HttpConnection):
    """opensearch-py's urllib3 connection, its JSON answers handed on undecoded and its requests
    written in one piece (see the module)."""

    def _create_urllib3_pool(self) -> None:
        super()._create_urllib3_pool()
        pool = self.pool
        if isinstance(pool, urllib3.HTTPSConnectionPool):
            pool.ConnectionCls = _HTTPSConnection
        elif isinstance(pool, urllib3.HTTPConnectionPool):
            pool.ConnectionCls = _HTTPConnection
        self.pool = _Pool(pool)  # type: ignore[assignment]

    def _log_trace(
        self,
        method: str,
        path: str,
        body: Any,
        status_code: int | None,
        response: Any,
        duration: float | None,
    ) -> None:
        """The trace pretty-prints the answer as text: a ``Utf8Answer`` is decoded for it, and only
        when the trace is on (its pretty-printer fails on bytes, and with it the request)."""
        if isinstance(response, Utf8Answer) and _TRACER.isEnabledFor(logging.INFO) and _TRACER.handlers:
            response = str(response)
        super()._log_trace(method, path, body, status_code, response, duration)
