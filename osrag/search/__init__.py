"""The read side: question -> candidates -> reranked -> selected -> envelope.

``from osrag.search import SearchClient`` (and ``AsyncSearchClient``, ``Retrieval``) keeps working
for apps written against the module this package replaced; loaded on first use.
"""

from __future__ import annotations

import importlib
from typing import Any

_PUBLIC = {
    "SearchClient": "osrag.search.client",
    "Retrieval": "osrag.search.retrieval",
    "AsyncSearchClient": "osrag.search.asearch",
}


def __getattr__(name: str) -> Any:
    module = _PUBLIC.get(name)
    if module is None:
        raise AttributeError(f"module 'osrag.search' has no attribute {name!r}")
    return getattr(importlib.import_module(module), name)
