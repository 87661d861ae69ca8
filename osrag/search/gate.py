"""The relevance gate and the evidence order (used when no cross-encoder scores the candidates).

Whether a candidate evidently answers the question, independent of the fused score (which
is rank-based and always positive): how much of the question's IDF-weighted terms it
contains, the cosine of its stored embedding with the question's, and whether it names an
exact code the question names.

The terms are the index's own, and the evidence rides on the search request itself, so a
steady-state search is one round trip:

- the question's terms are what the installed ``ru_search`` analyzer makes of its words
  (``_analyze``, asked only for words this client has not seen on this index: the analyzer's
  tokenizer splits on whitespace and its filters work token by token, so a word's terms do
  not depend on its neighbours, and ``WordTerms`` keeps them);
- each term's document frequency (hence its IDF) comes from a ``global`` ``filters``
  aggregation in the search request (``evidence_aggs``), asked only for terms whose count
  this client does not hold for the index's current generation (``DocFreqs``): the
  aggregation visits every document, so its cost grows with the index, and a repeated term
  need not pay it again until an ingest changes the counts;
- which of those terms each candidate holds comes back as the hit's ``matched_queries``:
  one named ``term`` probe per term, with boost 0 so it never changes a score, inside the
  BM25 head (``probe_clauses``), whose ``match`` on the same field already matches every
  document a probe matches, so the candidate set is unchanged.

No Python copy of the analyzer is kept here, so the gate can never drift from what BM25
matched. Everything here is pure: request pieces, ``parse_*`` readers, ``annotate`` fills
the hits, ``relevant_ids``/``evidence_order`` decide and order.
"""

from __future__ import annotations

import bisect
import math
import re
import threading
import time
from collections import OrderedDict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from osrag.search.candidates import Candidate
from osrag.search.query import identifier_terms
from osrag.search.variants import TYPO_QUERY_NAME
from osrag.vocabulary import POLICIES

#: The analyzed field whose terms are compared, and the analyzer the question goes through
#: (the field's search analyzer: the same tokens the BM25 head matched with).
FIELD = "text"
QUESTION_ANALYZER = "ru_search"
_LATIN = re.compile(r"[a-z]")


def idf(doc_freq: int, doc_count: int) -> float:
    """BM25's IDF (Lucene's form, always > 0): rare terms weigh more, a term in every chunk little."""
    return math.log(1.0 + (doc_count - doc_freq + 0.5) / (doc_freq + 0.5))


@dataclass(frozen=True)
class Analysis:
    """The question's terms with their IDF weights, and each candidate text's set of terms.

    ``required_codes``: the question's codes an answer must hold (``osrag.search.codes.required_codes``); None when
    the index was not asked (then every Latin code is, as before the index was asked).
    """

    weights: Mapping[str, float]
    texts: tuple[frozenset[str], ...]
    doc_count: int = 0
    required_codes: tuple[str, ...] | None = None


#: Prefix of the probes' query names (``matched_queries`` also lists other named queries).
PROBE_PREFIX = "osrag.term:"
#: The aggregation that carries the terms' document frequencies.
DF_AGG = "osrag_df"
#: At most this many distinct terms are probed and weighed: the lexical head already has up to
#: 4 x ``MAX_LEXICAL_TOKENS`` clauses and the cluster refuses more than 1024 in one query.
MAX_TERMS = 256


def question_words(lexical: str) -> list[str]:
    """The distinct whitespace-separated words of the question the BM25 head saw (the analyzer's
    tokenizer is ``whitespace``), in order."""
    return list(dict.fromkeys(lexical.split()))


def analyze_body(words: Sequence[str]) -> dict[str, Any]:
    """One ``_analyze`` body for ``words`` (joined by single spaces, so offsets map back to them)."""
    return {"analyzer": QUESTION_ANALYZER, "text": " ".join(words)}


