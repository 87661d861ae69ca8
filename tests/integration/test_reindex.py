"""Reindex, rollback, cleanup and the reindex lock against the real node.

Nothing here mocks OpenSearch. The killed reindex is a real ``osrag reindex``
process that gets SIGKILL while it is writing the new index; the concurrent
readers are real searches through the alias in another thread.
"""

from __future__ import annotations

import datetime as dt
import json
import os
import re
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest

from osrag.access import Principal
from osrag.admin.reindex import Reindexer
from osrag.admin.status import status
from osrag.errors import ConfigError, IndexStateError
from osrag.ingest.indexing import Ingester
from osrag.names import state_index
from osrag.search.client import SearchClient
from osrag.settings import Settings
from osrag.store.alias import AliasStore
from osrag.store.locking import LOCK_ID, LockRecord, ensure_state_index, read_lock
from tests.integration.conftest import drop_alias

#: These tests are about other things than access: they read as the admin bypass (no ACL clause).
ALL = Principal.admin_bypass()

pytestmark = pytest.mark.integration

REPO = Path(__file__).resolve().parents[2]
GOLDEN = REPO / "golden" / "corpus"
MINILM = "minilm:packaged"
NAVEC = "navec:news-300d"

#: About 30 chunks: re-embedding them with MiniLM takes a few seconds.
SMALL = (
    "account-registration",
    "promo-tea15",
    "faq-lamps",
    "product-lamp-light-mini",
    "delivery-pickup",
    "loyalty-program",
)
#: About 110 chunks, i.e. two re-embedding batches of 64: a kill lands after the first batch is written.
KILL = SMALL + (
    "promo-rules",
    "returns-policy",
    "delivery-tariffs",
    "orders-errors",
    "api-partner",
    "product-lamp-light",
    "returns-warranty",
    "orders-statuses",
    "faq-tea-storage",
    "promo-tea10",
)
QUERIES = (
    "код из СМС не приходит, не могу войти",
    "какая гарантия на LAMP-LIGHT-MINI",
    "TEA15 скидка на чай",
    "лампа мигает и жужжит",
    "забрать заказ самому из пункта выдачи",
    "можно ли оплатить доставку бонусными баллами",
)


# ------------------------------------------------------------------ fixtures and helpers


def make_corpus(dst: Path, names: Sequence[str], copies: int = 1) -> Path:
    """Golden documents in ``dst``; copy ``n`` > 0 gets the doc_id suffix ``-cN``."""
    dst.mkdir(parents=True, exist_ok=True)
    for n in range(copies):
        for name in names:
            text = (GOLDEN / f"{name}.md").read_text(encoding="utf-8")
            if n:
                text = re.sub(r"^doc_id: (.+)$", rf"doc_id: \1-c{n}", text, count=1, flags=re.M)
                assert f"-c{n}\n" in text
            (dst / f"{name}-{n}.md").write_text(text, encoding="utf-8")
    return dst


def ingest(settings: Settings, corpus: Path) -> Any:
    report = Ingester(settings).ingest([corpus])
    assert report.failed == [] and report.indexed == report.documents > 0
    return report


def top10(
    settings: Settings, queries: Sequence[str] = QUERIES, modes: Sequence[str] = ("bm25", "hybrid")
) -> dict[tuple[str, str], list[str]]:
    client = SearchClient(settings, principal=ALL)
    out = {}
    for mode in modes:
        for q in queries:
            hits = client.retrieve(q, mode=mode).hits
            out[(mode, q)] = [h.chunk_id for h in hits[:10]]
    return out


def alias_targets(client: Any, alias: str) -> list[str]:
    got = client.indices.get_alias(name=alias, ignore=[404])
    return sorted(k for k in got if k not in ("error", "status"))


def exists(client: Any, index: str) -> bool:
    return bool(client.indices.exists(index=index))


def names(r: Reindexer) -> list[str]:
    return [row["index"] for row in r.indices()]


def cli_env(settings: Settings, **extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("OSRAG_")}
    env.update(
        OSRAG_URL=settings.url,
        OSRAG_ALIAS=settings.alias,
        OSRAG_CACHE_DIR=str(settings.cache_dir),
        OSRAG_RERANK="false",
        **extra,
    )
    return env


