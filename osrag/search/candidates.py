"""The read path's one candidate record, and how a search response becomes candidates.

A ``Candidate`` is made once per hit (``hits_of``) around the hit's ``ChunkSource`` and travels
through every stage unchanged in kind: the gate fills ``coverage``/``cosine``/``ident_match``/
``relevance`` (``osrag.search.gate.annotate``), the cross-encoder ``rerank``/``truncated``, and selection
its ``tokens`` (the cost in the budget's count) and ``score`` (its place in the final order) before
``osrag.search.budget.select`` walks the same objects. Only the envelope's ``Passage`` leaves the library.

Also here: what the response of a candidates search says beyond its hits (a partial answer, a
copy gone mid-request, a refused script, a missing index), read without a client.
"""

from __future__ import annotations

import base64
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from osrag.errors import ClusterError
from osrag.names import content_hash
from osrag.records import ChunkSource

__all__ = [
    "TRANSIENT_SHARD_FAILURES",
    "VECTOR_FIELD",
    "Candidate",
    "decode_vector",
    "distinct_hits",
    "hits_of",
    "missing_index",
    "scripts_refused",
    "shards_failed_transiently",
    "shards_missing",
]

#: The script field that brings each candidate's stored vector back (``osrag.search.query.VECTOR_SCRIPT``).
VECTOR_FIELD = "osrag_vector"


@dataclass(slots=True, eq=False)
class Candidate:
    """One retrieved chunk and the scores the stages add to it (mutable: each stage fills its own)."""

    source: ChunkSource
    fused: float
    rank: int
    relevance: float = 0.0
    coverage: float = 0.0
    cosine: float = 0.0
    rerank: float | None = None
    truncated: bool = False
    ident_match: bool = False
    #: It holds one of the question's content terms (``osrag.search.gate.content_terms``).
    shares_term: bool = False
    #: The names of the named queries it matched (the gate's term probes among them).
    named: frozenset[str] = frozenset()
    #: The score the engine gave it under the dense head when that head was a named ``neural``
    #: clause (``osrag.search.query.DENSE_QUERY_NAME``); None when the head did not find it.
    dense_score: float | None = None
    #: Its cosine was not measured (the engine embedded the question and the dense head did not
    #: find it): the most it can be (``osrag.search.gate.annotate``); None when ``cosine`` is measured.
    cosine_at_most: float | None = None
    #: Its cost in the budget tokenizer's count and its selection score (set by ``ranking``).
    tokens: int = 0
    score: float = 0.0

    @property
    def chunk_id(self) -> str:
        return self.source.chunk_id

    @property
    def doc_id(self) -> str:
        return self.source.doc_id

    @property
    def text(self) -> str:
        return self.source.text

    @property
    def kind(self) -> str:
        return self.source.kind

    @property
    def section_id(self) -> str | None:
        return self.source.section_id

    @property
    def token_count(self) -> int | None:
        """The count the index stored at ingest (in its model's tokenizer), if any."""
        return self.source.token_count

    @property
    def embedding(self) -> np.ndarray | None:
        """The stored vector (a float32 array), None when the chunk has none."""
        vec = self.source.embedding
        return vec if vec is not None and vec.size else None


def decode_vector(value: str | Sequence[float]) -> np.ndarray:
    """A ``VECTOR_SCRIPT`` value as a float32 array: base64 of little-endian float32, read in place
    (no list of Python floats: the gate and selection work on arrays); a list of numbers, as an
    older script sent it, becomes the same array."""
    if not isinstance(value, str):
        return np.asarray(value, dtype=np.float32)
    raw = base64.b64decode(value, validate=True)
    if len(raw) % 4:
        raise ValueError(f"a vector's base64 decodes to {len(raw)} bytes, not a whole number of float32")
    return np.frombuffer(raw, dtype="<f4")


def _vector_of(h: Mapping[str, Any]) -> np.ndarray | None:
    """A hit's vector when it came by ``VECTOR_FIELD`` (else ``ChunkSource.of`` reads ``_source``)."""
    got = (h.get("fields") or {}).get(VECTOR_FIELD)
    return decode_vector(got[0]) if got and got[0] is not None else None


def hits_of(resp: Mapping[str, Any], dense_name: str | None = None) -> list[Candidate]:
    """A search response's hits as candidates, in the order the cluster ranked them; with
    ``dense_name``, each one's score under that named query (asked with
    ``include_named_queries_score``, which makes ``matched_queries`` a map of name to score)."""
    out = []
    for i, h in enumerate((resp.get("hits") or {}).get("hits") or ()):
        matched = h.get("matched_queries") or ()
        dense = matched.get(dense_name) if dense_name and isinstance(matched, Mapping) else None
        out.append(
            Candidate(
                ChunkSource.of(h["_source"], chunk_id=h["_id"], embedding=_vector_of(h)),
                fused=float(h["_score"] or 0.0),
                rank=i + 1,
                named=frozenset(matched),
                dense_score=float(dense) if dense is not None else None,
            )
        )
    return out


