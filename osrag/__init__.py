"""osrag: OpenSearch as a retrieval engine for Russian-language RAG.

Importing the package does no I/O: clients and models load on first use.
"""

from __future__ import annotations

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
    from osrag.asearch import AsyncSearchClient
    from osrag.errors import OsragError
    from osrag.search import SearchClient
    from osrag.settings import Settings


def __getattr__(name: str) -> Any:
    # Lazy so `import osrag` stays cheap (no torch, no client) until asked.
    if name == "Settings":
        from osrag.settings import Settings

        return Settings
    if name == "SearchClient":
        from osrag.search import SearchClient

        return SearchClient
    if name == "AsyncSearchClient":
        from osrag.asearch import AsyncSearchClient

        return AsyncSearchClient
    if name in ("Principal", "PUBLIC"):
        from osrag import access

        return getattr(access, name)
    if name == "OsragError":
        from osrag.errors import OsragError

        return OsragError
    raise AttributeError(f"module 'osrag' has no attribute {name!r}")
