"""JSON to and from OpenSearch through orjson, plugged into opensearch-py's serializer hook.

A search answer carries ~40 candidates with their texts and vectors; decoding it with the
standard library's ``json`` was a visible part of a search's client-side time, and encoding
the request (the question's vector as 300+ numbers, the gate's probes) another. orjson does
both in a fraction of it, with the same results: the same JSON types, UTF-8 text unescaped
(as the default serializer's ``ensure_ascii=False``), numpy numbers and arrays, dates as ISO
8601. Anything orjson refuses goes through the default serializer's ``default`` hook, and a
failure is opensearch-py's own ``SerializationError``.
"""

from __future__ import annotations

from typing import Any

import orjson
from opensearchpy.exceptions import SerializationError
from opensearchpy.serializer import JSONSerializer

_OPTIONS = orjson.OPT_SERIALIZE_NUMPY | orjson.OPT_NON_STR_KEYS


class OrjsonSerializer(JSONSerializer):
    """``JSONSerializer`` with orjson underneath (``mimetype`` application/json, so the transport
    uses it for answers as well as requests)."""

    def loads(self, s: str | bytes) -> Any:
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
