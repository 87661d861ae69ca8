"""The query path: question → candidates → reranked → selected → envelope.

Candidates come from ONE native ``hybrid`` query through the alias's search
pipeline (RRF by default): a BM25 head that is a ``bool.should`` of per-field
``match`` queries (chunk text, breadcrumb, title and the whole-identifier
subfield, so the user's own wording always takes part and exact codes survive)
and a kNN head on the question's embedding. Filters and the visibility clause
apply to both heads — inside the kNN query as an efficient filter, so the graph
search is not starved by a post-filter. User text only ever goes into ``match``
queries, which do not parse query syntax.
"""

from __future__ import annotations

import datetime as dt
import functools
import re
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from osrag.admin import Admin
from osrag.budget import Candidate, Selection, SelectionConfig, select
from osrag.embedding import Embedder, embedder_for
from osrag.envelope import Envelope, Freshness, LeftOutItem, Passage, RerankInfo, StageScores, location_fields
from osrag.errors import ClusterError, InputError, ModelError
from osrag.names import state_index, visibility_filter
from osrag.rerank import Reranker
from osrag.settings import Settings

MAX_QUESTION_CHARS = 4000
FILTER_KEYS = (
    "category",
    "tenant",
    "acl",
    "doc_id",
    "kind",
    "updated_after",
    "updated_before",
    "include_archived",
)
MODES = ("hybrid", "bm25", "bm25-std", "knn")
#: Upper bound on the analysed tokens the lexical head may ask for. Each token becomes a clause
#: on each of the four matched fields, and the cluster refuses a query with more than
#: ``indices.query.bool.max_clause_count`` (1024) clauses -- a legal 4000-character question
#: of short words would otherwise fail with a server error.
MAX_LEXICAL_TOKENS = 128


# ------------------------------------------------------------------ pure query building
def parse_filters(raw: Mapping[str, Any] | None) -> dict[str, Any]:
    """Validate filter keys and values; unknown keys are an error naming the key."""
    out: dict[str, Any] = {}
    if raw is not None and not isinstance(raw, Mapping):
        raise InputError(f"filters must be a mapping of key to value, got {type(raw).__name__}")
    for key, value in (raw or {}).items():
        if key not in FILTER_KEYS:
            raise InputError(f"unknown filter {key!r}; known: {', '.join(FILTER_KEYS)}")
        if key == "include_archived":
            out[key] = value if isinstance(value, bool) else str(value).lower() in ("1", "true", "yes")
        elif key in ("updated_after", "updated_before"):
            try:
                out[key] = dt.date.fromisoformat(str(value)[:10]).isoformat()
            except ValueError as exc:
                raise InputError(f"filter {key} wants a date YYYY-MM-DD, got {value!r}") from exc
        else:
            values = value if isinstance(value, (list, tuple)) else str(value).split(",")
            out[key] = [str(v).strip() for v in values if str(v).strip()]
            if not out[key]:
                raise InputError(f"filter {key} is empty")
    return out


def filter_clauses(alias: str, filters: Mapping[str, Any]) -> list[dict[str, Any]]:
    """Clauses every head gets: visibility, archive exclusion, user filters."""
    clauses: list[dict[str, Any]] = [visibility_filter(alias)]
    if not filters.get("include_archived", False):
        clauses.append({"bool": {"must_not": [{"term": {"archived": True}}]}})
    for key in ("category", "tenant", "doc_id", "kind"):
        if key in filters:
            clauses.append({"terms": {key: list(filters[key])}})
    if "acl" in filters:  # a chunk without ACL groups is public
        clauses.append(
            {
                "bool": {
                    "should": [
                        {"terms": {"acl": list(filters["acl"])}},
                        {"bool": {"must_not": [{"exists": {"field": "acl"}}]}},
                    ],
                    "minimum_should_match": 1,
                }
            }
        )
    rng = {}
    if "updated_after" in filters:
        rng["gte"] = filters["updated_after"]
    if "updated_before" in filters:
        rng["lte"] = filters["updated_before"]
    if rng:
        clauses.append({"range": {"updated_at": rng}})
    return clauses


