"""What apps call: ``SearchClient`` (sync); ``SearchApi``, the public methods it shares with
``AsyncSearchClient`` (``osrag.search.asearch``); and ``QuerySteps``, the one query path under both:
question -> candidates -> reranked -> selected -> envelope.

The path is a generator of steps (``osrag.steps``): it yields a ``Call`` when it needs
OpenSearch and a ``Work`` when it needs the CPU (the question's embedding, the
cross-encoder, the selection), and is sent back the result. Retrieval and its steps are
``osrag.search.retrieval_steps``; here the rest of the contract: the gate's annotation, the cross-encoder,
rank and select (``osrag.search.ranking``, under one ``SelectionPolicy`` read from the settings). One
``Candidate`` (``osrag.search.candidates``) travels through every stage; ``Passage`` is the only one
that leaves. ``osrag.steps.drive`` drives the steps with the client's transport: ``SearchClient``'s
(``ClusterTransport``) answers each step inline with the sync client; ``AsyncSearchClient``'s awaits
``AsyncOpenSearch`` for a ``Call`` and runs a ``Work`` in a thread. The two differ only in it.
"""

from __future__ import annotations

import functools
import operator
import time
from collections.abc import Mapping
from typing import Any, Generic, TypeVar, cast

from osrag import counting
from osrag.access import Principal
from osrag.connection import Cluster
from osrag.embedding import Embedder
from osrag.envelope import Envelope, Passage, RerankInfo
from osrag.errors import InputError, ModelError
from osrag.mlcommons.blueprints import is_cluster_model
from osrag.observability import observe_search
from osrag.search import gate, ranking
from osrag.search.budget import SelectionConfig
from osrag.search.candidates import Candidate
from osrag.search.query import parse_filters
from osrag.search.rerank import Reranker
from osrag.search.retrieval import Retrieval, elapsed_ms
from osrag.search.retrieval_steps import MODEL_WORK, Retriever
from osrag.settings import MAX_BUDGET_TOKENS, Settings
from osrag.steps import Call, Steps, SyncTransport, T, Transport, Work, drive

__all__ = ["ClusterTransport", "QuerySteps", "SearchApi", "SearchClient"]


