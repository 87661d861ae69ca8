"""osrag's own ingest of golden's corpus into an index whose model is a local ml-commons model,
two ways in one run: through the alias's ingest pipeline (what ships), and with the vectors from
batched ``_predict`` calls then bulk-written (what osrag did before; forced here by telling the
ingest that the model has no pipeline). Each way ingests into an alias of its own, ``--rounds``
times (the alias dropped in between); one JSON object with the wall times and the ingest
reports' counts is printed.

    python bench/bench_cluster_ingest.py --url http://127.0.0.1:9200 --model ml:NAME [--rounds 1]
"""

from __future__ import annotations

import argparse
import json
import sys
import time
import uuid
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--url", required=True)
    ap.add_argument("--model", required=True, help="ml:NAME[@VERSION] or ml-id:ID (a deployed local model)")
    ap.add_argument("--rounds", type=int, default=1)
    args = ap.parse_args()

    from osrag.admin.lifecycle import drop, plan_drop
    from osrag.ingest import batches
    from osrag.ingest.indexing import Ingester
    from osrag.settings import Settings
    from osrag.store.alias import AliasStore

    out: dict[str, list[dict[str, Any]]] = {"pipeline": [], "predict_then_bulk": []}
    real = batches.LazyModel.pipeline_model
    for _ in range(args.rounds):
        for way in out:
            alias = f"bench-ci-{uuid.uuid4().hex[:8]}"
            s = Settings(url=args.url, alias=alias, embedding_model=args.model, rerank=False, _env_file=None)
            batches.LazyModel.pipeline_model = real if way == "pipeline" else (lambda self: None)  # type: ignore[method-assign]
            try:
                admin = AliasStore(s)
                admin.install()
                t0 = time.monotonic()
                report = Ingester(s, admin=admin).ingest([ROOT / "golden" / "corpus"])
                seconds = round(time.monotonic() - t0, 2)
                out[way].append(
                    {
                        "seconds": seconds,
                        "documents": report.indexed,
                        "chunks": report.chunks,
                        "failed": len(report.failed),
                    }
                )
            finally:
                batches.LazyModel.pipeline_model = real  # type: ignore[method-assign]
                drop(s, plan_drop(s))
    best = {w: min(x["seconds"] for x in v) for w, v in out.items()}
    print(
        json.dumps(
            {
                "model": args.model,
                "runs": out,
                "ratio_predict_over_pipeline_best": round(best["predict_then_bulk"] / best["pipeline"], 2),
            },
            indent=2,
        )
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
