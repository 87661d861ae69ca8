"""The fast query path on the real node: round trips counted, the alias cache and its TTL, an
alias that moves, duplicates collapsed before the candidate cut (server-side and the fallback),
and a large ingest that turns periodic refresh off and back on."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import pytest

from osrag.access import PUBLIC
from osrag.ingest.indexing import Ingester
from osrag.search.client import SearchClient
from osrag.settings import Settings
from osrag.store.alias import AliasStore

pytestmark = pytest.mark.integration

SHARED = "Возврат товара надлежащего качества возможен в течение 14 дней с чеком и упаковкой."
DOCS = {
    "returns-a": f"# Возврат в магазине\n\n## Условия\n\n{SHARED}\n",
    "returns-b": f"# Возврат заказа онлайн\n\n## Условия\n\n{SHARED}\n",  # the same section text
    "delivery": "# Доставка\n\n## Сроки\n\nКурьер привозит заказ за два дня, самовывоз бесплатно.\n",
}


def write(root: Path, docs: dict[str, str]) -> Path:
    root.mkdir(parents=True, exist_ok=True)
    for doc_id, text in docs.items():
        (root / f"{doc_id}.md").write_text(f"---\ndoc_id: {doc_id}\n---\n{text}", encoding="utf-8")
    return root


class Requests:
    """Every request the client's transport sends, as (method, path)."""

    def __init__(self, sc: SearchClient) -> None:
        self.sent: list[tuple[str, str]] = []
        transport = sc.cluster.client.transport
        inner = transport.perform_request

        def counted(method: str, url: str, *a: Any, **kw: Any) -> Any:
            self.sent.append((method, url))
            return inner(method, url, *a, **kw)

        transport.perform_request = counted

    def during(self, fn: Any) -> list[tuple[str, str]]:
        start = len(self.sent)
        fn()
        return self.sent[start:]


@pytest.fixture
def ingested(admin: AliasStore, settings: Settings, tmp_path: Path) -> Settings:
    Ingester(settings).ingest([write(tmp_path / "docs", DOCS)])
    return settings


def test_steady_state_retrieve_is_one_round_trip_and_the_ttl_bounds_staleness(ingested: Settings) -> None:
    sc = SearchClient(ingested.model_copy(update={"target_cache_ttl_s": 1.0}), principal=PUBLIC)
    log = Requests(sc)
    sc.retrieve("возврат товара")  # first call: resolves the alias and loads the model
    for mode in ("hybrid", "bm25", "hybrid"):
        sent = log.during(lambda m=mode: sc.retrieve("возврат товара", mode=m))
        assert [p.rsplit("/", 1)[-1] for _, p in sent] == ["_search"], sent
    time.sleep(1.1)  # past the TTL: the alias and _meta are read again, in ONE request
    sent = log.during(lambda: sc.retrieve("возврат товара"))
    assert [p.rsplit("/", 1)[-1] for _, p in sent] == ["_mapping", "_search"], sent
    assert sent[0][1] == f"/{ingested.alias}/_mapping"


