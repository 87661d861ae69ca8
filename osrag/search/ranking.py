"""Rank and select: from retrieved (gated, possibly reranked) hits to the envelope.

A pure step -- no cluster, no model -- so the whole "what does the caller get" logic
(evidence order, the relevance gate, the token budget, duplicates, the status and its
message) is unit-tested from hand-made hits. ``SearchClient.search`` does the I/O
around it: retrieval, the question's embedding, the cross-encoder.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any

from osrag.envelope import Envelope, Freshness, LeftOutItem, RerankInfo, StageScores, passage_of
from osrag.errors import InputError
from osrag.names import age_seconds
from osrag.records import IndexMeta
from osrag.search.budget import Selection, SelectionConfig, select
from osrag.search.candidates import Candidate
from osrag.search.gate import Gate, cosine_floor, deciding_codes, evidence_order, relevant_ids
from osrag.search.trimming import Trim, TrimConfig, evidence, trim
from osrag.vocabulary import POLICIES

if TYPE_CHECKING:
    from osrag.settings import Settings


def freshness(alias: str, index: str, meta: IndexMeta) -> Freshness:
    """What the answer was read from, and how long ago that index was last written."""
    return Freshness(
        alias=alias,
        index=index,
        embedding_model=meta.embedding_model,
        dimension=meta.dimension,
        last_ingest_at=meta.last_ingest_at,
        age_seconds=age_seconds(meta.last_ingest_at),
    )


@dataclass(frozen=True)
class SelectionPolicy:
    """How candidates become an answer: the gate's thresholds, the selection policy, the budget
    walk's knobs. Built once from the settings (``from_settings``); a call's own policy name or
    walk knobs replace those (``with_overrides``)."""

    #: ``recall`` or ``minimal`` (see ``gate.relevant_ids``); the envelope names it.
    name: str = "recall"
    #: Reorder by evidence under ``recall`` too (``minimal`` always does, without a cross-encoder).
    evidence_order: bool = False
    #: The fusion the envelope reports.
    fusion: str = ""
    relative_coverage: float = 0.0
    relative_cosine: float = 0.0
    #: The gate's cosine floor; None: the index's model's own (``gate.cosine_floor``).
    cosine_floor: float | None = None
    walk: SelectionConfig = field(default_factory=SelectionConfig)
    #: Cut long passages to their evidence units before the walk (``osrag.search.trimming``).
    trim: bool = False
    trimming: TrimConfig = field(default_factory=TrimConfig)

    def __post_init__(self) -> None:
        if self.name not in POLICIES:
            raise InputError(f"unknown selection policy {self.name!r}; known: {', '.join(POLICIES)}")

    @classmethod
    def from_settings(cls, s: Settings) -> SelectionPolicy:
        """The policy the settings describe (a cosine floor set explicitly beats the model's)."""
        return cls(
            name=s.selection,
            evidence_order=s.evidence_order,
            fusion=str(s.fusion),
            relative_coverage=s.gate_relative_coverage,
            relative_cosine=s.gate_relative_cosine,
            cosine_floor=s.gate_cosine_floor,
            trim=s.trim_passages,
            trimming=TrimConfig(max_units=s.trim_units, keep_whole=s.trim_keep_whole),
        )

    def with_overrides(self, name: str | None = None, walk: SelectionConfig | None = None) -> SelectionPolicy:
        """This policy with a call's own policy name and walk knobs (None: keep this one's)."""
        if name is None and walk is None:
            return self
        return replace(self, name=self.name if name is None else name, walk=walk or self.walk)

    def gate(self, model: str | None) -> Gate:
        """The relevance gate for an index pinned to ``model``: cosines are on the model's own
        scale, so its floor applies unless one is set explicitly."""
        return Gate(
            floor=cosine_floor(model) if self.cosine_floor is None else self.cosine_floor,
            relative_coverage=self.relative_coverage,
            relative_cosine=self.relative_cosine,
            policy=self.name,
        )


def rank_and_select(
    question: str,
    candidates: Sequence[Candidate],
    budget: int,
    policy: SelectionPolicy,
    *,
    fresh: Freshness,
    count_tokens: Callable[[str], int],
    use_stored_counts: bool = True,
    rerank: RerankInfo | None = None,
    required_codes: Sequence[str] | None = None,
    filters: Mapping[str, Any] | None = None,
    notes: Sequence[str] = (),
    terms: Mapping[str, float] | None = None,
) -> Envelope:
    """The minimal material sufficient to answer ``question`` within ``budget``, or say so.

    ``candidates`` are in the final order when ``rerank.used``; otherwise in fused order, and
    reordered by evidence here under the ``minimal`` policy (best evidence first, then the
    relative cut) or, under ``recall``, only with ``policy.evidence_order``. Each must already
    carry the gate's coverage/cosine/identifier scores (``gate.annotate``). A chunk's cost is
    the count the index stored in its model's own tokenizer (``use_stored_counts``), else
    ``count_tokens`` of its text (a caller's own tokenizer, or a chunk without a count).
    ``required_codes``: the codes an answer must hold (``codes.required_codes``); None when the
    index was not asked, then every Latin code of the question is. ``terms``: the question's
    analyzed terms with their IDF weights (``gate.Analysis.weights``), which trimming looks for.
    """
    gate = policy.gate(fresh.embedding_model)
    info = rerank or RerankInfo()
    ordered = list(candidates)
    if not info.used and (policy.name == "minimal" or policy.evidence_order):
        ordered = evidence_order(ordered)
    codes = deciding_codes(question, required_codes)
    keep = relevant_ids(ordered, gate, codes)
    # The question names a code and no candidate holds it: say so (gate.relevant_ids' first rule).
    missing = codes if not any(c.ident_match for c in ordered) else []
    n = len(ordered)
    for pos, c in enumerate(ordered):
        stored = c.source.token_count
        c.tokens = stored if use_stored_counts and stored is not None else int(count_tokens(c.text))
        c.score = float(n - pos)  # rank-derived, so that selection walks the final order
    gated = [c for c in ordered if c.chunk_id in keep]
    trims = _trim_all(gated, budget, policy, terms, count_tokens) if policy.trim and terms else {}
    sel = select(gated, budget, policy.walk)
    status, message = _status(sel, budget, bool(ordered), missing)
    passages = [
        passage_of(
            c.source,
            rank,
            tokens=c.tokens,
            scores=StageScores(fused=c.fused, rerank=c.rerank, relevance=round(c.relevance, 4)),
            via_reserved_slot=(sel.reserved_used == c.chunk_id),
            rerank_truncated=c.truncated,
            **_trimmed_fields(trims.get(c.chunk_id)),
        )
        for rank, c in enumerate(sel.selected, start=1)
    ]
    n_trimmed = sum(p.trimmed for p in passages)
    if n_trimmed:
        notes = [
            *notes,
            f"{n_trimmed} passage(s) trimmed to the sentences that hold the question's terms "
            "(full_tokens: their whole cost; section() gives the whole text)",
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
        below_threshold=len(ordered) - len(gated),
        candidates=n,
        reserved_slot_used=sel.reserved_used,
        trimmed=n_trimmed,
        fusion=policy.fusion,
        selection=policy.name,
        rerank=info,
        filters=dict(filters or {}),
        freshness=fresh,
        notes=list(notes),
    )


#: How far past the budget candidates are still trimmed (a multiple of the budget): a trimmed
#: passage frees room that later candidates fill, so the walk reaches past the budget's whole
#: costs. Twice the budget: a shorter reach leaves the room trimming freed empty at small budgets,
#: where it matters most (docs/selection.md); a longer one only trims passages that cannot fit.
TRIM_REACH = 2.0


def _trim_all(
    gated: Sequence[Candidate],
    budget: int,
    policy: SelectionPolicy,
    terms: Mapping[str, float],
    count_tokens: Callable[[str], int],
) -> dict[str, Trim]:
    """Trim the gated candidates in walk order, charging each its trimmed cost (``c.tokens``).

    Only the candidates the walk can reach are cut: once ``TRIM_REACH`` times the budget is
    spoken for, the rest would be left out anyway and keep their whole cost (each cut is a count
    in the model's tokenizer).
    """
    found = evidence(list(terms))  # compiled once per search
    out: dict[str, Trim] = {}
    if found is None:
        return out
    best = gated[0] if gated else None
    if best is not None and best.tokens > budget:
        # The likeliest answer does not fit whole: cut it to the evidence that fits rather than let
        # the walk deliver lower-ranked passages in its place (kept whole otherwise, keep_whole).
        src = best.source
        t = trim(
            src.text,
            best.tokens,
            terms,
            found,
            count_tokens,
            heading_path=src.heading_path,
            title=src.title,
            kind=src.kind,
            config=policy.trimming,
            fit=budget,
        )
        if t is not None:
            out[best.chunk_id] = t
            best.tokens = t.tokens
    spoken = sum(c.tokens for c in gated[: policy.trimming.keep_whole])
    for c in gated[policy.trimming.keep_whole :]:
        if c.chunk_id in out:
            spoken += c.tokens
            continue
        if spoken > TRIM_REACH * budget:
            break
        src = c.source
        t = trim(
            src.text,
            c.tokens,
            terms,
            found,
            count_tokens,
            heading_path=src.heading_path,
            title=src.title,
            kind=src.kind,
            config=policy.trimming,
        )
        if t is not None:
            out[c.chunk_id] = t
            c.tokens = t.tokens
        spoken += c.tokens
    return out


def _trimmed_fields(t: Trim | None) -> dict[str, Any]:
    """A trimmed passage's own text and its whole cost; nothing for a whole one."""
    if t is None:
        return {}
    return {"text": t.text, "trimmed": True, "full_tokens": t.full_tokens}


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