def run_cli(settings: Settings, cwd: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "osrag.cli", *args],
        cwd=cwd,
        env=cli_env(settings),
        capture_output=True,
        text=True,
        timeout=300,
    )


def indexed_ops(client: Any, index: str) -> int:
    """Documents written into ``index`` so far, refreshed or not."""
    got = client.indices.stats(index=index, metric="indexing", ignore=[404])
    if "indices" not in got or index not in got["indices"]:
        return 0
    return int(got["indices"][index]["primaries"]["indexing"]["index_total"])


def lock_of(admin: AliasStore, index: str) -> LockRecord | None:
    """The reindex lock of the alias (a document in its state index; ``index`` is not needed)."""
    return read_lock(admin.cluster, admin.alias)


def put_lock(admin: AliasStore, **record: Any) -> None:
    """Stand in for another reindex: its lock document, as ``osrag.store.locking.acquire`` writes it."""
    ensure_state_index(admin.cluster, admin.alias)
    admin.cluster.client.index(
        index=state_index(admin.alias), id=LOCK_ID, body={"lock": {"token": "other", **record}}, refresh=True
    )


# ------------------------------------------------------------------ readers during a reindex
def test_searches_during_reindex_all_succeed_and_alias_always_names_one_index(
    admin: AliasStore, settings: Settings, tmp_path: Path
) -> None:
    ingest(settings, make_corpus(tmp_path / "kb", [p.stem for p in sorted(GOLDEN.glob("*.md"))], copies=2))
    client = admin.cluster.client
    old = admin.current_index()
    assert alias_targets(client, settings.alias) == [old]

    stop = threading.Event()
    errors: list[str] = []
    searches: list[tuple[float, str, str, int]] = []  # (time, mode, index searched, hits)
    aliases: dict[str, list[tuple[str, ...]]] = {"reader": [], "poller": []}  # what get_alias said, in order

    def poll_alias(who: str) -> None:
        try:
            aliases[who].append(tuple(alias_targets(client, settings.alias)))
        except Exception as exc:
            errors.append(f"get_alias: {type(exc).__name__}: {exc}")

    def reader() -> None:
        sc = SearchClient(settings, principal=ALL)
        i = 0
        while not stop.is_set():
            q = QUERIES[i % len(QUERIES)]
            i += 1
            for mode in ("hybrid", "bm25"):
                try:
                    r = sc.retrieve(q, mode=mode)
                    searches.append((time.monotonic(), mode, r.index, len(r.hits)))
                except Exception as exc:
                    errors.append(f"{mode} {q!r}: {type(exc).__name__}: {exc}")
            poll_alias("reader")

    def poller() -> None:
        # Nothing but get_alias, as fast as the node answers: a switch made of two requests
        # (remove, then add) leaves a gap of at least one request that this lands in.
        while not stop.is_set():
            poll_alias("poller")

    def wait_for(pred: Any, what: str, timeout: float = 60) -> None:
        deadline = time.monotonic() + timeout
        while not pred():
            assert not errors, errors[:3]
            assert time.monotonic() < deadline, f"timed out waiting for {what}"
            time.sleep(0.02)

    threads = [threading.Thread(target=reader, daemon=True), threading.Thread(target=poller, daemon=True)]
    for thread in threads:
        thread.start()
    try:
        wait_for(lambda: len(searches) >= 6, "searches on the old index")
        started = time.monotonic()
        plan = Reindexer(settings).run()
        finished = time.monotonic()
        wait_for(lambda: sum(1 for s in searches if s[2] == plan.target) >= 6, "searches on the new index")
    finally:
        stop.set()
        for thread in threads:
            thread.join(timeout=60)
    assert not any(thread.is_alive() for thread in threads)

    assert errors == []
    assert plan.method == "server-side _reindex" and plan.target not in (None, old)
    assert all(n > 0 for _, _, _, n in searches), [s for s in searches if s[3] == 0][:3]
    during = [s for s in searches if started <= s[0] <= finished]
    assert len(during) >= 4, f"only {len(during)} searches ran during the reindex"
    assert {s[2] for s in searches} == {old, plan.target}
    # Never 0 and never 2 indices behind the alias (the switch is one request), and no flapping.
    for who, polls in aliases.items():
        assert len(polls) > 5, who
        assert {len(a) for a in polls} == {1}, (who, sorted({a for a in polls if len(a) != 1}))
        seen = [a[0] for a in polls]
        switch = seen.index(plan.target)
        assert switch > 0 and set(seen[:switch]) == {old} and set(seen[switch:]) == {plan.target}, who

    # State after: the alias on the new index only, the old one kept (without the alias) for rollback.
    assert alias_targets(client, settings.alias) == [plan.target]
    assert client.indices.get_alias(index=old)[old]["aliases"] == {}
    assert admin.meta(plan.target).previous_index == old
    assert lock_of(admin, old) is None
    assert Reindexer(settings).counts(plan.target) == Reindexer(settings).counts(old)


