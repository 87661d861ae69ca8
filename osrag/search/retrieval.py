"""The pieces of one retrieval, each with one job and no I/O: check what was asked, read the
alias's mapping, gather the question's gate evidence into the request, build the request, read
the response. ``osrag.search.retrieval_steps.Retriever._retrieve`` strings them together around its
``Call``/``Work`` steps.
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from osrag.capabilities import Capabilities, adapt_search_body
from osrag.errors import InputError
from osrag.records import PASSAGE_FIELDS, IndexMeta
from osrag.search import gate
from osrag.search.candidates import Candidate, hits_of, shards_missing
from osrag.search.codes import code_aggs
from osrag.search.query import (
    DENSE_QUERY_NAME,
    MODES,
    EngineEmbedded,
    candidates_body,
    collapsed,
    lexical_text,
    validate_question,
)

__all__ = [
    "NO_EVIDENCE",
    "Ask",
    "QuestionEvidence",
    "Retrieval",
    "checked_ask",
    "read_response",
    "search_request",
]


@dataclass
class Retrieval:
    """What ``SearchClient.retrieve`` gives: the candidates in the cluster's order (or the
    collapsed order), the index they came from and its record, and how the search went."""

    hits: list[Candidate]
    index: str
    meta: IndexMeta
    timings_ms: dict[str, float] = field(default_factory=dict)
    vector: Any = None  # the question's embedding (hybrid and knn modes)
    notes: list[str] = field(default_factory=list)
    analysis: gate.Analysis | None = None  # the gate's evidence (when asked for)
    #: The engine embedded the question (a ``neural`` head): no ``vector`` here, each hit's
    #: cosine comes from its dense score (``gate.engine_cosines``).
    engine_embedded: bool = False
    #: The cross-encoder that ordered ``hits`` in the cluster (a search pipeline's ``rerank``
    #: processor), when one did: the model's name; and what to say when it could not.
    reranked_by: str | None = None
    rerank_note: str = ""


@dataclass(frozen=True)
class Ask:
    """One retrieval as asked, checked: the question, the BM25 head's text of it, the mode, the
    depth, the filter clauses (visibility, access, the user's filters), and whether the gate's
    evidence rides on the request."""

    question: str
    lexical: str
    mode: str
    depth: int
    filters: list[dict[str, Any]]
    pipeline: str | None = None
    evidence: bool = False
    #: Whether candidates bring their stored vectors (selection's duplicate test and the gate's
    #: cosine need them; a caller comparing heads may not).
    vectors: bool = True

    @property
    def embeds(self) -> bool:
        """Whether this mode needs the question's embedding."""
        return self.mode in ("hybrid", "knn")


def checked_ask(
    question: Any,
    mode: str,
    depth: int | None,
    filters: list[dict[str, Any]],
    *,
    default_depth: int,
    pipeline: str | None = None,
    evidence: bool = False,
    vectors: bool = True,
) -> Ask:
    """The ``Ask``, or an ``InputError`` naming what is wrong (before any request)."""
    q = validate_question(question)
    if mode not in MODES:
        raise InputError(f"unknown retrieval mode {mode!r}; known: {', '.join(MODES)}")
    depth = default_depth if depth is None else depth
    if isinstance(depth, bool) or not isinstance(depth, int) or not 1 <= depth <= 1000:
        raise InputError(f"candidate depth must be between 1 and 1000, got {depth}")
    if not isinstance(vectors, bool):
        raise InputError(f"vectors must be true or false, got {vectors!r}")
    return Ask(q, lexical_text(q), mode, depth, filters, pipeline, evidence, vectors)


@dataclass(frozen=True)
class QuestionEvidence:
    """The question's side of the relevance gate for one index generation: its ``ru_search``
    terms, the document frequencies this client already holds for them (``doc_count`` None: ask
    them all), and its Latin codes (``osrag.search.codes``)."""

    terms: tuple[str, ...] = ()
    known: Mapping[str, int] = field(default_factory=dict)
    doc_count: int | None = None
    codes: tuple[str, ...] = ()
    generation: str = ""
    #: False: the gate's evidence was not asked for (nothing rides on the request).
    on: bool = False

    @property
    def asked(self) -> list[str]:
        """The terms whose document frequency the request must bring (those not held)."""
        return (
            [t for t in self.terms if t not in self.known] if self.doc_count is not None else list(self.terms)
        )

    def probes(self, lexical: str) -> list[dict[str, Any]]:
        """The named zero-boost probes that tell which terms each candidate holds."""
        return gate.probe_clauses(gate.probe_terms(self.terms, lexical)) if self.on else []

    def aggs(self) -> dict[str, Any] | None:
        """The aggregations that bring the asked frequencies and what the index says of the codes."""
        asked = self.asked
        out = {
            **(gate.evidence_aggs(asked) if asked else {}),
            **(code_aggs(self.codes) if self.codes else {}),
        }
        return out or None


#: A retrieval without the gate's evidence (``retrieve``, the evaluation's heads).
NO_EVIDENCE = QuestionEvidence()


def search_request(
    ask: Ask,
    vector: Any,
    evidence: QuestionEvidence,
    *,
    caps: Capabilities,
    fetch: int,
    server_collapse: bool,
    ef_search: int | None,
    vectors: str,
    pipeline: str,
) -> tuple[dict[str, Any], dict[str, Any]]:
    """(body, params) of the candidates search: ``fetch`` candidates, collapsed by the server when
    asked, adapted to what the server supports, through ``pipeline`` in hybrid mode."""
    body = candidates_body(
        ask.mode,
        ask.lexical,
        vector,
        fetch,
        ask.filters,
        ef_search,
        probes=evidence.probes(ask.lexical),
        aggs=evidence.aggs(),
        vectors=vectors,
        # search() reads only what its passages show; retrieve() gives the whole stored chunk.
        source_fields=PASSAGE_FIELDS if ask.evidence else None,
    )
    if server_collapse:
        body = collapsed(body)
    body = adapt_search_body(body, caps)
    # No filter_path: the server's filtering of the answer costs more than the few fields it drops
    # save (bench/results/profile.md).
    params: dict[str, Any] = {}
    if ask.mode == "hybrid":
        params["search_pipeline"] = ask.pipeline or pipeline
    if isinstance(vector, EngineEmbedded):
        # Each hit's score under the named dense head comes back in matched_queries (the gate's
        # cosines: osrag.search.gate.engine_cosines).
        params["include_named_queries_score"] = "true"
    return body, params


def read_response(
    resp: Mapping[str, Any], timings: dict[str, float], notes: list[str], *, engine_embedded: bool = False
) -> list[Candidate]:
    """The candidates of a search response; the server's own time goes to ``timings`` (for the
    search record), a partial answer's note to ``notes``. ``engine_embedded``: the dense head was
    the named ``neural`` clause, whose score each hit it found carries."""
    if resp.get("took") is not None:
        timings["server_took"] = float(resp["took"])
    partial = shards_missing(resp)
    if partial:
        notes.append(partial)
    return hits_of(resp, DENSE_QUERY_NAME if engine_embedded else None)


def elapsed_ms(t0: float) -> float:
    """Milliseconds since ``t0`` (a ``time.perf_counter`` reading)."""
    return (time.perf_counter() - t0) * 1000
