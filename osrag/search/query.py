"""Query building: the question and filters as OpenSearch request bodies (``osrag.search.candidates``
reads the responses).

Pure functions (no client). Candidates come from ONE native ``hybrid`` query through the
alias's search pipeline (the fusion the settings name): a BM25 head that is a ``bool.should`` of per-field
``match`` queries (chunk text, breadcrumb, title and the whole-identifier subfield, so the
user's own wording always takes part and exact codes survive) and a kNN head on the
question's embedding. Filters and the visibility clause apply to both heads -- inside the
kNN query as an efficient filter, so the graph search is not starved by a post-filter.
User text only ever goes into ``match`` queries, which do not parse query syntax.
"""

from __future__ import annotations

import datetime as dt
import functools
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from osrag.access import Principal, access_clauses
from osrag.errors import InputError
from osrag.names import visibility_filter
from osrag.search.candidates import VECTOR_FIELD
from osrag.search.variants import variant_clauses
from osrag.vocabulary import RETRIEVAL_MODES

MAX_QUESTION_CHARS = 4000
FILTER_KEYS = (
    "category",
    "tenant",
    "doc_id",
    "kind",
    "updated_after",
    "updated_before",
    "include_archived",
)
#: ``meta.KEY`` filters a front-matter key osrag does not read itself (osrag.ingest.frontmatter keeps them).
META_PREFIX = "meta."
META_KEY = re.compile(r"^[^\s.][^\s]{0,199}$")
MODES = RETRIEVAL_MODES
#: Filters in one request at most: each is a clause on every head, and the cluster refuses a query
#: past ``indices.query.bool.max_clause_count`` with a server error instead of naming the input.
MAX_FILTERS = 64
#: Upper bound on the analysed tokens the lexical head may ask for. Each token becomes a clause
#: on each of the five matched fields, and the cluster refuses a query with more than
#: ``indices.query.bool.max_clause_count`` (1024) clauses -- a legal 4000-character question
#: of short words would otherwise fail with a server error.
MAX_LEXICAL_TOKENS = 128


def parse_filters(raw: Mapping[str, Any] | None) -> dict[str, Any]:
    """Validate filter keys and values; an unknown key or a value of the wrong kind is an error naming it.

    Nothing is coerced: ``include_archived`` is a boolean (or the CLI's ``true``/``false``),
    dates are ISO dates, the other filters are names (text, or a list of texts). Access is
    not a filter: who may see what comes from the principal (``osrag.access``).
    """
    out: dict[str, Any] = {}
    if raw is not None and not isinstance(raw, Mapping):
        raise InputError(f"filters must be a mapping of key to value, got {type(raw).__name__}")
    if raw is not None and len(raw) > MAX_FILTERS:
        raise InputError(f"{len(raw)} filters given; at most {MAX_FILTERS} in one search")
    for key, value in (raw or {}).items():
        if key == "acl":
            raise InputError(
                "acl is not a filter: pass the caller's groups as principal=Principal(groups=[...]) "
                "(CLI: --group G)"
            )
        if isinstance(key, str) and key.startswith(META_PREFIX):
            if not META_KEY.match(key[len(META_PREFIX) :]):
                raise InputError(f"filter {key[:80]!r}: meta.KEY wants a front-matter key name after 'meta.'")
        elif key not in FILTER_KEYS:
            raise InputError(f"unknown filter {key!r}; known: {', '.join(FILTER_KEYS)}, meta.KEY")
        if key == "include_archived":
            out[key] = _strict_bool(key, value)
        elif key in ("updated_after", "updated_before"):
            out[key] = _iso_date(key, value)
        else:
            values = value.split(",") if isinstance(value, str) else value
            if not isinstance(values, (list, tuple)) or not all(isinstance(v, str) for v in values):
                raise InputError(f"filter {key} wants text or a list of texts, got {value!r}")
            out[key] = [v.strip() for v in values if v.strip()]
            if not out[key]:
                raise InputError(f"filter {key} is empty")
    return out


def _strict_bool(key: str, value: Any) -> bool:
    """A real boolean, or the words ``true``/``false`` (what a CLI ``key=value`` carries)."""
    if isinstance(value, bool):
        return value
    if isinstance(value, str) and value.strip().lower() in ("true", "false"):
        return value.strip().lower() == "true"
    raise InputError(f"filter {key} wants true or false, got {value!r}")


