"""``AsyncSearchClient``: the same query path and methods as ``SearchClient``, for apps on an event loop.

Only the transport differs (``osrag.steps.drive`` takes it as an object). The path itself --
request bodies, the relevance gate, rank and select, the envelope -- is the generator of steps in
``osrag.search.client.QuerySteps``, and the public methods are ``SearchApi``'s, shared with the sync
client. Here a ``Call`` is awaited on ``opensearchpy.AsyncOpenSearch`` (aiohttp, the ``async``
extra) and a ``Work`` (the question's embedding, the cross-encoder, the selection) runs in a worker
thread with ``asyncio.to_thread``, so many searches share one loop without blocking it. Each method
returns a coroutine to await. Construction does no I/O; ``async with`` (or ``await close()``)
closes the connection pool.
"""

from __future__ import annotations

import asyncio
import operator
from collections.abc import Awaitable
from types import TracebackType
from typing import Any

from osrag.access import Principal
from osrag.connection import make_async_client, translate_errors
from osrag.envelope import Envelope, Passage
from osrag.search.client import SearchApi
from osrag.search.rerank import Reranker
from osrag.search.retrieval import Retrieval
from osrag.settings import Settings
from osrag.steps import AsyncTransport, Call, Work

__all__ = ["AsyncSearchClient", "PoolTransport"]


class PoolTransport(AsyncTransport):
    """The async transport: a ``Call`` awaited on an ``AsyncOpenSearch`` pool, a ``Work`` in a thread."""

    def __init__(self, settings: Settings) -> None:
        self.s = settings
        self.client: Any | None = None

    async def pool(self) -> Any:
        """The ``AsyncOpenSearch`` client, built on first use (building it sends nothing).

        Built in a thread: the first build imports aiohttp and the async transport, which
        would otherwise stall the loop for a moment."""
        if self.client is None:
            client = await asyncio.to_thread(make_async_client, self.s)
            if self.client is None:
                self.client = client
            else:  # another search built one meanwhile
                await client.close()
        return self.client

    async def close(self) -> None:
        """Close the connection pool (a later call opens a new one)."""
        client, self.client = self.client, None
        if client is not None:
            await client.close()

    async def answer(self, step: Call | Work) -> Any:
        if isinstance(step, Work):
            return await asyncio.to_thread(step.fn)
        fn = operator.attrgetter(step.method)(await self.pool())
        with translate_errors(self.s.url, step.what):
            return await fn(**step.kwargs)


class AsyncSearchClient(SearchApi[Awaitable[Envelope], Awaitable[Retrieval], Awaitable[list[Passage]]]):
    """``async with AsyncSearchClient(settings) as c: env = await c.search(question, principal=…)``.

    The same methods, arguments and ``Envelope`` as ``SearchClient``; each returns a coroutine.
    """

    def __init__(
        self,
        settings: Settings | None = None,
        *,
        reranker: Reranker | None = None,
        principal: Principal | None = None,
    ) -> None:
        super().__init__(settings, reranker=reranker, principal=principal)
        self._transport: PoolTransport = PoolTransport(self.s)

    async def close(self) -> None:
        """Close the connection pool (a later call opens a new one)."""
        await self._transport.close()

    async def __aenter__(self) -> AsyncSearchClient:
        return self

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        await self.close()
