"""Ingest of a real docs tree (issue 23, item 6): osrag's whole path against the simplest competent
pipeline over the same files, side by side in one run; then the sync paths.

Run against the running node (``OSRAG_URL``, default http://127.0.0.1:9200)::

    .venv/bin/python bench/bench_docs_ingest.py [--tree ../shared/datasets/vkdocs-ru-dev/corpus] [--reps 1]
        [--model navec:news-300d] [--profile]

1. First ingest, alternating per rep: *simple* -- read every ``.md`` file, split on blank lines
   packed to ``chunk_max_tokens`` words, embed with the same model object, one plain
   ``streaming_bulk`` into a fresh index of the same kind, one refresh; *osrag* --
   ``Ingester.ingest`` of the same tree into another fresh alias (dialect reader, chunker, token
   counts, hidden writes, flips) with the default settings; *osrag, workers* -- the same with
   ``OSRAG_INGEST_WORKERS=2`` (files read and chunked by worker processes, ``osrag.ingest.readpool``).
   The model is loaded once, before, for all. Ratios to simple.
2. Sync, on a copy of the tree (same collection name, so the same documents): an unchanged
   re-ingest in-process and as a fresh ``osrag ingest`` process (interpreter start included);
   one file changed in one paragraph (chunks embedded vs reused); one file deleted, ``--prune``.
   Every osrag run starts cold (``cold``): nothing an earlier run of the bench process counted,
   parsed or read is remembered, as in a fresh ``osrag ingest`` process. Each run's CPU seconds are
   recorded too, this process's and the node's, and the least wall time they allow on this machine.
3. ``--profile``: one more osrag ingest, in process (workers' time is invisible to cProfile), under
   cProfile; where the time went, by stage.

Results go to ``bench/results/docs_ingest.md`` with the machine and its load. Every alias the run
creates is dropped (``osrag.admin.lifecycle``).
"""

from __future__ import annotations

import argparse
import cProfile
import datetime as dt
import json
import os
import platform
import pstats
import shutil
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from osrag.admin import lifecycle  # noqa: E402
from osrag.embedding import Embedder, embedder_for  # noqa: E402
from osrag.ingest.indexing import Ingester  # noqa: E402
from osrag.settings import Settings  # noqa: E402
from osrag.store.alias import AliasStore  # noqa: E402

RESULTS = REPO / "bench" / "results" / "docs_ingest.md"
#: The worker processes of the second osrag run of each rep (``OSRAG_INGEST_WORKERS``).
WORKERS = 2
TREE = REPO.parent / "shared" / "datasets" / "vkdocs-ru-dev" / "corpus"


def settings_for(alias: str, model: str, **over: Any) -> Settings:
    return Settings(alias=alias, embedding_model=model, _env_file=None, **over)


def cpu(s: Settings) -> tuple[float, float]:
    """(this process's CPU seconds, its reaped children's included; the node's CPU seconds)."""
    import resource

    me = resource.getrusage(resource.RUSAGE_SELF)
    kids = resource.getrusage(resource.RUSAGE_CHILDREN)
    client = me.ru_utime + me.ru_stime + kids.ru_utime + kids.ru_stime
    stats = AliasStore(s).cluster.client.nodes.stats(metric="process")
    node = sum(n["process"]["cpu"]["total_in_millis"] for n in stats["nodes"].values()) / 1000
    return client, node


def measured(run: Any, tree: Path, s: Settings, emb: Embedder) -> dict[str, Any]:
    """``run(tree, s, emb)``, with the CPU seconds it cost this process and the node."""
    c0, n0 = cpu(s)
    got = run(tree, s, emb)
    c1, n1 = cpu(s)
    got["client_cpu"], got["node_cpu"] = c1 - c0, n1 - n0
    return got


def load() -> str:
    return " ".join(f"{x:.2f}" for x in os.getloadavg())


