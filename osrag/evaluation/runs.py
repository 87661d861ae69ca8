"""Running configurations against the live node: indices per set, ranked lists, budget deliveries.

Each set gets its own aliases (``{prefix}-{set}-{variant}``), filled through the product's
Ingester, so the numbers measure the code path users run. A configuration is a retrieval
mode on one of those aliases, optionally with its own fusion pipeline (put from the same
JSON files as the shipped one, so a row's label is exactly what ran).
"""

from __future__ import annotations

import hashlib
import re
import time
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any, TypeVar

from osrag import templates
from osrag.envelope import Envelope, Passage
from osrag.errors import ConfigError
from osrag.evaluation import metrics
from osrag.evaluation.datasets import EvalSet, Query
from osrag.ingest.indexing import Ingester
from osrag.records import ChunkSource
from osrag.search.candidates import Candidate
from osrag.search.client import SearchClient
from osrag.settings import Settings
from osrag.store.alias import AliasStore
from osrag.vocabulary import PIPELINES

Log = Callable[[str], None]
#: How a log line that reports an ingest's progress begins (the CLI does not count it as a step).
PROGRESS_MARK = "… "
T = TypeVar("T")

# Settings that change what is stored in the index: a set of overrides touching one of them
# gets its own alias, the rest (fusion, weights, gate, depth, dedup) run on the same index.
INDEX_SETTINGS = (
    "stemmer",
    "chunk_max_tokens",
    "chunk_min_tokens",
    "chunk_overlap",
    "embedding_model",
    "embedding_passage_prefix",
    "knn_engine",
    "hnsw_m",
    "hnsw_ef_construction",
    "contextualizer",  # osrag.ingest.context: what is embedded and indexed with each chunk
)
BASELINE = "bm25 · text field alone (baseline)"
BM25_HEAD = "bm25 · as shipped (text+breadcrumb+title, ident×1.5 for codes)"


