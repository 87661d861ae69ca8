"""osrag: OpenSearch as a retrieval engine for Russian-language RAG.

Importing the package does no I/O: clients and models load on first use.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

__version__ = "0.1.0"

__all__ = [
    "PUBLIC",
    "AsyncSearchClient",
    "OsragError",
    "Principal",
    "SearchClient",
    "Settings",
    "__version__",
]

if TYPE_CHECKING:  # pragma: no cover
    from osrag.access import PUBLIC, Principal
    from osrag.errors import OsragError
    from osrag.search.asearch import AsyncSearchClient
    from osrag.search.client import SearchClient
    from osrag.settings import Settings


#: Where each public name is defined: loaded on first use, so `import osrag` stays cheap (no torch,
#: no client) until one is asked for.
_DEFINED_IN = {
    "PUBLIC": "osrag.access",
    "Principal": "osrag.access",
    "AsyncSearchClient": "osrag.search.asearch",
    "OsragError": "osrag.errors",
    "SearchClient": "osrag.search.client",
    "Settings": "osrag.settings",
}


def __getattr__(name: str) -> Any:
    module = _DEFINED_IN.get(name)
    if module is None:
        raise AttributeError(f"module 'osrag' has no attribute {name!r}")
    return getattr(importlib.import_module(module), name)
