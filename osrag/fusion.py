"""Reference implementations of result-list fusion.

OpenSearch fuses hybrid results itself (the ``score-ranker-processor`` for RRF,
the ``normalization-processor`` for min-max). These functions are the same maths
on the client side: the eval harness uses them to fuse lists it fetched
separately (e.g. to compare fusion methods without re-indexing), and the tests
use them as the ground truth the server's output is checked against.

Both functions are pure and deterministic: equal inputs give equal outputs,
including the order of tied items.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence

__all__ = ["min_max_arithmetic", "rrf"]


def _check_weights(weights: Sequence[float] | None, n: int) -> list[float]:
    """Weights default to 1 each; they must match the lists one-to-one and be >= 0."""
    if weights is None:
        return [1.0] * n
    ws = [float(w) for w in weights]
    if len(ws) != n:
        raise ValueError(f"got {len(ws)} weight(s) for {n} list(s); pass one weight per list")
    for i, w in enumerate(ws):
        if not math.isfinite(w) or w < 0:
            raise ValueError(f"weight #{i} is {w!r}; weights must be finite and >= 0")
    return ws


def rrf(
    rankings: Sequence[Sequence[str]],
    k: int = 60,
    weights: Sequence[float] | None = None,
) -> list[tuple[str, float]]:
    """Weighted reciprocal-rank fusion: ``score(d) = sum_i w_i / (k + rank_i(d))``.

    RRF uses ranks only, so lists whose scores live on different scales (BM25
    vs cosine) can be fused without calibration. ``rank`` is 1-based; an id that
    is absent from a list contributes nothing for it. If an id repeats inside one
    list, only its first (best) position counts and positions are not renumbered.

    Ties are broken by the best (lowest) rank the id reached in any list, then by
    the id itself, so the output never depends on dict or set ordering. Scores
    are summed with ``math.fsum`` so that permuting the lists (with their
    weights) cannot change a score in its last bit and flip a tie.

    Returns ``(id, score)`` pairs, best first. No lists, or only empty lists,
    give an empty result.
    """
    if isinstance(k, bool) or not isinstance(k, (int, float)) or not math.isfinite(k) or k <= 0:
        raise ValueError(f"k must be a positive number, got {k!r}")
    ws = _check_weights(weights, len(rankings))

    parts: dict[str, list[float]] = {}
    best_rank: dict[str, int] = {}
    for ranking, w in zip(rankings, ws, strict=True):
        if isinstance(ranking, str):
            raise TypeError("each ranking must be a sequence of ids, not a single string")
        seen: set[str] = set()
        for rank, doc_id in enumerate(ranking, start=1):
            if doc_id in seen:
                continue
            seen.add(doc_id)
            parts.setdefault(doc_id, []).append(w / (k + rank))
            if rank < best_rank.get(doc_id, rank + 1):
                best_rank[doc_id] = rank

    scored = [(doc_id, math.fsum(p)) for doc_id, p in parts.items()]
    scored.sort(key=lambda item: (-item[1], best_rank[item[0]], item[0]))
    return scored


def min_max_arithmetic(
    score_lists: Sequence[Mapping[str, float]],
    weights: Sequence[float] | None = None,
) -> list[tuple[str, float]]:
    """Min-max normalise each list to [0, 1], then take the weighted arithmetic mean.

    This mirrors the score-based alternative to RRF: scores are comparable after
    normalisation only within the spread of one result list, which is why it is
    more fragile than RRF. A list whose scores are all equal (including a list
    of one) normalises to 1.0 for every id: it carries no ordering, only
    presence. An id missing from a list counts as 0 there, and the mean divides
    by the sum of all weights, so presence in more lists is rewarded.

    Ties are broken by id. Weights must not all be zero (the mean would be
    undefined); empty input gives an empty result.
    """
    ws = _check_weights(weights, len(score_lists))
    if score_lists and math.fsum(ws) <= 0:
        raise ValueError("at least one weight must be > 0")
    total_w = math.fsum(ws)

    parts: dict[str, list[float]] = {}
    for i, (scores, w) in enumerate(zip(score_lists, ws, strict=True)):
        if not scores:
            continue
        values = [float(v) for v in scores.values()]
        if not all(math.isfinite(v) for v in values):
            raise ValueError(f"list #{i} has a non-finite score")
        lo, hi = min(values), max(values)
        span = hi - lo
        for doc_id, raw in scores.items():
            norm = 1.0 if span == 0 else (float(raw) - lo) / span
            parts.setdefault(doc_id, []).append(w * norm)

    fused = [(doc_id, math.fsum(p) / total_w) for doc_id, p in parts.items()]
    fused.sort(key=lambda item: (-item[1], item[0]))
    return fused