def bm25_head(question: str, filters: list[dict[str, Any]], field: str = "text") -> dict[str, Any]:
    """Per-field matches in a bool.should (multi_match over graph analyzers can be rewritten wrongly)."""
    if field == "text.std":
        should: list[dict[str, Any]] = [{"match": {"text.std": {"query": question}}}]
    else:
        should = [
            {"match": {"text": {"query": question}}},
            {"match": {"breadcrumb": {"query": question, "boost": 0.6}}},
            {"match": {"title": {"query": question, "boost": 0.4}}},
            {"match": {"text.ident": {"query": question, "boost": 1.5}}},
        ]
    return {"bool": {"should": should, "minimum_should_match": 1, "filter": filters}}


_PART = re.compile(r"[^\W_]+")
_CASE_CHANGE = re.compile(r"(?<=[a-zа-яё])(?=[A-ZА-ЯЁ])")


def _lexical_cost(word: str) -> int:
    """Upper bound of the search tokens one whitespace word analyses to (original + delimiter parts)."""
    return 1 + len(_PART.findall(word)) + len(_CASE_CHANGE.findall(word))


def lexical_text(question: str, max_tokens: int = MAX_LEXICAL_TOKENS) -> str:
    """The question as the BM25 head sees it: verbatim unless it would exceed the clause limit.

    A longer question keeps its first distinct words up to ``max_tokens`` (words too big
    on their own are skipped); the kNN head still embeds the whole question.
    """
    words = question.split()
    if sum(_lexical_cost(w) for w in words) <= max_tokens:
        return question
    kept: list[str] = []
    seen: set[str] = set()
    spent = 0
    for w in words:
        key, cost = w.casefold(), _lexical_cost(w)
        if key in seen or spent + cost > max_tokens:
            continue
        seen.add(key)
        kept.append(w)
        spent += cost
    return " ".join(kept)


def knn_head(
    vector: Sequence[float], k: int, filters: list[dict[str, Any]], ef_search: int | None = None
) -> dict[str, Any]:
    """The kNN head; ``ef_search`` (never below k) widens the HNSW search per query."""
    head: dict[str, Any] = {
        "vector": [float(x) for x in vector],
        "k": k,
        "filter": {"bool": {"filter": filters}},
    }
    if ef_search:
        head["method_parameters"] = {"ef_search": max(int(ef_search), k)}
    return {"knn": {"embedding": head}}


def hybrid_body(
    question: str,
    vector: Sequence[float],
    depth: int,
    filters: list[dict[str, Any]],
    ef_search: int | None = None,
) -> dict[str, Any]:
    return {
        "size": depth,
        "query": {
            "hybrid": {
                "queries": [bm25_head(question, filters), knn_head(vector, depth, filters, ef_search)],
                "pagination_depth": depth,
            }
        },
        "_source": {"excludes": ["body"]},
    }


# ------------------------------------------------------------------ lexical relevance gate
_WORD = re.compile(r"[0-9A-Za-zА-Яа-яЁё_][0-9A-Za-zА-Яа-яЁё_.\-]*[0-9A-Za-zА-Яа-яЁё_]|[0-9A-Za-zА-Яа-яЁё]")
_GATE_STOP = frozenset(
    [
        "и",
        "в",
        "во",
        "на",
        "с",
        "со",
        "как",
        "а",
        "то",
        "все",
        "так",
        "но",
        "да",
        "к",
        "у",
        "же",
        "за",
        "бы",
        "по",
        "от",
        "из",
        "о",
        "об",
        "ли",
        "или",
        "для",
        "при",
        "что",
        "это",
        "этот",
        "эта",
        "эти",
        "какой",
        "какая",
        "какие",
        "какое",
        "где",
        "когда",
        "как",
        "ли",
        "мне",
        "меня",
        "мой",
        "моя",
        "мы",
        "вы",
        "вас",
        "нас",
        "их",
        "его",
        "ее",
        "я",
        "ты",
        "он",
        "она",
        "они",
        "есть",
        "был",
        "была",
        "было",
        "будет",
        "можно",
        "нужно",
        "надо",
        "ли",
        "если",
        "у",
        "также",
        "еще",
        "уже",
    ]
)


@functools.lru_cache(maxsize=65536)
def _stem(word: str) -> str:
    w = word.lower().replace("ё", "е")
    if any(ch.isdigit() for ch in w) or re.search(r"[a-z]", w):
        return w  # identifiers are matched whole
    return w[:5] if len(w) > 5 else w


