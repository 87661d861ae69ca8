"""LangChain: osrag as a ``BaseRetriever`` (``pip install 'osrag[langchain]'``).

    retriever = OsragRetriever(client=SearchClient(), principal=Principal(groups=["support"]))
    docs = retriever.invoke("как вернуть товар?", budget_tokens=800, filters={"category": "faq"})

Each ``Document`` is one selected passage (``page_content`` is its text, ``id`` its chunk id),
its metadata ``osrag.integrations.metadata.passage_metadata``: where it came from, its scores
per stage, and the envelope's status, budget and left-out count. ``principal``,
``budget_tokens`` and ``filters`` may be given per call to ``invoke``/``ainvoke``; the call's
principal wins over the retriever's, and with neither the search is refused (fail closed).
"""

from __future__ import annotations

from typing import Any

from langchain_core.callbacks import AsyncCallbackManagerForRetrieverRun, CallbackManagerForRetrieverRun
from langchain_core.documents import Document
from langchain_core.retrievers import BaseRetriever
from pydantic import ConfigDict, Field

from osrag.access import Principal
from osrag.envelope import Envelope
from osrag.integrations import base
from osrag.integrations.metadata import passages_with_metadata
from osrag.search.asearch import AsyncSearchClient
from osrag.search.client import SearchClient

__all__ = ["OsragRetriever", "to_documents"]


def to_documents(env: Envelope) -> list[Document]:
    """The envelope's passages as LangChain documents, in rank order."""
    return [
        Document(id=p.chunk_id, page_content=p.text, metadata=meta) for p, meta in passages_with_metadata(env)
    ]


class OsragRetriever(BaseRetriever):
    """A LangChain retriever over ``SearchClient.search`` (and ``AsyncSearchClient`` for ``ainvoke``)."""

    model_config = ConfigDict(arbitrary_types_allowed=True)

    client: SearchClient
    #: Used by ``ainvoke`` when given; otherwise ``ainvoke`` runs ``client`` in a worker thread.
    async_client: AsyncSearchClient | None = None
    principal: Principal | None = None
    budget_tokens: int | None = None
    filters: dict[str, Any] = Field(default_factory=dict)

    def _options(self, principal: Any, budget_tokens: Any, filters: Any) -> base.Options:
        defaults = base.Options(self.principal, self.budget_tokens, self.filters)
        return defaults.merged(principal, budget_tokens, filters)

    def _get_relevant_documents(
        self,
        query: str,
        *,
        run_manager: CallbackManagerForRetrieverRun,
        principal: Principal | None = None,
        budget_tokens: int | None = None,
        filters: dict[str, Any] | None = None,
    ) -> list[Document]:
        options = self._options(principal, budget_tokens, filters)
        return to_documents(base.search(self.client, query, options))

    async def _aget_relevant_documents(
        self,
        query: str,
        *,
        run_manager: AsyncCallbackManagerForRetrieverRun,
        principal: Principal | None = None,
        budget_tokens: int | None = None,
        filters: dict[str, Any] | None = None,
    ) -> list[Document]:
        options = self._options(principal, budget_tokens, filters)
        return to_documents(await base.asearch(self.client, self.async_client, query, options))