def parse_analyze(resp: Mapping[str, Any], words: Sequence[str]) -> dict[str, tuple[str, ...]]:
    """word -> its terms, from the answer to ``analyze_body(words)``; a stop word gets no terms.

    Tokens are attributed by offset (the char filters preserve length, so offsets point into
    the joined text).
    """
    starts: list[int] = []
    pos = 0
    for w in words:
        starts.append(pos)
        pos += len(w) + 1
    out: dict[str, list[str]] = {w: [] for w in words}
    for tok in resp.get("tokens") or []:
        i = bisect.bisect_right(starts, int(tok.get("start_offset", 0))) - 1
        if 0 <= i < len(words):
            term = str(tok.get("token", ""))
            if term and term not in out[words[i]]:
                out[words[i]].append(term)
    return {w: tuple(ts) for w, ts in out.items()}


class WordTerms:
    """word -> its ``ru_search`` terms, per index (a reindex may change the analyzer): a bounded,
    thread-safe LRU, so that a client stops asking ``_analyze`` once it has seen the words its
    users ask with."""

    def __init__(self, max_words: int = 50_000) -> None:
        self._max = max_words
        self._map: OrderedDict[tuple[str, str], tuple[str, ...]] = OrderedDict()
        self._lock = threading.Lock()

    def missing(self, index: str, words: Iterable[str]) -> list[str]:
        with self._lock:
            return [w for w in words if (index, w) not in self._map]

    def put(self, index: str, terms: Mapping[str, tuple[str, ...]]) -> None:
        with self._lock:
            for w, ts in terms.items():
                self._map[(index, w)] = ts
                self._map.move_to_end((index, w))
            while len(self._map) > self._max:
                self._map.popitem(last=False)

    def terms(self, index: str, words: Sequence[str]) -> list[str]:
        """The distinct terms of ``words`` in order (words not cached contribute none)."""
        out: dict[str, None] = {}
        with self._lock:
            for w in words:
                ts = self._map.get((index, w))
                if ts is not None:
                    self._map.move_to_end((index, w))
                    out.update(dict.fromkeys(ts))
        return list(out)[:MAX_TERMS]


def probe_terms(terms: Sequence[str], question: str) -> list[str]:
    """What each candidate is probed for: the question's terms and the codes it names."""
    return list(dict.fromkeys([*terms, *identifier_terms(question)]))[: MAX_TERMS + 16]


def probe_clauses(terms: Sequence[str]) -> list[dict[str, Any]]:
    """Named ``term`` probes on the gate's field, boost 0 (they never change a score)."""
    return [{"term": {FIELD: {"value": t, "boost": 0.0, "_name": PROBE_PREFIX + t}}} for t in terms]


def evidence_aggs(terms: Sequence[str]) -> dict[str, Any]:
    """Each term's document frequency over the whole index (``global``: not only the matches).

    The anonymous (list) form of ``filters``: buckets come back in the terms' order.
    """
    return {
        DF_AGG: {
            "global": {},
            "aggs": {"df": {"filters": {"filters": [{"term": {FIELD: t}} for t in terms]}}},
        }
    }


def matched_terms(hit: Candidate) -> frozenset[str]:
    """The probed terms a hit holds, from the named queries it matched."""
    return frozenset(n[len(PROBE_PREFIX) :] for n in hit.named if n.startswith(PROBE_PREFIX))


@dataclass(frozen=True)
class Freqs:
    """Document frequencies of some terms on one index, and the index's document count."""

    df: Mapping[str, int]
    doc_count: int


def parse_doc_freqs(resp: Mapping[str, Any], asked: Sequence[str]) -> Freqs:
    """The document frequencies of a search made with ``evidence_aggs(asked)``."""
    agg = (resp.get("aggregations") or {}).get(DF_AGG)
    if agg is None:
        raise ValueError(f"the search response lacks the {DF_AGG} aggregation")
    buckets = list(((agg.get("df") or {}).get("buckets")) or [])
    if len(buckets) != len(asked):
        raise ValueError(f"document frequencies for {len(asked)} terms were asked, {len(buckets)} came back")
    return Freqs(
        {t: int(b.get("doc_count") or 0) for t, b in zip(asked, buckets)}, int(agg.get("doc_count") or 0)
    )