def _iso_date(key: str, value: Any) -> str:
    """An ISO date (a datetime's date part) as ``YYYY-MM-DD``; anything else names the filter."""
    if isinstance(value, dt.datetime):
        return value.date().isoformat()
    if isinstance(value, dt.date):
        return value.isoformat()
    if isinstance(value, str):
        text = value.strip()
        try:
            return dt.date.fromisoformat(text).isoformat()
        except ValueError:
            try:
                return dt.datetime.fromisoformat(text).date().isoformat()
            except ValueError:
                pass
    raise InputError(f"filter {key} wants a date YYYY-MM-DD, got {value!r}")


def filter_clauses(alias: str, filters: Mapping[str, Any], principal: Principal) -> list[dict[str, Any]]:
    """Clauses every head gets: visibility, archive exclusion, what ``principal`` may see, user filters."""
    clauses: list[dict[str, Any]] = [visibility_filter(alias), *access_clauses(principal)]
    if not filters.get("include_archived", False):
        clauses.append({"bool": {"must_not": [{"term": {"archived": True}}]}})
    for key in ("category", "tenant", "doc_id", "kind"):
        if key in filters:
            clauses.append({"terms": {key: list(filters[key])}})
    for key in sorted(k for k in filters if k.startswith(META_PREFIX)):  # front-matter keys (flat_object)
        clauses.append({"terms": {key: list(filters[key])}})
    rng = {}
    if "updated_after" in filters:
        rng["gte"] = filters["updated_after"]
    if "updated_before" in filters:
        rng["lte"] = filters["updated_before"]
    if rng:
        clauses.append({"range": {"updated_at": rng}})
    return clauses


#: Field weights of the BM25 head: breadcrumb and title carry what a page is about, below the text
#: that answers (checked on every dev set, golden/report/). The exact-form ``text.ident`` subfield
#: is asked only for the identifier-looking tokens of the question (TEA15, LAMP-LIGHT-MINI, v2.3.1):
#: the whole question there would give every exact Russian word form a bonus over its other forms,
#: which the stemmed field exists to treat alike.
BREADCRUMB_BOOST = 0.6
TITLE_BOOST = 0.4
IDENT_BOOST = 1.5
#: The chunk's document context (``osrag.ingest.context``; empty unless a contextualizer was on at ingest):
#: matched below title and breadcrumb, as it repeats them with the document's lead sentence
#: (golden/report/contextual.md).
CONTEXT_BOOST = 0.3

_WORD = re.compile(r"[0-9A-Za-zА-Яа-яЁё_][0-9A-Za-zА-Яа-яЁё_.\-]*[0-9A-Za-zА-Яа-яЁё_]|[0-9A-Za-zА-Яа-яЁё]")
_JOINED_LATIN = re.compile(r"[A-Za-z0-9][-_.][A-Za-z0-9]")


def _is_identifier(word: str) -> bool:
    """A code such as TEA15, LAMP-LIGHT-MINI, v2.3.1, E_PROMO_3004 (letters with digits, or joined Latin parts).

    This is a question-shape test, not a copy of the analyzer: what the code matches is decided by
    the index's ``ident`` subfield.
    """
    has_digit = any(ch.isdigit() for ch in word)
    has_alpha = any(ch.isalpha() for ch in word)
    joined_latin = bool(re.search(r"[A-Za-z]", word) and _JOINED_LATIN.search(word))
    return (has_digit and has_alpha) or joined_latin


def identifier_terms(question: str) -> list[str]:
    """The exact codes a question names, lowercased (matched whole, never stemmed)."""
    return list(_identifier_terms(question))


@functools.lru_cache(maxsize=4096)
def _identifier_terms(question: str) -> tuple[str, ...]:
    # One search asks this of its question several times (the BM25 head, the probes, the gate,
    # the annotation, the envelope's status): computed once.
    return tuple(sorted({w.lower() for w in _WORD.findall(question) if _is_identifier(w)}))


def bm25_head(
    question: str, filters: list[dict[str, Any]], field: str = "text", probes: Sequence[dict[str, Any]] = ()
) -> dict[str, Any]:
    """Per-field matches in a bool.should (multi_match over graph analyzers can be rewritten wrongly).

    ``field`` picks a variant for evaluation: ``text`` is the shipped head, ``text.std`` the
    standard analyzer alone, ``text-only`` the stemmed text field alone (the eval's baseline).
    ``probes`` are extra should clauses that never change the matches or the scores (the
    relevance gate's named, zero-boost term probes, ``osrag.search.gate.probe_clauses``).
    """
    if field == "text.std":
        should: list[dict[str, Any]] = [{"match": {"text.std": {"query": question}}}]
    elif field == "text-only":
        should = [{"match": {"text": {"query": question}}}]
    else:
        should = [
            {"match": {"text": {"query": question}}},
            {"match": {"breadcrumb": {"query": question, "boost": BREADCRUMB_BOOST}}},
            {"match": {"title": {"query": question, "boost": TITLE_BOOST}}},
            {"match": {"context": {"query": question, "boost": CONTEXT_BOOST}}},
        ]
        # The question re-read (wrong layout, translit) on the same fields, misspelt words fuzzy;
        # nothing for an ordinary question (osrag.search.variants).
        fields = {f: c.get("boost", 1.0) for m in should for f, c in m["match"].items()}
        should += variant_clauses(question, fields)
        codes = identifier_terms(question)
        if codes:
            should.append({"match": {"text.ident": {"query": " ".join(codes), "boost": IDENT_BOOST}}})
    return {"bool": {"should": [*should, *probes], "minimum_should_match": 1, "filter": filters}}


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


