"""Does each selection knob change a figure? The envelope at one budget, per knob value, on every set.

For every set (and its perturbed copies) the index ``osrag eval`` built is reused (same prefix and
index-shaping settings, vectors from the on-disk cache); the shipped hybrid's candidates are ranked
once for the top-k reference, then ``search()`` is run at the budget with the shipped settings and
with each override in turn. Per row: the share of answerable questions with a relevant passage
delivered (recall in budget), «nothing relevant» on answerable and on no-answer questions, tokens
delivered per answered question and the off-topic share of what was delivered.

    nice .venv/bin/python bench/bench_selection.py golden/golden.jsonl \\
        --dataset ../shared/datasets/xquad-ru-dev --dataset ../shared/datasets/vkdocs-ru-dev \\
        --limit 200 --perturb mistyped --out bench/results/selection.md
"""

from __future__ import annotations

import argparse
import json
import shlex
import sys
import time
from pathlib import Path
from typing import Any

from osrag.evaluation import metrics, runs
from osrag.evaluation.datasets import EvalSet, load_dataset, load_golden
from osrag.evaluation.mistakes import perturbed
from osrag.evaluation.suite import EVAL_PRINCIPAL, PERTURB_SEED, eval_settings
from osrag.search.client import SearchClient
from osrag.settings import load_settings

#: Each knob with a value other than the shipped one (label -> Settings overrides).
KNOBS: dict[str, dict[str, Any]] = {
    "shipped": {},
    "gate floor 0 (never refuse on cosine)": {"gate_cosine_floor": 0.0},
    "gate floor 1 (cosine never passes)": {"gate_cosine_floor": 1.0},
    "minimal policy": {"selection": "minimal"},
    "minimal, relative_coverage 0.3": {"selection": "minimal", "gate_relative_coverage": 0.3},
    "minimal, relative_cosine 0.9": {"selection": "minimal", "gate_relative_cosine": 0.9},
    "evidence_order on": {"evidence_order": True},
    "trim_passages off": {"trim_passages": False},
    "trim_units 3": {"trim_units": 3},
    "trim_keep_whole 0": {"trim_keep_whole": 0},
    "trim_keep_whole 5": {"trim_keep_whole": 5},
    "collapse_duplicates off": {"collapse_duplicates": False},
}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("golden", nargs="?", default="golden/golden.jsonl")
    ap.add_argument("--dataset", action="append", default=[])
    ap.add_argument("--limit", type=int, default=None)
    ap.add_argument("--budget", type=int, default=1500)
    ap.add_argument("--depth", type=int, default=40)
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--perturb", action="append", default=[])
    ap.add_argument("--knobs", default=None, help="Comma-separated labels (default: all).")
    ap.add_argument("--prefix", default="osrag-eval")
    ap.add_argument("--out", default=None)
    a = ap.parse_args(argv)
    base = eval_settings(load_settings())
    sets: list[EvalSet] = [load_golden(Path(a.golden))] if a.golden else []
    sets += [load_dataset(Path(d)) for d in a.dataset]
    sets = [s.sample(a.limit) for s in sets]
    sets += [perturbed(s, k, PERTURB_SEED, rename=True) for s in sets for k in a.perturb]
    knobs = {k: v for k, v in KNOBS.items() if not a.knobs or k in a.knobs.split(",") or k == "shipped"}
    results: dict[str, dict[str, Any]] = {}
    for es in sets:
        s = runs.prepare_index(base, es, a.prefix, runs.IndexVariant("main", "markdown"), lambda m: None)
        client = SearchClient(s, principal=EVAL_PRINCIPAL)
        top = runs.rank_all(client, es, runs.Config("hybrid"), a.depth, None, True, a.workers)
        rel = {q.qid: q.relevant for q in es.answerable}
        pq = metrics.per_query(
            metrics.qrels(rel), metrics.run({q: top.keys[q] for q in rel}, "h"), ["recall@10"]
        )
        r10 = metrics.mean(pq["recall@10"].get(q, 0.0) for q in rel)
        results[es.name] = {"hybrid_r10": round(r10, 4), "knobs": {}}
        for label, over in knobs.items():
            t0 = time.perf_counter()
            c = SearchClient(s.model_copy(update=over), principal=EVAL_PRINCIPAL)
            br = runs.budget_run(c, es, top.hits, [a.budget], a.depth, workers=a.workers)
            summ = metrics.budget_summary(br.rows[runs.SELECTION][a.budget])
            none = br.nothing[runs.SELECTION][a.budget]
            results[es.name]["knobs"][label] = {
                **{k: round(v, 4) for k, v in summ.items()},
                "refused_answerable": round(metrics.nothing_found_rate(none["answerable"]), 4),
                "refused_answerable_n": sum(none["answerable"]),
                "answerable": len(none["answerable"]),
                "no_answer_detected": sum(none["no_answer"]),
                "no_answer": len(none["no_answer"]),
            }
            print(
                f"{es.name} · {label}: {results[es.name]['knobs'][label]} ({time.perf_counter() - t0:.0f} s)",
                file=sys.stderr,
                flush=True,
            )
    command = shlex.join(["python", "bench/bench_selection.py", *(argv or sys.argv[1:])])
    text = markdown(results, a.budget, str(base.embedding_model), command)
    if a.out:
        Path(a.out).write_text(text, encoding="utf-8")
        Path(a.out).with_suffix(".json").write_text(json.dumps(results, ensure_ascii=False, indent=1) + "\n")
    print(text)
    return 0


def markdown(results: dict[str, dict[str, Any]], budget: int, model: str, command: str) -> str:
    lines = [
        f"# Selection knobs at {budget} tokens",
        "",
        f"Model `{model}`, rerank off. Run: `{command}`.",
        "recall = answerable questions with a relevant passage delivered (mean recall in budget);",
        "refused = «nothing relevant» on answerable questions; no-answer = refused no-answer questions;",
        "tokens = delivered per answered question; off-topic = share of delivered tokens not relevant.",
        "",
    ]
    for name, r in results.items():
        lines += [
            f"## {name} (hybrid R@10 {r['hybrid_r10']:.3f})",
            "",
            "| setting | recall | refused | no-answer | tokens | off-topic |",
            "| --- | ---: | ---: | ---: | ---: | ---: |",
        ]
        for label, k in r["knobs"].items():
            lines.append(
                f"| {label} | {k['recall_in_budget']:.3f} | {k['refused_answerable']:.3f} "
                f"({k['refused_answerable_n']}/{k['answerable']}) | {k['no_answer_detected']}/{k['no_answer']} | "
                f"{k['tokens_per_answered']:.0f} | {k['off_topic_share']:.3f} |"
            )
        lines.append("")
    return "\n".join(lines)


if __name__ == "__main__":
    raise SystemExit(main())
