"""What every framework adapter does the same way: per-call options over defaults, sync or async.

An adapter is built with a ``SearchClient`` (and, for event loops, optionally an
``AsyncSearchClient``) and default ``principal``/``budget_tokens``/``filters``; each call may
give its own. The principal of a call is the call's, else the adapter's, else the client's;
with none, ``SearchClient.search`` refuses (fail closed). Without an async client, the async
path runs the sync search in a worker thread, so an event loop is never blocked either way.
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from osrag.access import Principal
from osrag.envelope import Envelope
from osrag.errors import InputError
from osrag.search.asearch import AsyncSearchClient
from osrag.search.client import SearchClient

__all__ = ["Options", "asearch", "search"]


@dataclass(frozen=True)
class Options:
    """A retriever's defaults; ``merged`` lays one call's options over them."""

    principal: Principal | None = None
    budget_tokens: int | None = None
    filters: Mapping[str, Any] = field(default_factory=dict)

    def merged(
        self,
        principal: Principal | None = None,
        budget_tokens: int | None = None,
        filters: Mapping[str, Any] | None = None,
    ) -> Options:
        """The call's principal and budget replace the defaults; its filters add to them (key by key)."""
        if filters is not None and not isinstance(filters, Mapping):
            raise InputError(f"filters must be a mapping of key to value, got {type(filters).__name__}")
        return Options(
            principal=principal if principal is not None else self.principal,
            budget_tokens=budget_tokens if budget_tokens is not None else self.budget_tokens,
            filters={**self.filters, **(filters or {})},
        )

    def kwargs(self) -> dict[str, Any]:
        return {"principal": self.principal, "budget_tokens": self.budget_tokens, "filters": self.filters}


def search(client: SearchClient, question: str, options: Options) -> Envelope:
    """One search through the one query path."""
    return client.search(question, **options.kwargs())


async def asearch(
    client: SearchClient, async_client: AsyncSearchClient | None, question: str, options: Options
) -> Envelope:
    """The same search on an event loop: the async client when given, else the sync one in a thread."""
    if async_client is not None:
        return await async_client.search(question, **options.kwargs())
    return await asyncio.to_thread(client.search, question, **options.kwargs())