#: The name of the dense head when the engine embeds the question (``neural_head``): with
#: ``include_named_queries_score`` each hit the head found carries its score under this name in
#: ``matched_queries``, which is how the gate gets the cosines without the question's vector.
DENSE_QUERY_NAME = "osrag_dense"


@dataclass(frozen=True)
class EngineEmbedded:
    """The question, to be embedded by the engine in the search request itself (a ``neural``
    clause naming a deployed ml-commons ``model_id``) instead of sent as a vector."""

    model_id: str
    text: str


def neural_head(
    question: EngineEmbedded, k: int, filters: list[dict[str, Any]], ef_search: int | None = None
) -> dict[str, Any]:
    """The dense head as a ``neural`` clause: the engine embeds ``question.text`` with its model
    (an asymmetric model's query prefix added by ml-commons, as for ``_predict`` with content type
    query) and searches the k nearest, named ``DENSE_QUERY_NAME`` so its scores come back."""
    head: dict[str, Any] = {
        "query_text": question.text,
        "model_id": question.model_id,
        "k": k,
        "filter": {"bool": {"filter": filters}},
        "_name": DENSE_QUERY_NAME,
    }
    if ef_search:
        head["method_parameters"] = {"ef_search": max(int(ef_search), k)}
    return {"neural": {"embedding": head}}


def dense_head(
    question: Sequence[float] | EngineEmbedded,
    k: int,
    filters: list[dict[str, Any]],
    ef_search: int | None = None,
) -> dict[str, Any]:
    """The kNN head on a vector, or the ``neural`` head when the engine embeds the question."""
    if isinstance(question, EngineEmbedded):
        return neural_head(question, k, filters, ef_search)
    return knn_head(question, k, filters, ef_search)


def hybrid_body(
    question: str,
    vector: Sequence[float] | EngineEmbedded,
    depth: int,
    filters: list[dict[str, Any]],
    ef_search: int | None = None,
    probes: Sequence[dict[str, Any]] = (),
) -> dict[str, Any]:
    return {
        "size": depth,
        "query": {
            "hybrid": {
                "queries": [
                    bm25_head(question, filters, probes=probes),
                    dense_head(vector, depth, filters, ef_search),
                ],
                "pagination_depth": depth,
            }
        },
        "_source": {"excludes": ["body"]},
    }


_LONE_SURROGATE = re.compile("[\ud800-\udfff]")


def validate_question(question: Any) -> str:
    if not isinstance(question, str):
        raise InputError(f"question must be text, got {type(question).__name__}")
    q = question.strip()
    if not q:
        raise InputError("question is empty")
    bad = _LONE_SURROGATE.search(q)
    if bad:  # "\ud800" from an app, or a non-UTF-8 byte on the command line (decoded as U+DCxx)
        raise InputError(
            f"question is not valid Unicode text: lone surrogate U+{ord(bad.group()):04X} at position "
            f"{bad.start()} (a non-UTF-8 byte?)"
        )
    if len(q) > MAX_QUESTION_CHARS:
        raise InputError(f"question is {len(q)} characters long; the limit is {MAX_QUESTION_CHARS}")
    return q


