"""Evaluation on the golden set: configurations side by side, in one run.

Relevance is judged on character spans, so every chunker is judged the same
way: a retrieved chunk counts for a relevant section when it comes from the
same document and its span overlaps the section's span (a heading and
everything under it). Ranked lists are turned into section keys before the
metrics (several chunks of one section count once, at the first position).

Configurations: fixed-size vs heading-aware chunking; BM25 only (standard
analyzer and osrag's Russian analyzer, Snowball vs light stemmer), kNN only,
hybrid with equal-weight RRF, weighted RRF and min-max; plain top-k (the
baseline, kept forever) vs budget selection at the same token budgets.
Reranking is reported only when a trained cross-encoder loads; nothing here
claims a rerank gain that was not measured.
"""

from __future__ import annotations

import json
import platform
import time
from collections import defaultdict
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from osrag import metrics
from osrag.admin import Admin
from osrag.chunking import Document, parse_sections
from osrag.errors import ConfigError
from osrag.indexing import Ingester, find_files, read_document
from osrag.names import PIPELINES
from osrag.search import Hit, SearchClient
from osrag.settings import Settings

DEFAULT_BUDGETS = (150, 300, 600, 1000, 1500, 2500)


# ------------------------------------------------------------------ golden set
@dataclass(frozen=True)
class GoldenQuestion:
    qid: str
    question: str
    qtype: str
    relevant: tuple[tuple[str, str | None], ...]
    filters: dict[str, Any] = field(default_factory=dict)

    @property
    def answerable(self) -> bool:
        return bool(self.relevant)


def load_golden(path: Path) -> list[GoldenQuestion]:
    out = []
    for n, line in enumerate(Path(path).read_text(encoding="utf-8").splitlines(), start=1):
        if not line.strip():
            continue
        try:
            row = json.loads(line)
            rel = tuple((r["doc_id"], r.get("section")) for r in row.get("relevant", []))
            out.append(
                GoldenQuestion(row["id"], row["question"], row["type"], rel, dict(row.get("filters") or {}))
            )
        except (ValueError, KeyError, TypeError) as exc:
            raise ConfigError(f"{path}:{n}: bad golden line ({exc})") from exc
    return out


class SectionSpans:
    """Character spans of the golden sections, from the corpus documents."""

    def __init__(self, corpus_dir: Path) -> None:
        self.docs: dict[str, Document] = {}
        for path, root in find_files([corpus_dir]):
            doc = read_document(path, root, 50_000_000)
            self.docs[doc.doc_id] = doc

    def span(self, doc_id: str, section: str | None) -> tuple[int, int]:
        doc = self.docs.get(doc_id)
        if doc is None:
            raise ConfigError(f"golden refers to unknown document {doc_id!r}")
        if section is None:
            return 0, len(doc.text)
        for s in parse_sections(doc):
            if s.heading_path and s.heading_path[-1].strip() == section.strip():
                return s.start, s.end
        raise ConfigError(f"golden refers to unknown section {section!r} in {doc_id}")

    def keys_for(self, q: GoldenQuestion) -> dict[str, tuple[str, int, int]]:
        return {f"{d}#{s or '*'}": (d, *self.span(d, s)) for d, s in q.relevant}


def judge(hit_src: dict[str, Any], rel: dict[str, tuple[str, int, int]]) -> str | None:
    """The relevant section key this chunk belongs to, if any."""
    d, a, b = hit_src.get("doc_id"), hit_src.get("start"), hit_src.get("end")
    if a is None or b is None:
        return None
    for key, (doc, s, e) in rel.items():
        if doc == d and a < e and b > s:
            return key
    return None


def ranked_keys(hits: Sequence[Hit], rel: dict[str, tuple[str, int, int]]) -> list[str]:
    return [judge(h.source, rel) or f"~{h.chunk_id}" for h in hits]


