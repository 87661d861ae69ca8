"""``AsyncSearchClient``: the same query path as ``SearchClient``, for apps on an event loop.

Only the driver differs. The path itself -- request bodies, the relevance gate, rank and
select, the envelope -- is the generator of steps in ``osrag.search.client.QuerySteps``, shared
with the sync client. Here a ``Call`` is awaited on ``opensearchpy.AsyncOpenSearch``
(aiohttp, the ``async`` extra) and a ``Work`` (the question's embedding, the cross-encoder,
the selection) runs in a worker thread with ``asyncio.to_thread``, so many searches share
one loop without blocking it. Construction does no I/O; ``async with`` (or ``await
close()``) closes the connection pool.
"""

from __future__ import annotations

import asyncio
import operator
from collections.abc import Mapping
from types import TracebackType
from typing import Any, TypeVar

from osrag.access import Principal
from osrag.connection import make_async_client, translate_errors
from osrag.envelope import Envelope, Passage
from osrag.errors import OsragError
from osrag.observability import observe_search
from osrag.search.budget import SelectionConfig
from osrag.search.client import QuerySteps
from osrag.search.query import parse_filters
from osrag.search.rerank import Reranker
from osrag.search.retrieval import Retrieval
from osrag.settings import Settings
from osrag.steps import Call, Steps, Work

__all__ = ["AsyncSearchClient"]

T = TypeVar("T")


class AsyncSearchClient(QuerySteps):
    """``async with AsyncSearchClient(settings) as c: env = await c.search(question, principal=…)``.

    The same methods, arguments and ``Envelope`` as ``SearchClient``; each is a coroutine.
    """

    def __init__(
        self,
        settings: Settings | None = None,
        *,
        reranker: Reranker | None = None,
        principal: Principal | None = None,
    ) -> None:
        super().__init__(settings, reranker=reranker, principal=principal)
        self._client: Any | None = None

    # -- the connection pool
    async def _pool(self) -> Any:
        """The ``AsyncOpenSearch`` client, built on first use (building it sends nothing).

        Built in a thread: the first build imports aiohttp and the async transport, which
        would otherwise stall the loop for a moment."""
        if self._client is None:
            client = await asyncio.to_thread(make_async_client, self.s)
            if self._client is None:
                self._client = client
            else:  # another search built one meanwhile
                await client.close()
        return self._client

    async def close(self) -> None:
        """Close the connection pool (a later call opens a new one)."""
        client, self._client = self._client, None
        if client is not None:
            await client.close()

    async def __aenter__(self) -> AsyncSearchClient:
        return self

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        await self.close()

    # -- the driver
    async def _answer(self, step: Call | Work) -> Any:
        if isinstance(step, Work):
            return await asyncio.to_thread(step.fn)
        fn = operator.attrgetter(step.method)(await self._pool())
        with translate_errors(self.s.url, step.what):
            return await fn(**step.kwargs)

    async def _run(self, steps: Steps[T]) -> T:
        """``osrag.steps.run_steps`` with each answer awaited."""
        try:
            step = next(steps)
            while True:
                try:
                    result = await self._answer(step)
                except OsragError as exc:
                    step = steps.throw(exc)
                else:
                    step = steps.send(result)
        except StopIteration as done:
            return done.value  # type: ignore[no-any-return]
        finally:
            steps.close()

    # -- the API (as SearchClient's)
    async def retrieve(
        self,
        question: str,
        *,
        mode: str = "hybrid",
        depth: int | None = None,
        filters: Mapping[str, Any] | None = None,
        pipeline: str | None = None,
        principal: Principal | None = None,
        vectors: bool = True,
    ) -> Retrieval:
        """Candidates only, as ``SearchClient.retrieve``."""
        who = self.principal_for(principal)
        flt = parse_filters(filters)
        return await self._run(self._retrieve(question, mode, depth, flt, who, pipeline, vectors=vectors))

    async def section(
        self,
        section_id: str,
        *,
        principal: Principal | None = None,
        filters: Mapping[str, Any] | None = None,
    ) -> list[Passage]:
        """The chunks of a section and its direct subsections, as ``SearchClient.section``."""
        return await self._run(self._section(section_id, principal, filters))

    async def search(
        self,
        question: str,
        *,
        budget_tokens: int | None = None,
        filters: Mapping[str, Any] | None = None,
        depth: int | None = None,
        rerank: bool | None = None,
        tokenizer: Any | None = None,
        selection: str | None = None,
        selection_config: SelectionConfig | None = None,
        principal: Principal | None = None,
    ) -> Envelope:
        """The envelope for ``question`` within the budget, as ``SearchClient.search``."""
        return await self._run(
            observe_search(
                self._search(
                    question,
                    budget_tokens=budget_tokens,
                    filters=filters,
                    depth=depth,
                    rerank=rerank,
                    tokenizer=tokenizer,
                    selection=selection,
                    selection_config=selection_config,
                    principal=principal,
                ),
                question,
            )
        )