@dataclass(frozen=True)
class IndexVariant:
    key: str
    strategy: str = "markdown"
    overrides: Mapping[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class Config:
    """One row of a set's table: a retrieval mode on an index variant."""

    label: str
    mode: str = "hybrid"  # a retrieval mode of SearchClient.retrieve (osrag.search.query.MODES)
    index: str = "main"
    fusion: tuple[str, tuple[float, float]] | None = None  # own pipeline; None: the alias's one
    depth: int | None = None


def shipped_label(s: Settings) -> str:
    return f"shipped default · hybrid {s.fusion} {'/'.join(f'{x:g}' for x in s.effective_fusion_weights)}"


FUSION_VARIANTS: tuple[tuple[str, tuple[float, float]], ...] = (
    ("rrf", (0.5, 0.5)),
    ("rrf", (0.7, 0.3)),
    ("rrf", (0.3, 0.7)),
    ("minmax", (0.3, 0.7)),
    ("minmax", (0.5, 0.5)),
    ("minmax", (0.6, 0.4)),
    ("minmax", (0.7, 0.3)),
    ("minmax", (0.8, 0.2)),
    ("minmax", (0.9, 0.1)),
)


def core_configs(s: Settings) -> list[Config]:
    """The rows every set gets: the shipped search, the lexical and dense heads, fusion variants."""
    out = [
        Config(shipped_label(s)),
        Config(BM25_HEAD, "bm25"),
        Config(BASELINE, "bm25-text"),
        Config("bm25 · standard analyzer", "bm25-std"),
        Config("knn", "knn"),
    ]
    for fusion, w in FUSION_VARIANTS:
        if (fusion, w) == (s.fusion, s.effective_fusion_weights):
            continue  # the shipped row already is this one
        name = "min-max" if fusion == "minmax" else "rrf"
        out.append(Config(f"hybrid {name} {w[0]:g}/{w[1]:g}", fusion=(fusion, w)))
    out.append(Config(f"{shipped_label(s)}, depth 20", depth=20))
    return out


def chunking_variants() -> list[IndexVariant]:
    """Extra indices for a set whose documents have structure (the golden set)."""
    return [
        IndexVariant("fixed", "fixed"),
        IndexVariant("light", overrides={"stemmer": "light_russian"}),
        IndexVariant("md200", overrides={"chunk_max_tokens": 200}),
        IndexVariant("md500", overrides={"chunk_max_tokens": 500}),
        IndexVariant("o0", overrides={"chunk_overlap": 0.0}),
    ]


def chunking_configs(s: Settings) -> list[Config]:
    ship = f"hybrid {s.fusion} {'/'.join(f'{x:g}' for x in s.effective_fusion_weights)}"
    return [
        Config("fixed-size chunks · bm25", "bm25", "fixed"),
        Config(f"fixed-size chunks · {ship}", index="fixed"),
        Config("bm25 · light_russian stemmer", "bm25", "light"),
        Config(f"headings 200 tok · {ship}", index="md200"),
        Config(f"headings 500 tok · {ship}", index="md500"),
        Config(f"headings, overlap 0 · {ship}", index="o0"),
    ]


# ------------------------------------------------------------------ indices
def alias_for(prefix: str, set_name: str, variant: str, s: Settings) -> str:
    """An alias per set, variant and index-shaping settings (hash), lower-case and safe."""
    shape = repr([(k, getattr(s, k)) for k in INDEX_SETTINGS]).encode("utf-8")
    tag = hashlib.sha256(shape).hexdigest()[:6]
    safe = re.sub(r"[^a-z0-9-]+", "-", set_name.lower()).strip("-") or "set"
    return f"{prefix}-{safe}-{variant}-{tag}"


def prepare_index(base: Settings, evalset: EvalSet, prefix: str, variant: IndexVariant, log: Log) -> Settings:
    """Install the alias (templates, pipelines with the current weights) and ingest the corpus."""
    s = base.model_copy(update=dict(variant.overrides))
    s = s.model_copy(update={"alias": alias_for(prefix, evalset.index_name or evalset.name, variant.key, s)})
    if s.chunk_min_tokens >= s.chunk_max_tokens:
        s = s.model_copy(update={"chunk_min_tokens": s.chunk_max_tokens // 5})
    admin = AliasStore(s)
    admin.install()
    watch = IngestLog(f"{evalset.name}/{variant.key}", documents_to_ingest(evalset), log)
    ingester = Ingester(s, admin=admin, strategy=variant.strategy)
    ingester.on_embedded = watch.embedded
    watch.start(s.alias)
    rep = evalset.ingest(ingester)
    if rep.failed and not evalset.tolerates_failed_files:
        raise ConfigError(f"{evalset.name}: corpus failed to ingest: {rep.failed[:3]}")
    evalset.ingest_failed[variant.key] = [f"{path}: {why}" for path, why in rep.failed]
    log(
        f"{evalset.name}/{variant.key} ({s.alias}): {rep.indexed} indexed, {rep.skipped} unchanged"
        + (
            f", {len(rep.failed)} failed (first: {rep.failed[0][0]}: {rep.failed[0][1]})"
            if rep.failed
            else ""
        )
    )
    return s


def documents_to_ingest(evalset: EvalSet) -> int | None:
    """How many documents the set's ingest reads: its in-memory rows, or its corpus folder's files."""
    docs = getattr(evalset, "docs", None)
    if isinstance(docs, list) and docs:
        return len(docs)
    corpus = getattr(evalset, "corpus", None)
    if corpus is None:
        return None
    from osrag.ingest.walking import walk

    return sum(1 for _ in walk([corpus]))


class IngestLog:
    """An eval ingest's progress as a log line every ``every_s`` seconds while its chunks are
    embedded (documents done of the total, ETA from the measured throughput), so a long ingest
    says how far it is, on a terminal or in a CI log alike."""

    def __init__(
        self,
        label: str,
        total: int | None,
        log: Log,
        every_s: float = 10.0,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        from osrag.progress import Throughput

        self.label, self.total, self.log, self.every_s, self.clock = label, total, log, every_s, clock
        self.docs_done = 0.0
        self.rate = Throughput(clock)
        self.last = clock()

    def start(self, alias: str) -> None:
        of = f"{self.total} documents" if self.total is not None else "the corpus"
        self.log(f"{PROGRESS_MARK}{self.label}: ingesting {of} into {alias}")

    def embedded(self, done: int, of: int, docs: int) -> None:
        """``Ingester.on_embedded``: the documents whose chunks are embedded, a batch's share included."""
        here = self.docs_done + (docs * done / of if of else docs)
        if done >= of:
            self.docs_done += docs
        self.rate.observe(here)
        now = self.clock()
        if now - self.last < self.every_s:
            return
        self.last = now
        total = self.total if self.total is not None else 0
        eta = self.rate.eta_s(total) if self.total else None
        from osrag.progress import clock_text

        left = f", ETA {clock_text(eta)}" if eta is not None else ""
        of_total = f"/{self.total}" if self.total is not None else ""
        self.log(f"{PROGRESS_MARK}{self.label}: {here:.0f}{of_total} documents embedded{left}")


def put_fusion_pipeline(s: Settings, fusion: str, weights: tuple[float, float]) -> str:
    """A search pipeline with the given fusion and weights, from the shipped JSON file."""
    admin = AliasStore(s)
    name = f"{s.alias}-{fusion}-{weights[0]:g}-{weights[1]:g}"
    body = templates.load_pipeline(PIPELINES[fusion], {**admin._params(), "weights": list(weights)})
    admin.cluster.call(
        "put eval pipeline",
        admin.cluster.client.transport.perform_request,
        "PUT",
        f"/_search/pipeline/{name}",
        body=body,
    )
    return name


# ------------------------------------------------------------------ retrieval
@dataclass
class Ranked:
    """One configuration's ranked keys per question (all questions) and its latencies."""

    config: Config
    keys: dict[str, list[str]] = field(default_factory=dict)
    hits: dict[str, list[Candidate]] = field(default_factory=dict)
    latency_ms: list[float] = field(default_factory=list)


def pmap(fn: Callable[[Query], T], queries: Sequence[Query], workers: int) -> list[T]:
    """``fn`` over the questions in order; a few in flight at once when ``workers`` > 1."""
    if workers <= 1 or len(queries) < 2:
        return [fn(q) for q in queries]
    first = fn(queries[0])  # lazy parts of the client (index meta, embedder) resolve once, here
    with ThreadPoolExecutor(max_workers=workers) as pool:
        return [first, *pool.map(fn, queries[1:])]


def rank_all(
    client: SearchClient,
    evalset: EvalSet,
    cfg: Config,
    depth: int,
    pipeline: str | None,
    keep_hits: bool = False,
    workers: int = 1,
) -> Ranked:
    d = cfg.depth or depth

    def one(q: Query) -> tuple[list[Candidate], float]:
        t0 = time.perf_counter()
        hits = client.retrieve(q.text, mode=cfg.mode, depth=d, filters=q.filters, pipeline=pipeline).hits
        return hits, (time.perf_counter() - t0) * 1000

    out = Ranked(cfg)
    for q, (hits, ms) in zip(evalset.queries, pmap(one, evalset.queries, workers)):
        out.latency_ms.append(ms)
        out.keys[q.qid] = [evalset.key(q, h.source) for h in hits]
        if keep_hits:
            out.hits[q.qid] = hits
    return out


# ------------------------------------------------------------------ budget
TOPK = "top-k (hybrid order)"
SELECTION = "budget selection (search())"


@dataclass
class BudgetRun:
    """Per budget and method: per-question deliveries (answerable) and «nothing found» flags."""

    rows: dict[str, dict[int, list[dict[str, float]]]] = field(default_factory=dict)
    nothing: dict[str, dict[int, dict[str, list[bool]]]] = field(default_factory=dict)
    stage_ms: dict[str, list[float]] = field(default_factory=dict)

    def add(
        self, method: str, budget: int, q: Query, delivered: list[tuple[str | None, int]], none: bool
    ) -> None:
        if q.answerable:
            self.rows.setdefault(method, {}).setdefault(budget, []).append(
                metrics.delivery(delivered, q.relevant)
            )
        by = self.nothing.setdefault(method, {}).setdefault(budget, {"answerable": [], "no_answer": []})
        by["answerable" if q.answerable else "no_answer"].append(none)


def _stored_tokens(src: ChunkSource) -> int:
    t = src.token_count
    if t is None:
        raise ConfigError(f"chunk {src.chunk_id!r} has no stored token_count")
    return t


def budget_run(
    client: SearchClient,
    evalset: EvalSet,
    topk_hits: Mapping[str, Sequence[Candidate]],
    budgets: Sequence[int],
    depth: int,
    extra_topk: Mapping[str, Mapping[str, Sequence[Candidate]]] | None = None,
    stage_budget: int | None = None,
    workers: int = 1,
) -> BudgetRun:
    """Plain top-k (the shipped hybrid's candidates, in order, while they fit) vs ``search()``.

    Both are charged the token count stored at ingest (what ``search()`` charges).
    """
    out = BudgetRun()
    methods = {TOPK: topk_hits, **(extra_topk or {})}
    for b in budgets:

        def one(q: Query, b: int = b) -> Envelope:
            return client.search(q.text, budget_tokens=b, filters=q.filters, depth=depth, rerank=False)

        for q, env in zip(evalset.queries, pmap(one, evalset.queries, workers)):
            for method, ranked_hits in methods.items():
                sel = metrics.topk_within_budget(
                    list(ranked_hits[q.qid]), b, lambda h: _stored_tokens(h.source)
                )
                delivered = [(_rel(evalset, q, h.source), _stored_tokens(h.source)) for h in sel]
                out.add(method, b, q, delivered, not sel)
            if b == stage_budget:
                for k, v in env.timings_ms.items():
                    out.stage_ms.setdefault(k, []).append(v)
            delivered = [(_passage_rel(evalset, q, p), p.tokens) for p in env.passages]
            out.add(SELECTION, b, q, delivered, env.status == "nothing_relevant")
    return out


def _passage_rel(evalset: EvalSet, q: Query, p: Passage) -> str | None:
    """A delivered passage's relevant key; a trimmed one is judged on the text it kept."""
    src = ChunkSource(
        chunk_id=p.chunk_id,
        doc_id=p.doc_id,
        start=p.start,
        end=p.end,
        heading_path=tuple(p.heading_path),
        title=p.title,
    )
    k = evalset.trimmed_key(q, src, p.text) if p.trimmed else evalset.key(q, src)
    return k if k in q.relevant else None


def _rel(evalset: EvalSet, q: Query, src: ChunkSource) -> str | None:
    k = evalset.key(q, src)
    return k if k in q.relevant else None