def query_terms(question: str) -> list[str]:
    return sorted({_stem(w) for w in _WORD.findall(question) if w.lower() not in _GATE_STOP and len(w) > 1})


def _is_identifier(word: str) -> bool:
    """A code such as TEA15, LAMP-LIGHT-MINI, v2.3.1, E_PROMO_3004 (letters with digits, or joined Latin parts)."""
    has_digit = any(ch.isdigit() for ch in word)
    has_alpha = any(ch.isalpha() for ch in word)
    joined_latin = bool(re.search(r"[A-Za-z]", word) and re.search(r"[A-Za-z0-9][-_.][A-Za-z0-9]", word))
    return (has_digit and has_alpha) or joined_latin


def identifier_terms(question: str) -> list[str]:
    """The exact codes a question names, lowercased (matched whole, never stemmed)."""
    return sorted({w.lower() for w in _WORD.findall(question) if _is_identifier(w)})


def names_identifier(identifiers: Sequence[str], text: str) -> bool:
    """True when ``text`` contains one of the question's codes as a whole word (TEA15 is not TEA10)."""
    if not identifiers:
        return False
    have = {w.lower() for w in _WORD.findall(text)}
    return any(i in have for i in identifiers)


def term_coverage(terms: Sequence[str], text: str) -> float:
    """Share of the question's content terms (crudely stemmed) that the text contains."""
    if not terms:
        return 0.0
    have = {_stem(w) for w in _WORD.findall(text)}
    return sum(1 for t in terms if t in have) / len(terms)


# ------------------------------------------------------------------ the client
@dataclass
class Hit:
    chunk_id: str
    source: dict[str, Any]
    fused: float
    rank: int
    relevance: float = 0.0
    coverage: float = 0.0
    cosine: float = 0.0
    rerank: float | None = None
    truncated: bool = False
    ident_match: bool = False


@dataclass
class Retrieval:
    hits: list[Hit]
    index: str
    meta: dict[str, Any]
    timings_ms: dict[str, float] = field(default_factory=dict)
    vector: Any = None  # the question's embedding (hybrid and knn modes)
    notes: list[str] = field(default_factory=list)


