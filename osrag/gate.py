"""The relevance gate and the evidence order (used when no cross-encoder scores the candidates).

Whether a candidate evidently answers the question, independent of the fused score (which
is rank-based and always positive): how much of the question's IDF-weighted terms it
contains, the cosine of its stored embedding with the question's, and whether it names an
exact code the question names.

The terms are the index's own: one ``_mtermvectors`` request (``termvectors_body``) returns
the question as the installed ``ru_search`` analyzer sees it (stop words gone, stemmed,
identifiers kept whole and split), each of those terms' document frequency in the index
(hence its IDF), and the ``ru_index`` terms of every candidate's text. No Python copy of the
analyzer is kept here, so the gate can never drift from what BM25 matched.

Everything but that one request is pure: ``parse_termvectors`` reads the response,
``annotate`` fills the hits, ``relevant_ids``/``evidence_order`` decide and order.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from osrag.query import Hit, identifier_terms

#: The analyzed field whose terms are compared, and the analyzer the question goes through
#: (the field's search analyzer: the same tokens the BM25 head matched with).
FIELD = "text"
QUESTION_ANALYZER = "ru_search"
POLICIES = ("recall", "minimal")
_LATIN = re.compile(r"[a-z]")


def termvectors_body(question: str, texts: Sequence[str]) -> dict[str, Any]:
    """One ``_mtermvectors`` body: the question (``ru_search``, with term statistics), then each text.

    Texts are sent as artificial documents, so the candidates' terms come from the field's
    index analyzer without needing their ``_id``s; positions and offsets are not asked for.
    """
    plain = {"fields": [FIELD], "positions": False, "offsets": False, "payloads": False}
    first = {
        **plain,
        "doc": {FIELD: question},
        "per_field_analyzer": {FIELD: QUESTION_ANALYZER},
        "term_statistics": True,
        "field_statistics": True,
    }
    rest = [{**plain, "doc": {FIELD: t}, "term_statistics": False, "field_statistics": False} for t in texts]
    return {"docs": [first, *rest]}


def idf(doc_freq: int, doc_count: int) -> float:
    """BM25's IDF (Lucene's form, always > 0): rare terms weigh more, a term in every chunk little."""
    return math.log(1.0 + (doc_count - doc_freq + 0.5) / (doc_freq + 0.5))


@dataclass(frozen=True)
class Analysis:
    """The question's terms with their IDF weights, and each candidate text's set of terms."""

    weights: Mapping[str, float]
    texts: tuple[frozenset[str], ...]
    doc_count: int = 0


def _terms(doc: Mapping[str, Any]) -> Mapping[str, Any]:
    return ((doc.get("term_vectors") or {}).get(FIELD) or {}).get("terms") or {}


def parse_termvectors(resp: Mapping[str, Any], n_texts: int) -> Analysis:
    """Read a response to ``termvectors_body`` (question first, then ``n_texts`` texts)."""
    docs = list(resp.get("docs") or [])
    if len(docs) != n_texts + 1:
        raise ValueError(f"term vectors for {n_texts + 1} documents were asked, {len(docs)} came back")
    q = docs[0]
    stats = ((q.get("term_vectors") or {}).get(FIELD) or {}).get("field_statistics") or {}
    n = int(stats.get("doc_count") or 0)
    weights = {t: idf(int(v.get("doc_freq") or 0), n) for t, v in _terms(q).items()}
    return Analysis(weights=weights, texts=tuple(frozenset(_terms(d)) for d in docs[1:]), doc_count=n)


def term_coverage(weights: Mapping[str, float], terms: frozenset[str] | set[str]) -> float:
    """IDF-weighted share of the question's terms that a candidate contains (0 with no terms)."""
    total = sum(weights.values())
    if total <= 0.0:
        return 0.0
    return sum(w for t, w in weights.items() if t in terms) / total


def code_part_weights(weights: Mapping[str, float], codes: Sequence[str]) -> dict[str, float]:
    """The question's terms that are only pieces of a code it names (lamp, light of LAMP-LIGHT).

    The analyzer keeps a code whole and also splits it, so a near twin (LAMP-LIGHT-MINI) holds the
    pieces of LAMP-LIGHT without holding LAMP-LIGHT; those pieces are evidence only together with
    the whole code (``coverage``), or TEA10-style twins would pass as close to the best evidence.
    """
    return {t: w for t, w in weights.items() if t not in codes and any(t in c for c in codes)}


def coverage(
    weights: Mapping[str, float], terms: frozenset[str] | set[str], codes: Sequence[str] = ()
) -> float:
    """``term_coverage``, where a code's pieces count only for a text that holds the whole code."""
    if not codes or any(c in terms for c in codes):
        return term_coverage(weights, terms)
    parts = code_part_weights(weights, codes)
    return term_coverage(weights, {t for t in terms if t not in parts})


