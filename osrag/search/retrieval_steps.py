"""The retrieval half of the query path: question -> candidates (and the section of a passage).

A generator of steps (``osrag.steps``): it yields a ``Call`` when it needs OpenSearch and a
``Work`` when it needs the CPU (the question's embedding), and is sent back the result, so the
sync and the async client share it. ``Retriever._retrieve`` strings together small steps with
one job each -- check what was asked, resolve the alias, embed the question, gather the gate's
evidence of the question, build the request, ask (with its retries), read the candidates,
collapse copies, the gate's analysis -- whose pure parts live in ``osrag.search.retrieval``.
"""

from __future__ import annotations

import dataclasses
import functools
import logging
import threading
import time
from collections.abc import Mapping
from typing import Any

from osrag import templates
from osrag.access import Principal, require_principal
from osrag.capabilities import Capabilities, from_responses, serverless_capabilities
from osrag.embedding import Embedder, embedder_for
from osrag.envelope import Passage, passage_of
from osrag.errors import ClusterError, IndexStateError, InputError, OsragError
from osrag.mlcommons.blueprints import is_cluster_model, rerank_ext
from osrag.names import pipeline_name, rerank_pipeline_name, state_index
from osrag.records import ChunkSource, IndexMeta
from osrag.search import codes, gate
from osrag.search.analyzer import SearchAnalyzer, Unsupported, search_analyzer
from osrag.search.candidates import (
    Candidate,
    distinct_hits,
    failed_as_a_node_went_away,
    missing_index,
    scripts_refused,
    shards_failed_transiently,
    shards_missing,
)
from osrag.search.query import (
    EngineEmbedded,
    filter_clauses,
    parse_filters,
    section_body,
    vectors_in_source,
)
from osrag.search.retrieval import (
    NO_EVIDENCE,
    Ask,
    QuestionEvidence,
    Retrieval,
    checked_ask,
    elapsed_ms,
    read_response,
    search_request,
)
from osrag.search.variants import embedding_text
from osrag.settings import Settings, load_settings
from osrag.steps import Call, Steps, Work
from osrag.store.alias import AliasStore, resolve_mapping

__all__ = ["MODEL_WORK", "Retriever"]

#: Models and their tokenizers are loaded once per process and shared by every client, and a
#: Hugging Face fast tokenizer is not safe to call from two threads at once (a call with
#: truncation changes its state for a concurrent call without). Model work -- embedding the
#: question, the cross-encoder, counting tokens -- therefore runs one at a time; the async
#: client's other steps (requests, the gate) go on meanwhile.
MODEL_WORK = threading.Lock()
log = logging.getLogger(__name__)


