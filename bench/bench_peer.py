"""osrag against a peer on the same index and model: Haystack's OpenSearch retrievers.

    .venv/bin/python bench/bench_peer.py [--sizes 1000,10000] [--queries 40] [--reps 2]

Needs the ``bench`` extra (``pip install -e '.[bench]'``: haystack-ai, opensearch-haystack) and
the ``osrag-bench-real-{N}k`` indices of ``bench_query.py`` (built there; reused here).

Side by side per question, in an order rotated per question, on the same index: the peer's
``OpenSearchBM25Retriever`` (a ``match`` on ``text``, the analyzed chunk text, through its
``custom_query``), its ``OpenSearchEmbeddingRetriever`` (the ``embedding`` field, the question
embedded by the same navec model) and its hybrid (both, fused by its own ``DocumentJoiner``
with reciprocal rank fusion: two requests); osrag's BM25 head (``retrieve(mode="bm25")``), its
native hybrid head and the whole ``search()`` without rerank (gate, selection, envelope), also
without passage trimming (``trim_passages=False``) to tell that step's cost apart.
Both sides fetch 40 candidates per head. osrag reads as ``Principal.admin_bypass()`` (its
visibility and archive clauses still apply; the peer has no filters).

For each: wall p50/p95 (ms), requests per question (the transport's ``perform_request``
wrapped on both clients), and for osrag's ``search()`` the client's overhead: wall - the
server's ``took`` - the question's embedding (reported on its own). The embedding is inside
the peer's hybrid and osrag's hybrid/search wall times alike. Results: ``bench/results/peer.md``.
"""

from __future__ import annotations

import argparse
import datetime as dt
import os
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "bench"))

import corpus_queries  # noqa: E402
from bench_common import pct  # noqa: E402

from osrag.access import Principal  # noqa: E402
from osrag.embedding import embedder_for  # noqa: E402
from osrag.search.client import SearchClient  # noqa: E402
from osrag.settings import Settings  # noqa: E402
from osrag.store.alias import AliasStore  # noqa: E402

MODEL = "navec:news-300d"
DEPTH = 40
WHO = Principal.admin_bypass()
PATHS = (
    "peer BM25",
    "peer embedding",
    "peer hybrid (RRF)",
    "osrag BM25 head",
    "osrag BM25 head + vectors",
    "osrag hybrid head",
    "osrag search()",
    "osrag search(), untrimmed",
)


class Counted:
    """Counts the requests a client's transport sends."""

    def __init__(self, transport: Any) -> None:
        self.n = 0
        inner = transport.perform_request

        def counted(*a: Any, **kw: Any) -> Any:
            self.n += 1
            return inner(*a, **kw)

        transport.perform_request = counted