class QuerySteps(Retriever):
    """The whole query path as steps (retrieval from ``Retriever``, then annotate, rerank and
    select), with the reranker and the selection policy. No I/O here: a subclass answers the steps.

    Every read is filtered for a principal (``osrag.access``): the one given to the call,
    else the client's own ``principal``; with neither it is an ``InputError`` (fail closed).
    """

    def __init__(
        self,
        settings: Settings | None = None,
        *,
        reranker: Reranker | None = None,
        principal: Principal | None = None,
    ) -> None:
        super().__init__(settings, principal=principal)
        self._reranker = reranker
        #: A cross-encoder in the cluster (``OSRAG_RERANKER_MODEL=ml:…``) reranks inside the search
        #: request, through the rerank pipeline ``osrag install`` puts; off: by ``_predict`` after it.
        self.rerank_in_pipeline = True
        #: How candidates become an answer, read from the settings once.
        self.policy = ranking.SelectionPolicy.from_settings(self.s)

    # -- the full contract
    def _search(
        self,
        question: str,
        *,
        budget_tokens: int | None,
        filters: Mapping[str, Any] | None,
        depth: int | None,
        rerank: bool | None,
        tokenizer: Any | None,
        selection: str | None,
        selection_config: SelectionConfig | None,
        principal: Principal | None,
    ) -> Steps[Envelope]:
        t_start = time.perf_counter()
        who = self.principal_for(principal)
        budget = self._checked_budget(budget_tokens)
        policy = self.policy.with_overrides(selection, selection_config)
        parsed_filters = parse_filters(filters)
        use_rerank = self.s.rerank if rerank is None else rerank
        in_cluster = self._pipeline_reranker(use_rerank)
        ret = yield from self._retrieve(
            question, "hybrid", depth, parsed_filters, who, evidence=True, rerank_with=in_cluster
        )
        question = question.strip()
        timings = dict(ret.timings_ms)
        notes: list[str] = list(ret.notes)
        if ret.hits and ret.analysis is not None:
            t0 = time.perf_counter()
            yield Work(
                functools.partial(
                    gate.annotate, question, ret.analysis, ret.vector, ret.hits, engine=ret.engine_embedded
                )
            )
            timings["annotate"] = elapsed_ms(t0)
        if in_cluster is not None:
            ordered, info = self._reranked_in_cluster(in_cluster, ret)
        else:
            ordered, info = yield Work(
                functools.partial(self._rerank, question, ret.hits, use_rerank, notes, timings)
            )
        t0 = time.perf_counter()
        env = yield Work(
            functools.partial(self._select, question, ordered, ret, budget, policy, tokenizer, info)
        )
        timings["select"] = elapsed_ms(t0)
        env.filters = dict(parsed_filters)
        env.notes = notes
        env.access = who.describe()
        env.timings_ms = {k: round(v, 2) for k, v in timings.items()}
        env.timings_ms["total"] = elapsed_ms(t_start)
        return env

    def _checked_budget(self, budget_tokens: int | None) -> int:
        """The call's token budget, else the settings'; anything but 1..MAX_BUDGET_TOKENS is refused."""
        budget = self.s.budget_tokens if budget_tokens is None else budget_tokens
        if isinstance(budget, bool) or not isinstance(budget, int) or not 0 < budget <= MAX_BUDGET_TOKENS:
            shown = repr(budget) if len(repr(budget)) <= 40 else repr(budget)[:39] + "…"
            raise InputError(
                f"token budget must be a positive integer, got {shown} "
                f"(budget_tokens: 1 to {MAX_BUDGET_TOKENS:,}, as OSRAG_BUDGET_TOKENS)"
            )
        return budget

    def _select(
        self,
        question: str,
        ordered: list[Candidate],
        ret: Retrieval,
        budget: int,
        policy: ranking.SelectionPolicy,
        tokenizer: Any | None,
        rerank: RerankInfo,
    ) -> Envelope:
        """Rank and select in the budget tokenizer's count (``osrag.counting``); model work, so one at a time."""
        with MODEL_WORK:
            if tokenizer is not None:
                counter = counting.caller_counter(tokenizer)
            else:
                counter = counting.budget_counter(self.s, self.embedder)
            reuse = counting.same_counter(ret.meta, counter)
            env = ranking.rank_and_select(
                question,
                ordered,
                budget,
                policy,
                fresh=ranking.freshness(self.s.alias, ret.index, ret.meta),
                count_tokens=counter.count,
                use_stored_counts=reuse,
                rerank=rerank,
                required_codes=ret.analysis.required_codes if ret.analysis is not None else None,
                terms=ret.analysis.weights if ret.analysis is not None else None,
            )
            env.tokenizer = counter.info(stored_counts=reuse)
            return env

    def _pipeline_reranker(self, use: bool) -> str | None:
        """The cross-encoder in the cluster (``ml:…``) that reranks inside the search request (the
        alias's rerank pipeline), or None: reranking off, a model in this process, or
        ``rerank_in_pipeline`` off (then an ``ml:`` model is asked by ``_predict``)."""
        if not use or not self.rerank_in_pipeline:
            return None
        model = self._reranker.model_name if self._reranker is not None else self.s.reranker_model
        return model if is_cluster_model(model) else None

    def _reranked_in_cluster(self, model: str, ret: Retrieval) -> tuple[list[Candidate], RerankInfo]:
        """The hits as the rerank pipeline ordered them, and what happened. The processor puts the
        model's score in ``_score``: it is the hit's rerank score; the fused score does not come
        back (0 in the envelope). When the pipeline failed, the fused order and a note naming
        the model (``Retriever._ask_reranked``)."""
        info = RerankInfo(model=model, where="cluster")
        hits = list(ret.hits)
        if ret.reranked_by is None:
            info.note = ret.rerank_note
            return hits, info
        for h in hits:
            h.rerank, h.fused = h.fused, 0.0
        info.used = True
        info.reranked = len(hits)
        return hits, info

    def _rerank(
        self, question: str, hits: list[Candidate], use: bool, notes: list[str], timings: dict[str, float]
    ) -> tuple[list[Candidate], RerankInfo]:
        """Hits in cross-encoder order (fused order when off or unavailable), and what happened."""
        model = self._reranker.model_name if self._reranker is not None else self.s.reranker_model
        info = RerankInfo(model=model if use else None)
        ordered = list(hits)
        if not use:
            info.note = "disabled by configuration"
            return ordered, info
        if not ordered:
            return ordered, info
        if self._reranker is None and "reranker_model" not in self.s.model_fields_set:
            # The default cross-encoder is not here (osrag.model_defaults, local facts only): not a
            # degradation of this search, so nothing is logged; the envelope says why, once.
            choice = self.s.reranker_choice
            if choice.name is None:
                info.model = None
                info.note = f"no cross-encoder here, fused order plus evidence ({choice.reason})"
                return ordered, info
        t0 = time.perf_counter()
        try:
            with MODEL_WORK:
                if self._reranker is None:
                    self._reranker = Reranker.from_settings(self.s)
                budget = self.s.rerank_budget_ms
                rr = self._reranker.score(question, [h.text for h in ordered], budget)
            for h, sc, tr in zip(ordered, rr.scores, rr.truncated):
                h.rerank, h.truncated = sc, tr
            ordered = [ordered[i] for i in rr.order]  # scored head by score, the rest in fused order
            info.used = True
            info.where = self._reranker.where
            info.reranked = rr.scored
            info.budget_ms = budget if budget is not None else self._reranker.budget_ms
            said = []
            n_tr = sum(rr.truncated)
            if n_tr:
                said.append(f"{n_tr} candidate(s) truncated to {rr.max_length} tokens for reranking")
            if rr.out_of_time:
                said.append(
                    f"rerank budget {info.budget_ms:g} ms: {rr.scored} of {len(ordered)} candidates scored, "
                    "the rest keep their fused order"
                )
            info.note = "; ".join(said)
        except ModelError as exc:
            # Said once, here: the loader logs the failure once per process, not once per search.
            info.note = f"reranker unavailable, ranked without it (fused order plus evidence): {exc}"
        timings["rerank"] = (time.perf_counter() - t0) * 1000
        return ordered, info