class Retriever:
    """The retrieval half of the query path: the state (cached alias target, embedder, caches of
    the gate) and the step generators of ``retrieve`` and ``section``. No I/O here: a subclass
    answers the steps (``osrag.search.client.QuerySteps`` adds rerank and select).

    Every read is filtered for a principal (``osrag.access``): the one given to the call,
    else the client's own ``principal``; with neither it is an ``InputError`` (fail closed).
    """

    def __init__(
        self,
        settings: Settings | None = None,
        *,
        principal: Principal | None = None,
    ) -> None:
        self.s = settings or load_settings()
        self.principal = principal
        self._embedder: Embedder | None = None
        self._index_meta: tuple[str, IndexMeta] | None = None
        self._resolved_at = 0.0
        self._has_content_hash = False
        self._caps: Capabilities | None = None
        self._word_terms = gate.WordTerms()
        # Per index: the in-process ru_search analyzer when the index was made from the shipped
        # template (osrag.search.analyzer), else None (the question's new words go to _analyze).
        self._analyzers: dict[str, SearchAnalyzer | None] = {}
        self._doc_freqs = gate.DocFreqs()
        # How candidates' vectors come back (query.VECTOR_WAYS): by script field, until the
        # cluster refuses inline scripts; then in ``_source`` for the rest of this client's life.
        self._vectors = "doc"
        # Lazily built parts may be asked for from worker threads at once (the async client).
        self._lazy = threading.Lock()
        #: An index pinned to a local model in the cluster (``ml:``): the engine embeds the
        #: question inside the search request (a ``neural`` head) instead of a ``_predict`` first.
        self.embed_in_query = self.s.embed_in_query

    # -- lazily resolved parts
    def _target(self, *, fresh: bool = False) -> Steps[tuple[str, IndexMeta]]:
        """The index behind the alias and its record, from ONE request (the alias's mapping),
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
        if cached is None or cached[0] != index or cached[1].embedding_model != meta.embedding_model:
            self._embedder = None
        self._has_content_hash = "content_hash" in props and meta.content_hash
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

    def _engine_question(self, question: str) -> EngineEmbedded | None:
        """The question for the engine to embed (a ``neural`` head), when the index's model is a
        local model in the cluster; None for any other model. The model is looked up once (and
        checked: deployed, the index's own weights) when the embedder is first built."""
        emb = self.embedder()
        if emb.backend != "ml-commons":
            return None
        info = emb.model.info
        # A remote model's connector is told per request which side it embeds (input_type, a
        # _predict parameter the neural query does not pass), so it keeps _predict.
        if info.where != "cluster":
            return None
        return EngineEmbedded(info.model_id, question)

    def principal_for(self, given: Principal | None) -> Principal:
        """The principal of this read: the call's, else the client's; neither is an InputError."""
        return require_principal(
            given if given is not None else self.principal, require_tenant=self.s.require_tenant
        )

    # -- retrieval: check, resolve, then (once more if the alias moved) embed, analyse, ask, read
    def _retrieve(
        self,
        question: str,
        mode: str,
        depth: int | None,
        filters: dict[str, Any],
        principal: Principal,
        pipeline: str | None = None,
        evidence: bool = False,
        vectors: bool = True,
        rerank_with: str | None = None,
    ) -> Steps[Retrieval]:
        """Candidates for ``question``; with ``evidence``, the relevance gate's evidence rides on
        the same request (``osrag.search.gate``) and comes back as ``Retrieval.analysis``;
        with ``rerank_with`` (a cross-encoder in the cluster, ``ml:…``), the hybrid request goes
        through the alias's rerank pipeline and comes back in that model's order."""
        ask = checked_ask(
            question,
            mode,
            depth,
            filter_clauses(self.s.alias, filters, principal),
            default_depth=self.s.candidate_depth,
            pipeline=pipeline,
            evidence=evidence,
            vectors=vectors,
        )
        caps = yield from self._capabilities()
        timings: dict[str, float] = {}
        notes: list[str] = []
        index, meta = yield from self._target()
        try:
            return (yield from self._retrieve_from(ask, index, meta, caps, timings, notes, rerank_with))
        except ClusterError as exc:
            if not missing_index(exc, index):
                raise
        # The cached index was deleted (a reindex moved the alias, then cleanup): resolve the
        # alias afresh and ask once more.
        index, meta = yield from self._target(fresh=True)
        return (yield from self._retrieve_from(ask, index, meta, caps, timings, notes, rerank_with))

    def _retrieve_from(
        self,
        ask: Ask,
        index: str,
        meta: IndexMeta,
        caps: Capabilities,
        timings: dict[str, float],
        notes: list[str],
        rerank_with: str | None = None,
    ) -> Steps[Retrieval]:
        """One retrieval from the concrete ``index`` (not the alias: if a reindex switches the
        alias meanwhile, the query vector still meets the index and model it was made for)."""
        vector = yield from self._embed(ask, meta, timings)
        engine = isinstance(vector, EngineEmbedded)
        found = yield from self._question_evidence(ask, index, meta, timings)
        server_collapse = self._server_collapses(ask.mode, caps)
        python_collapse = self.s.collapse_duplicates and not server_collapse
        body, params = search_request(
            ask,
            vector,
            found,
            caps=caps,
            # Where the server cannot collapse, more are asked so the cut comes after the collapse.
            fetch=min(2 * ask.depth, 1000) if python_collapse else ask.depth,
            server_collapse=server_collapse,
            ef_search=self.s.hnsw_ef_search,
            vectors=self._vectors if ask.vectors else "none",
            pipeline=pipeline_name(self.s.alias, self.s.fusion),
        )
        t0 = time.perf_counter()
        try:
            resp, reranked_by, rerank_note = yield from self._ask_reranked(
                index, body, params, notes, ask, rerank_with
            )
        except ClusterError as exc:
            if engine:
                raise self._engine_model_error(meta, exc) from exc
            raise
        timings["retrieve"] = elapsed_ms(t0)
        hits = read_response(resp, timings, notes, engine_embedded=engine)
        if python_collapse:
            hits = distinct_hits(hits, ask.depth)
        analysis = self._gate_analysis(found, index, resp, hits) if ask.evidence else None
        return Retrieval(
            hits,
            index,
            meta,
            timings,
            vector=None if engine else vector,
            notes=notes,
            analysis=analysis,
            engine_embedded=engine,
            reranked_by=reranked_by,
            rerank_note=rerank_note,
        )

    def _ask_reranked(
        self,
        index: str,
        body: dict[str, Any],
        params: dict[str, Any],
        notes: list[str],
        ask: Ask,
        rerank_with: str | None,
    ) -> Steps[tuple[dict[str, Any], str | None, str]]:
        """(response, the reranker that ordered it or None, a note): with ``rerank_with``, the
        hybrid request through the alias's rerank pipeline (``rerank_pipeline_name``), the
        question in its ``ext``, the first ``rerank_depth`` fused hits reranked (the processor
        scores every hit it is given, so no more are asked). If that request fails (the model
        or the pipeline gone), ranking fails open: asked again through the plain fusion
        pipeline, and the note names the model and why -- no access rule depends on the order."""
        if not rerank_with or ask.mode != "hybrid" or ask.pipeline is not None:
            return (yield from self._ask(index, body, params, notes)), None, ""
        name = rerank_pipeline_name(self.s.alias, self.s.fusion)
        reranked = {
            **body,
            "size": min(int(body["size"]), self.s.rerank_depth),
            "ext": rerank_ext(ask.question),
        }
        try:
            resp = yield from self._ask(index, reranked, {**params, "search_pipeline": name}, notes)
            return resp, rerank_with, ""
        except ClusterError as exc:
            if missing_index(exc, index):
                raise
            from osrag.mlcommons.errors import model_failure

            why = model_failure(f"rerank in search pipeline {name}", rerank_with, exc)
            said = str(why) if why is not None else f"search pipeline {name}: {exc} (osrag install puts it)"
            log.info("rerank in the cluster with %s failed; asked again without it: %s", rerank_with, said)
            note = (
                f"reranker {rerank_with} in the cluster failed, ranked without it "
                f"(fused order plus evidence): {' '.join(said.split())[:300]}"
            )
            return (yield from self._ask(index, body, params, notes)), None, note

    def _engine_model_error(self, meta: IndexMeta, exc: ClusterError) -> OsragError:
        """A search whose ``neural`` head failed: ml-commons' refusal as one line naming the
        index's model (``osrag.mlcommons.errors``), never its stack; any other failure as it was.
        The model is looked up afresh by the next search (it may be back, or registered anew)."""
        from osrag.mlcommons.errors import model_failure

        found = model_failure("search with the question embedded in it", meta.embedding_model, exc)
        if found is None:
            return exc
        with self._lazy:
            self._embedder = None
        return found

    def _embed(self, ask: Ask, meta: IndexMeta, timings: dict[str, float]) -> Steps[Any]:
        """The question's embedding (None for the lexical modes), or the question for the engine
        to embed in the search request (``EngineEmbedded``) when the index's model is a local
        model in the cluster and ``embed_in_query`` is on."""
        if not ask.embeds:
            return None
        if self.embed_in_query and is_cluster_model(meta.embedding_model or ""):
            t0 = time.perf_counter()
            engine = yield Work(functools.partial(self._engine_question, embedding_text(ask.question)))
            if engine is not None:
                timings["embed_query"] = elapsed_ms(t0)  # the model's look-up, once per client
                return engine
        t0 = time.perf_counter()
        # A question in the wrong layout or in translit is embedded as the user meant it.
        vector = yield Work(functools.partial(self._encode_query, embedding_text(ask.question)))
        timings["embed_query"] = elapsed_ms(t0)
        return vector

    def _question_evidence(
        self, ask: Ask, index: str, meta: IndexMeta, timings: dict[str, float]
    ) -> Steps[QuestionEvidence]:
        """The question's side of the gate on ``index`` (``NO_EVIDENCE`` when not asked for)."""
        if not ask.evidence:
            return NO_EVIDENCE
        t0 = time.perf_counter()
        generation = str(meta.last_ingest_at)
        terms = yield from self._question_terms(index, meta, ask.lexical)
        known, doc_count = self._doc_freqs.known(index, generation, terms)
        timings["analyze_question"] = elapsed_ms(t0)
        return QuestionEvidence(
            tuple(terms), known, doc_count, tuple(gate.latin_codes(ask.question)), generation, on=True
        )

    def _server_collapses(self, mode: str, caps: Capabilities) -> bool:
        """Whether the server collapses copies of one text (every chunk of the index carries its
        hash, and the server can collapse this mode)."""
        return (
            self.s.collapse_duplicates
            and self.s.hybrid_collapse
            and self._has_content_hash
            and (caps.collapse_in_hybrid or mode != "hybrid")
        )

    def _ask(
        self, index: str, body: dict[str, Any], params: dict[str, Any], notes: list[str]
    ) -> Steps[dict[str, Any]]:
        """The candidates search, with what a refusal allows: asked once more when a shard copy
        went away mid-request; vectors from ``_source`` when the cluster runs no inline scripts;
        nothing found before the first ingest made the state index. A missing ``index`` is
        raised for ``_retrieve`` to resolve the alias afresh."""
        search = {"index": index, "body": body, "params": params}
        try:
            resp = yield Call("search", "search", search)
            if shards_failed_transiently(resp):
                # A copy went away mid-request (a node stopping): asked once more, the cluster
                # answers from the shard's other copy; a failure that stays is noted by the reader.
                log.info("search of %s: shards failed as a node went away; asked once more", index)
                resp = yield Call("search", "search", search)
            return resp
        except ClusterError as exc:
            if missing_index(exc, index):
                raise
            if failed_as_a_node_went_away(exc):
                log.info("search of %s failed as a node went away; asked once more", index)
                return (yield Call("search", "search", search))
            if self._vectors == "doc" and scripts_refused(exc):
                self._vectors = "source"
                notes.append("this cluster runs no inline scripts: vectors read from _source")
                return (yield Call("search", "search", {**search, "body": vectors_in_source(body)}))
            # The state index is created by the first ingest; before it there is nothing to find.
            if not missing_index(exc, state_index(self.s.alias)):
                raise
            notes.append(f"nothing has been ingested into {self.s.alias} yet")
            return {"hits": {"hits": []}}

    def _gate_analysis(
        self, found: QuestionEvidence, index: str, resp: Mapping[str, Any], hits: list[Candidate]
    ) -> gate.Analysis | None:
        """The gate's evidence for ``hits`` from the response's probes and aggregations (the new
        document frequencies kept for the next search); None without hits."""
        if not hits:
            return None
        freqs = gate.Freqs(found.known, found.doc_count or 0)
        asked = found.asked
        if asked:
            got = gate.parse_doc_freqs(resp, asked)
            self._doc_freqs.put(index, found.generation, got)
            freqs = gate.Freqs({**found.known, **got.df}, got.doc_count)
        analysis = gate.analysis_of(list(found.terms), freqs, hits)
        if found.codes:
            required = codes.required_codes(codes.parse_code_evidence(resp, found.codes))
            analysis = dataclasses.replace(analysis, required_codes=required)
        return analysis

    def _question_terms(self, index: str, meta: IndexMeta, lexical: str) -> Steps[list[str]]:
        """The question's ``ru_search`` terms on ``index``, for words not seen yet from the analyzer
        in process (``osrag.search.analyzer``) when the index was made from the shipped template, else
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

    def local_analyzer(self, index: str, meta: IndexMeta) -> SearchAnalyzer | None:
        """The in-process ``ru_search`` of ``index``, or None when it cannot be trusted to be the
        index's own: the index's fingerprint (``_meta.osrag.fingerprint``, a hash of its model and
        of the analysis template it was created from) must be that of the shipped template with
        the index's stemmer, and that analysis must be one ``osrag.search.analyzer`` reproduces."""
        if index in self._analyzers:
            return self._analyzers[index]
        found: SearchAnalyzer | None = None
        stemmer = meta.stemmer or ""
        if meta.template_version == templates.TEMPLATE_VERSION and meta.fingerprint:
            try:
                made = AliasStore(self.s.model_copy(update={"stemmer": stemmer})).desired_components()
                fp = templates.fingerprint(
                    meta.embedding_model, meta.dimension, templates.TEMPLATE_VERSION, made
                )
                if fp == meta.fingerprint:
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
            passage_of(ChunkSource.of(h["_source"], chunk_id=h["_id"]), rank)
            for rank, h in enumerate(resp["hits"]["hits"], start=1)
        ]