# ------------------------------------------------------------------ a reindex killed midway
def test_killed_reindex_leaves_alias_and_searches_and_rerun_cleans_up(
    admin: AliasStore, settings: Settings, tmp_path: Path
) -> None:
    corpus = make_corpus(tmp_path / "kb", KILL)
    ingest(settings, corpus)
    client = admin.cluster.client
    old = admin.current_index()
    docs, chunks = Reindexer(settings).counts(old)
    assert chunks > 64, "the corpus must take more than one re-embedding batch"
    before = top10(settings)

    out, err = tmp_path / "reindex.out", tmp_path / "reindex.err"
    with out.open("w") as fo, err.open("w") as fe:
        proc = subprocess.Popen(
            [sys.executable, "-m", "osrag.cli", "reindex", "--embedding-model", MINILM],
            cwd=tmp_path,
            env=cli_env(settings, OSRAG_BULK_CHUNK_SIZE="16"),
            stdout=fo,
            stderr=fe,
        )
    try:
        deadline = time.monotonic() + 180
        target = None
        while True:
            assert proc.poll() is None, f"reindex ended before it was killed: {err.read_text()[-2000:]}"
            lock = lock_of(admin, old)
            if lock:
                target = lock.target
                if indexed_ops(client, target) > 0:
                    break
            assert time.monotonic() < deadline, "the reindex never started writing"
            time.sleep(0.05)
        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode == -signal.SIGKILL

    # The half-built index is there, really half-built, and never had the alias.
    assert target and exists(client, target)
    client.indices.refresh(index=target)
    written = int(client.count(index=target)["count"])
    assert 0 < written < chunks
    assert alias_targets(client, settings.alias) == [old]
    assert admin.current_index() == old
    lock = lock_of(admin, old)
    assert lock and lock.target == target and lock.pid == proc.pid

    # Readers are unaffected; writers are refused while the lock is there.
    assert top10(settings) == before
    with pytest.raises(IndexStateError) as ei:
        Ingester(settings).ingest([corpus])
    assert "reindex" in str(ei.value) and target in str(ei.value)
    st = status(settings)
    assert (
        st["index"] == old
        and st["reindex_lock"]["target"] == target
        and st["reindex_lock"]["state"] == "dead"
    )
    plan = Reindexer(settings).plan(MINILM)
    assert plan.stale_target == target and plan.lock_state == "dead"

    # Re-running drops the half-built index, finishes, switches, releases the lock.
    plan = Reindexer(settings).run(MINILM)
    assert not exists(client, target)
    assert plan.target not in (None, old, target)
    assert alias_targets(client, settings.alias) == [plan.target]
    assert sorted(names(Reindexer(settings))) == sorted([old, plan.target])
    assert lock_of(admin, old) is None
    meta = admin.meta(plan.target)
    assert (meta.embedding_model, meta.dimension, meta.previous_index) == (MINILM, 384, old)
    assert Reindexer(settings).counts(plan.target) == (docs, chunks)
    after = top10(settings)
    assert all(after.values())
    # Ingest works again (with the new model; a one-file corpus keeps it quick).
    one = make_corpus(tmp_path / "one", ["promo-lamp500"])
    report = Ingester(settings.model_copy(update={"embedding_model": MINILM})).ingest([one])
    assert (report.indexed, report.failed, report.index) == (1, [], plan.target)


