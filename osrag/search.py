"""The query path, written once for two clients: question -> candidates -> reranked -> selected -> envelope.

The path is a generator of steps (``QuerySteps``): it yields a ``Call`` when it needs
OpenSearch and a ``Work`` when it needs the CPU (the question's embedding, the
cross-encoder, the selection), and is sent back the result. Everything around those
steps -- request bodies and filters (``query``), the relevance gate (``gate``), rank and
select into the envelope (``ranking``), the cached alias target, the retry when the alias
moved -- is the same code for both drivers: ``SearchClient`` (here) answers each step
inline with the sync client; ``AsyncSearchClient`` (``osrag.asearch``) awaits
``AsyncOpenSearch`` for a ``Call`` and runs a ``Work`` in a thread, so an event loop is
never blocked. The two differ only in how they talk to OpenSearch.
"""

from __future__ import annotations

import dataclasses
import functools
import logging
import operator
import threading
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from osrag import counting, gate, ranking, templates
from osrag.access import Principal, require_principal
from osrag.admin import Admin
from osrag.analyzer import SearchAnalyzer, Unsupported, search_analyzer
from osrag.budget import SelectionConfig
from osrag.capabilities import Capabilities, adapt_search_body, from_responses, serverless_capabilities
from osrag.embedding import Embedder, embedder_for
from osrag.envelope import Envelope, Passage, RerankInfo
from osrag.errors import ClusterError, IndexStateError, InputError, ModelError
from osrag.names import pipeline_name, state_index
from osrag.observability import observe_search
from osrag.query import (
    CANDIDATES_FILTER_PATH,
    MAX_QUESTION_CHARS,
    MODES,
    Hit,
    candidates_body,
    collapsed,
    distinct_hits,
    filter_clauses,
    hits_of,
    lexical_text,
    missing_index,
    parse_filters,
    scripts_refused,
    section_body,
    shards_failed_transiently,
    shards_missing,
    validate_question,
    vectors_in_source,
)
from osrag.rerank import Reranker
from osrag.settings import MAX_BUDGET_TOKENS, Settings, load_settings
from osrag.steps import Call, Steps, T, Work, run_steps
from osrag.variants import embedding_text

__all__ = ["MAX_QUESTION_CHARS", "Call", "Hit", "QuerySteps", "Retrieval", "SearchClient", "Work"]

#: Models and their tokenizers are loaded once per process and shared by every client, and a
#: Hugging Face fast tokenizer is not safe to call from two threads at once (a call with
#: truncation changes its state for a concurrent call without). Model work -- embedding the
#: question, the cross-encoder, counting tokens -- therefore runs one at a time; the async
#: client's other steps (requests, the gate) go on meanwhile.
MODEL_WORK = threading.Lock()
log = logging.getLogger(__name__)


def resolve_mapping(alias: str, got: Mapping[str, Any] | None) -> tuple[str, dict[str, Any], dict[str, Any]]:
    """(index, ``_meta.osrag``, mapped fields) from the answer to GET ``{alias}/_mapping``."""
    names = [k for k in (got or {}) if k not in ("error", "status")]
    if not names:
        raise IndexStateError(f"alias {alias} does not exist; run `osrag install` first")
    if len(names) > 1:
        raise IndexStateError(f"alias {alias} points to {len(names)} indices: {', '.join(sorted(names))}")
    mapping = (got or {})[names[0]]["mappings"]
    meta = dict((mapping.get("_meta") or {}).get("osrag") or {})
    return names[0], meta, dict(mapping.get("properties") or {})


@dataclass
class Retrieval:
    hits: list[Hit]
    index: str
    meta: dict[str, Any]
    timings_ms: dict[str, float] = field(default_factory=dict)
    vector: Any = None  # the question's embedding (hybrid and knn modes)
    notes: list[str] = field(default_factory=list)
    analysis: gate.Analysis | None = None  # the gate's evidence (when asked for)


