"""osrag on the local three-node cluster: shards vs one shard, a node lost mid-search,
mid-ingest, and the alias through reindex and rollback.

Run only when asked, with the counts printed:
``.venv/bin/python -m pytest -m cluster tests/integration/test_cluster_nodes.py -s``.
The session fixture uses the cluster of ``osrag dev up --nodes 3`` (ports 9220-9222), starts it
when it is not running and stops it at the end only then. The client gets every node
(OSRAG_URL = node 1, OSRAG_HOSTS = nodes 2 and 3). Every loop is bounded in count and time;
all traffic goes to 127.0.0.1.
"""

from __future__ import annotations

import os
import re
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from osrag.access import Principal
from osrag.admin.reindex import Reindexer
from osrag.devnode import DevCluster
from osrag.evaluation.datasets import load_beir, load_golden
from osrag.ingest.indexing import Ingester
from osrag.names import pipeline_name
from osrag.search.client import SearchClient
from osrag.search.query import candidates_body, collapsed, filter_clauses, lexical_text, parse_filters
from osrag.settings import Settings
from osrag.store.alias import AliasStore
from tests.integration.conftest import drop_alias
from tests.integration.test_reindex import GOLDEN, QUERIES, SMALL, alias_targets, make_corpus

pytestmark = [pytest.mark.integration, pytest.mark.cluster, pytest.mark.slow]

ALL = Principal.admin_bypass()
REPO = Path(__file__).resolve().parents[2]
DEV_SET = Path(os.environ.get("OSRAG_TEST_DEV_SET", "/work/shared/datasets/xquad-ru-dev"))
DEV_QUESTIONS = 100


@pytest.fixture(scope="session")
def cluster(request: pytest.FixtureRequest) -> Iterator[DevCluster]:
    # The word, not the substring: `-m cluster_model` (the single node's ml-commons tests) must not
    # start three nodes.
    if not re.search(r"\bcluster\b", request.config.option.markexpr or ""):
        pytest.skip("starts a 3-node cluster; run with -m cluster")
    dc = DevCluster(Settings(_env_file=None), nodes=3)
    was_running = dc.status().running
    dc.up(wait_s=900)
    deadline = time.monotonic() + 900  # JVMs already started (by another shell) may still be booting
    while dc.status().number_of_nodes < 3:
        assert time.monotonic() < deadline, "the 3-node cluster did not form in 15 minutes"
        time.sleep(5)
    yield dc
    if not was_running and not os.environ.get("OSRAG_TEST_KEEP_NODE"):
        dc.down()


def cluster_settings(dc: DevCluster, alias: str, **over: Any) -> Settings:
    urls = dc.urls
    values: dict[str, Any] = {
        "url": urls[0],
        "hosts": ",".join(urls[1:]),
        "alias": alias,
        "embedding_model": "navec:news-300d",
        "rerank": False,
        "cache_dir": Settings().models_dir.parent,
        "timeout_s": 60,
    }
    return Settings(_env_file=None, **{**values, **over})


@pytest.fixture
def make_alias(cluster: DevCluster, unique_name: str) -> Iterator[Any]:
    made: list[Settings] = []

    def make(suffix: str = "", **over: Any) -> Settings:
        s = cluster_settings(cluster, f"{unique_name}{suffix}", **over)
        made.append(s)
        return s

    yield make
    for s in made:
        drop_alias(AliasStore(s).cluster.client, s.alias)


def wait_green(s: Settings, timeout_s: int = 300) -> str:
    client = AliasStore(s).cluster.client
    got = client.cluster.health(
        index=f"{s.alias}*",
        params={"wait_for_status": "green", "timeout": f"{timeout_s}s"},
        request_timeout=timeout_s + 30,
    )
    return str(got["status"])


# ------------------------------------------------------------------ (a) 1 shard vs 3 shards
def _top10(sc: SearchClient, question: str, filters: Any, mode: str, search_type: str) -> list[str]:
    """Top-10 chunk ids of ``mode`` on the alias, the request built as the search path builds it
    (collapsed on content_hash), sent with ``search_type``."""
    index, _meta = sc._run(sc._target())
    vector = sc._encode_query(question) if mode in ("hybrid", "knn") else None
    flt = filter_clauses(sc.s.alias, parse_filters(filters), ALL)
    body = collapsed(candidates_body(mode, lexical_text(question), vector, 10, flt, sc.s.hnsw_ef_search))
    params: dict[str, Any] = {"search_type": search_type}
    if mode == "hybrid":
        params["search_pipeline"] = pipeline_name(sc.s.alias, sc.s.fusion)
    resp = sc.cluster.client.search(index=index, body=body, params=params)
    return [h["_source"].get("chunk_id", h["_id"]) for h in resp["hits"]["hits"]]


