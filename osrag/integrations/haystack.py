"""Haystack 2+: osrag as a retriever ``@component`` (``pip install 'osrag[haystack]'``).

    retriever = OsragRetriever(SearchClient(), principal=Principal(groups=["support"]))
    out = retriever.run("как вернуть товар?", budget_tokens=800, filters={"category": "faq"})
    out["documents"], out["envelope"]

``run`` (and ``run_async``, used by ``AsyncPipeline``) returns ``documents`` -- one
``Document`` per selected passage, its ``meta`` from
``osrag.integrations.metadata.passage_metadata`` -- and the whole ``envelope``, so a pipeline
can tell "nothing relevant" and "budgeted" apart from an empty or short list. The call's
principal wins over the component's; with neither the search is refused (fail closed). A
pipeline with it serialises (``to_dict``) without the client; loading builds one from ``OSRAG_*``.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from haystack import Document, component, default_from_dict, default_to_dict

from osrag.access import Principal
from osrag.envelope import Envelope
from osrag.integrations import base
from osrag.integrations.metadata import passage_score, passages_with_metadata
from osrag.search.asearch import AsyncSearchClient
from osrag.search.client import SearchClient

__all__ = ["OsragRetriever", "to_documents"]


def to_documents(env: Envelope) -> list[Document]:
    """The envelope's passages as Haystack documents, in rank order."""
    return [
        Document(id=p.chunk_id, content=p.text, meta=meta, score=passage_score(p))
        for p, meta in passages_with_metadata(env)
    ]


@component
class OsragRetriever:
    """A Haystack retriever over ``SearchClient.search`` (and ``AsyncSearchClient`` in ``run_async``)."""

    def __init__(
        self,
        client: SearchClient,
        *,
        async_client: AsyncSearchClient | None = None,
        principal: Principal | None = None,
        budget_tokens: int | None = None,
        filters: Mapping[str, Any] | None = None,
    ) -> None:
        self.client = client
        self.async_client = async_client
        self.options = base.Options().merged(principal, budget_tokens, filters)

    def to_dict(self) -> dict[str, Any]:
        """For ``Pipeline.dumps``: the principal, budget and filters; never the client or its settings
        (they hold the cluster's credentials): ``from_dict`` builds the client from ``OSRAG_*``."""
        o = self.options
        who = o.principal.model_dump() if o.principal is not None else None
        return default_to_dict(self, principal=who, budget_tokens=o.budget_tokens, filters=dict(o.filters))

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> OsragRetriever:
        params = dict(data.get("init_parameters") or {})
        if params.get("principal") is not None:
            params["principal"] = Principal.model_validate(params["principal"])
        return default_from_dict(cls, {**data, "init_parameters": {"client": SearchClient(), **params}})

    @component.output_types(documents=list[Document], envelope=Envelope)
    def run(
        self,
        query: str,
        principal: Principal | None = None,
        budget_tokens: int | None = None,
        filters: dict[str, Any] | None = None,
    ) -> dict[str, Any]:
        env = base.search(self.client, query, self.options.merged(principal, budget_tokens, filters))
        return {"documents": to_documents(env), "envelope": env}

    @component.output_types(documents=list[Document], envelope=Envelope)
    async def run_async(
        self,
        query: str,
        principal: Principal | None = None,
        budget_tokens: int | None = None,
        filters: dict[str, Any] | None = None,
    ) -> dict[str, Any]:
        options = self.options.merged(principal, budget_tokens, filters)
        env = await base.asearch(self.client, self.async_client, query, options)
        return {"documents": to_documents(env), "envelope": env}
