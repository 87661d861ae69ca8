"""One public method set: ``SearchClient`` and ``AsyncSearchClient`` offer the same methods, written once."""

from __future__ import annotations

import inspect

from osrag.search.asearch import AsyncSearchClient
from osrag.search.client import SearchApi, SearchClient


def _public(cls: type) -> dict[str, inspect.Signature]:
    return {
        name: inspect.signature(fn)
        for name, fn in inspect.getmembers(cls, inspect.isfunction)
        if not name.startswith("_")
    }


def test_the_search_methods_are_defined_once_and_shared() -> None:
    shared = {"retrieve", "section", "search"}
    assert shared <= set(_public(SearchApi))
    for name in shared:
        assert getattr(SearchClient, name) is getattr(SearchApi, name)
        assert getattr(AsyncSearchClient, name) is getattr(SearchApi, name)


def test_the_clients_differ_only_in_the_pool_the_async_one_closes() -> None:
    sync, aio = _public(SearchClient), _public(AsyncSearchClient)
    assert set(aio) - set(sync) == {"close"}
    assert set(sync) - set(aio) == set()
    assert {k: v for k, v in aio.items() if k != "close"} == sync