def test_three_shards_rank_like_one_shard(make_alias: Any) -> None:
    """Top-10 on 3 shards against 1 shard, per head, with and without dfs_query_then_fetch; the
    1-shard alias asked twice is the control (is the list stable at all?)."""
    sets = [load_golden(REPO / "golden" / "golden.jsonl", None), load_beir(DEV_SET).sample(DEV_QUESTIONS)]
    report: list[str] = []
    same: dict[tuple[str, str, str], int] = {}
    overlaps: dict[tuple[str, str, str], float] = {}
    for es in sets:
        one, three = make_alias(f"-{es.name[:6]}-s1", shards=1), make_alias(f"-{es.name[:6]}-s3", shards=3)
        for s in (one, three):
            AliasStore(s).install()
            rep = es.ingest(Ingester(s))
            assert not rep.failed, rep.failed[:3]
        a, b = SearchClient(one, principal=ALL), SearchClient(three, principal=ALL)
        n = len(es.queries)
        for mode in ("bm25", "knn", "hybrid"):
            for label, other, variant in (
                ("1 shard again", a, "query_then_fetch"),
                ("3 shards", b, "query_then_fetch"),
                ("3 shards dfs", b, "dfs_query_then_fetch"),
            ):
                key = (es.name, mode, label)
                same[key], overlap, spent = 0, 0, 0.0
                for q in es.queries:
                    base = _top10(a, q.text, q.filters, mode, "query_then_fetch")
                    t0 = time.perf_counter()
                    got = _top10(other, q.text, q.filters, mode, variant)
                    spent += time.perf_counter() - t0
                    same[key] += base == got
                    overlap += len(set(base) & set(got))
                overlaps[key] = overlap / n
                report.append(
                    f"{es.name} {mode:6} {label:13}: same top-10 {same[key]:3}/{n}, "
                    f"mean overlap {overlap / n:.2f}/10, {1000 * spent / n:.0f} ms a search"
                )
    print("\n" + "\n".join(report))
    # The measured claims (docs/cluster.md, "Running on a cluster"): every list is stable on one shard; the
    # kNN head does not care about shards; BM25's per-shard statistics reorder the lexical head and so
    # the hybrid list; dfs_query_then_fetch repairs the BM25 head alone, but with the hybrid query it
    # makes the fused list further from the 1-shard one, not closer (the hybrid query does not honour it).
    for name, n in ((s.name, len(s.queries)) for s in sets):
        for mode in ("bm25", "knn", "hybrid"):
            assert same[(name, mode, "1 shard again")] == n, (name, mode)
        assert same[(name, "knn", "3 shards")] == n
        assert same[(name, "bm25", "3 shards dfs")] >= 0.8 * n > same[(name, "bm25", "3 shards")]
        assert overlaps[(name, "hybrid", "3 shards dfs")] < overlaps[(name, "hybrid", "3 shards")]


# ------------------------------------------------------------------ (b) a node stops during searches
def top10(hits: list[Any]) -> tuple[tuple[float, ...], frozenset[str]]:
    """The top 10 as the cluster may legitimately return it from any copy of a shard: the scores
    in order, and the chunks scored above the 10th score. Chunks of equal score are ordered by
    Lucene's internal doc id, which differs between a primary and its replica, so which of them
    comes first (or makes the cut at the 10th place) is not a difference in the answer."""
    top = hits[:10]
    scores = tuple(round(h.fused, 4) for h in top)
    cut = scores[-1] if scores else 0.0
    return scores, frozenset(h.chunk_id for h in top if round(h.fused, 4) > cut)