def analysis_of(terms: Sequence[str], freqs: Freqs, hits: Sequence[Candidate]) -> Analysis:
    """The ``Analysis`` of ``hits`` (in order, after any collapsing) for the question's ``terms``,
    whose document frequencies ``freqs`` holds."""
    matched = tuple(matched_terms(h) for h in hits)
    if not terms:  # a question of stop words only: nothing to weigh
        return Analysis(weights={}, texts=matched)
    missing = [t for t in terms if t not in freqs.df]
    if missing:
        raise ValueError(f"no document frequency for {', '.join(missing)}")
    n = freqs.doc_count
    return Analysis(weights={t: idf(freqs.df[t], n) for t in terms}, texts=matched, doc_count=n)


def parse_evidence(resp: Mapping[str, Any], terms: Sequence[str], hits: Sequence[Candidate]) -> Analysis:
    """The ``Analysis`` of a search made with ``evidence_aggs(terms)`` and the probes, for ``hits``
    (its hits, in order, after any collapsing)."""
    if not terms:
        return analysis_of(terms, Freqs({}, 0), hits)
    return analysis_of(terms, parse_doc_freqs(resp, terms), hits)


class DocFreqs:
    """term -> document frequency per index *generation* (the index name and its last ingest
    time), so a term asked again costs no aggregation until an ingest changes the counts.

    A bounded, thread-safe LRU. An entry is also dropped after ``max_age_s``: writes that do not
    end an ingest (a delete, an ingest still running) move the counts without a new generation,
    and the gate's weights may lag them by at most that long.
    """

    def __init__(self, max_terms: int = 50_000, max_age_s: float = 300.0) -> None:
        self._max = max_terms
        self._max_age = max_age_s
        self._map: OrderedDict[tuple[str, str, str], tuple[int, float]] = OrderedDict()
        self._counts: dict[tuple[str, str], tuple[int, float]] = {}
        self._lock = threading.Lock()

    def known(self, index: str, generation: str, terms: Sequence[str]) -> tuple[dict[str, int], int | None]:
        """The cached frequencies among ``terms`` and the cached document count (None: ask all)."""
        now = time.monotonic()
        with self._lock:
            count = self._counts.get((index, generation))
            if count is None or now - count[1] > self._max_age:
                return {}, None
            out: dict[str, int] = {}
            for t in terms:
                got = self._map.get((index, generation, t))
                if got is not None and now - got[1] <= self._max_age:
                    self._map.move_to_end((index, generation, t))
                    out[t] = got[0]
            return out, count[0]

    def put(self, index: str, generation: str, freqs: Freqs) -> None:
        now = time.monotonic()
        with self._lock:
            if len(self._counts) > 64:  # generations of indices long gone
                self._counts.clear()
            self._counts[(index, generation)] = (freqs.doc_count, now)
            for t, df in freqs.df.items():
                self._map[(index, generation, t)] = (df, now)
                self._map.move_to_end((index, generation, t))
            while len(self._map) > self._max:
                self._map.popitem(last=False)


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


def cosines(qvec: Any, vectors: Sequence[Any]) -> list[float]:
    """Cosine of the (normalised) question vector with each stored (normalised) vector; 0 when absent."""
    import numpy as np

    out = [0.0] * len(vectors)
    if qvec is None:
        return out
    q = np.asarray(qvec, dtype=np.float32)
    rows = [i for i, v in enumerate(vectors) if v is not None and len(v) and len(v) == len(q)]
    if rows:
        m = np.asarray([vectors[i] for i in rows], dtype=np.float32)
        for i, c in zip(rows, (m @ q).tolist()):
            out[i] = float(c)
    return out


#: A term held by at least half of the index's chunks tells them apart no better than a coin: its
#: BM25 IDF is at most ln 2 (``idf(n / 2, n)``). Any rarer term of the question is a content term.
CONTENT_IDF = math.log(2.0)


def content_terms(weights: Mapping[str, float]) -> frozenset[str]:
    """The question's terms that say what it is about: rarer than half of the index's chunks."""
    return frozenset(t for t, w in weights.items() if w > CONTENT_IDF)


