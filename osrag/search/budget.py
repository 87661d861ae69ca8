"""Token-budget selection: turn a ranked candidate list into a prompt-sized answer.

The contract is not "the k most similar chunks" but "the minimal material that
answers the question within N tokens, and say so when it cannot". Selection is
therefore a knapsack walk over the ranking, and its result describes itself:
what was spent, what relevant material lost to the budget, what was dropped as
a duplicate, and whether the answer is *everything relevant* or *a budgeted
selection* -- or an explicit *nothing relevant* instead of weak filler.

Rules of :func:`select`, in the order they apply:

1. **Ranking.** Candidates are walked by ``score`` descending; ties keep input
   order (stable sort). ``chunk_id`` must be unique.
2. **Relevance is decided before selection** (the search's relevance gate,
   ``osrag.search.gate``): every candidate given is relevant. A candidate's *relative
   score* (used by rule 5) is ``(score - floor) / (best - floor)`` with ``floor =
   min(0, lowest score)`` over all candidates: for non-negative scores (RRF,
   cosine) this is ``score / best``; with negative scores (cross-encoder logits)
   it is plain min-max within the list. If all scores are equal every candidate
   has relative score 1.
3. **Duplicates are never charged.** Each relevant candidate is compared with
   the already selected ones by word 3-shingle containment (``>= dup_overlap``, see
   :func:`shingle_overlap`); not by embedding cosine, which puts sibling pages that
   answer different questions (golden's TEA10 and TEA15) at 0.95 and more. A duplicate is reported
   with the selected chunk it repeats (the best-ranked one) and costs nothing.
4. **Whole units only.** The walk never truncates a text (trimming a passage to whole
   sentences happens before it, ``osrag.search.trimming``, and sets its cost); a unit that does not fit is
   skipped and the walk goes on with the next ones (greedy knapsack). It is
   reported in ``left_out_budget`` with its token cost.
5. **Value per token** (``min_value_ratio > 0``). A candidate's value is its
   relative score (duplicates, the only units with zero marginal value, are
   already gone); value per token is ``value / max(tokens, 1)``. A candidate
   whose value per token is below ``min_value_ratio`` times that of the first
   unit admitted normally is left out with reason ``"not_worth"`` (also listed
   in ``left_out_budget``: it passed the relevance bar and lost on cost). This
   is a per-candidate skip rather than a hard stop, because rank order is not
   value-per-token order: one bulky unit must not end the walk for the small,
   useful ones behind it.
6. **Reserved slot for one large, essential unit.** ``reserve = floor(
   reserve_fraction * budget)`` tokens are held back. A candidate is *large* if
   ``tokens > large_unit_fraction * budget`` -- of any ``kind``: a long decision
   record or interface definition needs the slot as much as a table does, and
   ``kind`` is too coarse to decide what is essential. It is *essential* if it
   is among the first ``essential_rank`` relevant candidates. While such a unit
   is still ahead in the walk and the slot is free, ordinary admissions are
   capped at ``budget - reserve``. When the essential large unit comes up and
   either does not fit that cap or fails the value-per-token rule, it is
   admitted through the slot if it fits the whole budget (the slot then is
   used up: at most one unit gets it). As soon as no essential large unit is
   pending (all of them were seen, or the slot was used), the cap becomes the
   whole budget and units skipped under the lower cap are retried, in rank
   order, before the walk continues -- the unused reserve goes to the normal
   candidates. With ``reserve_fraction = 0`` there is no slot at all.
7. The budget is never exceeded.

``complete`` is True when every non-duplicate candidate was delivered (nothing in
``left_out_budget``); with no candidates it is vacuously True and ``nothing_relevant``
is the flag to read.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Protocol

from osrag import vocabulary
from osrag.search.duplicates import duplicate_pairs
from osrag.search.duplicates import words as _words

__all__ = [
    "KINDS",
    "LeftOut",
    "ScoredUnit",
    "Selection",
    "SelectionConfig",
    "Unit",
    "select",
    "shingle_overlap",
]

KINDS: frozenset[str] = frozenset(vocabulary.CHUNK_KINDS)
LEFT_OUT_REASONS: frozenset[str] = frozenset(vocabulary.LEFT_OUT_REASONS)
SHINGLE_SIZE = 3


class Unit(Protocol):
    """What :func:`select` reads of a candidate: the read path's ``osrag.search.candidates.Candidate``
    (walked as it is, no copy per chunk) or a ``ScoredUnit`` made by hand."""

    @property
    def chunk_id(self) -> str: ...
    @property
    def doc_id(self) -> str: ...
    @property
    def text(self) -> str: ...
    @property
    def tokens(self) -> int: ...
    @property
    def score(self) -> float: ...


@dataclass(frozen=True)
class ScoredUnit:
    """One retrievable unit with its real token cost and final relevance score (a ``Unit`` made
    by hand: tests, benchmarks and callers of :func:`select` outside the query path)."""

    chunk_id: str
    doc_id: str
    text: str
    tokens: int
    score: float
    kind: str = "text"
    section_id: str | None = None

    def __post_init__(self) -> None:
        if isinstance(self.tokens, bool) or not isinstance(self.tokens, int) or self.tokens < 0:
            raise ValueError(f"{self.chunk_id}: tokens must be an integer >= 0, got {self.tokens!r}")
        if not math.isfinite(self.score):
            raise ValueError(f"{self.chunk_id}: score must be finite, got {self.score!r}")
        if self.kind not in KINDS:
            raise ValueError(f"{self.chunk_id}: kind must be one of {sorted(KINDS)}, got {self.kind!r}")


@dataclass(frozen=True)
class SelectionConfig:
    """Knobs of :func:`select`; the module docstring gives the exact rules."""

    dup_overlap: float = 0.8
    reserve_fraction: float = 0.2
    large_unit_fraction: float = 0.15
    essential_rank: int = 3
    min_value_ratio: float = 0.0

    def __post_init__(self) -> None:
        _check_range("dup_overlap", self.dup_overlap, 0.0, 1.0, open_lo=True)
        _check_range("reserve_fraction", self.reserve_fraction, 0.0, 1.0, open_hi=True)
        _check_range("large_unit_fraction", self.large_unit_fraction, 0.0, 1.0)
        _check_range("min_value_ratio", self.min_value_ratio, 0.0, math.inf)
        er = self.essential_rank
        if isinstance(er, bool) or not isinstance(er, int) or er < 0:
            raise ValueError(f"essential_rank must be an integer >= 0, got {er!r}")


def _check_range(
    name: str, value: float, lo: float, hi: float, *, open_lo: bool = False, open_hi: bool = False
) -> None:
    ok = (lo < value if open_lo else lo <= value) and (value < hi if open_hi else value <= hi)
    if math.isnan(value) or not ok:
        left, right = "(" if open_lo else "[", ")" if open_hi else "]"
        raise ValueError(f"{name} must be within {left}{lo}, {hi}{right}, got {value!r}")


@dataclass(frozen=True)
class LeftOut:
    """A relevant candidate that was not delivered, and why."""

    candidate: Unit
    reason: str
    duplicate_of: str | None = None

    def __post_init__(self) -> None:
        if self.reason not in LEFT_OUT_REASONS:
            raise ValueError(f"reason must be one of {sorted(LEFT_OUT_REASONS)}, got {self.reason!r}")


@dataclass(frozen=True)
class Selection:
    """What was delivered and an honest account of what was not."""

    selected: tuple[Unit, ...]
    budget: int
    spent: int
    left_out_budget: tuple[LeftOut, ...]
    duplicates: tuple[LeftOut, ...]
    reserved_used: str | None
    complete: bool
    nothing_relevant: bool

    @property
    def remaining(self) -> int:
        """Tokens of the budget not spent."""
        return self.budget - self.spent

    @property
    def left_out_tokens(self) -> int:
        """What delivering the relevant left-out units as well would have cost."""
        return sum(lo.candidate.tokens for lo in self.left_out_budget)


def _shingles(words: Sequence[str], n: int) -> set[int]:
    """The n-word windows, each kept as its hash: sets of ints intersect about a third faster
    than sets of tuples, whose hash is recomputed at every lookup. Two different windows share
    a 64-bit hash with odds of about 2**-64, which would only nudge one containment up."""
    if not words:
        return set()
    if len(words) <= n:
        return {hash(tuple(words))}
    return set(map(hash, zip(*(words[k:] for k in range(n)))))  # built in C


def _containment(wa: Sequence[str], wb: Sequence[str]) -> float:
    if not wa or not wb:
        return 0.0
    n = min(SHINGLE_SIZE, len(wa), len(wb))
    return _set_containment(_shingles(wa, n), _shingles(wb, n))


def _set_containment(sa: set[int], sb: set[int]) -> float:
    return len(sa & sb) / min(len(sa), len(sb))


def shingle_overlap(a: str, b: str) -> float:
    """Containment of word 3-shingles: ``|A & B| / min(|A|, |B|)`` in [0, 1].

    Containment rather than Jaccard, because the typical near-duplicate in a
    chunked corpus is a chunk wholly inside another (overlapping windows, a
    section and its sub-chunk), which Jaccard scores low. Texts shorter than
    three words are compared with shorter shingles; an empty text overlaps
    nothing.
    """
    return _containment(_words(a), _words(b))


def _relative_scores(scores: Sequence[float]) -> list[float]:
    """Scores mapped to [0, 1] against ``floor = min(0, lowest)`` (see the module docstring)."""
    if not scores:
        return []
    best = max(scores)
    floor = min(0.0, min(scores))
    span = best - floor
    if span <= 0.0:
        return [1.0] * len(scores)
    return [(s - floor) / span for s in scores]


@dataclass
class _Walk:
    """Mutable state of one :func:`select` call (kept out of the public types)."""

    cands: list[Unit]
    position: dict[int, int]
    value: list[float]
    cfg: SelectionConfig
    budget: int
    cap: int
    protected: set[int]
    slot_free: bool
    #: Each candidate's near duplicates among the others (``osrag.search.duplicates``).
    partners: dict[int, set[int]] = field(default_factory=dict)
    selected: list[int] = field(default_factory=list)
    spent: int = 0
    left: dict[int, LeftOut] = field(default_factory=dict)
    dups: dict[int, LeftOut] = field(default_factory=dict)
    retry: list[int] = field(default_factory=list)
    ref_density: float | None = None
    reserved_used: str | None = None

    def duplicate_of(self, i: int) -> str | None:
        """The best-ranked selected chunk that ``i`` nearly repeats, if any."""
        near = self.partners.get(i)
        if not near:
            return None
        for j in sorted(self.selected, key=self.position.__getitem__):
            if j in near:
                return self.cands[j].chunk_id
        return None

    def _admit(self, i: int, density: float, via_slot: bool) -> None:
        self.selected.append(i)
        self.spent += self.cands[i].tokens
        if via_slot:
            self.slot_free = False
            self.reserved_used = self.cands[i].chunk_id
        elif self.ref_density is None:
            self.ref_density = density

    def consider(self, i: int) -> None:
        c = self.cands[i]
        dup = self.duplicate_of(i)
        if dup is not None:
            self.dups[i] = LeftOut(c, "duplicate", duplicate_of=dup)
            return
        density = self.value[i] / max(c.tokens, 1)
        ratio = self.cfg.min_value_ratio
        worth = ratio == 0.0 or self.ref_density is None or density >= ratio * self.ref_density
        fits_cap = self.spent + c.tokens <= self.cap
        fits_budget = self.spent + c.tokens <= self.budget
        if self.slot_free and i in self.protected:
            if worth and fits_cap:
                self._admit(i, density, via_slot=False)
            elif fits_budget:
                self._admit(i, density, via_slot=True)
            else:
                self.left[i] = LeftOut(c, "budget")
            return
        if not worth:
            self.left[i] = LeftOut(c, "not_worth")
        elif fits_cap:
            self._admit(i, density, via_slot=False)
        else:
            self.left[i] = LeftOut(c, "budget")
            if fits_budget:  # may fit once the reserve is released
                self.retry.append(i)

    def release_reserve(self) -> None:
        """Open the whole budget and give skipped units first claim on it, in rank order."""
        self.cap = self.budget
        pending, self.retry = sorted(self.retry, key=self.position.__getitem__), []
        for i in pending:
            del self.left[i]
            self.consider(i)


def select(
    candidates: Sequence[Unit],
    budget_tokens: int,
    config: SelectionConfig = SelectionConfig(),
) -> Selection:
    """Pick whole, non-duplicate, relevant units within ``budget_tokens``; report the rest.

    Raises ``ValueError`` for a non-positive budget, a repeated ``chunk_id``, a negative cost or
    a score that is not finite.
    """
    if isinstance(budget_tokens, bool) or not isinstance(budget_tokens, int) or budget_tokens <= 0:
        raise ValueError(f"token budget must be a positive integer, got {budget_tokens!r}")
    cands = list(candidates)
    seen: set[str] = set()
    for c in cands:
        if c.chunk_id in seen:
            raise ValueError(f"chunk_id {c.chunk_id!r} occurs more than once among the candidates")
        seen.add(c.chunk_id)
        if isinstance(c.tokens, bool) or not isinstance(c.tokens, int) or c.tokens < 0:
            raise ValueError(f"{c.chunk_id}: tokens must be an integer >= 0, got {c.tokens!r}")
        if not math.isfinite(c.score):
            raise ValueError(f"{c.chunk_id}: score must be finite, got {c.score!r}")

    cfg = config
    order = sorted(range(len(cands)), key=lambda i: -cands[i].score)
    value = _relative_scores([c.score for c in cands])
    relevant = order

    reserve = math.floor(cfg.reserve_fraction * budget_tokens)
    large_limit = cfg.large_unit_fraction * budget_tokens
    protected = (
        {i for i in relevant[: cfg.essential_rank] if cands[i].tokens > large_limit} if reserve > 0 else set()
    )
    walk = _Walk(
        cands=cands,
        partners=duplicate_pairs([c.text for c in cands], cfg.dup_overlap),
        position={i: pos for pos, i in enumerate(order)},
        value=value,
        cfg=cfg,
        budget=budget_tokens,
        cap=budget_tokens - reserve if protected else budget_tokens,
        protected=protected,
        slot_free=reserve > 0,
    )
    pending = set(protected)
    for i in relevant:
        walk.consider(i)
        pending.discard(i)
        if walk.cap < budget_tokens and (not walk.slot_free or not pending):
            walk.release_reserve()

    by_rank = walk.position.__getitem__
    left_out = tuple(walk.left[i] for i in sorted(walk.left, key=by_rank))
    return Selection(
        selected=tuple(cands[i] for i in sorted(walk.selected, key=by_rank)),
        budget=budget_tokens,
        spent=walk.spent,
        left_out_budget=left_out,
        duplicates=tuple(walk.dups[i] for i in sorted(walk.dups, key=by_rank)),
        reserved_used=walk.reserved_used,
        complete=not left_out,
        nothing_relevant=not relevant,
    )
