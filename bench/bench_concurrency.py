"""search() under concurrency: one sync thread, 16 threads, 16 async tasks, each for a fixed time.

    .venv/bin/python bench/bench_concurrency.py [--alias osrag-bench-real-10k] [--chunks 10000]
                                                [--seconds 60] [--workers 16] [--queries 200]

One ``SearchClient`` shared by the threads (the sync client is thread-safe: opensearch-py's
connection pool, osrag's caches under locks); one ``AsyncSearchClient`` for the tasks (the
``async`` extra). Every worker walks the same question list from its own offset, calling
``search()`` without rerank as ``Principal.admin_bypass()``, until the time is up. Reported per
mode: searches per second, wall p50/p95 per search, errors (any exception counts; none is
expected). Three bounded runs of ``--seconds`` each, one after the other; a short warm-up
before each. Results: ``bench/results/concurrency.md`` with the machine's load average.
"""

from __future__ import annotations

import argparse
import asyncio
import datetime as dt
import os
import sys
import threading
import time
from pathlib import Path
from typing import Any

import numpy as np

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "bench"))

import corpus_queries  # noqa: E402

from osrag import AsyncSearchClient  # noqa: E402
from osrag.access import Principal  # noqa: E402
from osrag.search.client import SearchClient  # noqa: E402
from osrag.settings import Settings  # noqa: E402

MODEL = "navec:news-300d"
WHO = Principal.admin_bypass()


class Tally:
    def __init__(self) -> None:
        self.ms: list[float] = []
        self.errors: list[str] = []
        self.lock = threading.Lock()

    def add(self, ms: float | None, error: str | None = None) -> None:
        with self.lock:
            if error is not None:
                self.errors.append(error)
            else:
                self.ms.append(ms or 0.0)


def run_threads(sc: SearchClient, qs: list[str], workers: int, seconds: float) -> tuple[Tally, float]:
    tally = Tally()
    stop = time.perf_counter() + seconds

    def work(k: int) -> None:
        i = k * 7
        while time.perf_counter() < stop:
            q = qs[i % len(qs)]
            i += 1
            t0 = time.perf_counter()
            try:
                sc.search(q)
            except Exception as exc:  # counted, never expected
                tally.add(None, f"{type(exc).__name__}: {exc}")
            else:
                tally.add((time.perf_counter() - t0) * 1000)

    t0 = time.perf_counter()
    threads = [threading.Thread(target=work, args=(k,)) for k in range(workers)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return tally, time.perf_counter() - t0


async def run_tasks(settings: Settings, qs: list[str], workers: int, seconds: float) -> tuple[Tally, float]:
    tally = Tally()
    async with AsyncSearchClient(settings, principal=WHO) as ac:
        for q in qs[:3]:  # warm-up: the pool, the model in this client
            await ac.search(q)
        stop = time.perf_counter() + seconds

        async def work(k: int) -> None:
            i = k * 7
            while time.perf_counter() < stop:
                q = qs[i % len(qs)]
                i += 1
                t0 = time.perf_counter()
                try:
                    await ac.search(q)
                except Exception as exc:
                    tally.add(None, f"{type(exc).__name__}: {exc}")
                else:
                    tally.add((time.perf_counter() - t0) * 1000)

        t0 = time.perf_counter()
        await asyncio.gather(*(work(k) for k in range(workers)))
        return tally, time.perf_counter() - t0


def row(name: str, tally: Tally, secs: float) -> dict[str, Any]:
    ms = np.asarray(tally.ms or [0.0])
    return {
        "mode": name,
        "n": len(tally.ms),
        "qps": len(tally.ms) / secs,
        "p50": float(np.percentile(ms, 50)),
        "p95": float(np.percentile(ms, 95)),
        "errors": len(tally.errors),
        "first_error": tally.errors[0] if tally.errors else "",
    }


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--alias", default="osrag-bench-real-10k")
    ap.add_argument("--chunks", type=int, default=10000)
    ap.add_argument("--seconds", type=float, default=60.0)
    ap.add_argument("--workers", type=int, default=16)
    ap.add_argument("--queries", type=int, default=200)
    ap.add_argument("--out", type=Path, default=REPO / "bench" / "results" / "concurrency.md")
    args = ap.parse_args()
    load0 = os.getloadavg()
    s = Settings(alias=args.alias, embedding_model=MODEL, rerank=False)
    qs = [q.text for q in corpus_queries.make_queries(args.queries, args.chunks)]
    sc = SearchClient(s, principal=WHO)
    for q in qs[:3]:
        sc.search(q)
    rows = [row("sync, 1 thread", *run_threads(sc, qs, 1, args.seconds))]
    rows.append(row(f"sync, {args.workers} threads", *run_threads(sc, qs, args.workers, args.seconds)))
    rows.append(
        row(f"async, {args.workers} tasks", *asyncio.run(run_tasks(s, qs, args.workers, args.seconds)))
    )
    load1 = os.getloadavg()
    base = rows[0]["qps"] or 1.0
    now = dt.datetime.now(dt.UTC).strftime("%Y-%m-%d %H:%M UTC")
    lines = [
        "# search() under concurrency",
        "",
        f"Generated by `bench/bench_concurrency.py --alias {args.alias} --seconds {args.seconds:g} "
        f"--workers {args.workers}` on {now}: `search()` without rerank on {args.chunks:,} chunks, "
        f"{args.queries} generated questions, {os.cpu_count()} CPU cores shared with the OpenSearch node "
        f"and other jobs; load average {load0[0]:.2f} {load0[1]:.2f} {load0[2]:.2f} at the start, "
        f"{load1[0]:.2f} {load1[1]:.2f} {load1[2]:.2f} at the end.",
        "",
        "| mode | searches | per second | × one thread | p50 ms | p95 ms | errors |",
        "| --- | ---: | ---: | ---: | ---: | ---: | ---: |",
        *[
            f"| {r['mode']} | {r['n']} | {r['qps']:.1f} | {r['qps'] / base:.2f}× | {r['p50']:.1f} | "
            f"{r['p95']:.1f} | {r['errors']} |"
            for r in rows
        ],
        "",
        *[f"First error ({r['mode']}): `{r['first_error']}`" for r in rows if r["errors"]],
    ]
    args.out.write_text("\n".join(lines) + "\n", encoding="utf-8")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