class QuerySteps:
    """The state (cached alias target, embedder, reranker, budget tokenizer) and the step
    generators both clients share. No I/O here: a subclass answers the steps.

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
        self.s = settings or load_settings()
        self.principal = principal
        self._embedder: Embedder | None = None
        self._index_meta: tuple[str, dict[str, Any]] | None = None
        self._resolved_at = 0.0
        self._has_content_hash = False
        self._caps: Capabilities | None = None
        self._reranker = reranker
        self._word_terms = gate.WordTerms()
        # Per index: the in-process ru_search analyzer when the index was made from the shipped
        # template (osrag.analyzer), else None (the question's new words go to _analyze).
        self._analyzers: dict[str, SearchAnalyzer | None] = {}
        self._doc_freqs = gate.DocFreqs()
        # How candidates' vectors come back (query.VECTOR_WAYS): by script field, until the
        # cluster refuses inline scripts; then in ``_source`` for the rest of this client's life.
        self._vectors = "doc"
        # Lazily built parts may be asked for from worker threads at once (the async client).
        self._lazy = threading.Lock()

    # -- lazily resolved parts
    def _target(self, *, fresh: bool = False) -> Steps[tuple[str, dict[str, Any]]]:
        """The index behind the alias and its ``_meta``, from ONE request (the alias's mapping),
        cached for ``target_cache_ttl_s`` so that a steady stream of searches makes one round
        trip each (the search). Freshness: the last-ingest time shown is at most the TTL old;
        a search that meets a deleted index re-resolves at once (``fresh``). The embedder is
        kept while the index and its pinned model stay the same."""
        now = time.monotonic()
        cached = self._index_meta
        if not fresh and cached is not None and now - self._resolved_at < self.s.target_cache_ttl_s:
            return cached
        got = yield Call("get alias mapping", "indices.get_mapping", {"index": self.s.alias, "ignore": 404})
        index, meta, props = resolve_mapping(self.s.alias, got)
        cached = self._index_meta  # another search may have resolved meanwhile (async)
        if (
            cached is None
            or cached[0] != index
            or cached[1].get("embedding_model") != meta.get("embedding_model")
        ):
            self._embedder = None
        self._has_content_hash = "content_hash" in props and bool(meta.get("content_hash"))
        self._index_meta = (index, meta)
        self._resolved_at = now
        return self._index_meta

    def _capabilities(self) -> Steps[Capabilities]:
        """What the server supports, asked once per client before its first search (two requests)."""
        if self._caps is None and self.s.serverless:  # nothing to probe there (osrag.capabilities)
            self._caps = serverless_capabilities()
        if self._caps is None:
            info = yield Call("server info", "info", {})
            plugins = yield Call("cat plugins", "cat.plugins", {"format": "json"})
            self._caps = from_responses(info, plugins)
        return self._caps

    def embedder(self) -> Embedder:
        """The embedder the resolved index is pinned to (built once, kept while it stays)."""
        with self._lazy:
            if self._embedder is None:
                if self._index_meta is None:
                    raise IndexStateError("the alias's index is not resolved yet (no search has run)")
                self._embedder = embedder_for(self.s, meta=self._index_meta[1])
            return self._embedder

    def _encode_query(self, question: str) -> Any:
        with MODEL_WORK:
            return self.embedder().encode_query(question)

    def principal_for(self, given: Principal | None) -> Principal:
        """The principal of this read: the call's, else the client's; neither is an InputError."""
        return require_principal(
            given if given is not None else self.principal, require_tenant=self.s.require_tenant
        )

    # -- retrieval
    def _retrieve(
        self,
        question: str,
        mode: str,
        depth: int | None,
        filters: dict[str, Any],
        principal: Principal,
        pipeline: str | None = None,
        evidence: bool = False,
    ) -> Steps[Retrieval]:
        """Candidates for ``question``; with ``evidence``, the relevance gate's evidence rides on
        the same request (``osrag.gate``) and comes back as ``Retrieval.analysis``."""
        question = validate_question(question)
        if mode not in MODES:
            raise InputError(f"unknown retrieval mode {mode!r}; known: {', '.join(MODES)}")
        depth = self.s.candidate_depth if depth is None else depth
        if isinstance(depth, bool) or not isinstance(depth, int) or not 1 <= depth <= 1000:
            raise InputError(f"candidate depth must be between 1 and 1000, got {depth}")
        flt = filter_clauses(self.s.alias, filters, principal)
        timings: dict[str, float] = {}
        notes: list[str] = []
        caps = yield from self._capabilities()
        for attempt in (0, 1):
            # A cached index that was deleted (a reindex moved the alias, then cleanup) is met
            # as index-not-found: resolve the alias afresh and ask once more.
            index, meta = yield from self._target(fresh=attempt > 0)
            vector = None
            if mode in ("hybrid", "knn"):
                t0 = time.perf_counter()
                # A question in the wrong layout or in translit is embedded as the user meant it.
                vector = yield Work(functools.partial(self._encode_query, embedding_text(question)))
                timings["embed_query"] = (time.perf_counter() - t0) * 1000
            server_collapse = (
                self.s.collapse_duplicates
                and self.s.hybrid_collapse
                and self._has_content_hash
                and (caps.collapse_in_hybrid or mode != "hybrid")
            )
            python_collapse = self.s.collapse_duplicates and not server_collapse
            fetch = min(2 * depth, 1000) if python_collapse else depth
            lexical = lexical_text(question)
            terms: list[str] = []
            probes: list[dict[str, Any]] = []
            generation = str(meta.get("last_ingest_at"))
            known: dict[str, int] = {}
            doc_count: int | None = None
            t0 = time.perf_counter()
            try:
                if evidence:
                    terms = yield from self._question_terms(index, meta, lexical)
                    probes = gate.probe_clauses(gate.probe_terms(terms, lexical))
                    known, doc_count = self._doc_freqs.known(index, generation, terms)
                    timings["analyze_question"] = (time.perf_counter() - t0) * 1000
            except ClusterError as exc:
                if attempt == 0 and missing_index(exc, index):
                    continue
                raise
            # Only the terms whose document frequency this client does not hold are counted.
            asked = [t for t in terms if t not in known] if doc_count is not None else terms
            codes = gate.latin_codes(question) if evidence else []
            body = candidates_body(
                mode,
                lexical,
                vector,
                fetch,
                flt,
                self.s.hnsw_ef_search,
                probes=probes,
                # The question's Latin codes: what the index says of them (gate.required_codes).
                aggs={
                    **(gate.evidence_aggs(asked) if asked else {}),
                    **(gate.code_aggs(codes) if codes else {}),
                }
                or None,
                vectors=self._vectors,
            )
            if server_collapse:
                body = collapsed(body)
            body = adapt_search_body(body, caps)
            params: dict[str, Any] = {"filter_path": CANDIDATES_FILTER_PATH}
            if mode == "hybrid":
                params["search_pipeline"] = pipeline or pipeline_name(self.s.alias, self.s.fusion)
            t0 = time.perf_counter()
            try:
                # The concrete index resolved above, not the alias: if a reindex switches the alias
                # meanwhile, the query vector still meets the index (and model) it was made for.
                resp = yield Call("search", "search", {"index": index, "body": body, "params": params})
                if shards_failed_transiently(resp):
                    # A copy went away mid-request (a node stopping): asked once more, the cluster
                    # answers from the shard's other copy; a failure that stays is noted below.
                    log.info("search of %s: shards failed as a node went away; asked once more", index)
                    resp = yield Call("search", "search", {"index": index, "body": body, "params": params})
            except ClusterError as exc:
                if attempt == 0 and missing_index(exc, index):
                    continue
                if self._vectors == "doc" and scripts_refused(exc):
                    self._vectors = "source"
                    notes.append("this cluster runs no inline scripts: vectors read from _source")
                    resp = yield Call(
                        "search",
                        "search",
                        {"index": index, "body": vectors_in_source(body), "params": params},
                    )
                    timings["retrieve"] = (time.perf_counter() - t0) * 1000
                    break
                # The state index is created by the first ingest; before it there is nothing to find.
                if not missing_index(exc, state_index(self.s.alias)):
                    raise
                resp = {"hits": {"hits": []}}
                notes.append(f"nothing has been ingested into {self.s.alias} yet")
            timings["retrieve"] = (time.perf_counter() - t0) * 1000
            break
        hits = hits_of(resp)
        if resp.get("took") is not None:  # the server's own time, for the search record
            timings["server_took"] = float(resp["took"])
        partial = shards_missing(resp)
        if partial:
            notes.append(partial)
        if python_collapse:
            hits = distinct_hits(hits, depth)
        analysis = None
        if evidence and hits:
            freqs = gate.Freqs(known, doc_count or 0)
            if asked:
                got = gate.parse_doc_freqs(resp, asked)
                self._doc_freqs.put(index, generation, got)
                freqs = gate.Freqs({**known, **got.df}, got.doc_count)
            analysis = gate.analysis_of(terms, freqs, hits)
            if codes:
                required = gate.required_codes(gate.parse_code_evidence(resp, codes))
                analysis = dataclasses.replace(analysis, required_codes=required)
        return Retrieval(hits, index, meta, timings, vector=vector, notes=notes, analysis=analysis)

    def _question_terms(self, index: str, meta: Mapping[str, Any], lexical: str) -> Steps[list[str]]:
        """The question's ``ru_search`` terms on ``index``, for words not seen yet from the analyzer
        in process (``osrag.analyzer``) when the index was made from the shipped template, else
        from one ``_analyze``."""
        words = gate.question_words(lexical)
        missing = self._word_terms.missing(index, words)
        if missing:
            local = self.local_analyzer(index, meta)
            if local is not None:
                self._word_terms.put(index, local.words_terms(missing))
            else:
                resp = yield Call(
                    "analyze question",
                    "indices.analyze",
                    {"index": index, "body": gate.analyze_body(missing)},
                )
                self._word_terms.put(index, gate.parse_analyze(resp, missing))
        return self._word_terms.terms(index, words)

    def local_analyzer(self, index: str, meta: Mapping[str, Any]) -> SearchAnalyzer | None:
        """The in-process ``ru_search`` of ``index``, or None when it cannot be trusted to be the
        index's own: the index's fingerprint (``_meta.osrag.fingerprint``, a hash of its model and
        of the analysis template it was created from) must be that of the shipped template with
        the index's stemmer, and that analysis must be one ``osrag.analyzer`` reproduces."""
        if index in self._analyzers:
            return self._analyzers[index]
        found: SearchAnalyzer | None = None
        stemmer = str(meta.get("stemmer") or "")
        if meta.get("template_version") == templates.TEMPLATE_VERSION and meta.get("fingerprint"):
            try:
                made = Admin(self.s.model_copy(update={"stemmer": stemmer})).desired_components()
                fp = templates.fingerprint(
                    meta.get("embedding_model"), meta.get("dimension"), templates.TEMPLATE_VERSION, made
                )
                if fp == meta.get("fingerprint"):
                    found = search_analyzer(stemmer)
            except Unsupported as exc:
                log.debug("index %s: the question's terms come from _analyze (%s)", index, exc)
        with self._lazy:
            if len(self._analyzers) > 64:  # indices long gone
                self._analyzers.clear()
            self._analyzers[index] = found
        return found

    # -- parent-child: the whole section a passage came from
    def _section(
        self, section_id: str, principal: Principal | None, filters: Mapping[str, Any] | None
    ) -> Steps[list[Passage]]:
        who = self.principal_for(principal)
        if not section_id or not isinstance(section_id, str):
            raise InputError("section id is empty")
        flt = filter_clauses(self.s.alias, parse_filters(filters), who)
        index, _ = yield from self._target()
        try:
            resp = yield Call("section", "search", {"index": index, "body": section_body(section_id, flt)})
        except ClusterError as exc:
            if missing_index(exc, state_index(self.s.alias)):
                return []
            raise
        partial = shards_missing(resp)
        if partial:
            # A section is asked for as a whole and its list has no room for a note: some of its
            # chunks may sit on the failed shards, so give none rather than a silent part.
            raise ClusterError(f"section {section_id!r}: {partial}")
        return [
            ranking.passage(h["_source"], rank, chunk_id=h["_source"].get("chunk_id", h["_id"]))
            for rank, h in enumerate(resp["hits"]["hits"], start=1)
        ]

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
        budget = self.s.budget_tokens if budget_tokens is None else budget_tokens
        if isinstance(budget, bool) or not isinstance(budget, int) or not 0 < budget <= MAX_BUDGET_TOKENS:
            shown = repr(budget) if len(repr(budget)) <= 40 else repr(budget)[:39] + "…"
            raise InputError(
                f"token budget must be a positive integer, got {shown} "
                f"(budget_tokens: 1 to {MAX_BUDGET_TOKENS:,}, as OSRAG_BUDGET_TOKENS)"
            )
        parsed_filters = parse_filters(filters)
        ret = yield from self._retrieve(question, "hybrid", depth, parsed_filters, who, evidence=True)
        question = question.strip()
        timings = dict(ret.timings_ms)
        notes: list[str] = list(ret.notes)
        if ret.hits and ret.analysis is not None:
            t0 = time.perf_counter()
            yield Work(functools.partial(gate.annotate, question, ret.analysis, ret.vector, ret.hits))
            timings["annotate"] = (time.perf_counter() - t0) * 1000
        use_rerank = self.s.rerank if rerank is None else rerank
        ordered, info = yield Work(
            functools.partial(self._rerank, question, ret.hits, use_rerank, notes, timings)
        )
        t0 = time.perf_counter()
        env = yield Work(
            functools.partial(
                self._select,
                question,
                ordered,
                ret,
                budget=budget,
                tokenizer=tokenizer,
                rerank=info,
                selection=selection,
                selection_config=selection_config,
                filters=parsed_filters,
                notes=notes,
            )
        )
        timings["select"] = (time.perf_counter() - t0) * 1000
        env.access = who.describe()
        env.timings_ms = {k: round(v, 2) for k, v in timings.items()}
        env.timings_ms["total"] = (time.perf_counter() - t_start) * 1000
        return env

    def _select(
        self,
        question: str,
        ordered: list[Hit],
        ret: Retrieval,
        *,
        budget: int,
        tokenizer: Any | None,
        rerank: RerankInfo,
        selection: str | None,
        selection_config: SelectionConfig | None,
        filters: dict[str, Any],
        notes: list[str],
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
                budget=budget,
                settings=self.s,
                fresh=ranking.freshness(self.s.alias, ret.index, ret.meta),
                count_tokens=counter.count,
                use_stored_counts=reuse,
                rerank=rerank,
                selection=selection_config,
                policy=selection,
                filters=filters,
                notes=notes,
                required_codes=ret.analysis.required_codes if ret.analysis is not None else None,
            )
            env.tokenizer = counter.info(stored_counts=reuse)
            return env

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
            with MODEL_WORK:
                if self._reranker is None:
                    self._reranker = Reranker.from_settings(self.s)
                budget = self.s.rerank_budget_ms
                rr = self._reranker.score(question, [h.source.get("text", "") for h in ordered], budget)
            for h, sc, tr in zip(ordered, rr.scores, rr.truncated):
                h.rerank, h.truncated = sc, tr
            ordered = [ordered[i] for i in rr.order]  # scored head by score, the rest in fused order
            info.used = True
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
            info.note = f"reranker unavailable, ranked without it (fused order plus evidence): {exc}"
            notes.append(info.note)
        timings["rerank"] = (time.perf_counter() - t0) * 1000
        return ordered, info


class SearchClient(QuerySteps):
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
        self.admin = Admin(self.s)
        self.cluster = self.admin.cluster

    def _run(self, steps: Steps[T]) -> T:
        return run_steps(steps, self._answer)

    def _answer(self, step: Call | Work) -> Any:
        if isinstance(step, Work):
            return step.fn()
        fn = operator.attrgetter(step.method)(self.cluster.client)
        return self.cluster.call(step.what, fn, **step.kwargs)

    def embedder(self) -> Embedder:
        if self._index_meta is None:
            self._run(self._target())
        return super().embedder()

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
        return self._run(self._retrieve(question, mode, depth, parse_filters(filters), who, pipeline))

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
        return self._run(self._section(section_id, principal, filters))

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
        ``selection_config`` overrides the budget walk's knobs (dedup, reserved slot);
        ``tokenizer`` (a callable text -> count) overrides the budget tokenizer
        (``OSRAG_BUDGET_TOKENIZER``); the envelope's ``tokenizer`` says which one counted."""
        return self._run(
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
