"""Ingest against the real node: counts, skips, bad files, atomic replacement, bulk failures, lock, CLI.

Nothing here mocks OpenSearch. Where a failure has to be forced, the *input*
is made bad (a vector of the wrong length) and the server really rejects it.
"""

from __future__ import annotations

import datetime as dt
import json
import os
import threading
import time
from collections import Counter
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from osrag.embedding import embedder_for
from osrag.errors import ConfigError, IndexStateError
from osrag.ingest.indexing import Ingester
from osrag.names import state_index, visibility_filter
from osrag.settings import Settings
from osrag.store.alias import AliasStore
from osrag.store.locking import LockRecord, acquire, ensure_state_index, release
from osrag.store.versions import VersionStore
from tests.integration.conftest import drop_alias

pytestmark = pytest.mark.integration


# ------------------------------------------------------------------ fixtures and helpers
def cleanup(admin: AliasStore) -> None:
    """Remove everything install and ingest create for this test's alias."""
    drop_alias(admin.cluster.client, admin.alias)


@pytest.fixture
def small_settings(settings: Settings) -> Settings:
    """Small chunks, so a short test document makes several of them."""
    return settings.model_copy(update={"chunk_max_tokens": 60, "chunk_min_tokens": 5, "chunk_overlap": 0.1})


@pytest.fixture
def admin(small_settings: Settings) -> Iterator[AliasStore]:
    adm = AliasStore(small_settings)
    try:
        adm.install()
        yield adm
    finally:
        cleanup(adm)