# ------------------------------------------------------------------ a model with another dimension
def test_reindex_to_a_model_with_another_dimension(
    admin: AliasStore, settings: Settings, tmp_path: Path
) -> None:
    corpus = make_corpus(tmp_path / "kb", SMALL)
    ingest(settings, corpus)
    client = admin.cluster.client
    old = admin.current_index()
    counts = Reindexer(settings).counts(old)

    plan = Reindexer(settings).run(MINILM)
    assert (plan.method, plan.source_dimension, plan.target_dimension) == ("re-embed in Python", 300, 384)
    new = admin.current_index()
    assert new == plan.target != old
    meta = admin.meta(new)
    assert (meta.embedding_model, meta.dimension) == (MINILM, 384)
    assert admin.meta(old).dimension == 300
    mapping = client.indices.get_mapping(index=new)[new]["mappings"]["properties"]["embedding"]
    assert mapping["dimension"] == 384
    stored = client.search(index=new, body={"size": 3, "_source": ["embedding"]})["hits"]["hits"]
    assert stored and all(len(h["_source"]["embedding"]) == 384 for h in stored)
    assert Reindexer(settings).counts(new) == counts

    sc = SearchClient(settings, principal=ALL)
    for mode in ("hybrid", "knn", "bm25"):
        r = sc.retrieve(QUERIES[1], mode=mode)
        assert r.index == new and r.meta.dimension == 384 and r.hits, mode
    assert len(sc.retrieve(QUERIES[1], mode="knn").vector) == 384

    # The old model is refused: one index never mixes two models' vectors.
    with pytest.raises(ConfigError) as ei:
        Ingester(settings).ingest([corpus])
    assert NAVEC in str(ei.value) and MINILM in str(ei.value) and "reindex" in str(ei.value)
    assert Reindexer(settings).counts(new) == counts


# ------------------------------------------------------------------ same model: server-side _reindex
@pytest.mark.compat
def test_server_side_reindex_keeps_identical_results(
    admin: AliasStore, settings: Settings, tmp_path: Path
) -> None:
    ingest(settings, make_corpus(tmp_path / "kb", KILL))
    old = admin.current_index()
    before = top10(settings)
    assert all(before.values())

    plan = Reindexer(settings).run()
    assert plan.method == "server-side _reindex" and plan.target_model == NAVEC
    assert admin.current_index() == plan.target != old
    assert top10(settings) == before
    # Copied, not re-embedded: the stored vectors are the same.
    client = admin.cluster.client
    some = client.search(index=old, body={"size": 5, "sort": [{"chunk_id": "asc"}]})["hits"]["hits"]
    for hit in some:
        copy = client.get(index=plan.target, id=hit["_id"])["_source"]
        assert copy["embedding"] == hit["_source"]["embedding"] and copy["text"] == hit["_source"]["text"]


def test_reindex_before_the_first_ingest(admin: AliasStore, settings: Settings) -> None:
    """A freshly installed, empty index (no state index yet) can be planned and reindexed."""
    old = admin.current_index()
    plan = Reindexer(settings).plan()
    assert (plan.documents, plan.chunks) == (0, 0)
    plan = Reindexer(settings).run()
    assert admin.current_index() == plan.target != old


