"""orjson through opensearch-py's serializer hook: the same JSON as the default serializer."""

from __future__ import annotations

import datetime as dt
import json

import numpy as np
import pytest
from opensearchpy.exceptions import SerializationError
from opensearchpy.serializer import JSONSerializer

from osrag.connection import client_options
from osrag.jsonio import OrjsonSerializer
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
