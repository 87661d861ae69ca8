"""Query latency with a cluster model: the question embedded inside the search request (a ``neural``
clause in the hybrid query) against a ``_predict`` call before the search, on the same index.

golden's corpus is ingested once into a throwaway alias pinned to a deployed local ml-commons model;
then every golden question is asked through ``search()`` by two clients of that alias, one with
``embed_in_query`` on and one off, alternating which goes first, for ``--rounds`` rounds after a
warm-up. Prints a Markdown report (p50/p95 of the wall time of ``search()``, and of the server's
``took``) side by side; ``--out`` writes it. The alias is dropped afterwards.

    python bench/bench_cluster_query.py --model ml:NAME [--rounds 2] [--out bench/results/x.md]
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
import uuid
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_common import GOLDEN, golden_questions, log, machine, pct


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--model", required=True, help="ml:NAME[@VERSION] or ml-id:ID (a deployed local model)")
    ap.add_argument("--url", default=None, help="default: OSRAG_URL / the settings' URL")
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--warmup", type=int, default=3)
    ap.add_argument("--budget", type=int, default=600)
    ap.add_argument("--out", type=Path, default=None)
    args = ap.parse_args()

    from osrag import PUBLIC, SearchClient
    from osrag.ingest.indexing import Ingester
    from osrag.settings import Settings
    from osrag.store.alias import AliasStore

    extra = {"url": args.url} if args.url else {}
    s = Settings(
        alias=f"bench-h34q-{uuid.uuid4().hex[:8]}",
        embedding_model=args.model,
        rerank=False,
        # A busy shared node can take longer than the default 30 s over a batch of _predict.
        timeout_s=300,
        **extra,  # type: ignore[arg-type]
    )
    admin = AliasStore(s)
    try:
        admin.install()
        t0 = time.perf_counter()
        with tempfile.TemporaryDirectory() as tmp:
            corpus = Path(tmp) / "corpus"
            corpus.symlink_to(GOLDEN.parent / "corpus")
            report = Ingester(s, admin=admin).ingest([corpus])
        log(f"ingested {report.indexed} documents in {time.perf_counter() - t0:.0f} s")
        questions = golden_questions()
        neural = SearchClient(s, principal=PUBLIC)
        predict = SearchClient(s, principal=PUBLIC)
        predict.embed_in_query = False
        clients = {"neural (embedded in the request)": neural, "_predict, then search": predict}
        for q in questions[: args.warmup]:
            for c in clients.values():
                c.search(q, budget_tokens=args.budget)
        load_before = os.getloadavg()[0]
        wall: dict[str, list[float]] = {k: [] for k in clients}
        took: dict[str, list[float]] = {k: [] for k in clients}
        same = 0
        for r in range(args.rounds):
            for i, q in enumerate(questions):
                order = list(clients.items())
                if (i + r) % 2:
                    order.reverse()
                got = {}
                for name, c in order:
                    t = time.perf_counter()
                    env = c.search(q, budget_tokens=args.budget)
                    wall[name].append((time.perf_counter() - t) * 1000)
                    took[name].append(float(env.timings_ms.get("server_took", 0.0)))
                    got[name] = [p.chunk_id for p in env.passages]
                same += len({tuple(v) for v in got.values()}) == 1
            log(f"round {r + 1}/{args.rounds} done")
        n = len(questions) * args.rounds
        load = f"{load_before:.1f} before the timed searches, {os.getloadavg()[0]:.1f} after (1-minute load average)"
        rows = machine(f"{args.model} (ml-commons, local ONNX on the node)", load=load)
        lines = [
            "# Query latency: the question embedded in the search request vs `_predict` first",
            "",
            f"`python bench/bench_cluster_query.py --model {args.model} --rounds {args.rounds}`, one run,",
            f"golden's corpus ({report.indexed} documents), its {len(questions)} questions × {args.rounds} rounds",
            f"per way ({n} searches each, after {args.warmup} warm-up questions), budget {args.budget} tokens,",
            "no rerank; the two ways alternate which goes first. Wall time of `search()` in this process.",
            "",
            "| | value |",
            "| --- | --- |",
            *[f"| {k} | {v} |" for k, v in rows.items()],
            "",
            "| way | p50 ms | p95 ms | mean ms | server `took` p50 ms | p95 ms |",
            "| --- | ---: | ---: | ---: | ---: | ---: |",
        ]
        for name in clients:
            w, k = wall[name], took[name]
            lines.append(
                f"| {name} | {pct(w, 50):.1f} | {pct(w, 95):.1f} | {sum(w) / len(w):.1f} "
                f"| {pct(k, 50):.1f} | {pct(k, 95):.1f} |"
            )
        lines += ["", f"Same passages from both ways: {same} of {n} searches."]
        text = "\n".join(lines) + "\n"
        print(text)
        if args.out:
            args.out.write_text(text, encoding="utf-8")
    finally:
        from osrag.admin import lifecycle

        lifecycle.drop(s, lifecycle.plan_drop(s), admin)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