# ---------------------------------------------------------------- the simplest competent pipeline
def split(text: str, max_words: int) -> list[str]:
    """Blank-line paragraphs packed greedily up to ``max_words`` words (a longer paragraph alone)."""
    out: list[str] = []
    cur: list[str] = []
    n = 0
    for para in (p.strip() for p in text.split("\n\n")):
        if not para:
            continue
        w = len(para.split())
        if cur and n + w > max_words:
            out.append("\n\n".join(cur))
            cur, n = [], 0
        cur.append(para)
        n += w
    if cur:
        out.append("\n\n".join(cur))
    return out


def simple_run(tree: Path, s: Settings, emb: Embedder) -> dict[str, Any]:
    from opensearchpy.helpers import streaming_bulk

    admin = AliasStore(s)
    admin.install()
    index = admin.require_index()
    client = admin.cluster.client
    t0 = time.perf_counter()
    files = sorted(p for p in tree.rglob("*.md") if p.is_file())

    def actions() -> Any:
        batch: list[tuple[str, int, str]] = []

        def flush() -> Any:
            vecs = emb.encode_passages([t for _, _, t in batch])
            for (doc_id, i, text), v in zip(batch, vecs):
                yield {
                    "_index": index,
                    "_id": f"{doc_id}:{i}",
                    "_source": {
                        "doc_id": doc_id,
                        "ordinal": i,
                        "text": text,
                        "embedding": [float(x) for x in v],
                    },
                }
            batch.clear()

        for f in files:
            doc_id = f.relative_to(tree).with_suffix("").as_posix()
            for i, piece in enumerate(split(f.read_text(encoding="utf-8"), s.chunk_max_tokens)):
                batch.append((doc_id, i, piece))
            if len(batch) >= 256:
                yield from flush()
        if batch:
            yield from flush()

    n = 0
    for ok, item in streaming_bulk(
        client, actions(), chunk_size=s.bulk_chunk_size, max_retries=5, request_timeout=120
    ):
        if not ok:
            raise RuntimeError(f"simple bulk item failed: {str(item)[:300]}")
        n += 1
    client.indices.refresh(index=index)
    return {"seconds": time.perf_counter() - t0, "files": len(files), "chunks": n}


def cold() -> None:
    """Forget what an earlier run of this process remembered (line token counts, included
    snippets' reads, include-tag indexes, recent parses): each osrag run starts as a fresh
    ``osrag ingest`` process would."""
    from osrag.chunking import inclusion, linecounts, parser, render

    linecounts._COUNTS.clear()
    inclusion.forget()
    render._remembered_index.cache_clear()
    parser._RECENT.clear()


def osrag_run(tree: Path, s: Settings, emb: Embedder) -> dict[str, Any]:
    AliasStore(s).install()
    cold()
    t0 = time.perf_counter()
    r = Ingester(s, embedder=emb).ingest([tree])
    return {
        "seconds": time.perf_counter() - t0,
        "indexed": r.indexed,
        "skips": len(r.skips),
        "failed": len(r.failed),
        "chunks": r.chunks,
        "embed_seconds": r.embed_seconds,
    }


# ---------------------------------------------------------------- sync
def cli_ingest(s: Settings, tree: Path, *extra: str) -> tuple[float, dict[str, Any]]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("OSRAG_")}
    env.update(OSRAG_URL=s.url, OSRAG_ALIAS=s.alias, OSRAG_EMBEDDING_MODEL=str(s.embedding_model))
    t0 = time.perf_counter()
    out = subprocess.run(
        [sys.executable, "-m", "osrag.cli", "ingest", str(tree), "--json", *extra],
        env=env,
        capture_output=True,
        text=True,
        cwd=tree.parent,  # not a folder holding an `osrag` directory of its own
    )
    took = time.perf_counter() - t0
    if out.returncode != 0:
        raise RuntimeError(f"osrag ingest exited {out.returncode}: {out.stderr[-500:]}")
    return took, json.loads(out.stdout)