def test_every_search_succeeds_while_a_node_stops(
    cluster: DevCluster, make_alias: Any, tmp_path: Path
) -> None:
    s = make_alias(shards=3, replicas=1)
    AliasStore(s).install()
    rep = Ingester(s).ingest([make_corpus(tmp_path / "kb", SMALL)])
    assert not rep.failed and rep.indexed > 0
    assert wait_green(s) == "green"
    # BM25 statistics count deleted documents, and a primary and its replica merge on their own, so
    # the two copies of a shard hold different deleted documents (the visibility flip is an update)
    # and score slightly differently: a hybrid top-10 could then change when a search moves to the
    # other copy, with nothing wrong. Merged to one segment, both copies hold the same live
    # documents and nothing deleted, so any difference left is the failover's.
    client = AliasStore(s).cluster.client
    client.indices.forcemerge(index=s.alias, params={"max_num_segments": 1}, request_timeout=300)
    client.indices.refresh(index=s.alias)
    sc = SearchClient(s, principal=ALL)
    expected = {q: top10(sc.retrieve(q).hits) for q in QUERIES}

    runs, failed, differed = 0, [], 0
    stopped = threading.Event()
    deadline = time.monotonic() + 240
    max_runs = 400

    def stopper() -> None:
        time.sleep(3)
        cluster.stop_node(1)  # the node of OSRAG_URL: the client has to use OSRAG_HOSTS
        stopped.set()

    t = threading.Thread(target=stopper, daemon=True)
    t.start()
    after_stop = 0
    try:
        while runs < max_runs and time.monotonic() < deadline:
            q = QUERIES[runs % len(QUERIES)]
            runs += 1
            try:
                ret = sc.retrieve(q)
                failed += [n for n in ret.notes if n.startswith("partial answer")]
                got = top10(ret.hits)
                differed += got != expected[q]
            except Exception as exc:
                failed.append(f"{type(exc).__name__}: {exc}")
            if stopped.is_set():
                after_stop += 1
                if after_stop >= 60:
                    break
        t.join(timeout=120)
        print(
            f"\nsearches run {runs}, failed {len(failed)}, after node 1 stopped {after_stop}, "
            f"top-10 different from before {differed}"
        )
    finally:
        cluster.start_node(1, wait_s=900)
    assert stopped.is_set() and after_stop >= 30
    assert failed == [], failed[:3]
    assert differed == 0


# ------------------------------------------------------------------ (c) a node stops during an ingest
def test_ingest_interrupted_by_a_node_loses_and_duplicates_nothing(
    cluster: DevCluster, make_alias: Any, tmp_path: Path
) -> None:
    s = make_alias(shards=3, replicas=1, ingest_batch_docs=4)
    AliasStore(s).install()
    names = [p.stem for p in sorted(GOLDEN.glob("*.md"))]
    corpus = make_corpus(tmp_path / "kb", names, copies=3)
    docs = len(list(corpus.glob("*.md")))
    assert wait_green(s) == "green"

    first: dict[str, Any] = {}

    def run() -> None:
        try:
            first["report"] = Ingester(s).ingest([corpus])
        except Exception as exc:  # the ingest may stop with an error: the re-run must repair it
            first["error"] = f"{type(exc).__name__}: {exc}"

    t = threading.Thread(target=run, daemon=True)
    t.start()
    time.sleep(4)
    stopped_mid = t.is_alive()
    cluster.stop_node(2)
    t.join(timeout=600)
    assert not t.is_alive()
    cluster.start_node(2, wait_s=900)
    assert wait_green(s) == "green"
    second = Ingester(s).ingest([corpus])

    reindexer = Reindexer(s)
    index = AliasStore(s).require_index()
    found_docs, found_chunks = reindexer.counts(index)
    client = AliasStore(s).cluster.client
    client.indices.refresh(index=index)
    dup = client.search(
        index=index,
        body={"size": 0, "aggs": {"d": {"terms": {"field": "chunk_id", "min_doc_count": 2, "size": 10}}}},
    )["aggregations"]["d"]["buckets"]
    # The chunks a clean ingest of the same corpus writes, in a fresh alias on the same cluster
    clean = make_alias("-clean", shards=3, replicas=1)
    AliasStore(clean).install()
    clean_rep = Ingester(clean).ingest([corpus])
    r1 = first.get("report")
    print(
        f"\nnode 2 stopped {'during' if stopped_mid else 'after'} the first ingest; first run: "
        + (f"{r1.indexed} indexed, {len(r1.failed)} failed" if r1 else first.get("error", "?"))
        + f"; re-run: {second.indexed} indexed, {second.skipped} unchanged, {len(second.failed)} failed; "
        f"documents expected {docs}, found {found_docs}; chunks expected {clean_rep.chunks}, found "
        f"{found_chunks}; duplicated chunk ids {len(dup)}"
    )
    assert stopped_mid, "the first ingest ended before the node stopped; nothing was tested"
    assert second.failed == []
    assert found_docs == docs and found_chunks == clean_rep.chunks and dup == []