def cosine_of_score(score: float) -> float:
    """The cosine behind a k-NN score of a ``cosinesimil`` field on the lucene engine, whose
    score is ``(1 + cos) / 2`` (the space osrag's index template gives the vector field)."""
    return 2.0 * float(score) - 1.0


def engine_cosines(hits: Sequence[Candidate]) -> list[float | None]:
    """Each hit's cosine with the question from the engine's own dense score (the question was
    embedded in the search request, so this process has no vector): None for a hit the dense
    head did not find (it came from the BM25 head only)."""
    return [cosine_of_score(h.dense_score) if h.dense_score is not None else None for h in hits]


def annotate(
    question: str, analysis: Analysis, qvec: Any, hits: Sequence[Candidate], *, engine: bool = False
) -> None:
    """Fill each hit's coverage, cosine, identifier match, shared content term and relevance.

    ``analysis.texts`` is in the order of ``hits``. A code the question names (TEA15,
    LAMP-LIGHT-MINI) matches when the candidate's analyzed text holds it whole -- the index
    keeps the original of every identifier, so TEA15 never matches TEA10 -- and the code's
    split pieces add coverage only there (``coverage``).

    ``engine``: the cosines come from the engine (``engine_cosines``; ``qvec`` is None). A hit
    the dense head did not find has no measured cosine: it is not zero but at most the lowest
    cosine the dense head found (everything outside its top k is no closer than the k-th), and
    with no dense hit at all it is unknown (at most 1). ``cosine_at_most`` keeps that bound, so
    the gate never refuses on a cosine it did not see (``is_relevant``).
    """
    if len(analysis.texts) != len(hits):
        raise ValueError(f"{len(analysis.texts)} analyzed texts for {len(hits)} hits")
    if engine:
        measured = engine_cosines(hits)
        known = [c for c in measured if c is not None]
        ceiling = min(known) if known else 1.0
        for h, c in zip(hits, measured):
            h.cosine_at_most = None if c is not None else ceiling
        cos_list = [c if c is not None else 0.0 for c in measured]
    else:
        cos_list = cosines(qvec, [h.embedding for h in hits])
    codes = identifier_terms(question)
    # A question none of whose terms is rarer than half of the index (a small index on one subject)
    # has no term that tells chunks apart: absence of a rare term is then no evidence against a
    # chunk, and holding one of its terms is the lexical evidence there is.
    content = content_terms(analysis.weights) or frozenset(analysis.weights)
    parts = frozenset(code_part_weights(analysis.weights, codes))
    for h, terms, cos in zip(hits, analysis.texts, cos_list):
        h.coverage, h.cosine = coverage(analysis.weights, terms, codes), cos
        h.ident_match = any(c in terms for c in codes)
        # A code's pieces are evidence only beside the whole code, as in ``coverage``.
        # A word one edit away from one the question misspelt is a shared term too.
        h.shares_term = h.ident_match or not content.isdisjoint(terms - parts) or TYPO_QUERY_NAME in h.named
        h.relevance = max(h.coverage, h.cosine, 1.0 if h.ident_match else 0.0)


@dataclass(frozen=True)
class Gate:
    """What decides «relevant»: one rule, no per-corpus thresholds (``is_relevant``).

    ``floor``: the embedding model's cosine of text that cannot answer (``COSINE_FLOORS``, from
    ``osrag.evaluation.floors``). ``relative_*`` (the minimal policy only): close to the best
    evidence found.
    """

    floor: float
    relative_coverage: float = 0.0
    relative_cosine: float = 0.0
    policy: str = "recall"

    def __post_init__(self) -> None:
        if self.policy not in POLICIES:
            raise ValueError(f"unknown selection policy {self.policy!r}; known: {', '.join(POLICIES)}")


#: Per model family, the cosine a question reaches with text that cannot answer it: the 0.95
#: quantile of the off-topic pairs shipped in ``osrag/search/calibration/offtopic.jsonl``
#: (``osrag study floors MODEL``; not taken from any evaluation set).
COSINE_FLOORS: Mapping[str, float] = {"e5": 0.811, "navec": 0.732}
#: A model of no calibrated family: a cosine alone never makes a candidate relevant (1.0), a
#: shared content term or a named code still does.
UNKNOWN_FLOOR = 1.0