def sync_runs(tree: Path, s: Settings, emb: Embedder, tmp: Path) -> dict[str, Any]:
    copy = tmp / tree.name  # the same collection name: the same documents as the first ingest
    shutil.copytree(tree, copy)
    out: dict[str, Any] = {}
    t0 = time.perf_counter()
    r = Ingester(s).ingest([copy])  # no embedder given: an unchanged run must not load one
    out["unchanged_in_process"] = {
        "seconds": time.perf_counter() - t0,
        "skipped": r.skipped,
        "indexed": r.indexed,
    }
    took, summary = cli_ingest(s, copy)
    out["unchanged_cli"] = {"seconds": took, "skipped": summary["skipped"], "indexed": summary["indexed"]}

    target = max(sorted(copy.rglob("*.md")), key=lambda p: p.stat().st_size)
    text = target.read_text(encoding="utf-8")
    cut = text.index("\n\n", len(text) // 2)
    target.write_text(
        text[:cut] + " Этот абзац изменён для проверки синхронизации." + text[cut:], encoding="utf-8"
    )
    t0 = time.perf_counter()
    r = Ingester(s, embedder=emb).ingest([copy])
    out["one_file_changed"] = {
        "seconds": time.perf_counter() - t0,
        "file": target.relative_to(copy).as_posix(),
        "indexed": r.indexed,
        "chunks": r.chunks,
        "reused_vectors": r.reused_vectors,
        "embedded": r.chunks - r.reused_vectors,
    }
    gone = next(p for p in sorted(copy.rglob("*.md")) if "_includes" not in p.parts and p != target)
    gone.unlink()
    took, summary = cli_ingest(s, copy, "--prune")
    out["one_file_deleted_prune_cli"] = {
        "seconds": took,
        "file": gone.relative_to(copy).as_posix(),
        "pruned": summary["pruned_docs"],
        "skipped": summary["skipped"],
    }
    return out


# ---------------------------------------------------------------- profile
STAGES = {
    "reading files into documents (documents.read_document: dialect reader, front matter, includes)": "read_document",
    "chunking (chunk_document, token counts inside)": "chunk_document",
    "token counting (embedding.count_tokens, anywhere)": "count_tokens",
    "Markdown parsing (markdown_it MarkdownIt.parse, anywhere)": "parse",
    "included files (render.included: their reads, remembered or not)": "included",
    "embedding (encode_passages)": "encode_passages",
    "waiting for the writer thread (bulk, refresh, flip of the previous batch)": "wait_for_writes",
}


def profile_run(tree: Path, s: Settings, emb: Embedder) -> tuple[float, list[tuple[str, float]]]:
    AliasStore(s).install()
    cold()
    pr = cProfile.Profile()
    t0 = time.perf_counter()
    pr.enable()
    Ingester(s, embedder=emb).ingest([tree])
    pr.disable()
    total = time.perf_counter() - t0
    stats = pstats.Stats(pr).stats  # type: ignore[attr-defined]
    rows = []
    for label, fn in STAGES.items():
        cum = max(
            (
                v[3]
                for (file, _line, name), v in stats.items()
                if name == fn and ("osrag" in file or (fn == "parse" and "markdown_it" in file))
            ),
            default=0.0,
        )
        rows.append((label, cum))
    return total, rows


# ---------------------------------------------------------------- main
def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--tree", type=Path, default=TREE)
    ap.add_argument("--reps", type=int, default=1)
    ap.add_argument("--model", default="navec:news-300d")
    ap.add_argument("--profile", action="store_true")
    ap.add_argument("--out", type=Path, default=RESULTS)
    args = ap.parse_args()
    tree: Path = args.tree.resolve()
    started = time.perf_counter()
    load_start = load()
    base = Settings(_env_file=None)
    emb = embedder_for(settings_for("bench-docs-model", args.model), args.model)
    emb.encode_passages(["прогрев модели"])  # loaded once, before both pipelines
    aliases: list[Settings] = []
    pairs: list[tuple[dict[str, Any], dict[str, Any], str]] = []
    tmp = Path(tempfile.mkdtemp(prefix="osrag-bench-docs-"))
    sync: dict[str, Any] = {}
    profile: tuple[float, list[tuple[str, float]]] | None = None
    try:
        for _ in range(args.reps):
            ss = settings_for(f"bench-docs-simple-{uuid.uuid4().hex[:8]}", args.model)
            so = settings_for(f"bench-docs-osrag-{uuid.uuid4().hex[:8]}", args.model)
            s0 = settings_for(
                f"bench-docs-workers-{uuid.uuid4().hex[:8]}", args.model, ingest_workers=WORKERS
            )
            aliases += [ss, so, s0]
            simple = measured(simple_run, tree, ss, emb)
            whole = measured(osrag_run, tree, so, emb)
            here = measured(osrag_run, tree, s0, emb)
            whole["workers"] = here
            pairs.append((simple, whole, load()))
            print(
                f"simple {simple['seconds']:.1f}s  osrag {whole['seconds']:.1f}s  "
                f"{WORKERS} workers {here['seconds']:.1f}s  load {load()}",
                flush=True,
            )
        sync = sync_runs(tree, aliases[-1], emb, tmp)
        print(json.dumps(sync, ensure_ascii=False), flush=True)
        if args.profile:
            sp = settings_for(f"bench-docs-prof-{uuid.uuid4().hex[:8]}", args.model, ingest_workers=0)
            aliases.append(sp)
            profile = profile_run(tree, sp, emb)
    finally:
        for s in aliases:
            lifecycle.drop(s, lifecycle.plan_drop(s))
        shutil.rmtree(tmp, ignore_errors=True)
    write_report(args, tree, base, pairs, sync, profile, load_start, time.perf_counter() - started)


def write_report(
    args: argparse.Namespace,
    tree: Path,
    base: Settings,
    pairs: list[tuple[dict[str, Any], dict[str, Any], str]],
    sync: dict[str, Any],
    profile: tuple[float, list[tuple[str, float]]] | None,
    load_start: str,
    seconds: float,
) -> None:
    info = AliasStore(base).cluster.client.info()
    ratios = sorted(w["seconds"] / s["seconds"] for s, w, _ in pairs)
    median = ratios[len(ratios) // 2]
    here = sorted(w["workers"]["seconds"] / s["seconds"] for s, w, _ in pairs)
    median_here = here[len(here) // 2]
    now = dt.datetime.now(dt.UTC).strftime("%Y-%m-%d %H:%M UTC")
    rows = "\n".join(
        f"| {i + 1} | {s['seconds']:.1f} | {s['chunks']} | {w['seconds']:.1f} | {w['chunks']} "
        f"({w['indexed']} docs, {w['skips']} skipped) | {w['embed_seconds']:.1f} | {w['seconds'] / s['seconds']:.2f}× "
        f"| {w['workers']['seconds']:.1f} | {w['workers']['seconds'] / s['seconds']:.2f}× | {ld} |"
        for i, (s, w, ld) in enumerate(pairs)
    )
    cpu_rows = "\n".join(
        f"| {i + 1} | {s['client_cpu']:.1f} / {s['node_cpu']:.1f} | {w['client_cpu']:.1f} / {w['node_cpu']:.1f} "
        f"| {w['workers']['client_cpu']:.1f} / {w['workers']['node_cpu']:.1f} "
        f"| {(s['client_cpu'] + s['node_cpu']) / (os.cpu_count() or 1):.1f} | {(w['client_cpu'] + w['node_cpu']) / (os.cpu_count() or 1):.1f} |"
        for i, (s, w, _) in enumerate(pairs)
    )
    u_in, u_cli = sync["unchanged_in_process"], sync["unchanged_cli"]
    ch, pr = sync["one_file_changed"], sync["one_file_deleted_prune_cli"]
    lines = [
        "# Docs-tree ingest benchmark",
        "",
        f"Generated by `bench/bench_docs_ingest.py --reps {args.reps} --model {args.model}"
        f"{' --profile' if args.profile else ''}` on {now} (whole run {seconds / 60:.1f} min), tree "
        f"`{tree.relative_to(REPO.parent) if tree.is_relative_to(REPO.parent) else tree}`.",
        "",
        "| machine | |",
        "| --- | --- |",
        f"| CPU | {platform.machine()} × {os.cpu_count()} (nproc), shared with other sessions' jobs |",
        f"| load average (1/5/15 min) | {load_start} at the start, {load()} at the end |",
        f"| OpenSearch | {info['version']['number']}, single local node on the same machine |",
        f"| embedding model | `{args.model}` (loaded once before both pipelines) |",
        f"| ingest workers | {base.ingest_workers} (`OSRAG_INGEST_WORKERS`, the default); *workers*: {WORKERS} |",
        f"| Python | {platform.python_version()} |",
        "",
        "## First ingest: osrag vs the simplest competent pipeline",
        "",
        "*simple*: read each `.md`, split on blank lines packed to `chunk_max_tokens` words, embed with the "
        "same model object, one plain `streaming_bulk` (200 actions a request), one refresh. *osrag*: "
        "`Ingester.ingest` of the same tree (dialect reader with includes and variables, structure-aware "
        "chunker counting tokens with the model's tokenizer, hidden writes and one flip per batch), files "
        f"read and chunked as the default settings say; *workers*: the same with `OSRAG_INGEST_WORKERS={WORKERS}` "
        "(worker processes read, parse, chunk and count; the ingest's thread embeds, the writer writes).",
        "",
        "| rep | simple s | simple chunks | osrag s | osrag chunks | osrag embed s | osrag / simple "
        "| workers s | workers / simple | load after |",
        "| ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | --- |",
        rows,
        "",
        f"Median osrag / simple: **{median:.2f}×** (target ≤ 1.5×); with {WORKERS} workers: {median_here:.2f}×.",
        "",
        "CPU seconds each run cost, this process (worker processes included) / the node (`_nodes/stats`, "
        "anything else the node served meanwhile included); the last two columns are the least wall time "
        f"the client and node CPU allow on {os.cpu_count()} cores with perfect overlap.",
        "",
        "| rep | simple client / node | osrag client / node | workers client / node | simple floor s | osrag floor s |",
        "| ---: | ---: | ---: | ---: | ---: | ---: |",
        cpu_rows,
        "",
        "## Sync (a copy of the tree, same collection: the same documents)",
        "",
        "| run | seconds | outcome |",
        "| --- | ---: | --- |",
        f"| unchanged re-ingest, in process | {u_in['seconds']:.2f} | {u_in['skipped']} skipped unread, {u_in['indexed']} indexed |",
        f"| unchanged re-ingest, `osrag ingest` process (interpreter start included) | {u_cli['seconds']:.2f} | "
        f"{u_cli['skipped']} skipped, {u_cli['indexed']} indexed |",
        f"| one paragraph of `{ch['file']}` changed | {ch['seconds']:.2f} | {ch['indexed']} indexed: "
        f"{ch['embedded']} chunk(s) embedded, {ch['reused_vectors']} reused of {ch['chunks']} |",
        f"| `{pr['file']}` deleted, `osrag ingest --prune` process | {pr['seconds']:.2f} | pruned "
        f"{', '.join(pr['pruned'])}; {pr['skipped']} skipped |",
        "",
    ]
    if profile is not None:
        total, stages = profile
        lines += [
            "## Where the time goes (one more osrag ingest under cProfile)",
            "",
            f"Total under the profiler: {total:.1f} s (in process, `OSRAG_INGEST_WORKERS=0`; cumulative "
            "seconds; stages overlap: token counting and Markdown parsing happen inside reading and chunking).",
            "",
            "| stage | cumulative s | share |",
            "| --- | ---: | ---: |",
            *(f"| {label} | {cum:.1f} | {cum / total:.0%} |" for label, cum in stages),
            "",
        ]
    args.out.write_text("\n".join(lines) + "\n", encoding="utf-8")
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
