"""Ingest benchmark on the realistic corpus: the whole ingest path vs a raw bulk write of the
same prepared documents, and peak memory at two sizes.

Run against the running node (``OSRAG_URL``, default http://127.0.0.1:9200)::

    .venv/bin/python bench/bench_ingest.py [--chunks 20000] [--reps 2] [--mem-sizes 5000,20000]

1. Throughput. ``bench/corpus.py`` writes the first ``--chunks`` chunks' documents as Markdown
   files. *Prepared* (untimed): the same files read, chunked and embedded exactly as ingest does
   (``read_document``, ``chunk_document`` with the ingester's config and the model's token
   counter, ``encode_passages``), turned into ingest's own bulk actions (``prepared.chunk_action``).
   *Raw* (timed): those actions written serially by ingest's bulk writer (``osrag.store.bulk.write``,
   one request of ``bulk_chunk_size`` actions in flight, index settings as the template makes
   them) into a fresh index of the
   same kind, then one refresh -- the floor any ingest path pays. *Whole* (timed): ``osrag
   ingest`` of the files (``Ingester.ingest``: read, chunk, embed, hidden writes, refresh, flip)
   into another fresh index. Runs alternate raw, whole, raw, whole, ... on the same machine;
   the ratio raw-time / whole-time of each pair and their median are reported.
2. Memory. A child process ingests the first ``N`` chunks' files for each ``--mem-sizes`` N;
   its peak RSS (VmHWM) is compared: flat memory means a ratio near 1.

Results go to ``bench/results/ingest.md``. Every alias and index the run creates is removed.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
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
sys.path.insert(0, str(REPO / "bench"))

import corpus  # noqa: E402
from bench_common import machine as bench_machine  # noqa: E402

from osrag.chunking import chunk_document  # noqa: E402
from osrag.ingest.documents import read_document  # noqa: E402
from osrag.ingest.indexing import Ingester  # noqa: E402
from osrag.ingest.prepared import chunk_action, document_version  # noqa: E402
from osrag.ingest.walking import find_files  # noqa: E402
from osrag.names import state_index, utcnow  # noqa: E402
from osrag.settings import Settings  # noqa: E402
from osrag.store import bulk  # noqa: E402
from osrag.store.alias import AliasStore  # noqa: E402
from osrag.store.versions import version_key  # noqa: E402
from osrag.vocabulary import PIPELINES  # noqa: E402

RESULTS = REPO / "bench" / "results" / "ingest.md"
MODEL = "navec:news-300d"


def settings_for(alias: str) -> Settings:
    return Settings(alias=alias, embedding_model=MODEL)


def drop_alias(s: Settings) -> None:
    """Delete every index of ``alias``, its state index, templates and pipelines."""
    c = AliasStore(s).cluster.client
    # Two requests: a missing state index (the raw run makes none) would fail a joint delete.
    c.indices.delete(
        index=f"{s.alias}-*", ignore_unavailable=True, allow_no_indices=True, expand_wildcards="all"
    )
    c.indices.delete(index=state_index(s.alias), ignore_unavailable=True)
    c.indices.delete_index_template(name=f"{s.alias}-template", ignore=[404])
    c.cluster.delete_component_template(name=f"{s.alias}-analysis", ignore=[404])
    for suffix in PIPELINES.values():
        c.transport.perform_request("DELETE", f"/_search/pipeline/{s.alias}-{suffix}", params={"ignore": 404})


def prepare(files_dir: Path, s: Settings) -> list[tuple[Any, Any, str, Any]]:
    """(doc, chunk, version_key, vector) for every chunk, made as ingest makes them (untimed)."""
    ing = Ingester(s)
    from osrag.embedding import embedder_for

    emb = embedder_for(s, MODEL)
    out: list[tuple[Any, Any, str, Any]] = []
    docs = [read_document(p, root, 10**9) for p, root in find_files([files_dir])]
    for d in docs:
        chunks = chunk_document(d, "markdown", ing.config, emb.count_tokens)
        vecs = emb.encode_passages([c.text for c in chunks])
        key = version_key(d.doc_id, document_version(d, ing.strategy, ing.config, emb.model_name))
        out.extend((d, c, key, v) for c, v in zip(chunks, vecs))
    return out


def raw_run(prepared: list[tuple[Any, Any, str, Any]], s: Settings) -> float:
    """The prepared chunks written serially by ingest's bulk writer into a fresh index of the same
    kind, then a refresh: no hidden list, no flip, one request in flight."""
    admin = AliasStore(s)
    admin.install()
    index = admin.require_index()
    now = utcnow().isoformat()
    actions = (chunk_action(index, d, c, key, v, now) for d, c, key, v in prepared)
    t0 = time.perf_counter()
    failed = bulk.write(admin.cluster, actions, "raw bench write", concurrency=1)
    if failed:
        raise RuntimeError(f"{len(failed)} raw bulk items failed, the first: {str(failed[0])[:300]}")
    admin.cluster.client.indices.refresh(index=index)
    return time.perf_counter() - t0


def whole_run(files_dir: Path, s: Settings, expect: int) -> tuple[float, dict[str, Any]]:
    AliasStore(s).install()
    t0 = time.perf_counter()
    report = Ingester(s).ingest([files_dir])
    took = time.perf_counter() - t0
    if report.failed or report.chunks != expect:
        raise RuntimeError(
            f"whole ingest wrote {report.chunks} of {expect} chunks; failed {report.failed[:3]}"
        )
    return took, report.as_dict()


def vm_hwm_mib() -> float:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
    return float("nan")


def child(files_dir: str, alias: str) -> None:
    s = settings_for(alias)
    AliasStore(s).install()
    t0 = time.perf_counter()
    report = Ingester(s).ingest([Path(files_dir)])
    print(
        json.dumps({"seconds": time.perf_counter() - t0, "chunks": report.chunks, "vm_hwm_mib": vm_hwm_mib()})
    )


def memory_run(n_chunks: int, tmp: Path) -> dict[str, Any]:
    d = tmp / f"mem{n_chunks}"
    n_docs = corpus.docs_for(n_chunks)
    corpus.write_markdown(d, n_docs)
    alias = f"bench-ingest-mem-{uuid.uuid4().hex[:8]}"
    try:
        out = subprocess.run(
            [sys.executable, __file__, "--child", str(d), alias], capture_output=True, text=True, check=True
        )
        got = json.loads(out.stdout.strip().splitlines()[-1])
    finally:
        drop_alias(settings_for(alias))
        shutil.rmtree(d, ignore_errors=True)
    return {"docs": n_docs, **got}


def machine() -> dict[str, str]:
    load = " ".join(f"{x:.2f}" for x in os.getloadavg())
    return bench_machine(f"`{MODEL}`", **{"load average (1/5/15 min)": load})


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--chunks", type=int, default=20000)
    ap.add_argument("--reps", type=int, default=2)
    ap.add_argument("--mem-sizes", default="5000,20000")
    ap.add_argument("--child", nargs=2, metavar=("DIR", "ALIAS"))
    ap.add_argument("--out", type=Path, default=RESULTS)
    args = ap.parse_args()
    if args.child:
        child(*args.child)
        return
    started = time.perf_counter()
    mach = machine()
    tmp = Path(tempfile.mkdtemp(prefix="osrag-bench-ingest-"))
    try:
        files = tmp / "files"
        n_docs = corpus.docs_for(args.chunks)
        corpus.write_markdown(files, n_docs)
        base = Settings(embedding_model=MODEL)
        t0 = time.perf_counter()
        prepared = prepare(files, base)
        prep_s = time.perf_counter() - t0
        n = len(prepared)
        print(f"{n_docs} documents, {n} chunks prepared in {prep_s:.1f} s", flush=True)
        runs: list[dict[str, Any]] = []
        for rep in range(args.reps):
            pair: dict[str, Any] = {}
            for kind in ("raw", "whole"):
                alias = f"bench-ingest-{kind}-{uuid.uuid4().hex[:8]}"
                s = settings_for(alias)
                try:
                    if kind == "raw":
                        pair["raw"] = raw_run(prepared, s)
                    else:
                        pair["whole"], pair["report"] = whole_run(files, s, n)
                finally:
                    drop_alias(s)
                print(f"rep {rep + 1} {kind}: {pair[kind]:.1f} s", flush=True)
            pair["ratio"] = pair["raw"] / pair["whole"]
            runs.append(pair)
        del prepared
        mem = [memory_run(int(x), tmp) for x in args.mem_sizes.split(",")]
        for m in mem:
            print(f"memory {m['chunks']} chunks: VmHWM {m['vm_hwm_mib']:.0f} MiB", flush=True)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    write_report(args, mach, n_docs, n, prep_s, runs, mem, time.perf_counter() - started)


def write_report(
    args: argparse.Namespace,
    mach: dict[str, str],
    n_docs: int,
    n: int,
    prep_s: float,
    runs: list[dict[str, Any]],
    mem: list[dict[str, Any]],
    total_s: float,
) -> None:
    s = Settings()
    raw = statistics.median(r["raw"] for r in runs)
    whole = statistics.median(r["whole"] for r in runs)
    ratio = statistics.median(r["ratio"] for r in runs)
    emb = statistics.median(r["report"]["embed_seconds"] for r in runs)
    now = dt.datetime.now(dt.UTC).strftime("%Y-%m-%d %H:%M UTC")
    lines = [
        "# Ingest benchmark",
        "",
        f"Generated by `bench/bench_ingest.py --chunks {args.chunks} --reps {args.reps} "
        f"--mem-sizes {args.mem_sizes}` on {now} (whole run {total_s / 60:.1f} min).",
        "",
        "| machine | |",
        "| --- | --- |",
        *[f"| {k} | {v} |" for k, v in mach.items()],
        "",
        "## Throughput: whole ingest path vs a raw bulk write of the same prepared documents",
        "",
        f"Corpus: the first {n_docs} documents of `bench/corpus.py` (realistic Russian text, distinct "
        f"embeddings) as Markdown files → {n} chunks. *Prepared* once, untimed ({prep_s:.0f} s): read, "
        "chunked and embedded exactly as ingest does, as ingest's bulk actions. *Raw*: those actions written "
        f"serially by ingest's bulk writer ({s.bulk_chunk_size} per request, index settings from the "
        "template) into a fresh index of the same kind, then one refresh. *Whole*: `Ingester.ingest` of "
        "the files (read, chunk, embed, hidden writes, refresh, one visibility flip per batch) into "
        "another fresh index, with the defaults: batches of "
        f"≤ {s.ingest_batch_docs} documents / {s.ingest_batch_chunks} chunks, {s.bulk_concurrency} bulk "
        "requests in flight, periodic refresh off from the second batch, embedding of batch N+1 "
        "overlapped with the writes of batch N. Runs alternate raw, whole, raw, whole.",
        "",
        "| pair | raw s | whole s | raw chunks/s | whole chunks/s | raw / whole (throughput ratio) |",
        "| ---: | ---: | ---: | ---: | ---: | ---: |",
        *[
            f"| {i + 1} | {r['raw']:.1f} | {r['whole']:.1f} | {n / r['raw']:.0f} | {n / r['whole']:.0f} | "
            f"{r['ratio']:.2f}× |"
            for i, r in enumerate(runs)
        ],
        f"| median | {raw:.1f} | {whole:.1f} | {n / raw:.0f} | {n / whole:.0f} | **{ratio:.2f}×** |",
        "",
        f"Whole-path throughput is **{ratio:.2f}×** the raw bulk's (median of the {len(runs)} paired ratios; "
        f"target ≥ 0.7×). Embedding inside the whole path took {emb:.1f} s (median), overlapped with writes.",
        "",
        "## Peak memory at two sizes",
        "",
        "Each size is ingested by its own child process (model load included); VmHWM from /proc/self/status.",
        "",
        "| chunks | documents | ingest s | chunks/s | VmHWM MiB |",
        "| ---: | ---: | ---: | ---: | ---: |",
        *[
            f"| {m['chunks']} | {m['docs']} | {m['seconds']:.1f} | {m['chunks'] / m['seconds']:.0f} | "
            f"{m['vm_hwm_mib']:.0f} |"
            for m in mem
        ],
        "",
        f"**Peak RSS ratio {mem[-1]['chunks']} / {mem[0]['chunks']} chunks: "
        f"{mem[-1]['vm_hwm_mib'] / mem[0]['vm_hwm_mib']:.2f}**.",
        "",
    ]
    args.out.write_text("\n".join(lines), encoding="utf-8")
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