# ------------------------------------------------------------------ rollback
@pytest.mark.compat
def test_rollback_restores_previous_results_exactly(
    admin: AliasStore, settings: Settings, tmp_path: Path
) -> None:
    ingest(settings, make_corpus(tmp_path / "kb", SMALL))
    client = admin.cluster.client
    old = admin.current_index()
    with pytest.raises(IndexStateError, match="no previous index"):
        Reindexer(settings).rollback()
    before = top10(settings)

    plan = Reindexer(settings).run(MINILM)
    new = plan.target
    after = top10(settings)
    changed = [q for q in QUERIES if after[("hybrid", q)] != before[("hybrid", q)]]
    assert changed, "another model should change at least one hybrid result list"
    assert status(settings)["previous_index"] == old

    proc = run_cli(settings, tmp_path, "rollback")
    assert proc.returncode == 0, proc.stderr
    assert f"{new} -> {old}" in proc.stdout
    assert alias_targets(client, settings.alias) == [old]
    assert top10(settings) == before
    assert exists(client, new)
    assert "now live: created " in proc.stdout

    # The CLI does not toggle forward silently: the recorded "previous" is newer than the live one.
    proc = run_cli(settings, tmp_path, "rollback")
    assert proc.returncode == 2 and "newer than the live" in proc.stderr, proc.stderr
    assert alias_targets(client, settings.alias) == [old]

    # And forward again: the rolled-back-from index is now the "previous" one.
    assert Reindexer(settings).rollback() == (old, new)
    assert alias_targets(client, settings.alias) == [new]
    assert top10(settings) == after


# ------------------------------------------------------------------ cleanup and dry-run
def test_cleanup_keep_0_never_deletes_the_live_index_and_dry_run_changes_nothing(
    admin: AliasStore, settings: Settings, tmp_path: Path
) -> None:
    ingest(settings, make_corpus(tmp_path / "kb", SMALL[:2]))
    client = admin.cluster.client
    first = admin.current_index()
    r = Reindexer(settings)
    all_before = sorted(client.indices.get(index=f"{settings.alias}*", expand_wildcards="all"))

    proc = run_cli(settings, tmp_path, "reindex", "--dry-run")
    assert proc.returncode == 0, proc.stderr
    assert first in proc.stdout and "server-side _reindex" in proc.stdout
    proc = run_cli(settings, tmp_path, "reindex", "--dry-run", "--json", "--embedding-model", MINILM)
    assert proc.returncode == 0, proc.stderr
    plan = json.loads(proc.stdout)
    assert plan["source"] == first and plan["target"] is None
    assert (plan["target_model"], plan["target_dimension"], plan["method"]) == (
        MINILM,
        384,
        "re-embed in Python",
    )
    assert sorted(client.indices.get(index=f"{settings.alias}*", expand_wildcards="all")) == all_before
    assert admin.current_index() == first and lock_of(admin, first) is None

    # An alias whose name extends this one: its indices match "{alias}-*" too, and are not ours.
    neighbour = settings.model_copy(update={"alias": f"{settings.alias}-light"})
    try:
        theirs = AliasStore(neighbour).install()["index"]
        assert theirs.startswith(f"{settings.alias}-") and theirs not in names(r)

        second = r.run().target
        third = r.run().target
        assert r.rollback() == (third, second)
        assert names(r) == [first, second, third]

        proc = run_cli(settings, tmp_path, "cleanup", "--keep", "0")
        assert proc.returncode == 0, proc.stderr
        assert proc.stdout.strip() == f"deleted: {first}, {third}"
        assert names(r) == [second] and admin.current_index() == second
        assert exists(client, theirs) and AliasStore(neighbour).current_index() == theirs
        # Questions this two-document corpus answers (the LAMP one is answered by no document here:
        # since the exact-form subfield is asked only with the codes, BM25 rightly finds nothing).
        assert all(top10(settings, (QUERIES[0], QUERIES[2])).values())

        proc = run_cli(settings, tmp_path, "cleanup", "--keep", "0")
        assert (proc.returncode, proc.stdout.strip()) == (0, "deleted: nothing")
        proc = run_cli(settings, tmp_path, "cleanup", "--keep", "-1")
        assert (
            proc.returncode != 0
            and proc.stderr.startswith("osrag: error: --keep")
            and "Traceback" not in proc.stderr
        )
    finally:
        drop_alias(client, neighbour.alias)


def test_cleanup_keep_1_keeps_the_newest_old_index(
    admin: AliasStore, settings: Settings, tmp_path: Path
) -> None:
    ingest(settings, make_corpus(tmp_path / "kb", SMALL[:1]))
    r = Reindexer(settings)
    first = admin.current_index()
    second = r.run().target
    third = r.run().target
    assert r.cleanup(keep=1) == [first]
    assert names(r) == [second, third] and admin.current_index() == third


