"""Query benchmark on the realistic corpus: BM25 ``retrieve``, hybrid ``retrieve`` and the full
``search()`` without rerank, per index size, measured side by side; round trips counted; the
kNN head's recall vs exact kNN per ``ef_search``; recall of the relevant chunk per candidate depth.

Run against the running node (``OSRAG_URL``, default http://127.0.0.1:9200)::

    .venv/bin/python bench/bench_query.py [--sizes 1000,10000,100000] [--queries 40] [--reps 3]

Indices ``osrag-bench-real-{N}`` hold the first N chunks of ``bench/corpus.py`` (realistic
Russian text, its own navec embedding per chunk), written in ingest's shape with
``corpus_index.write_index`` (ingest's bulk actions and bulk writer) and force-merged to one segment; an index of the right size is reused.
``--stress N`` adds the named near-duplicate stress case (``corpus_queries.near_duplicates``: copies of
the first 500 chunks, digits varied, vectors jittered) as ``osrag-bench-neardup-{N}``.
Results go to ``bench/results/query.md``.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "bench"))

import corpus_index  # noqa: E402
import corpus_queries  # noqa: E402
from bench_common import log, pct  # noqa: E402
from bench_common import machine as bench_machine  # noqa: E402
from query_report import MODES, write_report  # noqa: E402

from osrag.access import Principal  # noqa: E402
from osrag.embedding import embedder_for  # noqa: E402
from osrag.names import utcnow  # noqa: E402
from osrag.search.client import SearchClient  # noqa: E402
from osrag.search.query import vectors_in_source  # noqa: E402
from osrag.settings import Settings  # noqa: E402
from osrag.store.alias import AliasStore  # noqa: E402
from osrag.store.locking import ensure_state_index  # noqa: E402

RESULTS = REPO / "bench" / "results" / "query.md"
MODEL = "navec:news-300d"
#: Every chunk of the bench corpus has a tenant, so PUBLIC (untenanted chunks only) sees none of them.
PUBLIC = Principal.admin_bypass()


def settings_for(alias: str, **kw: Any) -> Settings:
    return Settings(alias=alias, embedding_model=MODEL, rerank=False, **kw)


def build(alias: str, items: Any, n: int) -> dict[str, Any]:
    """The index of ``alias`` with ``n`` chunks (reused when it already holds them)."""
    s = settings_for(alias)
    admin = AliasStore(s)
    client = admin.cluster.client
    index = admin.current_index()
    if index is not None and client.count(index=index)["count"] == n:
        return {"index": index, "built_s": None}
    if index is not None:
        client.indices.delete(index=f"{alias}-*", expand_wildcards="all")
        client.indices.delete_alias(index="_all", name=alias, ignore=[404])
    admin.install()
    index = admin.require_index()
    ensure_state_index(admin.cluster, alias, s.replicas)
    t0 = time.perf_counter()
    now = utcnow().isoformat()
    got = corpus_index.write_index(admin.cluster, corpus_index.actions_for(items, index, now, MODEL), index)
    client.indices.forcemerge(index=index, max_num_segments=1, request_timeout=3600)
    admin.update_meta(index, last_ingest_at=now)
    assert got["written"] == n, got
    return {"index": index, "built_s": time.perf_counter() - t0}


class Counter:
    """Counts requests the client's transport sends (wraps ``perform_request``)."""

    def __init__(self, sc: SearchClient) -> None:
        self.n = 0
        transport = sc.cluster.client.transport
        inner = transport.perform_request

        def counted(*a: Any, **kw: Any) -> Any:
            self.n += 1
            return inner(*a, **kw)

        transport.perform_request = counted


def timed(sc: SearchClient, mode: str, q: str) -> float:
    t0 = time.perf_counter()
    if mode == "search":
        sc.search(q, principal=PUBLIC, rerank=False)
    else:
        sc.retrieve(q, mode=mode, principal=PUBLIC)
    return (time.perf_counter() - t0) * 1000