# ------------------------------------------------------------------ (d) reindex and rollback
def test_alias_names_one_index_through_reindex_and_rollback(make_alias: Any, tmp_path: Path) -> None:
    s = make_alias(shards=3, replicas=1)
    AliasStore(s).install()
    Ingester(s).ingest([make_corpus(tmp_path / "kb", SMALL)])
    assert wait_green(s) == "green"
    client = AliasStore(s).cluster.client
    old = AliasStore(s).current_index()
    polls: list[tuple[str, ...]] = []
    errors: list[str] = []
    searches = 0
    stop = threading.Event()

    def poll() -> None:
        nonlocal searches
        sc = SearchClient(s, principal=ALL)
        deadline = time.monotonic() + 600
        while not stop.is_set() and time.monotonic() < deadline and len(polls) < 20_000:
            try:
                polls.append(tuple(alias_targets(client, s.alias)))
                if len(polls) % 10 == 0:
                    assert sc.retrieve(QUERIES[searches % len(QUERIES)]).hits
                    searches += 1
            except Exception as exc:
                errors.append(f"{type(exc).__name__}: {exc}")

    t = threading.Thread(target=poll, daemon=True)
    t.start()
    try:
        time.sleep(1)
        plan = Reindexer(s).run()
        time.sleep(1)
        back = Reindexer(s).rollback()
        time.sleep(1)
    finally:
        stop.set()
        t.join(timeout=60)
    seen = [p[0] if len(p) == 1 else p for p in polls]
    changes = [seen[0], *(b for a, b in zip(seen, seen[1:], strict=False) if a != b)]
    print(
        f"\nalias polled {len(polls)} times, {sum(len(p) != 1 for p in polls)} not naming exactly one index; "
        f"searches {searches}, errors {len(errors)}; alias went {' -> '.join(map(str, changes))}"
    )
    assert errors == [], errors[:3]
    assert {len(p) for p in polls} == {1}
    assert back == (plan.target, old) and changes == [old, plan.target, old]
    assert alias_targets(client, s.alias) == [old]


# ------------------------------------------------------------------ (e) an ML node stops during an ingest


def _node_to_stop(cluster: DevCluster, client: Any) -> int:
    """A node other than the elected cluster manager (an election is a fault of its own; this test
    is about an ML worker going away), node 2 when it can be."""
    manager = client.transport.perform_request("GET", "/_cat/cluster_manager", params={"format": "json"})[0][
        "node"
    ]
    return next(n for n in (2, 3) if cluster.spec(n).name != manager)


def _visible_by_doc(client: Any, alias: str) -> dict[str, list[dict[str, Any]]]:
    from osrag.names import visibility_filter

    client.indices.refresh(index=alias)
    got = client.search(
        index=alias,
        body={
            "size": 10_000,
            "_source": ["doc_id", "chunk_id", "version_key", "embedding"],
            "query": {"bool": {"filter": [visibility_filter(alias)]}},
        },
        params={"request_cache": "false"},
    )
    out: dict[str, list[dict[str, Any]]] = {}
    for h in got["hits"]["hits"]:
        out.setdefault(h["_source"]["doc_id"], []).append(h["_source"])
    return out