class SearchClient:
    """What apps call: ``SearchClient(settings).search(question, budget_tokens=…, filters=…)``.

    Construction does no I/O; the cluster, the embedding model and the reranker
    are reached on the first search and reused afterwards.
    """

    def __init__(self, settings: Settings | None = None, *, reranker: Reranker | None = None) -> None:
        self.s = settings or Settings()
        self.admin = Admin(self.s)
        self.cluster = self.admin.cluster
        self._embedder: Embedder | None = None
        self._index_meta: tuple[str, dict[str, Any]] | None = None
        self._reranker = reranker
        # Relevance gate (see ``_is_relevant``). min_cosine was tuned on golden/ with navec:news-300d
        # (0.6 let off-topic filler through; 0.7 refused six more on-topic questions); it is a
        # per-model threshold, hence a setting.
        self.min_coverage = self.s.gate_min_coverage
        self.min_cosine = self.s.gate_min_cosine

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
    ) -> Retrieval:
        """Candidates only (used by ``search`` and by eval to compare heads and fusions)."""
        question = validate_question(question)
        if mode not in MODES:
            raise InputError(f"unknown retrieval mode {mode!r}; known: {', '.join(MODES)}")
        depth = self.s.candidate_depth if depth is None else depth
        if isinstance(depth, bool) or not isinstance(depth, int) or not 1 <= depth <= 1000:
            raise InputError(f"candidate depth must be between 1 and 1000, got {depth}")
        flt = filter_clauses(self.s.alias, parse_filters(filters))
        index, meta = self._target()
        timings: dict[str, float] = {}
        params: dict[str, Any] = {}
        vector = None
        if mode in ("hybrid", "knn"):
            t0 = time.perf_counter()
            vector = self.embedder().encode_query(question)
            timings["embed_query"] = (time.perf_counter() - t0) * 1000
        lexical = lexical_text(question)
        if mode == "hybrid":
            body = hybrid_body(lexical, vector, depth, flt, self.s.hnsw_ef_search)
            params["search_pipeline"] = pipeline or self.admin.pipeline_name(self.s.fusion)
        elif mode == "knn":
            body = {
                "size": depth,
                "query": knn_head(vector, depth, flt, self.s.hnsw_ef_search),
                "_source": {"excludes": ["body"]},
            }
        else:
            body = {
                "size": depth,
                "query": bm25_head(lexical, flt, "text.std" if mode == "bm25-std" else "text"),
                "_source": {"excludes": ["body"]},
            }
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
            if not _missing_index(exc, state_index(self.s.alias)):
                raise
            resp = {"hits": {"hits": []}}
            notes.append(f"nothing has been ingested into {self.s.alias} yet")
        timings["retrieve"] = (time.perf_counter() - t0) * 1000
        hits = [
            Hit(
                chunk_id=h["_source"].get("chunk_id", h["_id"]),
                source=h["_source"],
                fused=float(h["_score"] or 0.0),
                rank=i + 1,
            )
            for i, h in enumerate(resp["hits"]["hits"])
        ]
        return Retrieval(hits, index, meta, timings, vector=vector, notes=notes)

    # -- parent-child: the whole section a passage came from
    def section(self, section_id: str) -> list[Passage]:
        """The visible chunks of a section and of its direct subsections, in document order.

        A passage carries ``section_id`` and ``parent_section_id``; an app that needs more
        context than one chunk asks for the section instead of raising the budget.
        """
        if not section_id or not isinstance(section_id, str):
            raise InputError("section id is empty")
        index, _ = self._target()
        flt = [
            visibility_filter(self.s.alias),
            {
                "bool": {
                    "should": [
                        {"term": {"section_id": section_id}},
                        {"term": {"parent_section_id": section_id}},
                    ],
                    "minimum_should_match": 1,
                }
            },
        ]
        body = {
            "size": 1000,
            "query": {"bool": {"filter": flt}},
            "sort": [{"ordinal": "asc"}],
            "_source": {"excludes": ["embedding"]},
        }
        try:
            resp = self.cluster.call("section", self.cluster.client.search, index=index, body=body)
        except ClusterError as exc:
            if _missing_index(exc, state_index(self.s.alias)):
                return []
            raise
        out = []
        for rank, h in enumerate(resp["hits"]["hits"], start=1):
            src = h["_source"]
            out.append(
                Passage(
                    chunk_id=src.get("chunk_id", h["_id"]),
                    doc_id=src.get("doc_id", ""),
                    title=src.get("title", ""),
                    heading_path=list(src.get("heading_path") or []),
                    source=src.get("source", ""),
                    section_id=src.get("section_id"),
                    parent_section_id=src.get("parent_section_id"),
                    kind=src.get("kind", "text"),
                    text=src.get("text", ""),
                    tokens=int(src.get("token_count", 0)),
                    rank=rank,
                    start=src.get("start"),
                    end=src.get("end"),
                    **location_fields(src),
                )
            )
        return out

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
        selection: SelectionConfig | None = None,
    ) -> Envelope:
        """The minimal material sufficient to answer ``question`` within the budget, or say so."""
        t_start = time.perf_counter()
        budget = self.s.budget_tokens if budget_tokens is None else budget_tokens
        if isinstance(budget, bool) or not isinstance(budget, int) or budget <= 0:
            raise InputError(f"token budget must be a positive integer, got {budget!r}")
        parsed_filters = parse_filters(filters)
        ret = self.retrieve(question, depth=depth, filters=parsed_filters)
        question = question.strip()
        timings = dict(ret.timings_ms)
        notes: list[str] = list(ret.notes)
        emb = self.embedder()
        qvec = ret.vector

        # Relevance gate (independent of the fused score, which is rank-based and always positive).
        terms = query_terms(question)
        idents = identifier_terms(question)
        cosines = _cosines(qvec, [h.source.get("embedding") for h in ret.hits])
        for h, cos in zip(ret.hits, cosines):
            text = h.source.get("text", "")
            h.coverage, h.cosine = term_coverage(terms, text), cos
            h.ident_match = names_identifier(idents, text)
            h.relevance = max(h.coverage, h.cosine, 1.0 if h.ident_match else 0.0)

        use_rerank = self.s.rerank if rerank is None else rerank
        info = RerankInfo(
            model=(self._reranker.model_name if self._reranker is not None else self.s.reranker_model)
            if use_rerank
            else None
        )
        ordered = list(ret.hits)
        if use_rerank and ordered:
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
        elif not use_rerank:
            info.note = "disabled by configuration"

        t0 = time.perf_counter()
        if not info.used and self.s.evidence_order:
            ordered = evidence_order(ordered)
        count = tokenizer or emb.count_tokens

        def cost(src: dict[str, Any]) -> int:
            # The index stores each chunk's count in the index model's own tokenizer; recount only
            # when the caller names another tokenizer (or the count is missing).
            stored = src.get("token_count")
            if tokenizer is None and isinstance(stored, int):
                return stored
            return int(count(src.get("text", "")))

        relevant_ids = self._relevant_ids(ordered)
        cands = []
        for pos, h in enumerate(ordered):
            vec = h.source.get("embedding")
            # Score for ordering: rank-derived so selection walks the final order.
            cands.append(
                Candidate(
                    chunk_id=h.chunk_id,
                    doc_id=h.source.get("doc_id", ""),
                    text=h.source.get("text", ""),
                    tokens=cost(h.source),
                    score=float(len(ordered) - pos),
                    kind=h.source.get("kind", "text"),
                    embedding=tuple(vec) if vec else None,
                    section_id=h.source.get("section_id"),
                )
            )
        gated = [c for c in cands if c.chunk_id in relevant_ids]
        cfg = selection or SelectionConfig(dup_cosine=self.s.dedup_cosine, dup_overlap=self.s.dedup_overlap)
        sel = select(gated, budget, cfg)
        timings["select"] = (time.perf_counter() - t0) * 1000
        env = self._envelope(
            question, budget, ret, ordered, sel, len(cands) - len(gated), info, parsed_filters, notes, timings
        )
        env.timings_ms["total"] = (time.perf_counter() - t_start) * 1000
        return env

    def _relevant_ids(self, hits: Sequence[Hit]) -> set[str]:
        """Absolute gate per hit, then a relative one: close to the best evidence found.

        The relative part is what keeps "minimal": once the best chunk covers most
        of the question, chunks that cover much less are not worth their tokens.
        """
        passing = [h for h in hits if self._is_relevant(h)]
        if not passing:
            return set()
        best_cov = max(h.coverage for h in passing)
        best_cos = max(h.cosine for h in passing)
        rc, rs = self.s.gate_relative_coverage, self.s.gate_relative_cosine
        return {
            h.chunk_id
            for h in passing
            if h.ident_match or h.coverage >= rc * best_cov or h.cosine >= rs * best_cos
        }

    def _is_relevant(self, h: Hit) -> bool:
        """Enough of the question's words, a close embedding, or an exact code the question names."""
        return h.coverage >= self.min_coverage or h.cosine >= self.min_cosine or h.ident_match

    def _envelope(
        self,
        question: str,
        budget: int,
        ret: Retrieval,
        ordered: list[Hit],
        sel: Selection,
        below: int,
        info: RerankInfo,
        filters: dict[str, Any],
        notes: list[str],
        timings: dict[str, float],
    ) -> Envelope:
        by_id = {h.chunk_id: h for h in ordered}
        passages = []
        for rank, c in enumerate(sel.selected, start=1):
            h = by_id[c.chunk_id]
            src = h.source
            passages.append(
                Passage(
                    chunk_id=c.chunk_id,
                    doc_id=c.doc_id,
                    title=src.get("title", ""),
                    heading_path=list(src.get("heading_path") or []),
                    source=src.get("source", ""),
                    section_id=src.get("section_id"),
                    parent_section_id=src.get("parent_section_id"),
                    kind=c.kind,
                    text=c.text,
                    tokens=c.tokens,
                    rank=rank,
                    start=src.get("start"),
                    end=src.get("end"),
                    **location_fields(src),
                    scores=StageScores(fused=h.fused, rerank=h.rerank, relevance=round(h.relevance, 4)),
                    via_reserved_slot=(sel.reserved_used == c.chunk_id),
                    rerank_truncated=h.truncated,
                )
            )
        left = [
            LeftOutItem(
                chunk_id=lo.candidate.chunk_id,
                doc_id=lo.candidate.doc_id,
                tokens=lo.candidate.tokens,
                reason=lo.reason if lo.reason in ("budget", "not_worth") else "budget",
            )
            for lo in sel.left_out_budget
        ]
        left += [
            LeftOutItem(
                chunk_id=lo.candidate.chunk_id,
                doc_id=lo.candidate.doc_id,
                tokens=lo.candidate.tokens,
                reason="duplicate",
                duplicate_of=lo.duplicate_of,
            )
            for lo in sel.duplicates
        ]
        if not passages and sel.left_out_budget:
            # Relevant material exists but no whole unit fits: that is a budgeted answer, not "nothing".
            status, message = (
                "budgeted",
                (
                    f"a budgeted selection: none of the {len(sel.left_out_budget)} relevant passage(s) fits "
                    f"{budget} tokens"
                ),
            )
        elif not passages:
            status, message = (
                "nothing_relevant",
                (
                    "no candidate passed the relevance threshold"
                    if ordered
                    else "the index returned no candidates"
                ),
            )
        elif sel.complete:
            status, message = "complete", "everything relevant that was found fits the budget"
        else:
            status, message = (
                "budgeted",
                (
                    f"a budgeted selection: {len(sel.left_out_budget)} relevant passage(s) did not fit {budget} tokens"
                ),
            )
        meta = ret.meta
        last = meta.get("last_ingest_at")
        age = None
        if last:
            try:
                age = (dt.datetime.now(dt.UTC) - dt.datetime.fromisoformat(last)).total_seconds()
            except (TypeError, ValueError):  # unparsable or without a timezone
                age = None
        return Envelope(
            question=question,
            status=status,
            message=message,
            budget_tokens=budget,
            spent_tokens=sel.spent,
            passages=passages,
            left_out=left,
            left_out_for_budget=len(sel.left_out_budget),
            duplicates_dropped=len(sel.duplicates),
            below_threshold=below,
            candidates=len(ordered),
            reserved_slot_used=sel.reserved_used,
            fusion=self.s.fusion,
            rerank=info,
            filters=filters,
            freshness=Freshness(
                alias=self.s.alias,
                index=ret.index,
                embedding_model=meta.get("embedding_model"),
                dimension=meta.get("dimension"),
                last_ingest_at=last,
                age_seconds=age,
            ),
            timings_ms={k: round(v, 2) for k, v in timings.items()},
            notes=notes,
        )