class Peer:
    """Haystack's retrievers on the index behind ``alias``, as a new user would wire them."""

    def __init__(self, url: str, index: str, dim: int, embed: Callable[[str], list[float]]) -> None:
        from haystack.components.joiners import DocumentJoiner
        from haystack_integrations.components.retrievers.opensearch import (
            OpenSearchBM25Retriever,
            OpenSearchEmbeddingRetriever,
        )
        from haystack_integrations.document_stores.opensearch import OpenSearchDocumentStore

        self.store = OpenSearchDocumentStore(
            hosts=url, index=index, embedding_dim=dim, create_index=False, http_auth=None
        )
        self.bm25 = OpenSearchBM25Retriever(
            document_store=self.store,
            top_k=DEPTH,
            custom_query={"query": {"match": {"text": {"query": "$query"}}}},
        )
        self.knn = OpenSearchEmbeddingRetriever(document_store=self.store, top_k=DEPTH)
        self.joiner = DocumentJoiner(join_mode="reciprocal_rank_fusion", top_k=DEPTH)
        self.embed = embed
        self.counter: Counted | None = None

    def count(self) -> Counted:
        if self.counter is None:
            self.bm25.run(query="прогрев")  # the store's client is made on first use
            self.counter = Counted(self.store._client.transport)
        return self.counter

    def run_bm25(self, q: str) -> int:
        return len(self.bm25.run(query=q)["documents"])

    def run_knn(self, q: str) -> int:
        return len(self.knn.run(query_embedding=self.embed(q))["documents"])

    def run_hybrid(self, q: str) -> int:
        a = self.bm25.run(query=q)["documents"]
        b = self.knn.run(query_embedding=self.embed(q))["documents"]
        return len(self.joiner.run(documents=[a, b])["documents"])


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--sizes", default="1000,10000")
    ap.add_argument("--queries", type=int, default=40)
    ap.add_argument("--reps", type=int, default=2)
    ap.add_argument("--out", type=Path, default=REPO / "bench" / "results" / "peer.md")
    args = ap.parse_args()
    started = time.perf_counter()
    load0 = os.getloadavg()
    base = Settings(embedding_model=MODEL, rerank=False)
    emb = embedder_for(base, MODEL)
    info = AliasStore(Settings()).cluster.client.info()

    def embed(q: str) -> list[float]:
        return [float(x) for x in emb.encode_query(q)]

    rows: dict[str, dict[str, dict[str, Any]]] = {}
    for n in [int(x) for x in args.sizes.split(",")]:
        alias = f"osrag-bench-real-{n // 1000}k"
        s = base.model_copy(update={"alias": alias, "target_cache_ttl_s": 3600.0})
        sc = SearchClient(s, principal=WHO)
        index, _ = sc._run(sc._target())
        mine = Counted(sc.cluster.client.transport)
        # The same search without passage trimming (OSRAG_TRIM_PASSAGES=false), to tell its cost apart.
        whole = SearchClient(s.model_copy(update={"trim_passages": False}), principal=WHO)
        whole_counted = Counted(whole.cluster.client.transport)
        peer = Peer(s.url, index, emb.dimension, embed)
        theirs = peer.count()
        qs = [q.text for q in corpus_queries.make_queries(args.queries, n)]
        overhead: list[float] = []
        whole_overhead: list[float] = []
        bm25_overhead: list[float] = []
        embed_ms: list[float] = []
        whole_embed: list[float] = []

        def search(q: str, sc: SearchClient = sc, embed_ms: list[float] = embed_ms) -> int:
            env = sc.search(q)
            embed_ms.append(env.timings_ms.get("embed_query", 0.0))
            return len(env.passages)

        def search_whole(q: str, sc: SearchClient = whole, embed_ms: list[float] = whole_embed) -> int:
            return search(q, sc, embed_ms)

        calls: dict[str, tuple[Callable[[str], int], Counted]] = {
            "peer BM25": (peer.run_bm25, theirs),
            "peer embedding": (peer.run_knn, theirs),
            "peer hybrid (RRF)": (peer.run_hybrid, theirs),
            # Like the peer's retriever, the head alone brings no stored vectors back; with them is
            # what search() asks (selection's duplicate test reads them), measured beside it.
            "osrag BM25 head": (lambda q, sc=sc: len(sc.retrieve(q, mode="bm25", vectors=False).hits), mine),
            "osrag BM25 head + vectors": (lambda q, sc=sc: len(sc.retrieve(q, mode="bm25").hits), mine),
            "osrag hybrid head": (lambda q, sc=sc: len(sc.retrieve(q, mode="hybrid").hits), mine),
            "osrag search()": (search, mine),
            "osrag search(), untrimmed": (search_whole, whole_counted),
        }
        # Warm-up on other questions: models, connections, the index's caches (not these questions).
        for q in corpus_queries.make_queries(6, n)[-3:]:
            for fn, _ in calls.values():
                fn(q.text)
        wall: dict[str, list[float]] = {p: [] for p in PATHS}
        reqs: dict[str, list[int]] = {p: [] for p in PATHS}
        for rep in range(args.reps):
            for qi, q in enumerate(qs):
                k = (qi + rep) % len(PATHS)
                for p in PATHS[k:] + PATHS[:k]:
                    fn, counter = calls[p]
                    before = counter.n
                    t0 = time.perf_counter()
                    fn(q)
                    ms = (time.perf_counter() - t0) * 1000
                    wall[p].append(ms)
                    reqs[p].append(counter.n - before)
                    if p == "osrag search()":
                        took = sc_last_took(sc)
                        overhead.append(ms - took - embed_ms[-1])
                    if p == "osrag search(), untrimmed":
                        whole_overhead.append(ms - sc_last_took(whole) - whole_embed[-1])
                    if p == "osrag BM25 head":
                        bm25_overhead.append(ms - sc_last_took(sc))
        rows[f"{n // 1000}k"] = {
            p: {
                "p50": pct(wall[p], 50),
                "p95": pct(wall[p], 95),
                "reqs": statistics.mean(reqs[p]),
                "first": statistics.mean(reqs[p][: len(qs)]),
                "p50_first": pct(wall[p][: len(qs)], 50),
            }
            for p in PATHS
        }
        # The first pass alone: no question asked before, so nothing a process remembers of a
        # question (its trimmed sentences' token counts, its terms' statistics) helps it.
        rows[f"{n // 1000}k"]["osrag search()"]["overhead_first"] = pct(overhead[: len(qs)], 50)
        rows[f"{n // 1000}k"]["osrag search()"]["overhead"] = pct(overhead, 50)
        rows[f"{n // 1000}k"]["osrag search()"]["embed"] = pct(embed_ms, 50)
        rows[f"{n // 1000}k"]["osrag BM25 head"]["overhead"] = pct(bm25_overhead, 50)
        rows[f"{n // 1000}k"]["osrag search(), untrimmed"]["overhead"] = pct(whole_overhead, 50)
    write(args, rows, load0, os.getloadavg(), info, time.perf_counter() - started)