#: The script field that brings each candidate's stored vector back, read from the vector's
#: doc values. The same numbers as the vector in ``_source`` at a fraction of the cost: 3.x
#: rebuilds a vector in ``_source`` per hit from the vector data ("derived source"), so asking for
#: it there is the slow path (bench/results/profile.md). The floats travel as base64 of their
#: little-endian float32 bytes: exactly the stored values, fewer bytes than JSON numbers, and
#: decoded by numpy at once rather than parsed number by number. A chunk without a vector gets
#: ``null``.
VECTOR_SCRIPT = {
    # Read and encoded at once: the k-NN doc values hand out one reused array, so a vector kept
    # past its hit would be the one read last (seen on 3.6.0 and 2.19.1).
    "source": (
        "if (!doc.containsKey(params.f) || doc[params.f].size() == 0) { return null; } "
        "float[] v = doc[params.f].getValue(); byte[] b = new byte[v.length * 4]; "
        "for (int i = 0; i < v.length; ++i) { int x = Float.floatToIntBits(v[i]); int k = 4 * i; "
        "b[k] = (byte) x; b[k + 1] = (byte) (x >> 8); b[k + 2] = (byte) (x >> 16); "
        "b[k + 3] = (byte) (x >> 24); } "
        "return Base64.getEncoder().encodeToString(b);"
    ),
    "params": {"f": "embedding"},
}
#: How candidates' vectors travel: ``doc`` (the script field), ``source`` (``_source``, for a
#: cluster that refuses inline scripts) or ``none`` (not at all: a caller that only ranks).
VECTOR_WAYS = ("doc", "source", "none")


def candidates_body(
    mode: str,
    question: str,
    vector: Sequence[float] | EngineEmbedded | None,
    depth: int,
    filters: list[dict[str, Any]],
    ef_search: int | None = None,
    probes: Sequence[dict[str, Any]] = (),
    aggs: Mapping[str, Any] | None = None,
    vectors: str = "doc",
    source_fields: Sequence[str] | None = None,
) -> dict[str, Any]:
    """The request body of one retrieval ``mode`` (``question`` already passed ``lexical_text``).

    ``probes`` and ``aggs`` carry the relevance gate's evidence (``osrag.search.gate``) on the same
    request; the probes ride on the BM25 head (hybrid mode only: the others are not gated).
    ``vectors`` says how each candidate's stored vector comes back (``VECTOR_WAYS``); either
    way ``candidates.hits_of`` puts it in the candidate's ``source.embedding``.
    ``source_fields``: only these of ``_source`` (``records.PASSAGE_FIELDS`` for ``search()``);
    None: the whole stored chunk but its ``body`` (``retrieve()``).
    """
    if vectors not in VECTOR_WAYS:
        raise ValueError(f"vectors must be one of {VECTOR_WAYS}, got {vectors!r}")
    if mode == "hybrid":
        assert vector is not None
        body = hybrid_body(question, vector, depth, filters, ef_search, probes)
    elif mode == "knn":
        assert vector is not None
        body = {"size": depth, "query": dense_head(vector, depth, filters, ef_search)}
    else:
        field = {"bm25-std": "text.std", "bm25-text": "text-only"}.get(mode, "text")
        body = {"size": depth, "query": bm25_head(question, filters, field)}
    if vectors == "doc":
        body["_source"] = {"excludes": ["body", "embedding"]}
        body["script_fields"] = {VECTOR_FIELD: {"script": dict(VECTOR_SCRIPT)}}
    elif vectors == "none":
        body["_source"] = {"excludes": ["body", "embedding"]}
    else:
        body["_source"] = {"excludes": ["body"]}
    if source_fields is not None:
        wanted = [*source_fields, "embedding"] if vectors == "source" else list(source_fields)
        body["_source"] = {"includes": wanted}
    if aggs:
        body["aggs"] = dict(aggs)
    return body


def section_body(section_id: str, filters: list[dict[str, Any]]) -> dict[str, Any]:
    """The chunks of a section and of its direct subsections that ``filters`` (``filter_clauses``:
    visibility, archive, access) let through, in document order."""
    flt = [
        *filters,
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
    return {
        "size": 1000,
        "query": {"bool": {"filter": flt}},
        "sort": [{"ordinal": "asc"}],
        "_source": {"excludes": ["embedding"]},
    }


def vectors_in_source(body: Mapping[str, Any]) -> dict[str, Any]:
    """``body`` (a ``candidates_body``) asking for the vectors in ``_source`` instead of by script."""
    out = {k: v for k, v in body.items() if k != "script_fields"}
    wanted = (body.get("_source") or {}).get("includes")
    out["_source"] = {"includes": [*wanted, "embedding"]} if wanted else {"excludes": ["body"]}
    return out


def collapsed(body: dict[str, Any]) -> dict[str, Any]:
    """``body`` with candidates of equal ``content_hash`` collapsed by the server, BEFORE the
    cut to ``size`` (the hybrid query supports ``collapse`` from OpenSearch 3.1): copies of one
    text then take one candidate slot. Only for an index whose every chunk carries the hash --
    the server groups chunks without it together."""
    return {**body, "collapse": {"field": "content_hash"}}
