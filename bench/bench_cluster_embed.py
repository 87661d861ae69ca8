"""Cluster-side embedding at ingest: batched ``_predict`` against a ``text_embedding`` ingest pipeline.

The same chunks (golden's, the Markdown chunker) are embedded by a deployed ml-commons model two
ways: (1) ``_predict`` in batches, the vectors then bulk-indexed; (2) bulk-indexing the text into
an index whose default pipeline has a ``text_embedding`` processor. Each way runs ``--rounds``
times; prints one JSON object with the wall times. The throwaway index and pipeline are deleted.

    python bench/bench_cluster_embed.py --url http://127.0.0.1:9234 --model ml:NAME [--chunks 120]
"""

from __future__ import annotations

import argparse
import json
import sys
import time
import uuid
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--url", required=True)
    ap.add_argument("--model", required=True, help="ml:NAME[@VERSION] or ml-id:ID (a deployed local model)")
    ap.add_argument("--chunks", type=int, default=120)
    ap.add_argument("--batch", type=int, default=32)
    ap.add_argument("--rounds", type=int, default=2)
    args = ap.parse_args()

    from opensearchpy import OpenSearch, helpers

    from osrag.chunking.chunkers import chunk_document
    from osrag.chunking.model import Document
    from osrag.mlcommons.blueprints import parse_ref
    from osrag.mlcommons.client import MLCommons

    client = OpenSearch(args.url, timeout=600)
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
                "vec": {
                    "type": "knn_vector",
                    "dimension": dim,
                    # lucene, as osrag's indices: faiss needs a native library a dev node may not have
                    "method": {"name": "hnsw", "engine": "lucene", "space_type": "cosinesimil"},
                },
            }
        },
    }
    pipeline = {"processors": [{"text_embedding": {"model_id": info.model_id, "field_map": {"text": "vec"}}}]}
    out: dict[str, list[float]] = {"predict_then_bulk": [], "ingest_pipeline": []}
    try:
        client.ingest.put_pipeline(id=name, body=pipeline)
        for r in range(args.rounds):
            idx = f"{name}-p{r}"
            client.indices.create(index=idx, body=mapping)
            t0 = time.monotonic()
            vecs: list[list[float]] = []
            for i in range(0, len(texts), args.batch):
                vecs += ml.embed(info.model_id, texts[i : i + args.batch], content_type="passage").vectors
            helpers.bulk(
                client,
                ({"_index": idx, "_source": {"text": t, "vec": v}} for t, v in zip(texts, vecs)),
                chunk_size=args.batch,
                refresh=True,
            )
            out["predict_then_bulk"].append(round(time.monotonic() - t0, 2))
            client.indices.delete(index=idx)

            idx = f"{name}-i{r}"
            client.indices.create(
                index=idx, body={**mapping, "settings": {**mapping["settings"], "default_pipeline": name}}
            )
            t0 = time.monotonic()
            helpers.bulk(
                client,
                ({"_index": idx, "_source": {"text": t}} for t in texts),
                chunk_size=args.batch,
                refresh=True,
            )
            out["ingest_pipeline"].append(round(time.monotonic() - t0, 2))
            n = client.count(index=idx)["count"]
            assert n == len(texts), (n, len(texts))
            client.indices.delete(index=idx)
    finally:
        for idx in client.indices.get(index=f"{name}-*", ignore_unavailable=True):
            client.indices.delete(index=idx)
        client.ingest.delete_pipeline(id=name, ignore=[404])
    print(
        json.dumps({"model": info.label, "chunks": len(texts), "batch": args.batch, "seconds": out}, indent=2)
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