def _cosines(qvec: Any, vectors: Sequence[Sequence[float] | None]) -> list[float]:
    """Cosine of the (normalised) question vector with each stored (normalised) vector; 0 when absent."""
    import numpy as np

    out = [0.0] * len(vectors)
    if qvec is None:
        return out
    q = np.asarray(qvec, dtype=np.float32)
    rows = [i for i, v in enumerate(vectors) if v and len(v) == len(q)]
    if rows:
        m = np.asarray([vectors[i] for i in rows], dtype=np.float32)
        for i, c in zip(rows, (m @ q).tolist()):
            out[i] = float(c)
    return out


def evidence_order(hits: Sequence[Hit]) -> list[Hit]:
    """Reorder fused candidates by how much of the question each one evidently answers.

    Without a cross-encoder, the question's term coverage, the embedding cosine and
    an exact code match are the best per-candidate evidence; the fused rank stays in
    as a prior and breaks ties. Weights measured on golden/ (see golden/report).
    """
    n = max(len(hits), 1)

    def score(pos: int, h: Hit) -> float:
        return 2.0 * h.coverage + h.cosine + (1.0 if h.ident_match else 0.0) + (n - pos) / n

    ranked = sorted(enumerate(hits), key=lambda p: (-score(*p), p[0]))
    return [h for _, h in ranked]


def validate_question(question: Any) -> str:
    if not isinstance(question, str):
        raise InputError(f"question must be text, got {type(question).__name__}")
    q = question.strip()
    if not q:
        raise InputError("question is empty")
    if len(q) > MAX_QUESTION_CHARS:
        raise InputError(f"question is {len(q)} characters long; the limit is {MAX_QUESTION_CHARS}")
    return q


def _missing_index(exc: ClusterError, index: str) -> bool:
    """True when the cluster refused a search because ``index`` does not exist (404 index_not_found)."""
    cause = exc.__cause__
    if getattr(cause, "status_code", None) != 404:
        return False
    info = getattr(cause, "info", None)
    text = str(info) if info is not None else str(cause)
    return "index_not_found" in text and f"[{index}]" in text