def cosine_floor(model: str | None) -> float:
    """The gate's cosine floor for an index pinned to ``model`` (``COSINE_FLOORS``)."""
    from osrag.model_defaults import model_family

    family = model_family(model)
    return COSINE_FLOORS[family] if family else UNKNOWN_FLOOR


def is_relevant(h: Candidate, floor: float) -> bool:
    """A content term of the question, a cosine above what unrelated text gets, or a code it names.

    A cosine that was not measured (``Candidate.cosine_at_most``) counts as passing when its
    bound reaches the floor: the gate refuses only on evidence it has seen."""
    unmeasured = h.cosine_at_most is not None and floor < UNKNOWN_FLOOR and h.cosine_at_most >= floor
    return h.shares_term or h.cosine >= floor or h.ident_match or unmeasured


def latin_codes(question: str) -> list[str]:
    """The question's codes with a Latin letter (TEA-MATCHA-30, v2.3.1): those never decline, so a
    chunk about one holds it verbatim (a Cyrillic "2-ярдовый" is a word form, not a code)."""
    return [c for c in identifier_terms(question) if _LATIN.search(c)]


#: Characters of program text: a question that quotes code (a task statement with its snippet)
#: names the asker's own identifiers, which no document need hold.
_CODE_SYNTAX = re.compile(r"[`(){}\[\]=;<>]|\n")


def quotes_code(question: str) -> bool:
    """Whether the question quotes program text (then a missing code decides nothing)."""
    return bool(_CODE_SYNTAX.search(question))


def deciding_codes(question: str, required: Sequence[str] | None) -> list[str]:
    """The codes whose absence from every candidate means «nothing relevant»: ``required`` (what
    the index says an answer must hold, ``codes.required_codes``; None: every Latin code), none
    when the question quotes code."""
    if quotes_code(question):
        return []
    return list(required) if required is not None else latin_codes(question)


def relevant_ids(hits: Sequence[Candidate], gate: Gate, codes: Sequence[str] = ()) -> set[str]:
    """The candidates worth delivering; empty means «nothing relevant».

    «Nothing relevant» only where the evidence forces it: ``codes`` (``deciding_codes``) name a
    thing the index lacks and no candidate holds any of them -- the lexical head asks for codes
    whole, so a chunk with one would be among the candidates; or no candidate shares a content
    term with the question, names its code, or is closer to it than text that cannot answer
    (``gate.floor``). ``recall`` delivers every candidate with such evidence; ``minimal`` only
    those close to the best evidence found (``relative_*`` of the best coverage or cosine), which
    is leaner and loses answers worded unlike the best chunk.
    """
    if codes and not any(h.ident_match for h in hits):
        return set()
    passing = [h for h in hits if is_relevant(h, gate.floor)]
    if not passing or gate.policy == "recall":
        return {h.chunk_id for h in passing}
    best_cov = max(h.coverage for h in passing)
    best_cos = max(h.cosine for h in passing)
    return {
        h.chunk_id
        for h in passing
        if h.ident_match
        or (best_cov > 0 and h.coverage >= gate.relative_coverage * best_cov)
        or (best_cos > 0 and h.cosine >= gate.relative_cosine * best_cos)
    }


def evidence_order(hits: Sequence[Candidate]) -> list[Candidate]:
    """Reorder fused candidates by how much of the question each one evidently answers.

    Without a cross-encoder, the question's term coverage, the embedding cosine and an
    exact code match are the best per-candidate evidence; the fused rank stays in as a
    prior and breaks ties.
    """
    n = max(len(hits), 1)

    def score(pos: int, h: Candidate) -> float:
        return 2.0 * h.coverage + h.cosine + (1.0 if h.ident_match else 0.0) + (n - pos) / n

    ranked = sorted(enumerate(hits), key=lambda p: (-score(*p), p[0]))
    return [h for _, h in ranked]
