"""Is the shipped fusion ever significantly below its better head? Paired tests per set.

On the indices ``osrag eval`` built (same prefix, vectors cached), every set and its perturbed
copies are ranked by the shipped hybrid, the BM25 head and the kNN head, and the hybrid is tested
against each head (the eval's paired randomization test, p < 0.05) on recall@10, MRR@10, hit@5.

    nice .venv/bin/python bench/bench_heads.py golden/golden.jsonl \\
        --dataset ../shared/datasets/xquad-ru-dev --dataset ../shared/datasets/vkdocs-ru-dev \\
        --limit 200 --perturb mistyped --out bench/results/heads.md
"""

from __future__ import annotations

import argparse
import shlex
import sys
from pathlib import Path

from osrag.evaluation import metrics, runs
from osrag.evaluation.datasets import EvalSet, load_dataset, load_golden
from osrag.evaluation.mistakes import perturbed
from osrag.evaluation.suite import EVAL_PRINCIPAL, PERTURB_SEED, eval_settings
from osrag.search.client import SearchClient
from osrag.settings import load_settings

MODES = {"hybrid": "hybrid (shipped)", "bm25": "BM25 head", "knn": "kNN head"}
SHOWN = ("recall@10", "mrr@10", "hit_rate@5")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("golden", nargs="?", default="golden/golden.jsonl")
    ap.add_argument("--dataset", action="append", default=[])
    ap.add_argument("--limit", type=int, default=None)
    ap.add_argument("--depth", type=int, default=40)
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--perturb", action="append", default=[])
    ap.add_argument("--prefix", default="osrag-eval")
    ap.add_argument("--out", default=None)
    a = ap.parse_args(argv)
    base = eval_settings(load_settings())
    sets: list[EvalSet] = [load_golden(Path(a.golden))] if a.golden else []
    sets += [load_dataset(Path(d)) for d in a.dataset]
    sets = [s.sample(a.limit) for s in sets]
    sets += [perturbed(s, k, PERTURB_SEED, rename=True) for s in sets for k in a.perturb]
    w = base.effective_fusion_weights
    lines = [
        f"# Shipped fusion (min-max {w[0]:g}/{w[1]:g}) against each head",
        "",
        f"Model `{base.embedding_model}`. Run: `{shlex.join(['python', 'bench/bench_heads.py', *(argv or sys.argv[1:])])}`.",
        "▲/▼: the hybrid significantly above/below the head (paired randomization test, p < 0.05).",
        "",
        "| set | questions | " + " | ".join(f"{MODES[m]} R@10 / MRR@10 / hit@5" for m in MODES) + " |",
        "| --- | ---: | " + " | ".join("---" for _ in MODES) + " |",
    ]
    for es in sets:
        s = runs.prepare_index(base, es, a.prefix, runs.IndexVariant("main", "markdown"), lambda m: None)
        client = SearchClient(s, principal=EVAL_PRINCIPAL)
        rel = {q.qid: q.relevant for q in es.answerable}
        qrels = metrics.qrels(rel)
        ranked = {}
        for m in MODES:
            r = runs.rank_all(client, es, runs.Config(m, m), a.depth, None, workers=a.workers)
            ranked[m] = metrics.run({q: r.keys[q] for q in rel}, m)
        means = {m: metrics.per_query(qrels, ranked[m], list(SHOWN)) for m in MODES}
        cells = []
        for m in MODES:
            vals = [metrics.mean(means[m][k].values()) for k in SHOWN]
            marks = [""] * len(SHOWN)
            if m != "hybrid":
                ps = metrics.significance(qrels, ranked[m], ranked["hybrid"], SHOWN)
                hyb = [metrics.mean(means["hybrid"][k].values()) for k in SHOWN]
                marks = [metrics.mark(h - v, ps[k]) for h, v, k in zip(hyb, vals, SHOWN)]
            cells.append(" / ".join(f"{v:.3f}{mk}" for v, mk in zip(vals, marks)))
        lines.append(f"| {es.name} | {len(rel)} | " + " | ".join(cells) + " |")
        print(lines[-1], file=sys.stderr, flush=True)
    text = "\n".join(lines) + "\n"
    if a.out:
        Path(a.out).write_text(text, encoding="utf-8")
    print(text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
