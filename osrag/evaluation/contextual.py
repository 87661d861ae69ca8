"""Contextual retrieval measured: each dev set indexed without and with a contextualizer, side by side.

Every set is ingested twice through the real Ingester (``OSRAG_CONTEXTUALIZER=none`` and the one
measured, each in its own alias), and the shipped hybrid, the shipped BM25 head and the kNN head
are ranked on both. Each row with context is tested against the same row without (paired, per
question), and the contextual hybrid against the strongest single head without context (the
rule a default ships by). Writes a Markdown table.

    osrag study contextual --model navec:news-300d \\
        --out golden/report/contextual.md
"""

from __future__ import annotations

import sys
import time
from collections.abc import Sequence
from pathlib import Path

from osrag.evaluation import metrics, runs
from osrag.evaluation.datasets import EvalSet, load_dataset, load_golden
from osrag.evaluation.suite import EVAL_PRINCIPAL, eval_settings
from osrag.search.client import SearchClient
from osrag.settings import Settings

HEADS = (("hybrid (shipped)", "hybrid"), ("bm25 head (shipped)", "bm25"), ("knn", "knn"))
SHOWN = ("recall@10", "mrr@10", "ndcg@10")


def _sets(golden: str | None, datasets: Sequence[str], limit: int | None) -> list[EvalSet]:
    out: list[EvalSet] = []
    if golden:
        out.append(load_golden(Path(golden), None))
    out += [load_dataset(Path(d)) for d in datasets]
    return [s.sample(limit) for s in out]


def measure(base: Settings, es: EvalSet, contextualizer: str, prefix: str, depth: int) -> dict[str, object]:
    """ctx -> head -> (ranx run, per-question values) for one set."""
    out: dict[str, object] = {}
    answerable = es.answerable
    ids = {q.qid for q in answerable}
    qrels = metrics.qrels({q.qid: q.relevant for q in answerable})
    for ctx in ("none", contextualizer):
        variant = runs.IndexVariant(f"ctx-{ctx}", overrides={"contextualizer": ctx})
        s = runs.prepare_index(base, es, prefix, variant, lambda m: print(m, file=sys.stderr, flush=True))
        client = SearchClient(s, principal=EVAL_PRINCIPAL)
        for label, mode in HEADS:
            r = runs.rank_all(client, es, runs.Config(label, mode), depth, None, workers=2)
            run = metrics.run({q: k for q, k in r.keys.items() if q in ids}, f"{label} · {ctx}")
            out[f"{ctx}|{mode}"] = (run, metrics.per_query(qrels, run))
    out["qrels"] = qrels
    return out


def table(name: str, got: dict[str, object], contextualizer: str) -> list[str]:
    qrels = got["qrels"]
    mean = {k: {m: metrics.mean(v.values()) for m, v in pq.items()} for k, (_, pq) in _runs(got).items()}
    # The strongest single head without context, by recall@10 (the rule's comparison).
    single = max(("none|bm25", "none|knn"), key=lambda k: mean[k]["recall@10"])
    lines = [
        f"### {name}",
        "",
        "| head | context | " + " | ".join(SHOWN) + " | vs same head, no context (p, recall@10 / mrr@10) |",
        "|---|---|" + "---|" * (len(SHOWN) + 1),
    ]
    for label, mode in HEADS:
        for ctx in ("none", contextualizer):
            k = f"{ctx}|{mode}"
            cells = [f"{mean[k][m]:.4f}" for m in SHOWN]
            vs = ""
            if ctx != "none":
                base_run, run = _runs(got)[f"none|{mode}"][0], _runs(got)[k][0]
                ps = metrics.significance(qrels, base_run, run)
                parts = []
                for m in ("recall@10", "mrr@10"):
                    d = mean[k][m] - mean[f"none|{mode}"][m]
                    parts.append(f"{d:+.4f} (p {ps[m]:.3f}){metrics.mark(d, ps[m])}")
                vs = " · ".join(parts)
            lines.append(f"| {label} | {ctx} | " + " | ".join(cells) + f" | {vs} |")
    hyb = f"{contextualizer}|hybrid"
    ps = metrics.significance(qrels, _runs(got)[single][0], _runs(got)[hyb][0])
    d = mean[hyb]["recall@10"] - mean[single]["recall@10"]
    lines += [
        "",
        f"Contextual hybrid vs the strongest single head without context ({single.split('|')[1]}): "
        f"recall@10 {d:+.4f} (p {ps['recall@10']:.3f}){metrics.mark(d, ps['recall@10'])}",
        "",
    ]
    return lines


def _runs(got: dict[str, object]) -> dict[str, tuple]:  # type: ignore[type-arg]
    return {k: v for k, v in got.items() if k != "qrels"}  # type: ignore[misc]


def main(
    *,
    model: str,
    contextualizer: str,
    golden: str | None,
    datasets: Sequence[str],
    limit: int | None,
    depth: int,
    prefix: str,
    out: str | None,
    command: str,
) -> None:
    """Each set without and with the contextualizer, side by side (``osrag study contextual``)."""
    started = time.perf_counter()
    base = eval_settings(Settings(embedding_model=model))
    lines = [
        f"## Contextual retrieval: `{contextualizer}` vs none ({model})",
        "",
        f"Made by `{command}` "
        f"on {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}. Depth {depth}; "
        "Fisher's randomization test, paired per question; ▲/▼ significant at p < 0.05.",
        "",
    ]
    for es in _sets(golden, datasets, limit):
        got = measure(base, es, contextualizer, prefix, depth)
        lines += table(f"{es.name} ({len(es.answerable)} answerable questions)", got, contextualizer)
        print("\n".join(lines), file=sys.stderr, flush=True)
    lines.append(f"Total run time: {time.perf_counter() - started:.0f} s.")
    text = "\n".join(lines) + "\n"
    if out:
        Path(out).write_text(text, encoding="utf-8")
    print(text)
