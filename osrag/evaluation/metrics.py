"""Metrics: ranked-list measures and the paired test from ranx; budget measures written here.

Ranked lists are lists of relevance keys (a golden section key or a BEIR doc id, a neutral
id for anything else). A key repeated further down the list (a second chunk of one section
or document) is dropped before ranx sees it, so one finding counts once, at its best rank.
Only answerable questions enter the ranked-list metrics; no-answer questions are scored by
whether the selection said «nothing found».

What no library has stays here: recall within a token budget, tokens per answered question,
the «nothing found» rates, and the plain top-k baseline that fills the budget in rank order.
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Callable, Collection, Iterable, Mapping, Sequence
from typing import Any, TypeVar

import numpy as np

# ranx names; the report shows ``hit_rate@5`` as ``hit@5``.
RANKING_METRICS = ("recall@10", "recall@20", "mrr@10", "ndcg@10", "hit_rate@5")
SIGNIFICANCE_METRICS = ("recall@10", "mrr@10", "hit_rate@5")
LABELS = {"hit_rate@5": "hit@5"}
MAX_P = 0.05

T = TypeVar("T")


def label(metric: str) -> str:
    return LABELS.get(metric, metric)


def _ranx() -> Any:
    try:
        import ranx
    except ImportError as exc:  # pragma: no cover - the eval extra installs it
        from osrag.errors import ConfigError

        raise ConfigError("osrag eval needs ranx: pip install 'osrag[eval]'") from exc
    return ranx


def qrels(relevant: Mapping[str, Mapping[str, int]]) -> Any:
    """A ranx Qrels from qid -> key -> grade (answerable questions only)."""
    return _ranx().Qrels({q: dict(r) for q, r in relevant.items() if r})


def run(ranked: Mapping[str, Sequence[str]], name: str) -> Any:
    """A ranx Run from qid -> ranked keys; repeats dropped, scores falling with rank."""
    out: dict[str, dict[str, float]] = {}
    for qid, keys in ranked.items():
        uniq = list(dict.fromkeys(keys))
        out[qid] = {k: float(len(uniq) - i) for i, k in enumerate(uniq)}
    return _ranx().Run(out, name=name)


def per_query(
    qrels_: Any, run_: Any, metrics: Sequence[str] = RANKING_METRICS
) -> dict[str, dict[str, float]]:
    """metric -> qid -> value, for every judged question (missing ones score 0)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # numba's parallel-loop chatter
        _ranx().evaluate(qrels_, run_, list(metrics), return_mean=False, make_comparable=True)
    return {m: {q: float(v) for q, v in run_.scores[m].items()} for m in metrics}


def significance(
    qrels_: Any,
    baseline: Any,
    other: Any,
    metrics: Sequence[str] = SIGNIFICANCE_METRICS,
    stat_test: str = "fisher",
) -> dict[str, float]:
    """metric -> two-sided p-value of ``other`` vs ``baseline`` (paired, per question)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        rep = _ranx().compare(
            qrels_,
            [baseline, other],
            list(metrics),
            stat_test=stat_test,
            max_p=MAX_P,
            make_comparable=True,
        )
    got = rep.to_dict()[other.name]["comparisons"][baseline.name]
    return {m: float(got[m]) for m in metrics}


def mark(delta: float, p: float, max_p: float = MAX_P) -> str:
    """``▲``/``▼`` for a significant gain/loss against the baseline, empty otherwise."""
    if math.isnan(p) or p >= max_p or delta == 0:
        return ""
    return "▲" if delta > 0 else "▼"


def mean(values: Iterable[float]) -> float:
    """Mean ignoring ``nan`` (not evaluable); ``nan`` when nothing is left."""
    arr = np.asarray([float(v) for v in values], dtype=float)
    arr = arr[~np.isnan(arr)]
    return float(arr.mean()) if arr.size else math.nan


def percentile(values: Iterable[float], p: float) -> float:
    arr = np.asarray([float(v) for v in values], dtype=float)
    arr = arr[~np.isnan(arr)]
    return float(np.percentile(arr, p)) if arr.size else math.nan


# ------------------------------------------------------------------ budget measures
def topk_within_budget(items: Sequence[T], budget: int, cost: Callable[[T], int]) -> list[T]:
    """The baseline: items in rank order while they fit (whole items, no dedup, no gate)."""
    out: list[T] = []
    spent = 0
    for it in items:
        t = cost(it)
        if spent + t > budget:
            break
        out.append(it)
        spent += t
    return out


def delivery(delivered: Sequence[tuple[str | None, int]], relevant: Collection[str]) -> dict[str, float]:
    """One question's delivery: (relevant key or None, tokens) per passage handed over."""
    rel = set(relevant)
    found = {k for k, _ in delivered if k is not None and k in rel}
    tokens = sum(t for _, t in delivered)
    off = sum(t for k, t in delivered if k is None or k not in rel)
    return {
        "recall_in_budget": len(found) / len(rel) if rel else math.nan,
        "answered": 1.0 if found else 0.0,
        "tokens": float(tokens),
        "off_topic_share": off / tokens if tokens else math.nan,
    }


def budget_summary(rows: Sequence[Mapping[str, float]]) -> dict[str, float]:
    """Means over answerable questions; tokens are averaged over answered ones only."""
    answered = [r for r in rows if r["answered"]]
    return {
        "recall_in_budget": mean(r["recall_in_budget"] for r in rows),
        "answered": mean(r["answered"] for r in rows),
        "tokens_per_answered": mean(r["tokens"] for r in answered),
        "off_topic_share": mean(r["off_topic_share"] for r in rows),
    }


def nothing_found_rate(flags: Iterable[bool]) -> float:
    """Share of questions that got «nothing found» (``nan`` for none)."""
    return mean(1.0 if f else 0.0 for f in flags)