def knn_recall(
    sc: SearchClient, queries: list[Any], efs: list[int], k: int = 10
) -> dict[int, dict[str, float]]:
    """Recall@k of the HNSW kNN head vs exact kNN (script_score over every chunk), and its p50 ms."""
    client = sc.cluster.client
    index, _ = sc._run(sc._target())
    emb = sc.embedder()
    vecs = [emb.encode_query(q.text).tolist() for q in queries]
    exact = []
    for v in vecs:
        body = {
            "size": k,
            "_source": False,
            "query": {
                "script_score": {
                    "query": {"match_all": {}},
                    "script": {
                        "source": "knn_score",
                        "lang": "knn",
                        "params": {"field": "embedding", "query_value": v, "space_type": "cosinesimil"},
                    },
                }
            },
        }
        exact.append(
            {h["_id"] for h in client.search(index=index, body=body, request_timeout=120)["hits"]["hits"]}
        )
    out: dict[int, dict[str, float]] = {}
    for ef in efs:
        rec, ms = [], []
        for v, truth in zip(vecs, exact):
            body = {
                "size": k,
                "_source": False,
                "query": {
                    "knn": {"embedding": {"vector": v, "k": k, "method_parameters": {"ef_search": ef}}}
                },
            }
            t0 = time.perf_counter()
            got = {h["_id"] for h in client.search(index=index, body=body)["hits"]["hits"]}
            ms.append((time.perf_counter() - t0) * 1000)
            rec.append(len(got & truth) / max(len(truth), 1))
        out[ef] = {"recall": statistics.mean(rec), "p50_ms": statistics.median(ms)}
    return out


def depth_recall(sc: SearchClient, queries: list[Any], depths: list[int]) -> dict[int, dict[str, float]]:
    """Share of questions whose relevant chunk is among the hybrid candidates, per depth; p50 ms."""
    out: dict[int, dict[str, float]] = {}
    for d in depths:
        found, ms = 0, []
        for q in queries:
            t0 = time.perf_counter()
            r = sc.retrieve(q.text, mode="hybrid", depth=d, principal=PUBLIC)
            ms.append((time.perf_counter() - t0) * 1000)
            found += any(h.chunk_id == q.chunk_id for h in r.hits)
        out[d] = {"recall": found / len(queries), "p50_ms": statistics.median(ms)}
    return out


def _without_source(body: dict[str, Any]) -> dict[str, Any]:
    return {**_without_vectors(body), "_source": False}


def _without_vectors(body: dict[str, Any]) -> dict[str, Any]:
    out = {k: v for k, v in body.items() if k != "script_fields"}
    return {**out, "_source": {"excludes": ["body", "embedding"]}}


def _knn_only(body: dict[str, Any]) -> dict[str, Any]:
    head = body["query"]["hybrid"]["queries"][1]
    return {"size": body["size"], "query": head, "_source": False}


def breakdown(sc: SearchClient, queries: list[Any], reps: int) -> dict[str, dict[str, float]]:
    """Where a search's time goes on the server: the exact bodies ``search()`` and BM25 ``retrieve``
    send (captured at the transport), replayed with parts taken away, each variant's ``took``
    (server) and wall p50 side by side, variants rotated per question."""
    transport = sc.cluster.client.transport
    inner = transport.perform_request
    sent: list[tuple[str, dict[str, Any], dict[str, Any]]] = []

    def spy(method: str, url: str, *a: Any, **kw: Any) -> Any:
        if url.endswith("/_search"):
            sent.append((url, dict(kw.get("params") or {}), kw.get("body") or {}))
        return inner(method, url, *a, **kw)

    transport.perform_request = spy
    cases = []
    try:
        for q in queries:
            sc.search(q.text, principal=PUBLIC, rerank=False)
            first = sent[-1]
            sc.search(q.text, principal=PUBLIC, rerank=False)
            again = sent[-1]
            sc.retrieve(q.text, mode="bm25", principal=PUBLIC)
            cases.append((first, again, sent[-1]))
    finally:
        transport.perform_request = inner
    variants: dict[str, Any] = {
        "BM25 `retrieve` as sent (texts; vectors by script field)": lambda f, a, b: b,
        "BM25, vectors in `_source` (before)": lambda f, a, b: (b[0], b[1], vectors_in_source(b[2])),
        "BM25, texts only (no vectors)": lambda f, a, b: (b[0], b[1], _without_vectors(b[2])),
        "BM25, no `_source`": lambda f, a, b: (b[0], b[1], _without_source(b[2])),
        "kNN head alone, no `_source`": lambda f, a, b: (b[0], {}, _knn_only(a[2])),
        "hybrid `search()` as sent, question asked again": lambda f, a, b: a,
        "hybrid, first asking (+ document-frequency aggregation)": lambda f, a, b: f,
        "hybrid, vectors in `_source` (before)": lambda f, a, b: (a[0], a[1], vectors_in_source(a[2])),
        "hybrid, texts only (no vectors)": lambda f, a, b: (a[0], a[1], _without_vectors(a[2])),
        "hybrid, no `_source`": lambda f, a, b: (a[0], a[1], _without_source(a[2])),
    }
    names = list(variants)
    took: dict[str, list[float]] = {n: [] for n in names}
    wall: dict[str, list[float]] = {n: [] for n in names}
    k = 0
    for _ in range(reps):
        for case in cases:
            k += 1
            for n in names[k % len(names) :] + names[: k % len(names)]:
                url, params, body = variants[n](*case)
                t0 = time.perf_counter()
                resp = inner("POST", url, params=params, body=body)
                wall[n].append((time.perf_counter() - t0) * 1000)
                took[n].append(float(resp["took"]))
    return {n: {"took_p50": pct(took[n], 50), "wall_p50": pct(wall[n], 50)} for n in names}