# ------------------------------------------------------------------ retrieval metrics
@dataclass
class ConfigResult:
    name: str
    per_q: dict[str, dict[str, float]] = field(default_factory=dict)
    latency_ms: list[float] = field(default_factory=list)

    def mean(self, metric: str, qids: Sequence[str] | None = None) -> float:
        vals = [m[metric] for q, m in self.per_q.items() if (qids is None or q in qids) and metric in m]
        return metrics.mean(vals)


def retrieval_metrics(keys: list[str], relevant: Sequence[str]) -> dict[str, float]:
    rel = set(relevant)
    return {
        "hit@3": metrics.hit_at_k(keys, rel, 3),
        "hit@5": metrics.hit_at_k(keys, rel, 5),
        "hit@20": metrics.hit_at_k(keys, rel, 20),
        "recall@20": metrics.recall_at_k(keys, rel, 20),
        "mrr": metrics.reciprocal_rank(keys, rel),
        "ndcg@5": metrics.ndcg_at_k(keys, rel, 5),
    }


def topk_within_budget(hits: Sequence[Hit], budget: int, count: Callable[[str], int]) -> list[Hit]:
    """The baseline: chunks in rank order while they fit (whole chunks, no dedup, no gate)."""
    out, spent = [], 0
    for h in hits:
        t = count(h.source.get("text", ""))
        if spent + t > budget:
            break
        out.append(h)
        spent += t
    return out


def delivery_metrics(
    delivered: Sequence[tuple[dict[str, Any], int]], rel: dict[str, tuple[str, int, int]]
) -> dict[str, float]:
    keys = {judge(src, rel) for src, _ in delivered} - {None}
    tokens = sum(t for _, t in delivered)
    off = sum(t for src, t in delivered if judge(src, rel) is None)
    return {
        "recall_in_budget": len(keys) / len(rel) if rel else float("nan"),
        "answered": 1.0 if keys else 0.0,
        "tokens": float(tokens),
        "off_topic_share": off / tokens if tokens else float("nan"),
    }


# ------------------------------------------------------------------ the run
@dataclass
class EvalConfig:
    golden: Path
    corpus: Path
    out_dir: Path | None
    budget: int = 1000
    budgets: tuple[int, ...] = DEFAULT_BUDGETS
    depth: int = 40
    prefix: str = "osrag-eval"
    limit: int | None = None


def _settings_for(base: Settings, alias: str, **kw: Any) -> Settings:
    return base.model_copy(update={"alias": alias, **kw})


