"""Rank and select: from retrieved (gated, possibly reranked) hits to the envelope.

A pure step -- no cluster, no model -- so the whole "what does the caller get" logic
(evidence order, the relevance gate, the token budget, duplicates, the status and its
message) is unit-tested from hand-made hits. ``SearchClient.search`` does the I/O
around it: retrieval, the question's embedding, the cross-encoder.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

from osrag.budget import Candidate, Selection, SelectionConfig, select
from osrag.envelope import Envelope, Freshness, LeftOutItem, Passage, RerankInfo, StageScores, location_fields
from osrag.errors import InputError
from osrag.gate import POLICIES, Gate, cosine_defaults, evidence_order, latin_codes, relevant_ids
from osrag.names import age_seconds
from osrag.query import Hit
from osrag.settings import Settings


def passage(src: Mapping[str, Any], rank: int, **extra: Any) -> Passage:
    """The one mapping of a chunk's ``_source`` to a ``Passage`` (``extra`` overrides or adds)."""
    fields: dict[str, Any] = {
        "chunk_id": src.get("chunk_id", ""),
        "doc_id": src.get("doc_id", ""),
        "title": src.get("title", ""),
        "heading_path": list(src.get("heading_path") or []),
        "source": src.get("source", ""),
        "section_id": src.get("section_id"),
        "parent_section_id": src.get("parent_section_id"),
        "kind": src.get("kind", "text"),
        "text": src.get("text", ""),
        "tokens": int(src.get("token_count", 0)),
        "rank": rank,
        "start": src.get("start"),
        "end": src.get("end"),
        **location_fields(src),
    }
    fields.update(extra)
    return Passage(**fields)


def freshness(alias: str, index: str, meta: Mapping[str, Any]) -> Freshness:
    """What the answer was read from, and how long ago that index was last written."""
    last = meta.get("last_ingest_at")
    return Freshness(
        alias=alias,
        index=index,
        embedding_model=meta.get("embedding_model"),
        dimension=meta.get("dimension"),
        last_ingest_at=last,
        age_seconds=age_seconds(last),
    )


def rank_and_select(
    question: str,
    hits: Sequence[Hit],
    *,
    budget: int,
    settings: Settings,
    fresh: Freshness,
    count_tokens: Callable[[str], int],
    use_stored_counts: bool = True,
    rerank: RerankInfo | None = None,
    selection: SelectionConfig | None = None,
    policy: str | None = None,
    filters: Mapping[str, Any] | None = None,
    notes: Sequence[str] = (),
    timings: Mapping[str, float] | None = None,
    required_codes: Sequence[str] | None = None,
) -> Envelope:
    """The minimal material sufficient to answer ``question`` within ``budget``, or say so.

    ``hits`` are in the final order when ``rerank.used``; otherwise in fused order, and
    reordered by evidence here under the ``minimal`` policy (best evidence first, then the
    relative cut) or, under ``recall``, only with ``settings.evidence_order``. Each hit must already
    carry the gate's coverage/cosine/identifier scores (``gate.annotate``). A chunk's cost is
    the count the index stored in its model's own tokenizer (``use_stored_counts``), else
    ``count_tokens`` of its text (a caller's own tokenizer, or a chunk without a count).
    ``policy`` (default ``settings.selection``) is how the gate keeps candidates: ``recall``
    or ``minimal`` (see ``gate.relevant_ids``); the envelope names it.
    """
    policy = settings.selection if policy is None else policy
    gate = gate_of(settings, policy, fresh.embedding_model)
    info = rerank or RerankInfo()
    ordered = list(hits)
    if not info.used and (policy == "minimal" or settings.evidence_order):
        ordered = evidence_order(ordered)

    def cost(src: Mapping[str, Any]) -> int:
        stored = src.get("token_count")
        if use_stored_counts and isinstance(stored, int):
            return stored
        return int(count_tokens(src.get("text", "")))

    # The codes an answer must hold: those the index vouches for (gate.required_codes), or, when
    # the index was not asked, every Latin code of the question.
    codes = list(required_codes) if required_codes is not None else latin_codes(question)
    keep = relevant_ids(ordered, gate, codes)
    # The question names a code and no candidate holds it: say so (gate.relevant_ids' first rule).
    missing = codes if not any(h.ident_match for h in ordered) else []
    cands = [
        Candidate(
            chunk_id=h.chunk_id,
            doc_id=h.source.get("doc_id", ""),
            text=h.source.get("text", ""),
            tokens=cost(h.source),
            # Rank-derived so that selection walks the final order.
            score=float(len(ordered) - pos),
            kind=h.source.get("kind", "text"),
            embedding=_vector(h.source.get("embedding")),
            section_id=h.source.get("section_id"),
        )
        for pos, h in enumerate(ordered)
    ]
    gated = [c for c in cands if c.chunk_id in keep]
    cfg = selection or SelectionConfig(dup_cosine=settings.dedup_cosine, dup_overlap=settings.dedup_overlap)
    sel = select(gated, budget, cfg)
    status, message = _status(sel, budget, bool(ordered), missing)
    by_id = {h.chunk_id: h for h in ordered}
    passages = [
        passage(
            by_id[c.chunk_id].source,
            rank,
            chunk_id=c.chunk_id,
            doc_id=c.doc_id,
            kind=c.kind,
            text=c.text,
            tokens=c.tokens,
            scores=StageScores(
                fused=by_id[c.chunk_id].fused,
                rerank=by_id[c.chunk_id].rerank,
                relevance=round(by_id[c.chunk_id].relevance, 4),
            ),
            via_reserved_slot=(sel.reserved_used == c.chunk_id),
            rerank_truncated=by_id[c.chunk_id].truncated,
        )
        for rank, c in enumerate(sel.selected, start=1)
    ]
    return Envelope(
        question=question,
        status=status,
        message=message,
        budget_tokens=budget,
        spent_tokens=sel.spent,
        passages=passages,
        left_out=_left_out(sel),
        left_out_for_budget=len(sel.left_out_budget),
        duplicates_dropped=len(sel.duplicates),
        below_threshold=len(cands) - len(gated),
        candidates=len(ordered),
        reserved_slot_used=sel.reserved_used,
        fusion=settings.fusion,
        selection=policy,
        rerank=info,
        filters=dict(filters or {}),
        freshness=fresh,
        timings_ms={k: round(v, 2) for k, v in (timings or {}).items()},
        notes=list(notes),
    )