# ------------------------------------------------------------------ the lock: interrupted, live, foreign, aborted
def test_interrupted_reindex_drops_its_index_and_releases_the_lock(
    admin: AliasStore, settings: Settings, tmp_path: Path
) -> None:
    corpus = make_corpus(tmp_path / "kb", SMALL[:2])
    ingest(settings, corpus)
    client = admin.cluster.client
    old = admin.current_index()
    seen: list[str] = []

    def ctrl_c(done: int, total: int) -> None:
        seen.append(lock_of(admin, old).target)
        raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        Reindexer(settings).run(MINILM, progress=ctrl_c)
    assert seen and seen[0] != old
    assert not exists(client, seen[0])
    assert lock_of(admin, old) is None
    assert alias_targets(client, settings.alias) == [old] and names(Reindexer(settings)) == [old]
    assert Ingester(settings).ingest([corpus]).skipped == 2  # not refused


def test_live_and_foreign_locks_are_respected_and_abort_releases_a_dead_one(
    admin: AliasStore, settings: Settings, tmp_path: Path
) -> None:
    corpus = make_corpus(tmp_path / "kb", SMALL[:1])
    ingest(settings, corpus)
    client = admin.cluster.client
    old = admin.current_index()
    half = admin.create_index()  # stands for the index a reindex is building
    since = dt.datetime.now(dt.UTC).isoformat()
    r = Reindexer(settings)

    sleeper = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(120)"])
    try:
        put_lock(admin, target=half, since=since, pid=sleeper.pid, host=socket.gethostname())
        assert status(settings)["reindex_lock"]["state"] == "live"
        with pytest.raises(IndexStateError, match=f"pid {sleeper.pid}.*still running"):
            r.run()
        with pytest.raises(IndexStateError, match="still running"):
            r.abort()
        with pytest.raises(IndexStateError, match="roll back once it has finished"):
            r.rollback()
        assert r.cleanup(keep=0) == []  # the index being built is not "old"
        proc = run_cli(settings, tmp_path, "reindex", "--dry-run")
        assert proc.returncode == 0 and "still running" in proc.stdout
        assert exists(client, half) and lock_of(admin, old).target == half
    finally:
        sleeper.kill()
        sleeper.wait()
    assert status(settings)["reindex_lock"]["state"] == "dead"

    # Another host: cannot be checked from here, so a new run refuses and names the way out.
    put_lock(admin, target=half, since=since, pid=1, host="other-host.invalid")
    assert Reindexer(settings).plan().lock_state == "unknown"
    with pytest.raises(IndexStateError, match="other-host.invalid.*--abort"):
        r.run()
    assert exists(client, half)

    proc = run_cli(settings, tmp_path, "reindex", "--abort")
    assert proc.returncode == 0, proc.stderr
    assert f"aborted the reindex into {half}" in proc.stdout
    assert not exists(client, half) and lock_of(admin, old) is None
    assert admin.current_index() == old
    assert Ingester(settings).ingest([corpus]).skipped == 1
    proc = run_cli(settings, tmp_path, "reindex", "--abort")
    assert (proc.returncode, proc.stdout.strip()) == (0, f"no reindex lock on {old}: nothing to abort")
    proc = run_cli(settings, tmp_path, "reindex", "--abort", "--dry-run")
    assert proc.returncode != 0 and "--abort" in proc.stderr


def test_switch_while_a_hybrid_query_is_in_flight(
    admin: AliasStore, settings: Settings, tmp_path: Path
) -> None:
    """The alias moves to a 384-dim index between resolving it and searching it: the query still succeeds."""
    ingest(settings, make_corpus(tmp_path / "kb", SMALL[:2]))
    old = admin.current_index()
    new = Reindexer(settings).run(MINILM).target
    Reindexer(settings).rollback()
    assert admin.current_index() == old

    class Racing(SearchClient):
        switched = False

        def embedder(self) -> Any:
            emb = super().embedder()
            if not Racing.switched:
                Racing.switched = True
                AliasStore(settings).point_alias(new)  # the reindex's switch lands right now
            return emb

    r = Racing(settings, principal=ALL).retrieve(QUERIES[0], mode="hybrid")
    assert Racing.switched and r.hits