#: What a client's methods give: the value itself (``SearchClient``) or an awaitable of it
#: (``AsyncSearchClient``) -- ``search``'s envelope, ``retrieve``'s candidates, ``section``'s passages.
E = TypeVar("E")
R = TypeVar("R")
L = TypeVar("L")


class SearchApi(QuerySteps, Generic[E, R, L]):
    """The public methods, written once for both clients: each drives its steps (``osrag.steps.drive``)
    with the client's transport, which says whether the answer comes now or is awaited."""

    _transport: Transport

    def _drive(self, steps: Steps[Any], transport: Transport | None = None) -> Any:
        return drive(steps, transport or self._transport)

    def retrieve(
        self,
        question: str,
        *,
        mode: str = "hybrid",
        depth: int | None = None,
        filters: Mapping[str, Any] | None = None,
        pipeline: str | None = None,
        principal: Principal | None = None,
        vectors: bool = True,
    ) -> R:
        """The candidates of ``question`` before the gate, rerank and budget: what ``search``
        starts from, for comparing retrieval heads, fusions and depths.

        ``mode`` is one of ``osrag.search.query.MODES`` (``hybrid``, the shipped one; ``bm25``,
        ``bm25-text``, ``bm25-std``, ``knn``); ``depth`` how many candidates (default
        ``OSRAG_CANDIDATE_DEPTH``); ``filters`` and ``principal`` as for ``search``;
        ``pipeline`` another search pipeline for the hybrid mode. ``Retrieval.hits`` are
        ``osrag.search.candidates.Candidate`` records in the cluster's order: ``chunk_id``,
        ``doc_id``, ``text``, ``token_count`` (the count stored at ingest), ``fused`` and
        ``rank`` as attributes, the whole stored chunk as ``source`` (an
        ``osrag.records.ChunkSource``, its vector as ``source.embedding``). The scores the
        gate and the cross-encoder add (``coverage``, ``cosine``, ``relevance``,
        ``rerank``) are filled by ``search`` only. ``vectors=False`` leaves the stored vectors on
        the server (``source.embedding`` is None): a lighter request for a caller that only
        ranks."""
        return cast(
            R,
            self._drive(self._checked_retrieve(question, mode, depth, filters, principal, pipeline, vectors)),
        )

    def _checked_retrieve(
        self,
        question: str,
        mode: str,
        depth: int | None,
        filters: Mapping[str, Any] | None,
        principal: Principal | None,
        pipeline: str | None,
        vectors: bool,
    ) -> Steps[Retrieval]:
        """``_retrieve`` after the caller's principal and filters are checked (when driven, as a search)."""
        who = self.principal_for(principal)
        flt = parse_filters(filters)
        return (yield from self._retrieve(question, mode, depth, flt, who, pipeline, vectors=vectors))

    def section(
        self,
        section_id: str,
        *,
        principal: Principal | None = None,
        filters: Mapping[str, Any] | None = None,
    ) -> L:
        """The chunks of a section and of its direct subsections, in document order, filtered
        exactly like a search (visibility, archive, ``principal``, ``filters``).

        A passage carries ``section_id`` and ``parent_section_id``; an app that needs more
        context than one chunk asks for the section instead of raising the budget. Section ids
        are predictable (``{doc_id}#{n}``), so a section the principal may not see is empty,
        never a way around the ACL.
        """
        return cast(L, self._drive(self._section(section_id, principal, filters)))

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
    ) -> E:
        """The minimal material sufficient to answer ``question`` within the budget, or say so,
        from what ``principal`` may see (the envelope's ``access`` says whom it was filtered for).

        ``selection`` is the policy, ``"recall"`` or ``"minimal"`` (default: ``OSRAG_SELECTION``);
        ``selection_config`` overrides the budget walk's knobs (dedup, reserved slot);
        ``tokenizer`` (a callable text -> count) overrides the budget tokenizer
        (``OSRAG_BUDGET_TOKENIZER``); the envelope's ``tokenizer`` says which one counted."""
        steps = self._search(
            question,
            budget_tokens=budget_tokens,
            filters=filters,
            depth=depth,
            rerank=rerank,
            tokenizer=tokenizer,
            selection=selection,
            selection_config=selection_config,
            principal=principal,
        )
        return cast(E, self._drive(steps, observe_search(self._transport, question)))


class ClusterTransport(SyncTransport):
    """The sync transport: a ``Call`` sent with the cluster's client, a ``Work`` done inline."""

    def __init__(self, cluster: Cluster) -> None:
        self.cluster = cluster

    async def answer(self, step: Call | Work) -> Any:
        if isinstance(step, Work):
            return step.fn()
        fn = operator.attrgetter(step.method)(self.cluster.client)
        return self.cluster.call(step.what, fn, **step.kwargs)


class SearchClient(SearchApi[Envelope, Retrieval, list[Passage]]):
    """What apps call: ``SearchClient(settings).search(question, principal=…, budget_tokens=…, filters=…)``.

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
        super().__init__(settings, reranker=reranker, principal=principal)
        self.cluster = Cluster(self.s)
        self._transport: SyncTransport = ClusterTransport(self.cluster)

    def _run(self, steps: Steps[T]) -> T:
        """Steps driven to their value (for tools that drive a part of the path themselves)."""
        return drive(steps, self._transport)

    def embedder(self) -> Embedder:
        if self._index_meta is None:
            self._run(self._target())
        return super().embedder()
