"""The query path as one client: question -> candidates -> reranked -> selected -> envelope.

``SearchClient`` does the I/O -- the alias and its ``_meta``, the question's embedding,
the search request, the cross-encoder -- and hands the rest to pure modules:
``query`` (request bodies, filters parsed once), ``gate`` (the relevance gate) and
``ranking`` (rank and select into the envelope, one ``_source`` -> ``Passage`` mapping).
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from osrag import gate, ranking
from osrag.access import Principal, require_principal
from osrag.admin import Admin
from osrag.budget import SelectionConfig
from osrag.embedding import Embedder, embedder_for
from osrag.envelope import Envelope, Passage, RerankInfo
from osrag.errors import ClusterError, InputError, ModelError
from osrag.names import state_index
from osrag.query import (
    MAX_QUESTION_CHARS,
    MODES,
    Hit,
    candidates_body,
    filter_clauses,
    hits_of,
    lexical_text,
    missing_index,
    parse_filters,
    section_body,
    validate_question,
)
from osrag.rerank import Reranker
from osrag.settings import Settings, load_settings

__all__ = ["MAX_QUESTION_CHARS", "Hit", "Retrieval", "SearchClient"]


@dataclass
class Retrieval:
    hits: list[Hit]
    index: str
    meta: dict[str, Any]
    timings_ms: dict[str, float] = field(default_factory=dict)
    vector: Any = None  # the question's embedding (hybrid and knn modes)
    notes: list[str] = field(default_factory=list)


class SearchClient:
    """What apps call: ``SearchClient(settings).search(question, principal=…, budget_tokens=…, filters=…)``.

    Every read is filtered for a principal (``osrag.access``): the one given to the call,
    else the client's own ``principal``; with neither it is an ``InputError`` (fail closed).
    Construction does no I/O; the cluster, the embedding model and the reranker
    are reached on the first search and reused afterwards.
    """

    def __init__(
        self,
        settings: Settings | None = None,
        *,
        reranker: Reranker | None = None,
        principal: Principal | None = None,
    ) -> None:
        self.s = settings or load_settings()
        self.principal = principal
        self.admin = Admin(self.s)
        self.cluster = self.admin.cluster
        self._embedder: Embedder | None = None
        self._index_meta: tuple[str, dict[str, Any]] | None = None
        self._reranker = reranker

    # -- lazily resolved parts
    def _target(self) -> tuple[str, dict[str, Any]]:
        """The index behind the alias and its ``_meta``, read afresh on every query so that the
        freshness report (last ingest) never goes stale; the embedder is kept while the index and
        its pinned model stay the same."""
        index = self.admin.require_index()
        meta = self.admin.meta(index)
        old = self._index_meta
        if old is None or old[0] != index or old[1].get("embedding_model") != meta.get("embedding_model"):
            self._embedder = None
        self._index_meta = (index, meta)
        return self._index_meta

    def embedder(self) -> Embedder:
        if self._embedder is None:
            _, meta = self._index_meta if self._index_meta is not None else self._target()
            self._embedder = embedder_for(self.s, meta=meta)
        return self._embedder

    # -- retrieval
    def retrieve(
        self,
        question: str,
        *,
        mode: str = "hybrid",
        depth: int | None = None,
        filters: Mapping[str, Any] | None = None,
        pipeline: str | None = None,
        principal: Principal | None = None,
    ) -> Retrieval:
        """Candidates only (used by ``search`` and by eval to compare heads and fusions)."""
        who = self.principal_for(principal)
        return self._retrieve(question, mode, depth, parse_filters(filters), who, pipeline)

    def principal_for(self, given: Principal | None) -> Principal:
        """The principal of this read: the call's, else the client's; neither is an InputError."""
        return require_principal(
            given if given is not None else self.principal, require_tenant=self.s.require_tenant
        )

    def _retrieve(
        self,
        question: str,
        mode: str,
        depth: int | None,
        filters: dict[str, Any],
        principal: Principal,
        pipeline: str | None = None,
    ) -> Retrieval:
        question = validate_question(question)
        if mode not in MODES:
            raise InputError(f"unknown retrieval mode {mode!r}; known: {', '.join(MODES)}")
        depth = self.s.candidate_depth if depth is None else depth
        if isinstance(depth, bool) or not isinstance(depth, int) or not 1 <= depth <= 1000:
            raise InputError(f"candidate depth must be between 1 and 1000, got {depth}")
        flt = filter_clauses(self.s.alias, filters, principal)
        index, meta = self._target()
        timings: dict[str, float] = {}
        vector = None
        if mode in ("hybrid", "knn"):
            t0 = time.perf_counter()
            vector = self.embedder().encode_query(question)
            timings["embed_query"] = (time.perf_counter() - t0) * 1000
        body = candidates_body(mode, lexical_text(question), vector, depth, flt, self.s.hnsw_ef_search)
        params: dict[str, Any] = {}
        if mode == "hybrid":
            params["search_pipeline"] = pipeline or self.admin.pipeline_name(self.s.fusion)
        notes: list[str] = []
        t0 = time.perf_counter()
        try:
            # The concrete index resolved above, not the alias: if a reindex switches the alias
            # meanwhile, the query vector still meets the index (and model) it was made for.
            resp = self.cluster.call(
                "search", self.cluster.client.search, index=index, body=body, params=params
            )
        except ClusterError as exc:
            # The state index is created by the first ingest; before it there is nothing to find.
            if not missing_index(exc, state_index(self.s.alias)):
                raise
            resp = {"hits": {"hits": []}}
            notes.append(f"nothing has been ingested into {self.s.alias} yet")
        timings["retrieve"] = (time.perf_counter() - t0) * 1000
        return Retrieval(hits_of(resp), index, meta, timings, vector=vector, notes=notes)

    # -- parent-child: the whole section a passage came from
    def section(
        self,
        section_id: str,
        *,
        principal: Principal | None = None,
        filters: Mapping[str, Any] | None = None,
    ) -> list[Passage]:
        """The chunks of a section and of its direct subsections, in document order, filtered
        exactly like a search (visibility, archive, ``principal``, ``filters``).

        A passage carries ``section_id`` and ``parent_section_id``; an app that needs more
        context than one chunk asks for the section instead of raising the budget. Section ids
        are predictable (``{doc_id}#{n}``), so a section the principal may not see is empty,
        never a way around the ACL.
        """
        who = self.principal_for(principal)
        if not section_id or not isinstance(section_id, str):
            raise InputError("section id is empty")
        flt = filter_clauses(self.s.alias, parse_filters(filters), who)
        index, _ = self._target()
        try:
            resp = self.cluster.call(
                "section",
                self.cluster.client.search,
                index=index,
                body=section_body(section_id, flt),
            )
        except ClusterError as exc:
            if missing_index(exc, state_index(self.s.alias)):
                return []
            raise
        return [
            ranking.passage(h["_source"], rank, chunk_id=h["_source"].get("chunk_id", h["_id"]))
            for rank, h in enumerate(resp["hits"]["hits"], start=1)
        ]

    # -- the full contract
    def search(
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
        """The minimal material sufficient to answer ``question`` within the budget, or say so,
        from what ``principal`` may see (the envelope's ``access`` says whom it was filtered for).

        ``selection`` is the policy, ``"recall"`` or ``"minimal"`` (default: ``OSRAG_SELECTION``);
        ``selection_config`` overrides the budget walk's knobs (dedup, reserved slot)."""
        t_start = time.perf_counter()
        who = self.principal_for(principal)
        budget = self.s.budget_tokens if budget_tokens is None else budget_tokens
        if isinstance(budget, bool) or not isinstance(budget, int) or budget <= 0:
            raise InputError(f"token budget must be a positive integer, got {budget!r}")
        parsed_filters = parse_filters(filters)
        ret = self._retrieve(question, "hybrid", depth, parsed_filters, who)
        question = question.strip()
        timings = dict(ret.timings_ms)
        notes: list[str] = list(ret.notes)
        emb = self.embedder()
        self._annotate(question, ret, timings)
        use_rerank = self.s.rerank if rerank is None else rerank
        ordered, info = self._rerank(question, ret.hits, use_rerank, notes, timings)
        t0 = time.perf_counter()
        env = ranking.rank_and_select(
            question,
            ordered,
            budget=budget,
            settings=self.s,
            fresh=ranking.freshness(self.s.alias, ret.index, ret.meta),
            count_tokens=tokenizer or emb.count_tokens,
            use_stored_counts=tokenizer is None,
            rerank=info,
            selection=selection_config,
            policy=selection,
            filters=parsed_filters,
            notes=notes,
        )
        timings["select"] = (time.perf_counter() - t0) * 1000
        env.access = who.describe()
        env.timings_ms = {k: round(v, 2) for k, v in timings.items()}
        env.timings_ms["total"] = (time.perf_counter() - t_start) * 1000
        return env

    def _annotate(self, question: str, ret: Retrieval, timings: dict[str, float]) -> None:
        """The gate's evidence on each hit, from the index's own analysis (one ``_mtermvectors``)."""
        if not ret.hits:
            return
        texts = [h.source.get("text", "") for h in ret.hits]
        t0 = time.perf_counter()
        resp = self.cluster.call(
            "term vectors",
            self.cluster.client.mtermvectors,
            index=ret.index,
            body=gate.termvectors_body(question, texts),
        )
        gate.annotate(question, gate.parse_termvectors(resp, len(texts)), ret.vector, ret.hits)
        timings["analyze"] = (time.perf_counter() - t0) * 1000

    def _rerank(
        self, question: str, hits: list[Hit], use: bool, notes: list[str], timings: dict[str, float]
    ) -> tuple[list[Hit], RerankInfo]:
        """Hits in cross-encoder order (fused order when off or unavailable), and what happened."""
        model = self._reranker.model_name if self._reranker is not None else self.s.reranker_model
        info = RerankInfo(model=model if use else None)
        ordered = list(hits)
        if not use:
            info.note = "disabled by configuration"
            return ordered, info
        if not ordered:
            return ordered, info
        t0 = time.perf_counter()
        try:
            if self._reranker is None:
                self._reranker = Reranker.from_settings(self.s)
            rr = self._reranker.score(question, [h.source.get("text", "") for h in ordered])
            for h, sc, tr in zip(ordered, rr.scores, rr.truncated):
                h.rerank, h.truncated = sc, tr
            ordered = [ordered[i] for i in rr.order]  # scored head by score, the rest in fused order
            info.used = True
            n_tr = sum(rr.truncated)
            if n_tr:
                info.note = f"{n_tr} candidate(s) truncated to {rr.max_length} tokens for reranking"
        except ModelError as exc:
            info.note = f"reranker unavailable, ranked without it (fused order plus evidence): {exc}"
            notes.append(info.note)
        timings["rerank"] = (time.perf_counter() - t0) * 1000
        return ordered, info
