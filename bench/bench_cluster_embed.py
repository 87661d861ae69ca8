"""Cluster-side embedding at ingest: batched ``_predict`` against a ``text_embedding`` ingest pipeline.

The same chunks (golden's, the Markdown chunker) are embedded by a deployed ml-commons model and
bulk-indexed, each way into a fresh index, in one run:

* ``predict_then_bulk``: ``_predict`` in batches (``--batch``), the vectors then bulk-indexed --
  how osrag ingested an ``ml:`` index before the pipeline;
* ``pipeline_c1``: the text bulk-indexed through osrag's own pipeline body
  (``osrag.mlcommons.pipelines.embed_pipeline``: ``PROCESSOR_BATCH`` texts per inference call),
  one bulk request in flight;
* ``pipeline_cN``: the same with ``--concurrency`` requests in flight (``bulk_concurrency``: what
  osrag's ingest does);
* ``pipeline_batch32``: the processor sending 32 texts per inference call (``batch_size``: 32).

Bulk requests carry ``--bulk`` chunks, written by osrag's own bulk writer. Each way runs
``--rounds`` times; one JSON object with the wall times (and the agreement of the vectors with
``_predict``'s) is printed. The throwaway indices and pipelines are deleted.

    python bench/bench_cluster_embed.py --url http://127.0.0.1:9200 --model ml:NAME [--chunks 120]
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
    ap.add_argument("--chunks", type=int, default=120)
    ap.add_argument("--batch", type=int, default=32, help="texts per _predict")
    ap.add_argument("--bulk", type=int, default=40, help="chunks per bulk request")
    ap.add_argument("--concurrency", type=int, default=2)
    ap.add_argument("--rounds", type=int, default=2)
    args = ap.parse_args()

    import numpy as np

    from osrag.chunking.chunkers import chunk_document
    from osrag.chunking.model import Document
    from osrag.connection import Cluster
    from osrag.mlcommons.blueprints import parse_ref
    from osrag.mlcommons.client import MLCommons
    from osrag.mlcommons.pipelines import EMBED_INPUT_FIELD, embed_pipeline
    from osrag.settings import Settings
    from osrag.store import bulk

    cluster = Cluster(Settings(url=args.url, bulk_chunk_size=args.bulk, timeout_s=600, _env_file=None))
    client = cluster.client
    ml = MLCommons(client)
    info = ml.find(parse_ref(args.model))
    texts: list[str] = []
    for path in sorted((ROOT / "golden" / "corpus").glob("*.md")):
        doc = Document(doc_id=path.stem, text=path.read_text(encoding="utf-8"))
        texts += [c.text for c in chunk_document(doc, "markdown")]
    texts = texts[: args.chunks]
    name = f"bench-cluster-embed-{uuid.uuid4().hex[:8]}"
    dim = info.dimension or 384
    mapping = {
        "settings": {"index.knn": True, "number_of_replicas": 0},
        "mappings": {
            "properties": {
                "text": {"type": "text"},
                "embedding": {
                    "type": "knn_vector",
                    "dimension": dim,
                    # lucene, as osrag's indices: faiss needs a native library a dev node may not have
                    "method": {"name": "hnsw", "engine": "lucene", "space_type": "cosinesimil"},
                },
            }
        },
    }
    pipelines = {
        "pipeline": f"{name}-embed",
        "pipeline_batch32": f"{name}-embed-b32",
    }
    ways = ["predict_then_bulk", "pipeline_c1", f"pipeline_c{args.concurrency}", "pipeline_batch32"]
    out: dict[str, list[float]] = {w: [] for w in ways}
    agreement: dict[str, float] = {}
    reference: Any = None

    def write(idx: str, sources: list[dict[str, Any]], concurrency: int, pipeline: str | None) -> None:
        actions = ({"_index": idx, "_id": str(i), "_source": s} for i, s in enumerate(sources))
        failed = bulk.write(cluster, actions, "bench bulk", concurrency=concurrency, pipeline=pipeline)
        assert not failed, failed[:2]
        client.indices.refresh(index=idx)

    def stored(idx: str) -> Any:
        hits = client.search(index=idx, body={"size": len(texts), "_source": ["embedding"]})["hits"]["hits"]
        by_id = {int(h["_id"]): h["_source"]["embedding"] for h in hits}
        return np.array([by_id[i] for i in range(len(texts))])

    try:
        client.ingest.put_pipeline(id=pipelines["pipeline"], body=embed_pipeline(info.model_id))
        client.ingest.put_pipeline(
            id=pipelines["pipeline_batch32"], body=embed_pipeline(info.model_id, batch_size=32)
        )
        for r in range(args.rounds):
            for way in ways:
                idx = f"{name}-{r}-{way.replace('_', '-')}"
                client.indices.create(index=idx, body=mapping)
                t0 = time.monotonic()
                if way == "predict_then_bulk":
                    vecs: list[list[float]] = []
                    for i in range(0, len(texts), args.batch):
                        part = texts[i : i + args.batch]
                        vecs += ml.embed(info.model_id, part, content_type="passage").vectors
                    write(
                        idx,
                        [{"text": t, "embedding": v} for t, v in zip(texts, vecs)],
                        args.concurrency,
                        None,
                    )
                else:
                    concurrency = 1 if way == "pipeline_c1" else args.concurrency
                    pipe = pipelines["pipeline_batch32" if way == "pipeline_batch32" else "pipeline"]
                    write(idx, [{"text": t, EMBED_INPUT_FIELD: t} for t in texts], concurrency, pipe)
                out[way].append(round(time.monotonic() - t0, 2))
                got = stored(idx)
                if way == "predict_then_bulk":
                    reference = got
                elif reference is not None:
                    cos = np.sum(got * reference, axis=1)
                    agreement[way] = round(float(min(agreement.get(way, 1.0), cos.min())), 6)
                client.indices.delete(index=idx)
    finally:
        for idx in client.indices.get(index=f"{name}-*", ignore_unavailable=True):
            client.indices.delete(index=idx)
        for p in pipelines.values():
            client.ingest.delete_pipeline(id=p, ignore=[404])
    best = {w: min(v) for w, v in out.items()}
    print(
        json.dumps(
            {
                "model": info.label,
                "chunks": len(texts),
                "predict_batch": args.batch,
                "bulk_chunks": args.bulk,
                "concurrency": args.concurrency,
                "seconds": out,
                "ratio_predict_over_way_best_round": {
                    w: round(best["predict_then_bulk"] / best[w], 2) for w in ways if w != "predict_then_bulk"
                },
                "min_cosine_vs_predict": agreement,
            },
            indent=2,
        )
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