def write(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
    return path


def sectioned(marker: str, sections: int, extra: str = "", doc_id: str | None = None) -> str:
    """A document whose every section (one chunk each with small_settings) contains ``marker``."""
    front = f"---\ndoc_id: {doc_id}\n---\n" if doc_id else ""
    parts = [f"{front}# Документ про {marker}\n"]
    for i in range(1, sections + 1):
        parts.append(
            f"## Раздел {i}: {marker}\n\n{marker.capitalize()} — это пункт номер {i}. {extra} Здесь {marker} "
            "повторяется, чтобы каждый фрагмент его содержал, и текст достаточно длинный для отдельного фрагмента.\n"
        )
    return "\n".join(parts)


def count(
    admin: AliasStore, doc_id: str | None = None, visible: bool = True, query: dict[str, Any] | None = None
) -> int:
    filters: list[dict[str, Any]] = []
    if doc_id is not None:
        filters.append({"term": {"doc_id": doc_id}})
    if visible:
        filters.append(visibility_filter(admin.alias))
    if query is not None:
        filters.append(query)
    body = {"query": {"bool": {"filter": filters}}} if filters else {"query": {"match_all": {}}}
    return int(admin.cluster.client.count(index=admin.alias, body=body)["count"])


def versions(admin: AliasStore, doc_id: str, visible: bool = True) -> Counter[str]:
    filters: list[dict[str, Any]] = [{"term": {"doc_id": doc_id}}]
    if visible:
        filters.append(visibility_filter(admin.alias))
    resp = admin.cluster.client.search(
        index=admin.alias,
        body={"size": 1000, "_source": ["version_key"], "query": {"bool": {"filter": filters}}},
    )
    return Counter(h["_source"]["version_key"] for h in resp["hits"]["hits"])


def hidden(admin: AliasStore) -> list[str]:
    got = admin.cluster.client.get(index=state_index(admin.alias), id="hidden", ignore=[404])
    return list((got.get("_source") or {}).get("keys") or [])


def token_sum(admin: AliasStore) -> int:
    resp = admin.cluster.client.search(
        index=admin.alias,
        body={
            "size": 0,
            "query": {"bool": {"filter": [visibility_filter(admin.alias)]}},
            "aggs": {"t": {"sum": {"field": "token_count"}}},
        },
    )
    return int(resp["aggregations"]["t"]["value"])


def matching_docs(admin: AliasStore, word: str) -> set[str]:
    resp = admin.cluster.client.search(
        index=admin.alias,
        body={
            "size": 100,
            "_source": ["doc_id"],
            "query": {
                "bool": {"must": [{"match": {"text": word}}], "filter": [visibility_filter(admin.alias)]}
            },
        },
    )
    return {h["_source"]["doc_id"] for h in resp["hits"]["hits"]}


def reasons(report: Any) -> dict[str, str]:
    return {Path(p).name: r for p, r in report.failed}


# ------------------------------------------------------------------ ingest, skip, update
@pytest.mark.compat
def test_ingest_counts_search_skip_and_update(
    admin: AliasStore, small_settings: Settings, tmp_path: Path
) -> None:
    corpus = tmp_path / "kb"
    write(
        corpus / "tea.md",
        "---\ndoc_id: tea-green\ntitle: Зелёный чай\ncategory: product\n---\n"
        + sectioned("чай", 3, "Зелёный чай сенча заваривают при 80 градусах."),
    )
    write(corpus / "delivery" / "zones.md", sectioned("доставка", 4, "Курьер привозит лампы по Москве."))
    write(corpus / "notes.txt", "Промокод TEA10 даёт скидку десять процентов на весь чай в корзине.\n")
    write(corpus / "ignored.png", "не документ")  # not a supported suffix: not listed
    before = dt.datetime.now(dt.UTC)

    first = Ingester(small_settings).ingest([corpus])
    assert first.failed == []
    assert (first.documents, first.indexed, first.skipped) == (3, 3, 0)
    assert first.chunks == count(admin) == 3 + 4 + 1
    assert first.tokens == token_sum(admin) > 0
    assert first.index == admin.current_index()
    assert first.seconds > 0 and first.chunks_per_s > 0

    # Searchable through the alias, with the visibility filter every reader uses.
    assert matching_docs(admin, "курьером") == {"kb/delivery/zones"}  # the collection, then the relative path
    assert matching_docs(admin, "промокод") == {"kb/notes"}
    assert "tea-green" in matching_docs(admin, "сенча")
    last = dt.datetime.fromisoformat(str(admin.meta().last_ingest_at))
    assert before <= last <= dt.datetime.now(dt.UTC)

    # Unchanged content: everything skipped, nothing written.
    second = Ingester(small_settings).ingest([corpus])
    assert (second.documents, second.indexed, second.skipped, second.chunks) == (3, 0, 3, 0)
    assert second.failed == []
    assert count(admin) == count(admin, visible=False) == 8

    # One document changes (and gets fewer chunks): only it is re-indexed, its old chunks are gone.
    old_keys = set(versions(admin, "kb/delivery/zones"))
    write(corpus / "delivery" / "zones.md", sectioned("доставка", 2, "Теперь и самовывоз из пункта выдачи."))
    third = Ingester(small_settings).ingest([corpus])
    assert (third.documents, third.indexed, third.skipped, third.chunks) == (3, 1, 2, 2)
    new = versions(admin, "kb/delivery/zones")
    assert len(new) == 1 and set(new).isdisjoint(old_keys)
    assert sum(new.values()) == 2
    assert versions(admin, "kb/delivery/zones", visible=False) == new  # no leftovers stored either
    assert count(admin, "kb/delivery/zones", visible=False) == count(admin, "kb/delivery/zones") == 2
    assert count(admin, "tea-green", visible=False) == count(admin, "tea-green") == 3
    assert count(admin) == count(admin, visible=False) == 3 + 2 + 1
    assert matching_docs(admin, "самовывоз") == {"kb/delivery/zones"}
    assert matching_docs(admin, "курьером") == set()
    assert hidden(admin) == []


# ------------------------------------------------------------------ bad input
def test_bad_files_fail_one_by_one_and_the_rest_is_indexed(
    admin: AliasStore, small_settings: Settings, tmp_path: Path
) -> None:
    s = small_settings.model_copy(update={"max_file_bytes": 50_000})
    corpus = tmp_path / "kb"
    write(corpus / "good-1.md", sectioned("лампа", 2))
    write(corpus / "good-2.md", sectioned("чай", 3))
    (corpus / "empty.md").write_bytes(b"")
    (corpus / "binary.md").write_bytes(b"\x89PNG\r\n\x1a\n\x00\x00\x00\x0dIHDR" + bytes(range(256)) * 4)
    (corpus / "cp1251.md").write_bytes(
        "# Возврат товара\n\nВернуть чай можно в течение 14 дней.\n".encode("cp1251")
    )
    big = write(corpus / "big.md", "# Большой\n\n" + "Валидный русский текст про чай и лампы. " * 830)
    assert 55_000 < big.stat().st_size < 100_000

    report = Ingester(s).ingest([corpus])
    assert (report.documents, report.indexed) == (6, 2)
    why = reasons(report)
    assert set(why) == {"binary.md", "cp1251.md", "big.md"}
    # An empty placeholder is skipped with its reason (issue 23), not a failure.
    assert [(Path(p).name, r) for p, r in report.skips] == [("empty.md", "empty file")]
    assert "binary" in why["binary.md"] and "NUL" in why["binary.md"]
    assert "not UTF-8" in why["cp1251.md"] and "offset 2" in why["cp1251.md"]
    assert "too large" in why["big.md"] and "limit 0.05 MB" in why["big.md"]
    assert count(admin, "kb/good-1") == 2 and count(admin, "kb/good-2") == 3
    assert count(admin, visible=False) == 5  # nothing of the bad files
    assert report.as_dict()["failures"] == [{"path": p, "reason": r} for p, r in report.failed]


def test_fifty_megabyte_file_rejected_by_size_without_reading(
    admin: AliasStore, small_settings: Settings, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    assert small_settings.max_file_bytes == 50_000_000  # the default limit
    corpus = tmp_path / "kb"
    huge = corpus / "huge.md"
    huge.parent.mkdir(parents=True)
    line = ("Настоящий текст, не разреженный файл: чай, лампы, доставка. " * 20 + "\n").encode()
    with huge.open("wb") as f:
        for _ in range(50 * 1024 * 1024 // len(line) + 1):
            f.write(line)
    assert huge.stat().st_size >= 50 * 1024 * 1024
    write(corpus / "small.md", sectioned("лампа", 2))

    read: list[Path] = []
    real_open = os.open

    def recording_open(
        path: Any, flags: int, *args: Any, **kw: Any
    ) -> int:  # documents.py opens with os.open
        read.append(Path(path))
        return real_open(path, flags, *args, **kw)

    monkeypatch.setattr(os, "open", recording_open)
    try:
        report = Ingester(small_settings).ingest([corpus])
    finally:
        huge.unlink()  # pytest keeps the last runs' tmp dirs: don't leave 50 MB behind
    assert huge not in read and corpus / "small.md" in read  # the 50 MB file was never read
    why = reasons(report)
    assert list(why) == ["huge.md"]
    assert "too large" in why["huge.md"] and "52.4 MB > limit 50 MB" in why["huge.md"]
    assert report.indexed == 1 and count(admin, "kb/small") == 2
    assert report.seconds < 30


def test_model_mismatch_refused_before_anything_is_written(
    admin: AliasStore, small_settings: Settings, tmp_path: Path
) -> None:
    write(tmp_path / "a.md", sectioned("чай", 2))
    other = small_settings.model_copy(update={"embedding_model": "minilm:packaged"})
    client = admin.cluster.client
    assert not client.indices.exists(index=state_index(admin.alias))
    with pytest.raises(ConfigError) as ei:
        Ingester(other).ingest([tmp_path])
    msg = str(ei.value)
    assert "minilm:packaged" in msg and "navec:news-300d" in msg and "reindex" in msg
    assert count(admin, visible=False) == 0
    assert not client.indices.exists(index=state_index(admin.alias))
    assert admin.meta().last_ingest_at is None


def test_embedder_of_another_dimension_refused(
    admin: AliasStore, small_settings: Settings, tmp_path: Path
) -> None:
    """Same model name, different vectors (e.g. a replaced model dir): refused, says reindex."""
    from sentence_transformers import SentenceTransformer
    from tokenizers import Tokenizer, pre_tokenizers
    from tokenizers.models import WordLevel

    try:
        from sentence_transformers.sentence_transformer.modules import StaticEmbedding
    except ImportError:  # sentence-transformers 5.x
        from sentence_transformers.models import StaticEmbedding

    tok = Tokenizer(WordLevel(vocab={"<unk>": 0, "чай": 1, "раздел": 2}, unk_token="<unk>"))
    tok.pre_tokenizer = pre_tokenizers.Whitespace()
    weights = np.random.default_rng(1).standard_normal((3, 16)).astype(np.float32)
    SentenceTransformer(modules=[StaticEmbedding(tok, embedding_weights=weights)], device="cpu").save(
        str(tmp_path / "tiny-model")
    )
    emb = embedder_for(small_settings, model_name=str(tmp_path / "tiny-model"))
    assert emb.dimension == 16  # loaded: a 16-dim model
    emb.model_name = "navec:news-300d"  # ...under the name the index is pinned to
    write(tmp_path / "kb" / "a.md", sectioned("чай", 2))
    with pytest.raises(ConfigError) as ei:
        Ingester(small_settings, embedder=emb).ingest([tmp_path / "kb"])
    assert "dimension 16 does not match the index's 300" in str(ei.value) and "reindex" in str(ei.value)
    assert count(admin, visible=False) == 0


# ------------------------------------------------------------------ atomic replacement
def test_replacement_is_atomic_under_concurrent_reads(
    admin: AliasStore, small_settings: Settings, tmp_path: Path
) -> None:
    doc = write(tmp_path / "kb" / "d.md", sectioned("альфа", 8, doc_id="D"))
    v1_text, v2_text = doc.read_text(encoding="utf-8"), sectioned("бета", 5, "Другой текст.", doc_id="D")
    first = Ingester(small_settings).ingest([doc])
    assert first.indexed == 1 and first.chunks == 8
    (v1_key,) = versions(admin, "D")

    client = admin.cluster.client
    body = {
        "size": 100,
        "_source": ["version_key"],
        "query": {"bool": {"filter": [{"term": {"doc_id": "D"}}, visibility_filter(admin.alias)]}},
    }
    seen: list[tuple[int, frozenset[str]]] = []
    errors: list[BaseException] = []
    stop = threading.Event()

    def reader() -> None:
        try:
            while not stop.is_set():
                hits = client.search(index=admin.alias, body=body)["hits"]["hits"]
                seen.append((len(hits), frozenset(h["_source"]["version_key"] for h in hits)))
        except BaseException as exc:
            errors.append(exc)

    thread = threading.Thread(target=reader, daemon=True)
    thread.start()
    chunk_counts = {v1_key: 8}
    try:
        time.sleep(0.2)
        for text, n in [(v2_text, 5), (v1_text, 8), (v2_text, 5), (v1_text, 8), (v2_text, 5)]:
            doc.write_text(text, encoding="utf-8")
            report = Ingester(small_settings).ingest([doc])
            assert (report.indexed, report.chunks, report.failed) == (1, n, [])
            (key,) = versions(admin, "D")
            chunk_counts[key] = n
            time.sleep(0.05)
    finally:
        stop.set()
        thread.join(timeout=30)
    assert not errors, errors
    assert len(chunk_counts) == 2  # v1 and v2 keys are stable across re-ingests

    bad = [(n, sorted(keys)) for n, keys in seen if len(keys) != 1 or n != chunk_counts.get(next(iter(keys)))]
    assert len(seen) > 50, f"only {len(seen)} searches ran during the re-ingests"
    assert {next(iter(k)) for n, k in seen if len(k) == 1} == set(chunk_counts)  # both versions were seen
    assert bad == [], f"{len(bad)} of {len(seen)} searches saw a mix or a gap: {bad[:5]}"
    assert count(admin, "D", visible=False) == 5 and hidden(admin) == []


def test_without_the_visibility_filter_a_mix_is_stored_before_the_flip(
    admin: AliasStore, small_settings: Settings, tmp_path: Path
) -> None:
    """Deterministic: at the moment of the flip both versions are stored; only the filter hides one."""
    doc = write(tmp_path / "d.md", sectioned("альфа", 6, doc_id="D"))
    Ingester(small_settings).ingest([doc])
    doc.write_text(sectioned("бета", 4, doc_id="D"), encoding="utf-8")
    observed: dict[str, Counter[str]] = {}

    class Watching(VersionStore):
        def hide(self, add: Sequence[str] = (), remove: Sequence[str] = ()) -> None:
            if add and remove and not observed:  # just before the flip
                observed["unfiltered"] = versions(admin, "D", visible=False)
                observed["filtered"] = versions(admin, "D")
            super().hide(add=add, remove=remove)

    Ingester(small_settings, store=Watching(admin.cluster, small_settings.alias)).ingest([doc])
    assert sorted(observed["unfiltered"].values()) == [4, 6]  # a reader without the filter would see a mix
    assert list(observed["filtered"].values()) == [6]  # with it: all of v1, nothing of v2
    assert sorted(versions(admin, "D").values()) == [4]


# ------------------------------------------------------------------ bulk failures
def test_bulk_item_failure_reported_and_no_partial_chunks_left(
    admin: AliasStore, small_settings: Settings, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    corpus = tmp_path / "kb"
    write(corpus / "ok.md", sectioned("лампа", 3))
    write(corpus / "updated.md", sectioned("чай", 4))
    first = Ingester(small_settings).ingest([corpus])
    assert first.indexed == 2
    (updated_v1,) = versions(admin, "kb/updated")

    # Second round: every doc changes, one new doc arrives; two of them get one bad vector each.
    write(corpus / "ok.md", sectioned("лампа", 2, "Новая версия."))
    write(corpus / "updated.md", sectioned("чай", 5, "Сломанная версия.", doc_id="kb/updated"))
    write(corpus / "new.md", sectioned("доставка", 3, "Тоже сломан."))
    emb = embedder_for(small_settings, meta=admin.meta())
    real = emb.encode_passages

    def one_short_vector_per_bad_doc(texts: Sequence[str]) -> list[np.ndarray]:
        vecs = list(real(texts))
        for marker in ("Сломанная", "Тоже сломан"):
            i = next(i for i, t in enumerate(texts) if marker in t and "Раздел 2" in t)
            vecs[i] = vecs[i][:299]  # the server must reject a 299-dim vector in a 300-dim field
        return vecs

    monkeypatch.setattr(emb, "encode_passages", one_short_vector_per_bad_doc)
    report = Ingester(small_settings, embedder=emb).ingest([corpus])

    why = reasons(report)
    assert set(why) == {"updated.md", "new.md"}
    for r in why.values():
        assert "bulk write failed" in r and "400" in r
        assert "dimension" in r.lower() and "299" in r  # the server's own reason, with its cause
    assert len(report.failed_items) == 2
    assert report.indexed == 1 and report.chunks == 2
    assert count(admin, "kb/ok") == count(admin, "kb/ok", visible=False) == 2
    # The updated doc keeps its whole old version; nothing of the failed new one is visible or stored.
    assert (
        versions(admin, "kb/updated")
        == versions(admin, "kb/updated", visible=False)
        == Counter({updated_v1: 4})
    )
    assert count(admin, "kb/new", visible=False) == 0
    assert hidden(admin) == []

    # Fixed input: the next ingest writes both (nothing stuck from the failed attempt).
    monkeypatch.setattr(emb, "encode_passages", real)
    again = Ingester(small_settings, embedder=emb).ingest([corpus])
    assert (again.indexed, again.skipped, again.failed) == (2, 1, [])
    assert count(admin, "kb/updated", visible=False) == 5 and count(admin, "kb/new", visible=False) == 3


# ------------------------------------------------------------------ reindex lock
def test_reindex_lock_refuses_ingest_until_cleared(
    admin: AliasStore, small_settings: Settings, tmp_path: Path
) -> None:
    write(tmp_path / "a.md", sectioned("чай", 2))
    ensure_state_index(admin.cluster, admin.alias)
    acquire(admin.cluster, admin.alias, LockRecord(token="t", target="x", since="2026-01-01T00:00:00+00:00"))
    with pytest.raises(IndexStateError) as ei:
        Ingester(small_settings).ingest([tmp_path])
    assert "reindex into x" in str(ei.value) and "2026-01-01" in str(ei.value)
    assert count(admin, visible=False) == 0
    assert release(admin.cluster, admin.alias, "t")
    report = Ingester(small_settings).ingest([tmp_path])
    assert report.indexed == 1 and count(admin, f"{tmp_path.name}/a") == 2


# ------------------------------------------------------------------ CLI
def test_cli_ingest_json_summary_and_exit_code(
    admin: AliasStore, small_settings: Settings, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from click.testing import CliRunner

    from osrag.cli import cli

    s = small_settings
    env = {
        "OSRAG_URL": s.url,
        "OSRAG_ALIAS": s.alias,
        "OSRAG_CACHE_DIR": str(s.models_dir.parent),
        "OSRAG_EMBEDDING_MODEL": "navec:news-300d",
        "OSRAG_CHUNK_MAX_TOKENS": str(s.chunk_max_tokens),
        "OSRAG_CHUNK_MIN_TOKENS": str(s.chunk_min_tokens),
        "OSRAG_CHUNK_OVERLAP": str(s.chunk_overlap),
    }
    monkeypatch.chdir(tmp_path)  # no stray .env
    corpus = tmp_path / "kb"
    write(corpus / "a.md", sectioned("чай", 2))
    write(corpus / "b.md", sectioned("лампа", 3))
    runner = CliRunner()

    ok = runner.invoke(cli, ["ingest", str(corpus), "--json"], env=env)
    assert ok.exit_code == 0, ok.output
    summary = json.loads(ok.stdout)
    for key in ("documents", "chunks", "tokens", "skipped", "failed", "seconds", "chunks_per_s"):
        assert key in summary, key
    assert (summary["documents"], summary["chunks"], summary["skipped"], summary["failed"]) == (2, 5, 0, 0)
    assert summary["tokens"] > 0 and summary["chunks_per_s"] > 0

    (corpus / "empty.md").write_bytes(b"")  # a placeholder: skipped with its reason, exit 0
    (corpus / "broken.md").write_bytes(b"\x00\x01binary")  # a real failure: exit 1
    bad = runner.invoke(cli, ["ingest", str(corpus), "--json"], env=env)
    assert bad.exit_code == 1
    summary = json.loads(bad.stdout)
    assert (summary["documents"], summary["skipped"], summary["failed"]) == (4, 2, 1)
    assert summary["skips"] == [{"path": str(corpus / "empty.md"), "reason": "empty file"}]
    assert [f["path"] for f in summary["failures"]] == [str(corpus / "broken.md")]
    assert "binary" in summary["failures"][0]["reason"]


# ------------------------------------------------------------------ duplicates, failed deletes
def test_duplicate_doc_id_across_batches_is_refused(
    admin: AliasStore, small_settings: Settings, tmp_path: Path
) -> None:
    s = small_settings.model_copy(update={"ingest_batch_docs": 1})  # every file its own batch
    write(tmp_path / "a.md", sectioned("чай", 2, doc_id="same"))
    write(tmp_path / "b.md", sectioned("лампа", 3, doc_id="same"))
    first = Ingester(s).ingest([tmp_path])
    assert first.indexed == 1
    assert first.failed == [(str(tmp_path / "b.md"), "duplicate doc_id 'same' in this ingest")]
    assert count(admin, "same") == count(admin, "same", visible=False) == 2
    # The next ingest does not flip-flop between the two files: a is unchanged, b refused again.
    second = Ingester(s).ingest([tmp_path])
    assert (second.indexed, second.skipped, len(second.failed)) == (0, 1, 1)


def test_chunks_that_survive_the_delete_stay_hidden(
    admin: AliasStore, small_settings: Settings, tmp_path: Path
) -> None:
    doc = write(tmp_path / "d.md", sectioned("альфа", 6, doc_id="D"))
    Ingester(small_settings).ingest([doc])
    (v1_key,) = versions(admin, "D")

    class DeleteFails(VersionStore):  # the delete request "succeeds" but removes nothing
        def delete_versions(self, index: str, keys: Sequence[str]) -> None:
            return None

    doc.write_text(sectioned("бета", 4, doc_id="D"), encoding="utf-8")
    report = Ingester(small_settings, store=DeleteFails(admin.cluster, small_settings.alias)).ingest([doc])
    assert report.indexed == 1
    assert sorted(versions(admin, "D").values()) == [4]  # readers see v2 only
    assert versions(admin, "D", visible=False)[v1_key] == 6  # v1 is still stored...
    assert hidden(admin) == [v1_key]  # ...and therefore stays hidden


def test_cli_ingest_shows_the_readers_notes(
    admin: AliasStore, small_settings: Settings, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from click.testing import CliRunner

    from osrag.cli import cli

    s = small_settings
    env = {
        "OSRAG_URL": s.url,
        "OSRAG_ALIAS": s.alias,
        "OSRAG_CACHE_DIR": str(s.models_dir.parent),
        "OSRAG_EMBEDDING_MODEL": "navec:news-300d",
    }
    monkeypatch.chdir(tmp_path)  # no stray .env
    corpus = tmp_path / "kb"
    write(corpus / "a.md", "# Облако\n\nСервис {var(cloud)} хранит данные.\n\n```bash\necho да\n")
    write(corpus / "b.md", "# Вставка\n\n{include(missing.md)}\n\nТекст раздела.\n")
    runner = CliRunner()
    got = runner.invoke(cli, ["ingest", str(corpus), "--json"], env=env)
    assert got.exit_code == 0, got.output
    summary = json.loads(got.stdout)
    assert summary["notes"] == {"unknown variable": 1, "unclosed fence": 1, "include not found": 1}
    assert {(e["kind"], Path(e["path"]).name) for e in summary["note_examples"]} == {
        ("unknown variable", "a.md"),
        ("unclosed fence", "a.md"),
        ("include not found", "b.md"),
    }
    write(corpus / "c.md", "# Ещё\n\nРегион {var(region)} по умолчанию.\n")  # unchanged files are not re-read
    text = runner.invoke(cli, ["ingest", str(corpus)], env=env)
    assert text.exit_code == 0, text.output
    assert "reader notes: unknown variable x1" in text.stderr
    assert "c.md: variable 'region' has no value" in text.stderr