@pytest.mark.compat
def test_search_steady_state_is_one_round_trip_with_the_gate_evidence_on_it(ingested: Settings) -> None:
    sc = SearchClient(ingested.model_copy(update={"target_cache_ttl_s": 60.0}), principal=PUBLIC)
    log = Requests(sc)
    first = log.during(lambda: sc.search("возврат товара", budget_tokens=500))
    # A cold client reads the server info and the alias once; the question's terms come from the
    # analyzer in process (osrag.search.analyzer), not from _analyze.
    assert [p.rsplit("/", 1)[-1] for _, p in first][-2:] == ["_mapping", "_search"], first
    sent = log.during(lambda: sc.search("возврат товара", budget_tokens=500))
    # Steady state: no alias, mapping, _meta or analysis request -- the search carries the
    # relevance gate's probes and document frequencies itself.
    assert [p.rsplit("/", 1)[-1] for _, p in sent] == ["_search"], sent
    # A new question, even of words this client has never seen, is one request too.
    for q in ("товара возврат", "возврат посылки", "сроки доставки курьером LAMP-LIGHT-MINI"):
        sent = log.during(lambda q=q: sc.search(q, budget_tokens=500))
        assert [p.rsplit("/", 1)[-1] for _, p in sent] == ["_search"], (q, sent)
    # On an index the analyzer cannot vouch for (made from another template), a new word costs
    # one ``_analyze`` for that word only, and the answer is the same.
    index, _ = sc._run(sc._target())
    other = SearchClient(ingested.model_copy(update={"target_cache_ttl_s": 60.0}), principal=PUBLIC)
    other.retrieve("возврат", mode="bm25")  # the server info and the alias, read once
    other._analyzers[index] = None
    log = Requests(other)
    sent = log.during(lambda: other.search("возврат посылки", budget_tokens=500))
    assert [p.rsplit("/", 1)[-1] for _, p in sent] == ["_analyze", "_search"], sent
    assert [p.chunk_id for p in other.search("возврат посылки", budget_tokens=500).passages] == [
        p.chunk_id for p in sc.search("возврат посылки", budget_tokens=500).passages
    ]


def test_a_repeated_question_asks_no_document_frequencies_until_an_ingest(
    ingested: Settings, tmp_path: Path
) -> None:
    """The gate's ``global`` aggregation visits every document: a term's count is asked once per
    index generation, and the weights from the held counts equal the fresh ones."""
    sc = SearchClient(ingested.model_copy(update={"target_cache_ttl_s": 0.0}), principal=PUBLIC)
    bodies: list[dict[str, Any]] = []
    transport = sc.cluster.client.transport
    inner = transport.perform_request

    def spy(method: str, url: str, *a: Any, **kw: Any) -> Any:
        if url.endswith("/_search"):
            bodies.append(kw.get("body") or {})
        return inner(method, url, *a, **kw)

    transport.perform_request = spy
    first = sc.search("возврат товара", budget_tokens=500)
    assert "aggs" in bodies[-1]
    again = sc.search("возврат товара", budget_tokens=500)
    assert "aggs" not in bodies[-1], bodies[-1].get("aggs")
    assert [p.chunk_id for p in again.passages] == [p.chunk_id for p in first.passages]
    plain = SearchClient(ingested, principal=PUBLIC).retrieve("возврат товара", mode="hybrid")
    ret = sc.retrieve("возврат товара", mode="hybrid")
    assert [h.chunk_id for h in ret.hits] == [h.chunk_id for h in plain.hits]
    # A new word asks for its own count only.
    sc.search("возврат посылки", budget_tokens=500)
    filters = bodies[-1]["aggs"]["osrag_df"]["aggs"]["df"]["filters"]["filters"]
    assert [f["term"]["text"] for f in filters] == ["посылк"], filters
    # An ingest ends a generation: the counts are asked again.
    Ingester(ingested).ingest([write(tmp_path / "more", {"extra": "# Возврат\n\nЕщё про возврат товара.\n"})])
    sc.search("возврат товара", budget_tokens=500)
    assert "aggs" in bodies[-1]


@pytest.mark.compat
def test_candidates_vectors_come_by_script_field_and_equal_the_stored_ones(ingested: Settings) -> None:
    """The script field reads the vectors the index holds: the same numbers ``_source`` gives."""
    sc = SearchClient(ingested, principal=PUBLIC)
    got = sc.retrieve("возврат товара", mode="hybrid")
    assert got.hits and all(len(h.source.embedding) > 0 for h in got.hits)
    client = sc.cluster.client
    ids = [h.source.chunk_id for h in got.hits]
    raw = client.search(
        index=got.index,
        body={"size": len(ids), "query": {"terms": {"chunk_id": ids}}, "_source": ["chunk_id", "embedding"]},
    )
    stored = {h["_source"]["chunk_id"]: h["_source"]["embedding"] for h in raw["hits"]["hits"]}
    for h in got.hits:
        a, b = h.source.embedding, stored[h.source.chunk_id]
        assert len(a) == len(b) and max(abs(x - y) for x, y in zip(a, b)) < 1e-6, h.chunk_id