def cosines(qvec: Any, vectors: Sequence[Sequence[float] | None]) -> list[float]:
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


def annotate(question: str, analysis: Analysis, qvec: Any, hits: Sequence[Hit]) -> None:
    """Fill each hit's coverage, cosine, identifier match and relevance (their best).

    ``analysis.texts`` is in the order of ``hits``. A code the question names (TEA15,
    LAMP-LIGHT-MINI) matches when the candidate's analyzed text holds it whole -- the index
    keeps the original of every identifier, so TEA15 never matches TEA10 -- and the code's
    split pieces add coverage only there (``coverage``).
    """
    if len(analysis.texts) != len(hits):
        raise ValueError(f"{len(analysis.texts)} analyzed texts for {len(hits)} hits")
    codes = identifier_terms(question)
    for h, terms, cos in zip(hits, analysis.texts, cosines(qvec, [h.source.get("embedding") for h in hits])):
        h.coverage, h.cosine = coverage(analysis.weights, terms, codes), cos
        h.ident_match = any(c in terms for c in codes)
        h.relevance = max(h.coverage, h.cosine, 1.0 if h.ident_match else 0.0)


@dataclass(frozen=True)
class Gate:
    """The thresholds that decide «relevant» (per embedding model: cosines are model-specific).

    ``min_*``: a candidate with this much evidence answers the question; when none has, the
    answer is «nothing relevant». ``keep_*`` (the recall policy): once something is relevant,
    a candidate is delivered if it has at least this much -- lower, so that a relevant chunk
    worded unlike the question is not dropped. ``relative_*`` (the minimal policy): close to
    the best evidence found.
    """

    min_coverage: float
    min_cosine: float
    keep_coverage: float = 0.0
    keep_cosine: float = 0.0
    relative_coverage: float = 0.0
    relative_cosine: float = 0.0
    policy: str = "recall"

    def __post_init__(self) -> None:
        if self.policy not in POLICIES:
            raise ValueError(f"unknown selection policy {self.policy!r}; known: {', '.join(POLICIES)}")


def is_relevant(h: Hit, min_coverage: float, min_cosine: float) -> bool:
    """Enough of the question's terms, a close embedding, or an exact code the question names."""
    return h.coverage >= min_coverage or h.cosine >= min_cosine or h.ident_match


def latin_codes(question: str) -> list[str]:
    """The question's codes with a Latin letter (TEA-MATCHA-30, v2.3.1): those never decline, so a
    chunk about one holds it verbatim (a Cyrillic "2-ярдовый" is a word form, not a code)."""
    return [c for c in identifier_terms(question) if _LATIN.search(c)]


def relevant_ids(hits: Sequence[Hit], gate: Gate, codes: Sequence[str] = ()) -> set[str]:
    """The candidates worth delivering; empty means «nothing relevant».

    ``codes`` are the question's ``latin_codes``: when it names one and no candidate holds
    it, the index has nothing on that code (the lexical head asks for codes whole, so a
    chunk with it would be among the candidates) -- «nothing relevant», whatever else matched.
    Both policies then ask whether any candidate passes the absolute gate (``min_*``).
    ``recall`` then keeps every candidate with the lower ``keep_*`` evidence (it only drops
    what shares neither words nor meaning with the question); ``minimal`` keeps the passing
    candidates close to the best evidence found (``relative_*`` of the best coverage or
    cosine), which is leaner and loses answers worded unlike the best chunk.
    """
    if codes and not any(h.ident_match for h in hits):
        return set()
    passing = [h for h in hits if is_relevant(h, gate.min_coverage, gate.min_cosine)]
    if not passing:
        return set()
    if gate.policy == "recall":
        return {h.chunk_id for h in hits if is_relevant(h, gate.keep_coverage, gate.keep_cosine)} | {
            h.chunk_id for h in passing
        }
    best_cov = max(h.coverage for h in passing)
    best_cos = max(h.cosine for h in passing)
    return {
        h.chunk_id
        for h in passing
        if h.ident_match
        or h.coverage >= gate.relative_coverage * best_cov
        or h.cosine >= gate.relative_cosine * best_cos
    }


def evidence_order(hits: Sequence[Hit]) -> list[Hit]:
    """Reorder fused candidates by how much of the question each one evidently answers.

    Without a cross-encoder, the question's term coverage, the embedding cosine and an
    exact code match are the best per-candidate evidence; the fused rank stays in as a
    prior and breaks ties.
    """
    n = max(len(hits), 1)

    def score(pos: int, h: Hit) -> float:
        return 2.0 * h.coverage + h.cosine + (1.0 if h.ident_match else 0.0) + (n - pos) / n

    ranked = sorted(enumerate(hits), key=lambda p: (-score(*p), p[0]))
    return [h for _, h in ranked]
