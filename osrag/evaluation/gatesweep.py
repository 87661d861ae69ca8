"""Checking the gate on every set: replay its decision over every question's candidates.

The gate (``osrag.search.gate``) decides «nothing relevant» from each candidate's shared content
term, cosine and code match, all of which ``search()`` computes before it decides. So the
candidates of every question are fetched once (the shipped hybrid with its evidence, on the
indices ``osrag eval`` built) and the pure decision is replayed for a grid of cosine floors,
the model's shipped floor among them: for each, the share of answerable questions refused
(false «nothing relevant»), how many of those had a relevant chunk among the candidates, and how
many no-answer questions were refused (detected). The floor is not chosen here (it comes from
``osrag.evaluation.floors``); the grid shows what it costs and what it buys.

    osrag study gatesweep golden/golden.jsonl \\
        --dataset ../shared/datasets/xquad-ru-dev --dataset ../shared/datasets/vkdocs-ru-dev \\
        --perturb mistyped
"""

from __future__ import annotations

import json
import sys
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from osrag.evaluation import runs
from osrag.evaluation.datasets import EvalSet, load_dataset, load_golden
from osrag.records import ChunkSource
from osrag.search import gate
from osrag.search.candidates import Candidate
from osrag.search.client import SearchClient
from osrag.search.query import parse_filters
from osrag.settings import Settings, load_settings


@dataclass(frozen=True)
class Evidence:
    """One candidate's evidence as the gate sees it, and whether it is relevant (judged)."""

    coverage: float
    cosine: float
    ident: bool
    relevant: bool
    shares_term: bool = False


@dataclass(frozen=True)
class Question:
    qid: str
    answerable: bool
    required_codes: tuple[str, ...] | None
    hits: tuple[Evidence, ...]


def collect(client: SearchClient, evalset: EvalSet, depth: int, workers: int = 4) -> list[Question]:
    """The shipped hybrid's candidates of every question with the gate's evidence filled in."""

    def one(q: Any) -> Question:
        who = client.principal_for(None)
        ret = client._run(
            client._retrieve(q.text, "hybrid", depth, parse_filters(q.filters), who, None, True)
        )
        hits: list[Candidate] = ret.hits
        required: tuple[str, ...] | None = None
        if hits and ret.analysis is not None:
            gate.annotate(q.text.strip(), ret.analysis, ret.vector, hits, engine=ret.engine_embedded)
            required = ret.analysis.required_codes
        return Question(
            q.qid,
            q.answerable,
            required,
            tuple(
                Evidence(
                    h.coverage,
                    h.cosine,
                    h.ident_match,
                    evalset.key(q, h.source) in q.relevant,
                    h.shares_term,
                )
                for h in hits
            ),
        )

    return runs.pmap(one, evalset.queries, workers)


def refused(q: Question, g: gate.Gate, question: str) -> bool:
    """Whether the gate says «nothing relevant» for this question (``relevant_ids`` replayed)."""
    hits = []
    for i, e in enumerate(q.hits):
        h = Candidate(ChunkSource(chunk_id=str(i)), fused=0.0, rank=i + 1)
        h.coverage, h.cosine, h.ident_match, h.shares_term = e.coverage, e.cosine, e.ident, e.shares_term
        hits.append(h)
    return not hits or not gate.relevant_ids(hits, g, gate.deciding_codes(question, q.required_codes))


def sweep(
    sets: dict[str, list[Question]], texts: dict[str, dict[str, str]], floors: Iterable[float]
) -> list[dict[str, Any]]:
    """One row per cosine floor: per set, false refusals and no-answer detection."""
    rows = []
    for floor in floors:
        g = gate.Gate(floor=floor)
        row: dict[str, Any] = {"floor": floor}
        for name, qs in sets.items():
            ans = [q for q in qs if q.answerable]
            no = [q for q in qs if not q.answerable]
            false = [q for q in ans if refused(q, g, texts[name][q.qid])]
            row[name] = {
                "false_refusals": round(len(false) / len(ans), 4) if ans else None,
                "false_with_answer_in_candidates": sum(1 for q in false if any(e.relevant for e in q.hits)),
                "no_answer_detected": sum(1 for q in no if refused(q, g, texts[name][q.qid])),
                "no_answer": len(no),
            }
        rows.append(row)
    return rows


def main(
    golden: str | None,
    datasets: Sequence[str],
    *,
    prefix: str,
    depth: int,
    limit: int | None,
    floors: Sequence[float],
    perturb: Sequence[str],
    out: str | None,
    dump: str | None,
) -> int:
    """Replay the gate over every question's candidates for a grid of floors (``osrag study gatesweep``)."""
    from osrag.evaluation.mistakes import perturbed
    from osrag.evaluation.suite import EVAL_PRINCIPAL, PERTURB_SEED, eval_settings

    base: Settings = eval_settings(load_settings())
    evalsets: list[EvalSet] = [load_golden(Path(golden))] if golden else []
    evalsets += [load_dataset(Path(d)) for d in datasets]
    sets: dict[str, list[Question]] = {}
    texts: dict[str, dict[str, str]] = {}
    evalsets = [es.sample(limit) for es in evalsets]
    evalsets += [perturbed(es, k, PERTURB_SEED, rename=True) for es in evalsets for k in perturb]
    for es in evalsets:
        alias = runs.alias_for(prefix, es.index_name or es.name, "main", base)
        client = SearchClient(base.model_copy(update={"alias": alias}), principal=EVAL_PRINCIPAL)
        sets[es.name] = collect(client, es, depth)
        texts[es.name] = {q.qid: q.text.strip() for q in es.queries}
        print(f"gatesweep: {es.name}: {len(sets[es.name])} questions from {alias}", file=sys.stderr)
    if dump:
        from dataclasses import asdict

        dumped = {n: [asdict(q) for q in qs] for n, qs in sets.items()}
        Path(dump).write_text(json.dumps(dumped, ensure_ascii=False) + "\n", encoding="utf-8")
    shipped = gate.cosine_floor(base.embedding_model)
    grid = sorted({shipped, *floors})
    rows = sweep(sets, texts, grid)
    text = json.dumps(
        {"model": base.embedding_model, "shipped_floor": shipped, "depth": depth, "rows": rows},
        ensure_ascii=False,
    )
    if out:
        Path(out).write_text(text + "\n", encoding="utf-8")
    for r in rows:
        cells = "  ".join(
            f"{n}: false {r[n]['false_refusals']} ({r[n]['false_with_answer_in_candidates']} w/ answer), "
            f"no-answer {r[n]['no_answer_detected']}/{r[n]['no_answer']}"
            for n in sets
        )
        mark = " (shipped)" if r["floor"] == shipped else ""
        print(f"floor {r['floor']:.3f}{mark}  {cells}")
    return 0