_LAST: dict[int, float] = {}


def sc_last_took(sc: SearchClient) -> float:
    """The server's ``took`` of the client's last search (recorded by the hook below)."""
    return _LAST.get(id(sc), 0.0)


def _record_took() -> None:
    """Wrap ``QuerySteps._retrieve`` so the last search's ``took`` is kept per client."""
    from osrag.search import client as search_mod

    inner = search_mod.QuerySteps._retrieve

    def wrapped(self: Any, *a: Any, **kw: Any) -> Any:
        ret = yield from inner(self, *a, **kw)
        _LAST[id(self)] = float(ret.timings_ms.get("server_took", 0.0))
        return ret

    search_mod.QuerySteps._retrieve = wrapped  # type: ignore[method-assign]


def write(
    args: argparse.Namespace,
    rows: dict[str, dict[str, dict[str, Any]]],
    load0: tuple[float, float, float],
    load1: tuple[float, float, float],
    info: dict[str, Any],
    took_s: float,
) -> None:
    now = dt.datetime.now(dt.UTC).strftime("%Y-%m-%d %H:%M UTC")
    lines = [
        "# osrag vs Haystack's OpenSearch retrievers, same index and model",
        "",
        f"Generated by `bench/bench_peer.py --sizes {args.sizes} --queries {args.queries} --reps {args.reps}` "
        f"on {now} (whole run {took_s / 60:.1f} min). OpenSearch {info['version']['number']}, one local node "
        f"on the same 2-core machine, shared with other jobs: load average {load0[0]:.2f} {load0[1]:.2f} "
        f"{load0[2]:.2f} at the start, {load1[0]:.2f} {load1[1]:.2f} {load1[2]:.2f} at the end. Embedding "
        f"model `{MODEL}` on both sides; {DEPTH} candidates per head; osrag reads as admin bypass (its "
        "visibility and archive clauses still apply), without rerank.",
        "",
        "Wall time per question in ms (p50 / p95), paths rotated per question; requests per question "
        "counted at each client's transport (first pass over the questions / all passes).",
        "",
    ]
    for size, r in rows.items():
        lines += [
            f"## {size} chunks",
            "",
            "| path | p50 | p95 | requests per question (first asking / all) |",
            "| --- | ---: | ---: | ---: |",
            *[
                f"| {p} | {r[p]['p50']:.1f} | {r[p]['p95']:.1f} | {r[p]['first']:.2f} / {r[p]['reqs']:.2f} |"
                for p in PATHS
            ],
            "",
            f"* osrag `search()` / peer hybrid retrieval p50: "
            f"**{r['osrag search()']['p50'] / r['peer hybrid (RRF)']['p50']:.2f}×** (goal ≤ 1)",
            f"* osrag BM25 head / peer BM25 p50: **{r['osrag BM25 head']['p50'] / r['peer BM25']['p50']:.2f}×** "
            "(goal ≤ 1.2)",
            f"* osrag `search()` client overhead (wall - server `took` - embedding) p50: "
            f"**{r['osrag search()']['overhead']:.1f} ms**; the question's embedding p50 "
            f"{r['osrag search()']['embed']:.1f} ms",
            f"* the same without passage trimming (`OSRAG_TRIM_PASSAGES=false`): p50 "
            f"{r['osrag search(), untrimmed']['p50']:.1f} ms, "
            f"**{r['osrag search(), untrimmed']['p50'] / r['peer hybrid (RRF)']['p50']:.2f}×** the peer's hybrid, "
            f"client overhead **{r['osrag search(), untrimmed']['overhead']:.1f} ms**",
            f"* osrag BM25 head client overhead (wall - server `took`) p50: "
            f"**{r['osrag BM25 head']['overhead']:.1f} ms** (goal ≤ 2)",
            f"* first pass only (every question asked for the first time): `search()` p50 "
            f"{r['osrag search()']['p50_first']:.1f} ms, "
            f"**{r['osrag search()']['p50_first'] / r['peer hybrid (RRF)']['p50_first']:.2f}×** the peer's hybrid "
            f"({r['peer hybrid (RRF)']['p50_first']:.1f} ms), client overhead "
            f"**{r['osrag search()']['overhead_first']:.1f} ms**",
            "",
        ]
    args.out.write_text("\n".join(lines), encoding="utf-8")
    print("\n".join(lines))


if __name__ == "__main__":
    _record_took()
    main()