def _prepare(
    base: Settings, alias: str, corpus: Path, strategy: str, log: Callable[[str], None], **kw: Any
) -> Settings:
    s = _settings_for(base, alias, **kw)
    if s.chunk_min_tokens >= s.chunk_max_tokens:
        s = s.model_copy(update={"chunk_min_tokens": s.chunk_max_tokens // 5})
    admin = Admin(s)
    admin.install()
    rep = Ingester(s, admin=admin, strategy=strategy).ingest([corpus])
    if rep.failed:
        raise ConfigError(f"eval corpus failed to ingest: {rep.failed[:3]}")
    log(f"index {alias}: {rep.indexed} indexed, {rep.skipped} unchanged")
    return s


def run(base: Settings, cfg: EvalConfig, log: Callable[[str], None] = lambda m: None) -> dict[str, Any]:
    started = time.perf_counter()
    questions = load_golden(cfg.golden)
    if cfg.limit:
        questions = questions[: cfg.limit]
    spans = SectionSpans(cfg.corpus)
    rels = {q.qid: spans.keys_for(q) for q in questions}
    answerable = [q for q in questions if q.answerable]
    ans_ids = [q.qid for q in answerable]

    model = base.embedding_model or "navec:news-300d"
    common = {"embedding_model": model, "rerank": False}
    s_md = _prepare(base, f"{cfg.prefix}-md", cfg.corpus, "markdown", log, **common)
    s_fx = _prepare(base, f"{cfg.prefix}-fixed", cfg.corpus, "fixed", log, **common)
    s_lt = _prepare(
        base, f"{cfg.prefix}-light", cfg.corpus, "markdown", log, stemmer="light_russian", **common
    )

    # Extra fusion pipelines on the md alias: weighted RRF variants from the same JSON file.
    md_admin = Admin(s_md)
    # Every fusion variant gets its own pipeline from the same JSON files, so each row's label is
    # exactly what ran (the alias's own pipeline carries the shipped weights).
    variants = [
        ("rrf", (0.5, 0.5)),
        ("rrf", (0.9, 0.1)),
        ("rrf", (0.8, 0.2)),
        ("rrf", (0.7, 0.3)),
        ("rrf", (0.3, 0.7)),
        ("minmax", (0.5, 0.5)),
        ("minmax", (0.9, 0.1)),
    ]
    from osrag import templates

    names: dict[tuple[str, tuple[float, float]], str] = {}
    for fusion, w in variants:
        name = f"{cfg.prefix}-{fusion}-{w[0]:g}-{w[1]:g}"
        body = templates.load_pipeline(PIPELINES[fusion], {**md_admin._params(), "weights": list(w)})
        md_admin.cluster.call(
            "put eval pipeline",
            md_admin.cluster.client.transport.perform_request,
            "PUT",
            f"/_search/pipeline/{name}",
            body=body,
        )
        names[(fusion, w)] = name
    shipped = f"{base.fusion} {'/'.join(f'{x:g}' for x in base.rrf_weights)}"

    configs: list[tuple[str, Settings, str, str | None]] = [
        ("fixed-size · bm25", s_fx, "bm25", None),
        (f"fixed-size · hybrid {shipped}", s_fx, "hybrid", Admin(s_fx).pipeline_name(base.fusion)),
        ("headings · bm25 standard analyzer", s_md, "bm25-std", None),
        ("headings · bm25 light_russian", s_lt, "bm25", None),
        ("headings · bm25 russian", s_md, "bm25", None),
        ("headings · knn", s_md, "knn", None),
    ]
    for fusion, w in variants:
        label = "min-max" if fusion == "minmax" else "rrf"
        configs.append((f"headings · hybrid {label} {w[0]:g}/{w[1]:g}", s_md, "hybrid", names[(fusion, w)]))
    # Chunk size and overlap: the same hybrid query over indices chunked differently.
    for max_tokens, overlap in ((200, 0.12), (500, 0.12), (350, 0.0)):
        alias = f"{cfg.prefix}-md{max_tokens}-o{int(overlap * 100)}"
        sx = _prepare(
            base,
            alias,
            cfg.corpus,
            "markdown",
            log,
            chunk_max_tokens=max_tokens,
            chunk_overlap=overlap,
            **common,
        )
        configs.append(
            (
                f"headings {max_tokens} tok, overlap {overlap:.2f} · hybrid {shipped}",
                sx,
                "hybrid",
                Admin(sx).pipeline_name(base.fusion),
            )
        )
    configs.append(
        (f"headings · hybrid {shipped}, depth 20", s_md, "hybrid", md_admin.pipeline_name(base.fusion))
    )
    chosen = f"shipped default · hybrid {shipped}, depth {cfg.depth}"
    configs.append((chosen, s_md, "hybrid", md_admin.pipeline_name(base.fusion)))
    results: list[ConfigResult] = []
    retrievals: dict[str, dict[str, list[Hit]]] = {}
    clients: dict[str, SearchClient] = {}
    for name, s, mode, pipeline in configs:
        client = clients.setdefault(s.alias, SearchClient(s))
        res = ConfigResult(name)
        retrievals[name] = {}
        for q in questions:
            t0 = time.perf_counter()
            depth = 20 if name.endswith("depth 20") else cfg.depth
            ret = client.retrieve(q.question, mode=mode, depth=depth, filters=q.filters, pipeline=pipeline)
            res.latency_ms.append((time.perf_counter() - t0) * 1000)
            retrievals[name][q.qid] = ret.hits
            if q.answerable:
                res.per_q[q.qid] = retrieval_metrics(ranked_keys(ret.hits, rels[q.qid]), list(rels[q.qid]))
                res.per_q[q.qid]["top5_tokens"] = float(
                    sum(h.source.get("token_count", 0) for h in ret.hits[:5])
                )
        results.append(res)
        log(f"{name}: hit@5 {res.mean('hit@5'):.3f} recall@20 {res.mean('recall@20'):.3f}")

    # Budget: plain top-k baseline vs budget selection, same retrieval config and token budget.
    client = clients[s_md.alias]
    count = client.embedder().count_tokens
    fixed_name = f"fixed-size · hybrid {shipped}"
    methods = ("top-k", "top-k, fixed-size chunks", "budget selection")
    budget_rows: dict[str, dict[int, dict[str, float]]] = {k: {} for k in methods}
    no_answer_ok: dict[str, dict[int, float]] = {k: {} for k in methods}
    stage_ms: dict[str, list[float]] = defaultdict(list)
    for b in sorted(set(cfg.budgets) | {cfg.budget}):
        acc: dict[str, list[dict[str, float]]] = {k: [] for k in methods}
        na: dict[str, list[float]] = {k: [] for k in methods}
        for q in questions:
            hits = retrievals[chosen][q.qid]
            base_sel = topk_within_budget(hits, b, count)
            fixed_sel = topk_within_budget(retrievals[fixed_name][q.qid], b, count)
            env = client.search(q.question, budget_tokens=b, filters=q.filters, depth=cfg.depth)
            if b == cfg.budget:
                for k, v in env.timings_ms.items():
                    stage_ms[k].append(v)
            sel_srcs = [
                ({"doc_id": p.doc_id, "start": p.start, "end": p.end}, p.tokens) for p in env.passages
            ]
            if q.answerable:
                acc["top-k"].append(
                    delivery_metrics(
                        [(h.source, count(h.source.get("text", ""))) for h in base_sel], rels[q.qid]
                    )
                )
                acc["budget selection"].append(delivery_metrics(sel_srcs, rels[q.qid]))
                acc["top-k, fixed-size chunks"].append(
                    delivery_metrics(
                        [(h.source, count(h.source.get("text", ""))) for h in fixed_sel], rels[q.qid]
                    )
                )
            else:
                na["top-k"].append(1.0 if not base_sel else 0.0)  # top-k always returns something
                na["top-k, fixed-size chunks"].append(1.0 if not fixed_sel else 0.0)
                na["budget selection"].append(1.0 if env.status == "nothing_relevant" else 0.0)
        for k in acc:
            rows = acc[k]
            answered = [r for r in rows if r["answered"]]
            budget_rows[k][b] = {
                "recall_in_budget": metrics.mean(r["recall_in_budget"] for r in rows),
                "answered": metrics.mean(r["answered"] for r in rows),
                "tokens_per_answered": metrics.mean(r["tokens"] for r in answered),
                "off_topic_share": metrics.mean(r["off_topic_share"] for r in rows),
            }
            no_answer_ok[k][b] = metrics.mean(na[k])
        log(
            f"budget {b}: top-k recall {budget_rows['top-k'][b]['recall_in_budget']:.3f} "
            f"vs selection {budget_rows['budget selection'][b]['recall_in_budget']:.3f}"
        )

    by_type: dict[str, dict[str, dict[str, float]]] = {}
    types = sorted({q.qtype for q in answerable})
    for res in results:
        by_type[res.name] = {
            t: {
                "hit@5": res.mean("hit@5", [q.qid for q in answerable if q.qtype == t]),
                "recall@20": res.mean("recall@20", [q.qid for q in answerable if q.qtype == t]),
            }
            for t in types
        }

    emb = client.embedder()
    report = {
        "when": time.strftime("%Y-%m-%d %H:%M:%S %Z"),
        "machine": machine_info(),
        "opensearch": Admin(s_md).cluster.info().get("version", {}).get("number"),
        "embedding_model": emb.model_name,
        "embedding_dimension": emb.dimension,
        "reranker": "not measured: no trained cross-encoder is loadable offline on this machine",
        "questions": len(questions),
        "answerable": len(answerable),
        "no_answer": len(questions) - len(answerable),
        "types": {t: sum(1 for q in questions if q.qtype == t) for t in sorted({q.qtype for q in questions})},
        "depth": cfg.depth,
        "budget": cfg.budget,
        "chosen": chosen,
        "retrieval": [
            {
                "config": r.name,
                **{
                    m: round(r.mean(m, ans_ids), 4)
                    for m in ("hit@3", "hit@5", "hit@20", "recall@20", "mrr", "ndcg@5", "top5_tokens")
                },
                "p50_ms": round(metrics.percentile(r.latency_ms, 50), 1),
                "p95_ms": round(metrics.percentile(r.latency_ms, 95), 1),
            }
            for r in results
        ],
        "by_type": by_type,
        "budget_curve": {
            k: {str(b): {m: round(v, 4) for m, v in row.items()} for b, row in rows.items()}
            for k, rows in budget_rows.items()
        },
        "no_answer_correct": {
            k: {str(b): round(v, 4) for b, v in rows.items()} for k, rows in no_answer_ok.items()
        },
        "stage_latency_ms": {
            k: {"p50": round(metrics.percentile(v, 50), 2), "p95": round(metrics.percentile(v, 95), 2)}
            for k, v in stage_ms.items()
        },
        "seconds": round(time.perf_counter() - started, 1),
    }
    if cfg.out_dir:
        write_outputs(report, cfg.out_dir)
    return report


def machine_info() -> dict[str, Any]:
    cpu = ""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    import os

    mem = ""
    try:
        kb = int(
            next(
                ln for ln in Path("/proc/meminfo").read_text().splitlines() if ln.startswith("MemTotal")
            ).split()[1]
        )
        mem = f"{kb / 1024 / 1024:.1f} GiB"
    except (OSError, StopIteration, ValueError):
        pass
    return {"cpu": cpu, "cores": os.cpu_count(), "memory": mem, "python": platform.python_version()}


# ------------------------------------------------------------------ output
def format_table(report: dict[str, Any]) -> str:
    cols = ("hit@3", "hit@5", "hit@20", "recall@20", "mrr", "ndcg@5", "p50_ms", "p95_ms")
    w = max(len(r["config"]) for r in report["retrieval"])
    lines = [f"{'config':<{w}}  " + "  ".join(f"{c:>9}" for c in cols)]
    for r in report["retrieval"]:
        lines.append(
            f"{r['config']:<{w}}  "
            + "  ".join(f"{r[c]:>9.3f}" if "ms" not in c else f"{r[c]:>9.1f}" for c in cols)
        )
    lines.append("")
    b = str(report["budget"])
    lines.append(f"budget {b} tokens ({report['chosen']}, same candidates):")
    lines.append(
        f"{'':<26}{'recall_in_budget':>18}{'answered':>10}{'tok/answered':>14}{'off-topic':>11}{'no-answer ok':>14}"
    )
    for k, rows in report["budget_curve"].items():
        row = rows[b]
        lines.append(
            f"{k:<26}{row['recall_in_budget']:>18.3f}{row['answered']:>10.3f}{row['tokens_per_answered']:>14.1f}"
            f"{row['off_topic_share']:>11.3f}{report['no_answer_correct'][k][b]:>14.3f}"
        )
    return "\n".join(lines)


def write_outputs(report: dict[str, Any], out_dir: Path) -> None:
    out_dir.mkdir(parents=True, exist_ok=True)
    (out_dir / "results.json").write_text(
        json.dumps(report, ensure_ascii=False, indent=2) + "\n", encoding="utf-8"
    )
    (out_dir / "REPORT.md").write_text(markdown_report(report), encoding="utf-8")
    plot_budget_curve(report, out_dir / "recall_vs_budget.png")


def markdown_report(r: dict[str, Any]) -> str:
    cols = ("hit@3", "hit@5", "hit@20", "recall@20", "mrr", "ndcg@5", "top5_tokens", "p50_ms", "p95_ms")
    out = [
        "# osrag eval report",
        "",
        f"Generated by `osrag eval` on {r['when']}: {r['questions']} questions ({r['answerable']} answerable, "
        f"{r['no_answer']} with no answer in the corpus), OpenSearch {r['opensearch']}, "
        f"{r['machine']['cores']} cores ({r['machine']['cpu']}), {r['machine']['memory']}.",
        "",
        "## Models, and what they mean for these numbers",
        "",
        f"- Embeddings: `{r['embedding_model']}` (dimension {r['embedding_dimension']}), a static mean-of-word-vectors "
        "model built from navec Russian word vectors. It is what an offline machine can load; a trained multilingual "
        "encoder (production default `intfloat/multilingual-e5-base`) would make the kNN head much stronger, so the "
        "kNN-only and hybrid rows understate what the dense head gives in production.",
        f"- Reranker: {r['reranker']}. No rerank row is reported and no rerank gain is claimed.",
        "- Token counts use the embedding model's own tokenizer (words and punctuation for navec).",
        "",
        "## Retrieval (candidates before selection; metrics over answerable questions, section level)",
        "",
        "| config | " + " | ".join(cols) + " |",
        "|---|" + "---|" * len(cols),
    ]
    for row in r["retrieval"]:
        out.append(
            f"| {row['config']} | "
            + " | ".join(f"{row[c]:.1f}" if ("ms" in c or "tokens" in c) else f"{row[c]:.3f}" for c in cols)
            + " |"
        )
    out += [
        "",
        "`top5_tokens`: tokens in the first five candidates. Section-level hits favour bigger chunks "
        "(a 1200-character window overlaps more sections), so compare chunkers with it and with the budget "
        "table below, which charges every token.",
        "",
    ]
    out += defaults_section(r)
    out += [
        "",
        f"## Plain top-k (baseline) vs budget selection ({r['chosen']}, candidate depth {r['depth']})",
        "",
        "| budget | method | recall within budget | answered | tokens per answered question | off-topic token share | correct «nothing found» |",
        "|---|---|---|---|---|---|---|",
    ]
    budgets = sorted(int(b) for b in next(iter(r["budget_curve"].values())))
    for b in budgets:
        for k, rows in r["budget_curve"].items():
            row = rows[str(b)]
            out.append(
                f"| {b} | {k} | {row['recall_in_budget']:.3f} | {row['answered']:.3f} | "
                f"{row['tokens_per_answered']:.1f} | {row['off_topic_share']:.3f} | {r['no_answer_correct'][k][str(b)]:.3f} |"
            )
    out += [
        "",
        "![recall within budget](recall_vs_budget.png)",
        "",
        "## By question type (hit@5 / recall@20)",
        "",
    ]
    types = sorted(next(iter(r["by_type"].values())).keys())
    out.append("| config | " + " | ".join(types) + " |")
    out.append("|---|" + "---|" * len(types))
    for name, row in r["by_type"].items():
        out.append(
            f"| {name} | "
            + " | ".join(f"{row[t]['hit@5']:.2f} / {row[t]['recall@20']:.2f}" for t in types)
            + " |"
        )
    out += [
        "",
        f"## Latency per stage of `SearchClient.search` at budget {r['budget']} (ms)",
        "",
        "| stage | p50 | p95 |",
        "|---|---|---|",
    ]
    for k, v in r["stage_latency_ms"].items():
        out.append(f"| {k} | {v['p50']:.2f} | {v['p95']:.2f} |")
    out += [
        "",
        f"Run time {r['seconds']} s. Re-running `osrag eval golden/golden.jsonl` reproduces these numbers up to timing.",
        "",
    ]
    return "\n".join(out)


def defaults_section(r: dict[str, Any]) -> list[str]:
    """Why the shipped defaults are what they are, with the numbers from this run."""
    rows = {row["config"]: row for row in r["retrieval"]}

    def cite(name: str, *metrics_: str) -> str:
        row = rows.get(name)
        if not row:
            return f"{name}: (not run)"
        return f"{name}: " + ", ".join(f"{m} {row[m]:.3f}" for m in metrics_)

    m = ("hit@5", "recall@20", "mrr")
    out = ["## Shipped defaults and the numbers behind them", ""]
    out.append(
        "- **Fusion: RRF with weights 0.9 (BM25) / 0.1 (kNN), depth 40.** With this weak dense head, "
        "equal weights lose top-5 precision to stemmed BM25 while deeper recall holds up; leaning on BM25 "
        "keeps most of its precision and gives the best recall@20 of all fusions tried. Min-max 0.9/0.1 "
        "is as good or slightly better at the top (one setting away: `OSRAG_FUSION=minmax`); RRF stays "
        "the default because the selection results below are the same for both and rank fusion does not "
        "depend on score distributions, which change with the model and the corpus."
    )
    for name in (
        "headings · bm25 russian",
        "headings · hybrid rrf 0.5/0.5",
        "headings · hybrid rrf 0.9/0.1",
        "headings · hybrid min-max 0.9/0.1",
        "headings · hybrid rrf 0.9/0.1, depth 20",
    ):
        out.append(f"  - {cite(name, *m)}")
    out.append(
        "- **Stemmer: Snowball `russian`.** It joins чай/чая/чаю and оформить/оформил, which "
        "`light_russian` keeps apart; the standard analyzer is far behind both."
    )
    for name in (
        "headings · bm25 russian",
        "headings · bm25 light_russian",
        "headings · bm25 standard analyzer",
    ):
        out.append(f"  - {cite(name, 'hit@3', 'hit@5', 'recall@20', 'mrr')}")
    out.append(
        "- **Chunking: headings, at most 350 tokens, overlap 0.12, minimum 40.** Most sections of this corpus "
        "fit in 200 tokens, so the limit and the overlap barely change the chunks; 350 keeps whole tables "
        "and functions together for the reserved slot. Fixed windows look better on section-level hits "
        "because each window spans several sections (top5_tokens is about twice as large); the budget "
        "table charges them for those tokens."
    )
    for name in (
        "headings 200 tok, overlap 0.12 · hybrid rrf 0.9/0.1",
        "headings · hybrid rrf 0.9/0.1",
        "headings 500 tok, overlap 0.12 · hybrid rrf 0.9/0.1",
        "headings 350 tok, overlap 0.00 · hybrid rrf 0.9/0.1",
    ):
        out.append(f"  - {cite(name, 'hit@5', 'recall@20', 'top5_tokens')}")
    out.append(
        "- **Selection: near-duplicates at cosine ≥ 0.95 or 3-gram containment ≥ 0.8; evidence order "
        "(2·term coverage + cosine + exact code + rank prior) when no reranker runs; a chunk must cover "
        "half the question's terms, reach cosine 0.65 or name its code, and be within 60 % of the best "
        "coverage (or 95 % of the best cosine).** This is what beats top-k at small budgets and says "
        "«nothing found» for most no-answer questions; at large budgets top-k's recall is higher because "
        "it spends the whole budget on whatever ranks next, and the selection stops early by design."
    )
    out.append("")
    return out


def plot_budget_curve(r: dict[str, Any], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(6.4, 4.0), dpi=110)
    for k, rows in r["budget_curve"].items():
        xs = sorted(int(b) for b in rows)
        ax.plot(xs, [rows[str(x)]["recall_in_budget"] for x in xs], marker="o", label=k)
    ax.set_xlabel("token budget")
    ax.set_ylabel("recall of relevant sections within budget")
    ax.set_ylim(0, 1)
    ax.grid(alpha=0.3)
    ax.legend()
    ax.set_title(f"golden set, {r['embedding_model']}")
    fig.tight_layout()
    fig.savefig(path)
    plt.close(fig)