def shards_missing(resp: Mapping[str, Any]) -> str | None:
    """A note when the cluster answered from only some shards (it still says 200: a shard with no
    copy left, or one failing on every copy), so a partial candidate list is never taken silently
    for the whole one; None when every shard answered."""
    shards = resp.get("_shards") or {}
    failed = int(shards.get("failed") or 0)
    if failed <= 0:
        return None
    total = int(shards.get("total") or 0)
    reasons = sorted(
        {
            str((f.get("reason") or {}).get("type") or (f.get("reason") or {}).get("reason") or "unknown")
            for f in shards.get("failures") or []
            if isinstance(f, Mapping)
        }
    )
    why = f" ({', '.join(reasons)})" if reasons else ""
    return f"partial answer: {failed} of {total} shards failed{why}; candidates they hold are missing"


#: Shard failures that say a copy went away mid-request (a node stopping or restarting), not that
#: the query is wrong: the cluster routes the same search to the shard's other copy when asked again.
TRANSIENT_SHARD_FAILURES = frozenset(
    {
        "node_disconnected_exception",
        "node_not_connected_exception",
        "node_closed_exception",
        "connect_transport_exception",
        "send_request_transport_exception",
        "no_shard_available_action_exception",
    }
)


def shards_failed_transiently(resp: Mapping[str, Any]) -> bool:
    """True when some shards failed and every failure is a copy going away (worth one more ask)."""
    shards = resp.get("_shards") or {}
    if int(shards.get("failed") or 0) <= 0:
        return False
    types = {
        str((f.get("reason") or {}).get("type") or "")
        for f in shards.get("failures") or []
        if isinstance(f, Mapping)
    }
    return bool(types) and types <= TRANSIENT_SHARD_FAILURES


def distinct_hits(hits: list[Candidate], depth: int) -> list[Candidate]:
    """The fallback where the server cannot collapse: the best hit of each content hash (computed
    from the text when the chunk has none), re-numbered, cut to ``depth``. The caller asks the
    server for more than ``depth`` so the cut still comes after the collapse."""
    seen: set[str] = set()
    out: list[Candidate] = []
    for h in hits:
        key = h.source.content_hash or content_hash(h.source.text)
        if key in seen:
            continue
        seen.add(key)
        h.rank = len(out) + 1
        out.append(h)
        if len(out) >= depth:
            break
    return out


def failed_as_a_node_went_away(exc: BaseException) -> bool:
    """True when a whole search failed with a 5xx ``search_phase_execution_exception`` and every
    failure it names is a copy going away (a node stopping mid-request: seen as a 500 whose phase
    lost its shards). A search is read-only, so one more ask is safe; a query the cluster refuses
    is a 400, or names a failure of another kind, and is not asked again."""
    cause = exc.__cause__
    if getattr(cause, "status_code", None) not in (500, 503):
        return False
    info = getattr(cause, "info", None)
    err = info.get("error") if isinstance(info, Mapping) else None
    if not isinstance(err, Mapping) or err.get("type") != "search_phase_execution_exception":
        return False
    named: set[str] = set()
    for f in err.get("failed_shards") or []:
        if isinstance(f, Mapping):
            named.add(str((f.get("reason") or {}).get("type") or ""))
    for r in err.get("root_cause") or []:
        if isinstance(r, Mapping) and r.get("type") != "search_phase_execution_exception":
            named.add(str(r.get("type") or ""))
    caused = err.get("caused_by")
    if isinstance(caused, Mapping):
        named.add(str(caused.get("type") or ""))
    named.discard("")
    return named <= TRANSIENT_SHARD_FAILURES


def scripts_refused(exc: ClusterError) -> bool:
    """True when the cluster refused a search because it does not run inline scripts
    (``script.allowed_types`` without ``inline``, or painless not allowed in that context)."""
    cause = exc.__cause__
    if getattr(cause, "status_code", None) not in (400, 500):
        return False
    info = getattr(cause, "info", None)
    text = (str(info) if info is not None else str(cause)).lower()
    return "cannot execute" in text and "script" in text


def missing_index(exc: ClusterError, index: str) -> bool:
    """True when the cluster refused a search because ``index`` does not exist (404 index_not_found)."""
    cause = exc.__cause__
    if getattr(cause, "status_code", None) != 404:
        return False
    info = getattr(cause, "info", None)
    text = str(info) if info is not None else str(cause)
    return "index_not_found" in text and f"[{index}]" in text