def _vector(value: Any) -> Any:
    """A candidate's stored vector as selection takes it: a float32 array from the query path (kept
    as it is), a list from ``_source`` (made a tuple by ``Candidate``); None when absent or empty."""
    if value is None or not len(value):
        return None
    return value


def gate_of(settings: Settings, policy: str, model: str | None = None) -> Gate:
    """The relevance gate's thresholds from the settings, for one selection policy.

    Cosines are on the embedding model's own scale: unless set explicitly, the ``model``'s
    family's own thresholds apply (``gate.cosine_defaults``: e5's), else the settings' defaults.
    """
    if policy not in POLICIES:
        raise InputError(f"unknown selection policy {policy!r}; known: {', '.join(POLICIES)}")
    family = cosine_defaults(model)
    given = settings.model_fields_set
    return Gate(
        min_coverage=settings.gate_min_coverage,
        min_cosine=family[0] if family and "gate_min_cosine" not in given else settings.gate_min_cosine,
        keep_coverage=settings.gate_keep_coverage,
        keep_cosine=family[1] if family and "gate_keep_cosine" not in given else settings.gate_keep_cosine,
        relative_coverage=settings.gate_relative_coverage,
        relative_cosine=settings.gate_relative_cosine,
        policy=policy,
    )


def _left_out(sel: Selection) -> list[LeftOutItem]:
    left = [
        LeftOutItem(
            chunk_id=lo.candidate.chunk_id,
            doc_id=lo.candidate.doc_id,
            tokens=lo.candidate.tokens,
            reason=lo.reason if lo.reason in ("budget", "not_worth") else "budget",
        )
        for lo in sel.left_out_budget
    ]
    return left + [
        LeftOutItem(
            chunk_id=lo.candidate.chunk_id,
            doc_id=lo.candidate.doc_id,
            tokens=lo.candidate.tokens,
            reason="duplicate",
            duplicate_of=lo.duplicate_of,
        )
        for lo in sel.duplicates
    ]


def _status(
    sel: Selection, budget: int, any_candidates: bool, missing_codes: Sequence[str] = ()
) -> tuple[Any, str]:
    """The envelope's status and its one-line message."""
    if not sel.selected and sel.left_out_budget:
        # Relevant material exists but no whole unit fits: that is a budgeted answer, not "nothing".
        return "budgeted", (
            f"a budgeted selection: none of the {len(sel.left_out_budget)} relevant passage(s) fits {budget} tokens"
        )
    if not sel.selected:
        if any_candidates and missing_codes:
            return (
                "nothing_relevant",
                f"no candidate holds {', '.join(missing_codes)}, which the question names",
            )
        return "nothing_relevant", (
            "no candidate passed the relevance threshold"
            if any_candidates
            else "the index returned no candidates"
        )
    if sel.complete:
        return "complete", "everything relevant that was found fits the budget"
    return "budgeted", (
        f"a budgeted selection: {len(sel.left_out_budget)} relevant passage(s) did not fit {budget} tokens"
    )