def test_a_cached_index_that_was_deleted_is_resolved_again(ingested: Settings, tmp_path: Path) -> None:
    sc = SearchClient(ingested.model_copy(update={"target_cache_ttl_s": 3600.0}), principal=PUBLIC)
    old = sc.retrieve("доставка курьер").index
    admin = AliasStore(ingested)
    new = admin.create_index()
    client = admin.cluster.client
    client.reindex(body={"source": {"index": old}, "dest": {"index": new}}, refresh=True)
    admin.update_meta(new, content_hash=True)
    admin.point_alias(new)
    client.indices.delete(index=old)
    got = sc.retrieve("доставка курьер")  # the cached index is gone: re-resolved, asked again
    assert got.index == new
    assert [h.source.doc_id for h in got.hits][:1] == ["delivery"]


@pytest.mark.parametrize("server_side", [True, False])
def test_equal_texts_take_one_candidate_slot(ingested: Settings, server_side: bool) -> None:
    s = ingested.model_copy(update={"hybrid_collapse": server_side})
    sc = SearchClient(s, principal=PUBLIC)
    hits = sc.retrieve("возврат товара 14 дней чек упаковка", depth=10).hits
    shared = [h for h in hits if SHARED in h.source.text]
    assert len(shared) == 1, [h.chunk_id for h in hits]
    assert len({h.source.content_hash for h in hits}) == len(hits)
    assert [h.rank for h in hits] == list(range(1, len(hits) + 1))
    off = SearchClient(s.model_copy(update={"collapse_duplicates": False}), principal=PUBLIC)
    both = off.retrieve("возврат товара 14 дней чек упаковка", depth=10).hits
    assert len([h for h in both if SHARED in h.source.text]) == 2


def test_a_many_batch_ingest_restores_refresh_and_repairs_a_crashed_one(
    admin: AliasStore, settings: Settings, tmp_path: Path
) -> None:
    index = admin.require_index()
    client = admin.cluster.client

    def interval() -> Any:
        got = client.indices.get_settings(index=index, name="index.refresh_interval")
        return got[index]["settings"].get("index", {}).get("refresh_interval")

    client.indices.put_settings(index=index, body={"index": {"refresh_interval": "7s"}})
    many = {
        f"d{i}": f"# Документ {i}\n\n## Раздел\n\nТекст номер {i} про доставку и возврат.\n" for i in range(6)
    }
    small = settings.model_copy(update={"ingest_batch_docs": 2})  # three batches
    seen: list[Any] = []
    ing = Ingester(small)
    original = ing._write_batch

    def spy(*a: Any, **kw: Any) -> Any:
        seen.append(interval())
        return original(*a, **kw)

    ing._write_batch = spy  # type: ignore[method-assign]
    report = ing.ingest([write(tmp_path / "many", many)])
    assert report.indexed == 6 and not report.failed
    assert seen[1:] == ["-1", "-1"]  # off from the second batch
    assert interval() == "7s" and admin.meta(index).saved_refresh_interval is None
    # A crash left refresh off with the original recorded: the next ingest puts it back.
    admin.update_meta(index, saved_refresh_interval={"value": "7s"})
    client.indices.put_settings(index=index, body={"index": {"refresh_interval": "-1"}})
    Ingester(settings).ingest([write(tmp_path / "one", {"solo": "# Один\n\n## Р\n\nОдин документ.\n"})])
    assert interval() == "7s" and admin.meta(index).saved_refresh_interval is None
    assert (
        len(SearchClient(settings, principal=PUBLIC).retrieve("текст номер доставку", mode="bm25").hits) == 6
    )