def machine() -> dict[str, str]:
    return bench_machine(f"`{MODEL}` (static word vectors: embedding a question costs about a millisecond)")


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--sizes", default="1000,10000,100000")
    ap.add_argument("--queries", type=int, default=40)
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--efs", default="40,100,200,400")
    ap.add_argument("--depths", default="20,40,80")
    ap.add_argument("--tune-queries", type=int, default=30)
    ap.add_argument(
        "--stress", type=int, default=0, help="chunks of the near-duplicate stress index (0: none)"
    )
    ap.add_argument("--out", type=Path, default=RESULTS)
    args = ap.parse_args()
    started = time.perf_counter()
    sizes = [int(x) for x in args.sizes.split(",")]
    mach = machine()
    load_start = os.getloadavg()
    emb = embedder_for(settings_for("osrag-bench-x"), MODEL)
    targets: list[tuple[str, str, int, list[Any]]] = []  # (label, alias, n, queries)
    built: dict[str, dict[str, Any]] = {}
    for n in sizes:
        alias = f"osrag-bench-real-{n // 1000}k"
        log(f"index {alias}: {n} chunks")
        built[alias] = build(alias, corpus_index.iter_embedded(n, emb), n)
        targets.append((f"{n // 1000}k", alias, n, corpus_queries.make_queries(args.queries, n)))
    if args.stress:
        alias = f"osrag-bench-neardup-{args.stress // 1000}k"
        base = list(corpus_index.iter_embedded(500, emb))
        log(f"index {alias}: {args.stress} near-duplicate chunks")
        built[alias] = build(alias, corpus_queries.near_duplicates(base, args.stress), args.stress)
        targets.append(
            (
                f"near-dup {args.stress // 1000}k",
                alias,
                args.stress,
                corpus_queries.make_queries(args.queries, 500),
            )
        )

    clients = {alias: SearchClient(settings_for(alias)) for _, alias, _, _ in targets}
    counters = {alias: Counter(sc) for alias, sc in clients.items()}
    # Warm-up: model loads, first requests, caches.
    for _, alias, _, qs in targets:
        for q in qs[:3]:
            for mode in MODES:
                timed(clients[alias], mode, q.text)
    lat: dict[tuple[str, str], list[float]] = {(lab, m): [] for lab, _, _, _ in targets for m in MODES}
    pairs: dict[str, list[float]] = {lab: [] for lab, _, _, _ in targets}
    trips: dict[str, list[tuple[int, int]]] = {lab: [] for lab, _, _, _ in targets}  # (rep, requests)
    log(f"latency: {args.reps} reps x {args.queries} questions x {len(targets)} indices x {len(MODES)} modes")
    for _rep in range(args.reps):
        for qi in range(args.queries):
            order = MODES[qi % 3 :] + MODES[: qi % 3]  # each mode in each position equally often
            for label, alias, _, qs in targets[qi % len(targets) :] + targets[: qi % len(targets)]:
                q = qs[qi % len(qs)].text
                sc = clients[alias]
                got: dict[str, float] = {}
                for mode in order:
                    before = counters[alias].n
                    got[mode] = timed(sc, mode, q)
                    if mode == "search":
                        trips[label].append((_rep, counters[alias].n - before))
                    lat[(label, mode)].append(got[mode])
                pairs[label].append(got["search"] / got["bm25"])
    query_s = time.perf_counter() - started
    # Tuning on the largest realistic index.
    label, alias, n, qs = targets[len(sizes) - 1]
    tune_q = corpus_queries.make_queries(args.tune_queries, n)
    log(f"tuning on {alias}: ef_search {args.efs}, depth {args.depths}")
    knn = knn_recall(clients[alias], tune_q, [int(x) for x in args.efs.split(",")])
    depth = depth_recall(clients[alias], tune_q, [int(x) for x in args.depths.split(",")])
    log(f"server-side breakdown on {alias}")
    parts = breakdown(clients[alias], tune_q, args.reps)
    write_report(
        args,
        mach,
        load_start,
        targets,
        built,
        lat,
        pairs,
        trips,
        knn,
        depth,
        parts,
        label,
        time.perf_counter() - started,
        query_s,
    )


if __name__ == "__main__":
    main()
