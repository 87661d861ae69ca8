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
import datetime as dt
import os
import statistics
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "bench"))

import corpus_index  # noqa: E402
import corpus_queries  # noqa: E402
from bench_common import log  # noqa: E402
from bench_common import machine as bench_machine  # noqa: E402

from osrag.access import Principal  # noqa: E402
from osrag.admin import Admin  # noqa: E402
from osrag.embedding import embedder_for  # noqa: E402
from osrag.locking import ensure_state_index  # noqa: E402
from osrag.names import utcnow  # noqa: E402
from osrag.query import vectors_in_source  # noqa: E402
from osrag.search import SearchClient  # noqa: E402
from osrag.settings import Settings  # noqa: E402

RESULTS = REPO / "bench" / "results" / "query.md"
MODEL = "navec:news-300d"
MODES = ("bm25", "hybrid", "search")
#: Every chunk of the bench corpus has a tenant, so PUBLIC (untenanted chunks only) sees none of them.
PUBLIC = Principal.admin_bypass()


def settings_for(alias: str, **kw: Any) -> Settings:
    return Settings(alias=alias, embedding_model=MODEL, rerank=False, **kw)


def build(alias: str, items: Any, n: int) -> dict[str, Any]:
    """The index of ``alias`` with ``n`` chunks (reused when it already holds them)."""
    s = settings_for(alias)
    admin = Admin(s)
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


def pct(xs: list[float], p: float) -> float:
    return float(np.percentile(np.asarray(xs), p))


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


def growth_lines(
    targets: list[tuple[str, str, int, list[Any]]], lat: dict[tuple[str, str], list[float]]
) -> list[str]:
    """p50 per size, and 1M projected from the growth between the two largest sizes (on paper)."""
    sized = sorted(
        (n, label) for label, alias, n, _ in targets if not alias.startswith("osrag-bench-neardup")
    )
    if len(sized) < 2:
        return []
    (n0, l0), (n1, l1) = sized[-2], sized[-1]
    per_decade = {
        m: (pct(lat[(l1, m)], 50) / pct(lat[(l0, m)], 50)) ** (1 / np.log10(n1 / n0)) for m in MODES
    }
    decades = np.log10(1_000_000 / n1)
    lines = [
        "## Growth with the index, and 1M chunks on paper",
        "",
        f"p50 ms per size; the last row is a projection, not a run: the p50 at {n1:,} times the growth "
        f"per 10× measured between {n0:,} and {n1:,}.",
        "",
        "| chunks | " + " | ".join(MODES) + " | search / BM25 |",
        "| ---: | " + " | ".join("---:" for _ in MODES) + " | ---: |",
    ]
    for n, label in sized:
        p = [pct(lat[(label, m)], 50) for m in MODES]
        lines.append(f"| {n:,} | " + " | ".join(f"{x:.1f}" for x in p) + f" | {p[2] / p[0]:.2f}× |")
    proj = [pct(lat[(l1, m)], 50) * per_decade[m] ** decades for m in MODES]
    lines += [
        "| 1,000,000 (projected) | "
        + " | ".join(f"{x:.0f}" for x in proj)
        + f" | {proj[2] / proj[0]:.2f}× |",
        "",
        "Growth per 10× chunks: " + ", ".join(f"{m} {per_decade[m]:.2f}×" for m in MODES) + ".",
        "",
    ]
    return lines


