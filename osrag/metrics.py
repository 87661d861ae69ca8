"""Information-retrieval metrics for the eval harness.

Conventions, chosen for how osrag evaluates:

* **Relevant items are section keys, ranked lists may repeat them.** A search
  returns chunks, and several chunks of one section are one finding, not
  several. Every metric therefore first applies :func:`dedupe` (first
  occurrence wins, later repeats are dropped and the ranks close up), so a
  section found three times counts once, at its best rank.
* **No relevant items means "not evaluable", not zero.** With an empty
  relevant set recall is 0/0; the per-query metrics return ``nan`` and the
  aggregation helpers (:func:`mean`, :func:`percentile`) skip ``nan``. That
  keeps "no-answer" questions from dragging averages down or up; they are
  scored separately (e.g. by whether the retriever said "nothing relevant").
* ``k`` must be >= 1; a ranked list shorter than ``k`` is simply all of it.
"""

from __future__ import annotations

import math
from collections.abc import Collection, Iterable, Mapping, Sequence

__all__ = [
    "dedupe",
    "hit_at_k",
    "mean",
    "ndcg_at_k",
    "percentile",
    "recall_at_k",
    "reciprocal_rank",
]


def dedupe(ranked: Sequence[str]) -> list[str]:
    """Drop repeats, keeping each id at its first (best) position."""
    if isinstance(ranked, str):
        raise TypeError("ranked must be a sequence of ids, not a single string")
    return list(dict.fromkeys(ranked))


def _check_k(k: int) -> None:
    if isinstance(k, bool) or not isinstance(k, int) or k < 1:
        raise ValueError(f"k must be an integer >= 1, got {k!r}")


def _as_set(relevant: Collection[str]) -> set[str]:
    if isinstance(relevant, str):
        raise TypeError("relevant must be a collection of ids, not a single string")
    return set(relevant)


def hit_at_k(ranked: Sequence[str], relevant: Collection[str], k: int) -> float:
    """1.0 if any relevant id is in the top k, else 0.0; ``nan`` if nothing is relevant."""
    _check_k(k)
    rel = _as_set(relevant)
    if not rel:
        return math.nan
    return 1.0 if any(d in rel for d in dedupe(ranked)[:k]) else 0.0


def recall_at_k(ranked: Sequence[str], relevant: Collection[str], k: int) -> float:
    """Share of the relevant ids found in the top k; ``nan`` if nothing is relevant."""
    _check_k(k)
    rel = _as_set(relevant)
    if not rel:
        return math.nan
    found = sum(1 for d in dedupe(ranked)[:k] if d in rel)
    return found / len(rel)


def reciprocal_rank(ranked: Sequence[str], relevant: Collection[str]) -> float:
    """1 / rank of the first relevant id (0.0 if none); ``nan`` if nothing is relevant."""
    rel = _as_set(relevant)
    if not rel:
        return math.nan
    for rank, d in enumerate(dedupe(ranked), start=1):
        if d in rel:
            return 1.0 / rank
    return 0.0


def _gains(relevant: Mapping[str, float] | Collection[str]) -> dict[str, float]:
    """Graded gains from a mapping, or gain 1.0 for each id of a plain collection."""
    if isinstance(relevant, Mapping):
        gains = {str(d): float(g) for d, g in relevant.items()}
        for d, g in gains.items():
            if not math.isfinite(g) or g < 0:
                raise ValueError(f"gain for {d!r} is {g!r}; gains must be finite and >= 0")
        return gains
    return dict.fromkeys(_as_set(relevant), 1.0)


def ndcg_at_k(
    ranked: Sequence[str],
    relevant: Mapping[str, float] | Collection[str],
    k: int,
) -> float:
    """Normalised DCG at k with linear gains and a ``log2(rank + 1)`` discount.

    ``relevant`` is either a mapping id -> graded gain (0 means not relevant)
    or a collection of ids (binary gains). Gains are used as they are (no
    ``2**g - 1``), which keeps binary and graded judgements on one scale. The
    ideal ranking is the relevant ids sorted by gain, cut at k. ``nan`` when no
    id has a positive gain.
    """
    _check_k(k)
    gains = _gains(relevant)
    ideal = sorted((g for g in gains.values() if g > 0), reverse=True)[:k]
    if not ideal:
        return math.nan
    dcg = math.fsum(
        gains.get(d, 0.0) / math.log2(rank + 1) for rank, d in enumerate(dedupe(ranked)[:k], start=1)
    )
    idcg = math.fsum(g / math.log2(rank + 1) for rank, g in enumerate(ideal, start=1))
    return dcg / idcg


def _drop_nan(values: Iterable[float]) -> list[float]:
    out = []
    for v in values:
        fv = float(v)
        if math.isnan(fv):
            continue
        out.append(fv)
    return out


def mean(values: Iterable[float]) -> float:
    """Arithmetic mean ignoring ``nan`` (non-evaluable queries); ``nan`` if nothing is left."""
    vs = _drop_nan(values)
    if not vs:
        return math.nan
    return math.fsum(vs) / len(vs)


def percentile(values: Iterable[float], p: float) -> float:
    """The p-th percentile (p in [0, 100]) with linear interpolation between order statistics.

    Same definition as ``numpy.percentile``'s default: position ``p/100 * (n-1)``
    in the sorted values. ``nan`` values are skipped; no values give ``nan``.
    """
    fp = float(p)
    if not 0.0 <= fp <= 100.0:
        raise ValueError(f"p must be within [0, 100], got {p!r}")
    vs = sorted(_drop_nan(values))
    if not vs:
        return math.nan
    pos = fp / 100.0 * (len(vs) - 1)
    lo = math.floor(pos)
    hi = min(lo + 1, len(vs) - 1)
    frac = pos - lo
    return vs[lo] + (vs[hi] - vs[lo]) * frac
