"""Perturbed copies of the dev sets' questions, and recall on each beside the clean one.

The perturbations live in ``osrag.evaluation.mistakes`` (``osrag eval --perturb KIND`` uses them
too). Ways a Russian question reaches a search box broken (``osrag.search.variants`` answers them):

* ``layout`` -- typed with the QWERTY layout on: every Cyrillic letter becomes the Latin key it
  sits on (``доставка`` -> ``ljcnfdrf``), and ЙЦУКЕН's ``? . , ; : "`` become ``& / ? $ ^ @``;
  Latin words and identifiers are typed as they are;
* ``translit`` -- everyday Latin transliteration (``щ`` -> ``shch``, ``ж`` -> ``zh``, ``ь`` and
  ``ъ`` dropped as most people drop them: ``skolko``);
* ``typos`` -- one or two Cyrillic words of five letters or more get one edit each (a neighbouring
  ЙЦУКЕН key, a dropped, doubled or swapped letter; never the first letter), seeded per question.

Run (writes ``golden/report/variants.md``)::

    nice -n 10 osrag study perturb golden/golden.jsonl \\
        --dataset ../shared/datasets/xquad-ru-dev --dataset ../shared/datasets/vkdocs-ru-dev
"""

from __future__ import annotations

import contextlib
import logging
import sys
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from osrag.evaluation import metrics, runs
from osrag.evaluation.datasets import EvalSet, load_dataset, load_golden
from osrag.evaluation.mistakes import (  # noqa: F401 (the perturbations, re-exported)
    KINDS,
    MIN_TYPO_LETTERS,
    TO_QWERTY,
    layout,
    perturb,
    perturbed,
    translit,
    typos,
)
from osrag.evaluation.suite import EVAL_PRINCIPAL, eval_settings
from osrag.search import variants
from osrag.search.client import SearchClient
from osrag.settings import Settings

logger = logging.getLogger(__name__)

#: The clean questions with osrag.search.variants off: what the variants cost an ordinary question.
OFF = "clean, variants off"

# ------------------------------------------------------------------ measuring
MODES = {"bm25": "bm25 head (as shipped)", "hybrid": "hybrid (shipped pipeline)"}


def recall_at_10(evalset: EvalSet, ranked: Mapping[str, Sequence[str]]) -> float:
    rel = {q.qid: q.relevant for q in evalset.answerable}
    per = metrics.per_query(metrics.qrels(rel), metrics.run(ranked, "r"), ["recall@10"])["recall@10"]
    return metrics.mean(per.get(q, 0.0) for q in rel)


def measure(
    base: Settings,
    sets: Sequence[EvalSet],
    seed: int,
    depth: int,
    log: Callable[[str], None],
    on_set: Callable[[list[dict[str, Any]]], None] | None = None,
) -> list[dict[str, Any]]:
    """Each set's rows; ``on_set`` sees the rows so far after every set (the report grows as it runs)."""
    rows = []
    for evalset in sets:
        s = runs.prepare_index(base, evalset, "osrag-variants", runs.IndexVariant("main"), log)
        client = SearchClient(s, principal=EVAL_PRINCIPAL)
        for kind in (OFF, *KINDS):
            copy = perturbed(evalset, "clean" if kind == OFF else kind, seed)
            changed = sum(a.text != b.text for a, b in zip(evalset.queries, copy.queries))
            triggered = 0 if kind == OFF else sum(bool(variants.find_variants(q.text)) for q in copy.queries)
            row: dict[str, Any] = {
                "set": evalset.name,
                "kind": kind,
                "questions": len(copy.queries),
                "changed": changed,
                "triggered": triggered,
            }
            for mode in MODES:
                t0 = time.perf_counter()
                with variants.disabled() if kind == OFF else contextlib.nullcontext():
                    r = runs.rank_all(client, copy, runs.Config(mode, mode), depth, None, workers=2)
                row[mode] = recall_at_10(copy, r.keys)
                log(
                    f"{evalset.name} · {kind} · {mode}: R@10 {row[mode]:.3f} ({time.perf_counter() - t0:.0f} s)"
                )
            rows.append(row)
        if on_set:
            on_set(rows)
    return rows


def markdown(rows: Sequence[Mapping[str, Any]], model: str, command: str, sampled: Mapping[str, str]) -> str:
    lines = [
        "# Query variants: R@10 on perturbed copies of the dev sets' questions",
        "",
        f"Model of the kNN head: `{model}`. Run: `{command}`.",
        "Perturbations (`osrag/evaluation/perturb.py`): `layout` = typed with QWERTY on, `translit` = everyday",
        "Latin transliteration (ь/ъ dropped), `typos` = one or two words of ≥5 letters with one edit each",
        "(seeded per question). `changed` = questions the perturbation altered; `variants` = questions",
        "`osrag.search.variants` gave extra clauses (on `clean`: ordinary questions whose request changed).",
        "Δ = perturbed minus clean.",
        "",
        "| set | questions | copy | changed | variants | BM25 R@10 | Δ | hybrid R@10 | Δ |",
        "| --- | ---: | --- | ---: | ---: | ---: | ---: | ---: | ---: |",
    ]
    clean = {r["set"]: r for r in rows if r["kind"] == "clean"}
    for r in rows:
        c = clean[r["set"]]
        db, dh = r["bm25"] - c["bm25"], r["hybrid"] - c["hybrid"]
        lines.append(
            f"| {r['set']}{sampled.get(r['set'], '')} | {r['questions']} | {r['kind']} | {r['changed']} | "
            f"{r['triggered']} | {r['bm25']:.3f} | {db:+.3f} | {r['hybrid']:.3f} | {dh:+.3f} |"
        )
    return "\n".join(lines) + "\n"


def main(
    golden: Path | None,
    datasets: Sequence[Path],
    *,
    limit: int | None,
    seed: int,
    depth: int,
    out: Path,
    command: str,
) -> int:
    """Recall of every set's perturbed copies beside the clean questions (``osrag study perturb``)."""
    logging.basicConfig(level=logging.WARNING)
    sets: list[EvalSet] = []
    if golden:
        sets.append(load_golden(golden))
    sets += [load_dataset(d) for d in datasets]
    sampled = {}
    for i, s in enumerate(sets):
        if limit and len(s.queries) > limit:
            sampled[s.name] = f" (sample of {limit}/{len(s.queries)}, seed {seed})"
            sets[i] = s.sample(limit, seed)
    base = eval_settings(Settings())

    def write(rows: list[dict[str, Any]]) -> None:
        out.write_text(markdown(rows, str(base.embedding_model), command, sampled), encoding="utf-8")

    write(measure(base, sets, seed, depth, lambda m: print(m, file=sys.stderr, flush=True), write))
    print(out.read_text(encoding="utf-8"))
    return 0