def write_report(
    args: argparse.Namespace,
    mach: dict[str, str],
    load_start: tuple[float, float, float],
    targets: list[tuple[str, str, int, list[Any]]],
    built: dict[str, dict[str, Any]],
    lat: dict[tuple[str, str], list[float]],
    pairs: dict[str, list[float]],
    trips: dict[str, list[tuple[int, int]]],
    knn: dict[int, dict[str, float]],
    depth: dict[int, dict[str, float]],
    parts: dict[str, dict[str, float]],
    tuned_on: str,
    total_s: float,
    query_s: float,
) -> None:
    s = Settings()
    now = dt.datetime.now(dt.UTC).strftime("%Y-%m-%d %H:%M UTC")
    load_end = os.getloadavg()
    names = {
        "bm25": 'BM25 `retrieve(mode="bm25")`',
        "hybrid": "hybrid `retrieve()`",
        "search": "`search()` without rerank",
    }
    lines = [
        "# Query benchmark",
        "",
        f"Generated by `bench/bench_query.py --sizes {args.sizes} --queries {args.queries} --reps {args.reps}"
        + (f" --stress {args.stress}" if args.stress else "")
        + f"` on {now} (whole run {total_s / 60:.1f} min).",
        "",
        "| machine | |",
        "| --- | --- |",
        *[f"| {k} | {v} |" for k, v in mach.items()],
        "| load average (1/5/15 min) | "
        + " ".join(f"{x:.2f}" for x in load_start)
        + " at the start, "
        + " ".join(f"{x:.2f}" for x in load_end)
        + " at the end |",
        "",
        "## Indices",
        "",
        "The first N chunks of `bench/corpus.py` (realistic Russian text: navec word forms with a Zipf "
        "law and 600 topics, Markdown sections one chunk each, identifiers, filter metadata; each chunk "
        "its own navec embedding), written in ingest's shape, force-merged to one segment. One shard, "
        f"HNSW m={s.hnsw_m}, ef_construction={s.hnsw_ef_construction}, lucene engine; queries use the "
        f"defaults: ef_search={s.hnsw_ef_search}, candidate depth {s.candidate_depth}, fusion {s.fusion} {s.fusion_weights[0]:g}/{s.fusion_weights[1]:g}, duplicates "
        "collapsed server-side on `content_hash` (hybrid + `collapse`).",
        "",
        "| alias | chunks | build s (bulk + refresh + force-merge) |",
        "| --- | ---: | ---: |",
        *[
            f"| `{alias}` | {n:,} | "
            + (f"{built[alias]['built_s']:.0f}" if built[alias]["built_s"] is not None else "reused")
            + " |"
            for _, alias, n, _ in targets
        ],
        "",
        "## Latency (ms, client wall time) and the search()/BM25 ratio",
        "",
        f"{args.queries} generated questions (keywords, paraphrase, identifier) per index, {args.reps} "
        "repetitions; each question goes through the three calls back to back (order rotated), indices "
        "interleaved, so every ratio compares calls made within milliseconds of each other. Warm-up "
        "excluded. The ratio is given as p50(search) / p50(BM25) and, in brackets, as the median of the "
        "per-question paired ratios.",
        "",
        "| index | "
        + " | ".join(f"{names[m]} p50 / p95" for m in MODES)
        + " | search / BM25 p50 | requests per search: first asked | asked again |",
        "| --- | " + " | ".join("---:" for _ in MODES) + " | ---: | ---: | ---: |",
    ]
    for label, _, _, _ in targets:
        cells = [f"{pct(lat[(label, m)], 50):.1f} / {pct(lat[(label, m)], 95):.1f}" for m in MODES]
        ratio = pct(lat[(label, "search")], 50) / pct(lat[(label, "bm25")], 50)
        first = [n for r, n in trips[label] if r == 0]
        again = [n for r, n in trips[label] if r > 0]

        def trip_cell(t: list[int]) -> str:
            return f"{statistics.mean(t):.2f} (min {min(t)}, max {max(t)})" if t else "–"

        lines.append(
            f"| {label} | "
            + " | ".join(cells)
            + f" | {ratio:.2f}× ({statistics.median(pairs[label]):.2f}×) | "
            + f"{trip_cell(first)} | {trip_cell(again)} |"
        )
    lines += [
        "",
        "Round trips are counted, not assumed: the client's `transport.perform_request` is wrapped and "
        "every request of each `search()` call is counted. The alias → index resolution and the index "
        f"`_meta` come from one request, cached for `OSRAG_TARGET_CACHE_TTL_S` ({s.target_cache_ttl_s:g} s); "
        "a search after the TTL adds 1 request. The relevance gate's evidence rides on the search request "
        "itself; only words the client has not seen yet cost one `_analyze` (cached per word and index), "
        "so the first time a question is asked it may make 2 requests and a question asked again makes 1.",
        "",
        f"## Where the time goes on the server ({tuned_on} index, {args.tune_queries} questions × {args.reps})",
        "",
        "The bodies `search()` and BM25 `retrieve` send, captured at the transport and replayed as they "
        "are and with parts taken away; `took` is OpenSearch's own time, wall is the client's. Variants "
        "rotated per question, p50 over all.",
        "",
        "| request | took p50 ms | wall p50 ms |",
        "| --- | ---: | ---: |",
        *[f"| {n} | {v['took_p50']:.1f} | {v['wall_p50']:.1f} |" for n, v in parts.items()],
        "",
        *growth_lines(targets, lat),
        f"## ef_search: kNN-head recall@10 vs exact kNN ({tuned_on} index, {args.tune_queries} questions)",
        "",
        "Exact kNN is a `script_score` (`knn_score`, cosine) over every chunk. p50 is the kNN query alone.",
        "",
        "| ef_search | recall@10 vs exact | p50 ms |",
        "| ---: | ---: | ---: |",
        *[f"| {ef} | {v['recall']:.3f} | {v['p50_ms']:.1f} |" for ef, v in knn.items()],
        "",
        f"## Candidate depth: relevant chunk among the hybrid candidates ({tuned_on} index)",
        "",
        "| depth | questions whose relevant chunk is a candidate | hybrid p50 ms |",
        "| ---: | ---: | ---: |",
        *[f"| {d} | {v['recall']:.3f} | {v['p50_ms']:.1f} |" for d, v in depth.items()],
        "",
    ]
    args.out.write_text("\n".join(lines), encoding="utf-8")
    log(f"wrote {args.out} (queries {query_s / 60:.1f} min)")


if __name__ == "__main__":
    main()
