"""Ingest benchmark: the embedder alone vs the whole ingest path, and peak memory at 1x vs 10x.

Run against the running node (``OSRAG_URL``, default http://127.0.0.1:9200)::

    .venv/bin/python bench/bench_ingest.py [--scale N] [--reps 3] [--model navec:news-300d]

1. Throughput. The sample is golden/corpus (N copies of it with --scale N, each
   copy with its own doc_ids). Repetitions alternate: the raw embedder encoding
   every chunk text of the sample, then the whole ingest path (read → chunk →
   embed → bulk → flip) into a fresh alias; the ratio whole/raw says how much
   the path adds on top of the model.
2. Memory. Peak RSS (VmHWM, and ru_maxrss from wait4) of a child process that
   ingests the sample, and of one that ingests a corpus 10x larger (copies with
   distinct doc_ids and slightly varied text); flat memory means a ratio near 1.

Results go to bench/results/ingest.md. Every alias the run creates is removed.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from osrag.admin import Admin  # noqa: E402
from osrag.chunking import ChunkingConfig, chunk_document  # noqa: E402
from osrag.indexing import Ingester, find_files, read_document  # noqa: E402
from osrag.names import PIPELINES, state_index  # noqa: E402
from osrag.settings import Settings  # noqa: E402

GOLDEN = REPO / "golden" / "corpus"
RESULTS = REPO / "bench" / "results" / "ingest.md"
_DOC_ID = re.compile(r"^doc_id:\s*(.+)$", re.M)


# ------------------------------------------------------------------ corpus copies
def make_corpus(target: Path, copies: int) -> int:
    """``copies`` copies of the golden corpus under ``target``, each doc with its own doc_id and a
    slightly different text (so no two documents share a content hash). Returns the file count."""
    n = 0
    for k in range(copies):
        for src in sorted(GOLDEN.glob("*.md")):
            text = src.read_text(encoding="utf-8")
            if k:
                text = _DOC_ID.sub(lambda m, k=k: f"doc_id: {m.group(1).strip()}-copy{k}", text, count=1)
                text = (
                    text.rstrip("\n") + f"\n\nРедакция копии № {k}: текст дополнен для нагрузочного теста.\n"
                )
            out = target / f"copy{k:03d}" / src.name
            out.parent.mkdir(parents=True, exist_ok=True)
            out.write_text(text, encoding="utf-8")
            n += 1
    return n


# ------------------------------------------------------------------ cluster helpers
def bench_settings(model: str, alias: str) -> Settings:
    return Settings().model_copy(update={"alias": alias, "embedding_model": model, "rerank": False})


def cleanup(settings: Settings) -> None:
    admin = Admin(settings)
    client = admin.cluster.client
    alias = settings.alias
    client.indices.delete(index=f"{alias}-*", ignore=[404])
    client.indices.delete(index=state_index(alias), ignore=[404])
    client.indices.delete_index_template(name=admin.template_name, ignore=[404])
    client.cluster.delete_component_template(name=f"{alias}-analysis", ignore=[404])
    for variant in PIPELINES:
        client.transport.perform_request(
            "DELETE", f"/_search/pipeline/{admin.pipeline_name(variant)}", params={"ignore": 404}
        )


def fresh_alias(model: str, created: list[Settings]) -> Settings:
    s = bench_settings(model, f"bench-ingest-{uuid.uuid4().hex[:10]}")
    created.append(s)
    Admin(s).install()
    return s


# ------------------------------------------------------------------ machine info
def machine_info(settings: Settings) -> dict[str, str]:
    from osrag.evaluation import machine_info as host

    m = host()
    info = Admin(settings).cluster.info()
    return {
        "date": dt.datetime.now(dt.UTC).strftime("%Y-%m-%d %H:%M UTC"),
        "nproc": str(m["cores"]),
        "cpu": m["cpu"] or "unknown",
        "ram": m["memory"] or "unknown",
        "python": m["python"],
        "opensearch": f"{info['version']['number']} ({info['version'].get('distribution', 'opensearch')})",
    }


# ------------------------------------------------------------------ child: one ingest, own peak RSS
def child_ingest(corpus: str, alias: str, model: str) -> None:
    s = bench_settings(model, alias)
    t0 = time.perf_counter()
    report = Ingester(s).ingest([corpus])
    seconds = time.perf_counter() - t0
    status = Path("/proc/self/status").read_text()
    hwm = int(re.search(r"VmHWM:\s+(\d+)", status).group(1))  # type: ignore[union-attr]
    print(
        json.dumps(
            {
                "vmhwm_kb": hwm,
                "documents": report.documents,
                "chunks": report.chunks,
                "failed": len(report.failed),
                "seconds": seconds,
            }
        )
    )


def measure_child(corpus: Path, model: str, created: list[Settings]) -> dict[str, Any]:
    s = fresh_alias(model, created)
    proc = subprocess.Popen(
        [sys.executable, __file__, "--child-ingest", str(corpus), "--alias", s.alias, "--model", model],
        stdout=subprocess.PIPE,
        text=True,
    )
    assert proc.stdout is not None
    out = proc.stdout.read()
    _, status, usage = os.wait4(proc.pid, 0)
    proc.returncode = os.waitstatus_to_exitcode(status)
    if proc.returncode != 0:
        raise SystemExit(f"child ingest of {corpus} failed (exit {proc.returncode})")
    result = json.loads(out.strip().splitlines()[-1])
    result["ru_maxrss_kb"] = usage.ru_maxrss  # Linux: KiB, this child only
    cleanup(s)
    return result


# ------------------------------------------------------------------ main
def run(scale: int, reps: int, model: str) -> str:
    created: list[Settings] = []
    work = Path(tempfile.mkdtemp(prefix="osrag-bench-ingest-"))
    try:
        sample = work / "sample"
        n_docs = make_corpus(sample, scale)
        big = work / "x10"
        n_big = make_corpus(big, 10 * scale)

        probe = fresh_alias(model, created)  # also builds/loads the model once
        info = machine_info(probe)
        ingester = Ingester(probe)
        emb = ingester._prepare_target()[1]
        cfg = ChunkingConfig(
            max_tokens=probe.chunk_max_tokens, min_tokens=probe.chunk_min_tokens, overlap=probe.chunk_overlap
        )
        texts: list[str] = []
        tokens = 0
        for path, root in find_files([sample]):
            doc = read_document(path, root, int(probe.max_file_mb * 1e6))
            for c in chunk_document(doc, "markdown", cfg, emb.count_tokens):
                texts.append(c.text)
                tokens += c.token_count
        cleanup(probe)
        emb.encode_passages(texts[:64])  # warm-up: first call pays for lazy init

        raw_s: list[float] = []
        whole_s: list[float] = []
        embed_in_whole: list[float] = []
        for _ in range(reps):
            t0 = time.perf_counter()
            vecs = emb.encode_passages(texts)
            raw_s.append(time.perf_counter() - t0)
            assert len(vecs) == len(texts)

            s = fresh_alias(model, created)
            t0 = time.perf_counter()
            report = Ingester(s, embedder=emb).ingest([sample])
            whole_s.append(time.perf_counter() - t0)
            embed_in_whole.append(report.embed_seconds)
            if report.failed or report.chunks != len(texts):
                raise SystemExit(f"ingest mismatch: {report.as_dict()}")
            cleanup(s)

        mem1 = measure_child(sample, model, created)
        mem10 = measure_child(big, model, created)
        if mem10["documents"] != n_big or mem10["failed"] or mem1["failed"]:
            raise SystemExit(f"memory runs failed: {mem1} {mem10}")
    finally:
        for s in created:
            try:
                cleanup(s)
            except Exception as exc:
                print(f"cleanup of {s.alias} failed: {exc}", file=sys.stderr)
        shutil.rmtree(work, ignore_errors=True)

    raw_med, whole_med = statistics.median(raw_s), statistics.median(whole_s)
    fmt = ", ".join
    lines = [
        "# Ingest benchmark",
        "",
        f"Generated by `bench/bench_ingest.py --scale {scale} --reps {reps}` on {info['date']}.",
        "",
        "| machine | |",
        "| --- | --- |",
        f"| CPU | {info['cpu']} × {info['nproc']} (nproc) |",
        f"| RAM | {info['ram']} |",
        f"| OpenSearch | {info['opensearch']}, single local node |",
        f"| embedding model | `{model}` (batch {probe.embedding_batch_size}, device {probe.device}) |",
        f"| Python | {info['python']} |",
        "",
        "## Throughput: embedder alone vs the whole ingest path",
        "",
        f"Sample: golden/corpus × {scale} = {n_docs} documents → {len(texts)} chunks, {tokens} tokens "
        f"(chunk_max_tokens {probe.chunk_max_tokens}). Repetitions alternate raw / whole; each whole run "
        "goes into a fresh alias.",
        "",
        "| | median s | runs (s) | chunks/s |",
        "| --- | ---: | --- | ---: |",
        f"| raw embedder (`encode_passages` on all chunk texts) | {raw_med:.3f} | "
        f"{fmt(f'{x:.3f}' for x in raw_s)} | {len(texts) / raw_med:.0f} |",
        f"| whole ingest (read → chunk → embed → bulk → flip) | {whole_med:.3f} | "
        f"{fmt(f'{x:.3f}' for x in whole_s)} | {len(texts) / whole_med:.0f} |",
        f"| of which embedding inside ingest | {statistics.median(embed_in_whole):.3f} | "
        f"{fmt(f'{x:.3f}' for x in embed_in_whole)} | |",
        "",
        f"**Ratio whole / raw: {whole_med / raw_med:.1f}×** (median of {reps}).",
        "",
        "## Peak memory: 1x vs 10x corpus",
        "",
        "Each ingest runs in its own child process (model load included); VmHWM from /proc/self/status, "
        "ru_maxrss from wait4 for that child.",
        "",
        "| corpus | documents | chunks | ingest s | VmHWM MiB | ru_maxrss MiB |",
        "| --- | ---: | ---: | ---: | ---: | ---: |",
        f"| 1x (sample) | {mem1['documents']} | {mem1['chunks']} | {mem1['seconds']:.1f} | "
        f"{mem1['vmhwm_kb'] / 1024:.0f} | {mem1['ru_maxrss_kb'] / 1024:.0f} |",
        f"| 10x | {mem10['documents']} | {mem10['chunks']} | {mem10['seconds']:.1f} | "
        f"{mem10['vmhwm_kb'] / 1024:.0f} | {mem10['ru_maxrss_kb'] / 1024:.0f} |",
        "",
        f"**Peak RSS ratio 10x / 1x: {mem10['vmhwm_kb'] / mem1['vmhwm_kb']:.2f}** "
        f"(+{(mem10['vmhwm_kb'] - mem1['vmhwm_kb']) / 1024:.0f} MiB for 10x the documents).",
        "",
    ]
    return "\n".join(lines)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--scale", type=int, default=1, help="copies of golden/corpus in the sample (default 1)")
    ap.add_argument(
        "--reps", type=int, default=3, help="alternating repetitions of raw and whole (default 3)"
    )
    ap.add_argument("--model", default="navec:news-300d", help="embedding model (default navec:news-300d)")
    ap.add_argument("--out", type=Path, default=RESULTS, help=f"Markdown result file (default {RESULTS})")
    ap.add_argument("--child-ingest", help=argparse.SUPPRESS)
    ap.add_argument("--alias", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child_ingest:
        child_ingest(args.child_ingest, args.alias, args.model)
        return
    if args.scale < 1 or args.reps < 1:
        ap.error("--scale and --reps must be >= 1")
    md = run(args.scale, args.reps, args.model)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(md, encoding="utf-8")
    print(md)
    print(f"written to {args.out}", file=sys.stderr)


if __name__ == "__main__":
    main()
