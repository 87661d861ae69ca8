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
more than the parse itself.
"""

from __future__ import annotations

from typing import Any

import orjson
from opensearchpy.connection import Urllib3HttpConnection
from opensearchpy.exceptions import SerializationError
from opensearchpy.serializer import JSONSerializer

_OPTIONS = orjson.OPT_SERIALIZE_NUMPY | orjson.OPT_NON_STR_KEYS


class OrjsonSerializer(JSONSerializer):
    """``JSONSerializer`` with orjson underneath (``mimetype`` application/json, so the transport
    uses it for answers as well as requests)."""

    def loads(self, s: str | bytes) -> Any:
        if isinstance(s, Utf8Answer):
            s = memoryview(s)  # orjson takes bytes, not a subclass of them; a view copies nothing
        try:
            return orjson.loads(s)
        except orjson.JSONDecodeError as exc:
            raise SerializationError(s, exc) from exc

    def dumps(self, data: Any) -> Any:
        if isinstance(data, str):  # already serialized (a bulk body, a template)
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


class OrjsonConnection(Urllib3HttpConnection):
    """opensearch-py's urllib3 connection, its JSON answers handed on undecoded (see the module)."""

    def _create_urllib3_pool(self) -> None:
        super()._create_urllib3_pool()
        self.pool = _Pool(self.pool)  # type: ignore[assignment]