@pytest.mark.cluster_model
def test_an_ml_node_lost_mid_ingest_shows_no_half_document_and_the_rerun_resumes(
    cluster: DevCluster, make_alias: Any, tmp_path: Path
) -> None:
    """The tiny embedding model deployed on all three nodes, the alias written through its ingest
    pipeline; one node (not the cluster manager) stops once the first batch is written. The ingest
    either finishes (ml-commons sends inference to the nodes left) or stops with one line naming the
    model; either way every visible document is whole (all its chunks, each with a vector), and the
    same ingest run again (the node back) indexes only what is not visible, embedding only its chunks.

    Which node: the client round-robins over OSRAG_URL and OSRAG_HOSTS alike (the transport marks a
    node that stops answering dead and retries elsewhere; (b) shows it for node 1), so the node of
    OSRAG_URL is no different for the client; every node holds the model and shards. The node stopped
    is one that is not the elected cluster manager, so the fault is an ML node lost, not an election."""
    pytest.importorskip("onnx")
    pytest.importorskip("tokenizers")
    import uuid

    from osrag.mlcommons.client import MLCommons
    from osrag.mlcommons.errors import MLCommonsError
    from tests.integration.ml_natives import deploy_or_skip, predict_count, remove_model
    from tests.integration.tiny_embedder import DIM, build

    names = [p.stem for p in sorted(GOLDEN.glob("*.md"))]
    corpus = make_corpus(tmp_path / "kb", names, copies=2)
    docs = len(list(corpus.glob("*.md")))
    client = AliasStore(cluster_settings(cluster, "x")).cluster.client  # every node, as the ingest's
    ml = MLCommons(client, poll_seconds=0.5)
    meta = build(
        [p.read_text(encoding="utf-8") for p in corpus.glob("*.md")],
        tmp_path / "tiny.zip",
        f"t-node-{uuid.uuid4().hex[:8]}",
    )
    info = ml.register_local(tmp_path / "tiny.zip", meta)
    victim = 0
    try:
        info = deploy_or_skip(ml, info.model_id)
        assert info.deployed and len(info.worker_nodes) == 3, info
        s = make_alias(shards=3, replicas=1, ingest_batch_docs=2, embedding_model=f"ml-id:{info.model_id}")
        AliasStore(s).install()
        assert wait_green(s) == "green"
        victim = _node_to_stop(cluster, client)

        events: list[tuple[float, str]] = []
        stop: dict[str, float] = {}

        def stopper() -> None:
            stop["begun"] = time.monotonic()
            cluster.stop_node(victim)
            stop["done"] = time.monotonic()

        def progress(path: str, status: str) -> None:
            events.append((time.monotonic(), status))
            if status == "indexed" and "thread" not in stop:
                stop["thread"] = 0.0
                threading.Thread(target=stopper, daemon=True).start()

        first: dict[str, Any] = {}
        t0 = time.monotonic()
        try:
            first["report"] = Ingester(s).ingest([corpus], progress=progress)
        except Exception as exc:  # the one allowed failure: one line naming the model (asserted below)
            first["error"] = exc
        ended = time.monotonic()
        deadline = time.monotonic() + 120
        while "done" not in stop and time.monotonic() < deadline:
            time.sleep(0.5)
        after_stop = sum(1 for at, st in events if st == "indexed" and at > stop.get("done", ended))

        # What readers see now: whole documents only, each chunk with its vector.
        visible = _visible_by_doc(client, s.alias)
        vectors_ok = all(len(c.get("embedding") or []) == DIM for cs in visible.values() for c in cs)
        one_version = all(len({c["version_key"] for c in cs}) == 1 for cs in visible.values())

        cluster.start_node(victim, wait_s=900)
        assert wait_green(s) == "green"
        asked = predict_count(client, info.model_id)
        second = Ingester(s).ingest([corpus])
        embedded_again = predict_count(client, info.model_id) - asked
        final = _visible_by_doc(client, s.alias)
        index = AliasStore(s).require_index()
        client.indices.refresh(index=index)
        stored = client.count(index=index)["count"]
        dup = client.search(
            index=index,
            body={"size": 0, "aggs": {"d": {"terms": {"field": "chunk_id", "min_doc_count": 2, "size": 10}}}},
        )["aggregations"]["d"]["buckets"]

        r1, err = first.get("report"), first.get("error")
        assert "done" in stop, "the node did not stop"
        print(
            f"\nnode {victim} stopped {stop['done'] - stop['begun']:.1f}s after the first batch "
            f"({stop['begun'] - t0:.1f}s into the ingest); the ingest ended {ended - stop['done']:+.1f}s "
            f"after it was down, {after_stop} document(s) indexed after; first run: "
            + (
                f"{r1.indexed} indexed, {len(r1.failed)} failed {[w for _, w in r1.failed[:2]]}"
                if r1
                else f"{type(err).__name__}: {err}"
            )
            + f"; visible then {len(visible)}/{docs} documents; re-run: {second.indexed} indexed, "
            f"{second.skipped} unchanged, {len(second.failed)} failed, {second.chunks} chunks, "
            f"{embedded_again} inference calls; stored chunks {stored}, duplicated ids {len(dup)}"
        )
        assert stop["begun"] < ended, "the ingest ended before the node began to stop"
        if err is not None:  # it may stop while the node's JVM is still exiting
            line = str(err)
            assert isinstance(err, MLCommonsError), f"{type(err).__name__}: {line}"
            assert "\n" not in line and info.model_id in line, line
            assert "run the same `osrag ingest` again" in line, line
        else:  # it carried on with the node gone, and wrote everything
            assert stop["done"] < ended, "the ingest ended before the node was gone"
            assert r1 is not None and r1.failed == [], r1.failed[:3]
        assert vectors_ok and one_version
        for doc_id, chunks in visible.items():  # as many chunks as the complete ingest gives it
            assert len(chunks) == len(final[doc_id]), doc_id
        assert second.failed == [] and len(final) == docs
        assert (second.indexed, second.skipped) == (docs - len(visible), len(visible))
        assert embedded_again == second.chunks  # one call a chunk, only for what was not visible
        assert stored == sum(len(c) for c in final.values()) and dup == []
        assert all(len(c.get("embedding") or []) == DIM for cs in final.values() for c in cs)
    finally:
        if victim:
            cluster.start_node(victim, wait_s=900)
        remove_model(ml, info.model_id)
