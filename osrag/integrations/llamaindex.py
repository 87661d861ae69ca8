"""LlamaIndex: osrag as a ``BaseRetriever`` (``pip install 'osrag[llamaindex]'``).

    retriever = OsragRetriever(SearchClient(), principal=Principal(groups=["support"]))
    nodes = retriever.with_options(budget_tokens=800, filters={"category": "faq"}).retrieve("как вернуть товар?")

Each ``NodeWithScore`` is one selected passage: a ``TextNode`` (id = chunk id, source = the
document) with the metadata of ``osrag.integrations.metadata.passage_metadata``, scored by the
cross-encoder when it ran, else by the fused score. LlamaIndex's ``retrieve`` takes only the
question, so per-call options come from ``with_options``: a copy sharing the same clients.
Only the title, heading path and citation are shown to the LLM; the rest is bookkeeping.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping
from typing import Any

from llama_index.core.base.base_retriever import BaseRetriever
from llama_index.core.callbacks import CallbackManager
from llama_index.core.schema import NodeRelationship, NodeWithScore, QueryBundle, RelatedNodeInfo, TextNode

from osrag.access import Principal
from osrag.envelope import Envelope
from osrag.integrations import base
from osrag.integrations.metadata import LLM_KEYS, passage_score, passages_with_metadata
from osrag.search.asearch import AsyncSearchClient
from osrag.search.client import SearchClient

__all__ = ["OsragRetriever", "to_nodes"]


def to_nodes(env: Envelope) -> list[NodeWithScore]:
    """The envelope's passages as scored LlamaIndex nodes, in rank order."""
    out = []
    for p, meta in passages_with_metadata(env):
        hidden = [k for k in meta if k not in LLM_KEYS]
        node = TextNode(
            id_=p.chunk_id,
            text=p.text,
            metadata=meta,
            excluded_llm_metadata_keys=hidden,
            excluded_embed_metadata_keys=hidden,
            relationships={NodeRelationship.SOURCE: RelatedNodeInfo(node_id=p.doc_id)},
        )
        out.append(NodeWithScore(node=node, score=passage_score(p)))
    return out


class OsragRetriever(BaseRetriever):
    """A LlamaIndex retriever over ``SearchClient.search`` (and ``AsyncSearchClient`` for ``aretrieve``)."""

    def __init__(
        self,
        client: SearchClient,
        *,
        async_client: AsyncSearchClient | None = None,
        principal: Principal | None = None,
        budget_tokens: int | None = None,
        filters: Mapping[str, Any] | None = None,
        callback_manager: CallbackManager | None = None,
    ) -> None:
        super().__init__(callback_manager=callback_manager)
        self.client = client
        self.async_client = async_client
        self.options = base.Options().merged(principal, budget_tokens, filters)

    def with_options(
        self,
        *,
        principal: Principal | None = None,
        budget_tokens: int | None = None,
        filters: Mapping[str, Any] | None = None,
    ) -> OsragRetriever:
        """A copy for one call (or one user): its principal and budget replace these, its filters add."""
        other = copy.copy(self)
        other.options = self.options.merged(principal, budget_tokens, filters)
        return other

    def _retrieve(self, query_bundle: QueryBundle) -> list[NodeWithScore]:
        return to_nodes(base.search(self.client, query_bundle.query_str, self.options))

    async def _aretrieve(self, query_bundle: QueryBundle) -> list[NodeWithScore]:
        env = await base.asearch(self.client, self.async_client, query_bundle.query_str, self.options)
        return to_nodes(env)
