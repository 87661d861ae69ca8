"""Sync semantics against the real node (issue 23, item 6; issue 29, item 3).

* an unchanged re-ingest decides from the files' bytes: nothing is parsed, chunked or embedded,
  and no model is loaded;
* a changed file re-embeds only the chunks whose text changed (the others reuse stored vectors);
* ``--prune`` removes the documents whose file is gone (or that the file no longer gives), in
  the collection ingested only;
* a path or collection long enough to push a chunk ``_id`` over 512 bytes is indexed like any
  other, and its batch-mates with it.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import pytest

from osrag.embedding import embedder_for
from osrag.errors import ConfigError
from osrag.ingest import batches, documents
from osrag.ingest.indexing import Ingester
from osrag.names import visibility_filter
from osrag.settings import Settings
from osrag.store.alias import AliasStore
from tests.integration.conftest import drop_alias

pytestmark = pytest.mark.integration


@pytest.fixture
def small(settings: Settings) -> Settings:
    return settings.model_copy(update={"chunk_max_tokens": 60, "chunk_min_tokens": 5, "chunk_overlap": 0.0})


@pytest.fixture
def admin(small: Settings) -> Iterator[AliasStore]:
    adm = AliasStore(small)
    try:
        adm.install()
        yield adm
    finally:
        drop_alias(adm.cluster.client, adm.alias)


def page(topic: str, sections: int, changed: int | None = None) -> str:
    parts = [f"# Страница про {topic}\n"]
    for i in range(1, sections + 1):
        extra = " Этот раздел изменён." if i == changed else ""
        parts.append(
            f"## Раздел {i}\n\nПро {topic}: пункт {i} достаточно длинный, чтобы быть отдельным фрагментом "
            f"текста, и в нём есть слово {topic}.{extra}\n"
        )
    return "\n".join(parts)


def tree(root: Path, files: dict[str, str]) -> Path:
    for rel, text in files.items():
        p = root / rel
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(text, encoding="utf-8")
    return root


def docs(admin: AliasStore, visible: bool = True) -> dict[str, int]:
    """doc_id -> chunk count."""
    filters = [visibility_filter(admin.alias)] if visible else []
    resp = admin.cluster.client.search(
        index=admin.alias,
        body={
            "size": 0,
            "query": {"bool": {"filter": filters}},
            "aggs": {"d": {"terms": {"field": "doc_id", "size": 1000}}},
        },
        params={"request_cache": "false"},
    )
    return {b["key"]: b["doc_count"] for b in resp["aggregations"]["d"]["buckets"]}


class Counting:
    """The index's embedder, counting what it is asked to embed."""

    def __init__(self, settings: Settings, admin: AliasStore) -> None:
        self.emb = embedder_for(settings, meta=admin.meta())
        self.texts: list[str] = []
        real = self.emb.encode_passages

        def encode(texts: Sequence[str]) -> Any:
            self.texts.extend(texts)
            return real(texts)

        self.emb.encode_passages = encode  # type: ignore[method-assign]


def test_unchanged_files_are_skipped_unread_and_no_model_is_loaded(
    admin: AliasStore, small: Settings, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    kb = tree(
        tmp_path / "kb", {"a.md": page("чай", 3), "b/c.md": page("лампы", 2), "d.md": page("доставка", 2)}
    )
    first = Ingester(small).ingest([kb])
    assert (first.indexed, first.skipped) == (3, 0)
    stored = docs(admin)

    def no(*_: Any, **__: Any) -> Any:
        raise AssertionError("an unchanged re-ingest must not parse, chunk or load a model")

    monkeypatch.setattr(documents, "read_document", no)
    monkeypatch.setattr(batches, "chunk_document", no)
    monkeypatch.setattr(batches, "embedder_for", no)
    again = Ingester(small).ingest([kb])
    assert (again.documents, again.indexed, again.skipped, again.failed) == (3, 0, 3, [])
    assert docs(admin) == stored


def test_a_changed_file_re_embeds_only_its_changed_chunks(
    admin: AliasStore, small: Settings, tmp_path: Path
) -> None:
    kb = tree(tmp_path / "kb", {"a.md": page("чай", 4), "b.md": page("лампы", 2)})
    Ingester(small).ingest([kb])
    chunks_before = docs(admin)["kb/a"]
    assert chunks_before >= 4
    tree(kb, {"a.md": page("чай", 4, changed=2)})
    counting = Counting(small, admin)
    report = Ingester(small, embedder=counting.emb).ingest([kb])
    assert (report.indexed, report.skipped) == (1, 1)
    assert len(counting.texts) == 1 and "изменён" in counting.texts[0]
    assert report.reused_vectors == chunks_before - 1
    assert docs(admin) == docs(admin, visible=False) == {"kb/a": chunks_before, "kb/b": 2}
    # The reused vectors are the stored ones: a kNN search for a chunk's own vector finds it first.
    hit = admin.cluster.client.search(
        index=admin.alias,
        body={"size": 1, "_source": ["text", "embedding"], "query": {"term": {"doc_id": "kb/a"}}},
    )["hits"]["hits"][0]["_source"]
    expected = counting.emb.encode_passages([hit["text"]])[0]
    assert [round(float(x), 5) for x in hit["embedding"]] == [round(float(x), 5) for x in expected]


def test_prune_removes_documents_whose_file_is_gone_in_that_collection_only(
    admin: AliasStore, small: Settings, tmp_path: Path
) -> None:
    kb = tree(
        tmp_path / "kb", {"a.md": page("чай", 2), "old.md": page("архив", 2), "sub/x.md": page("лампы", 2)}
    )
    other = tree(tmp_path / "other", {"old.md": page("архив", 2)})
    Ingester(small).ingest([kb, other])
    assert set(docs(admin)) == {"kb/a", "kb/old", "kb/sub/x", "other/old"}

    (kb / "old.md").unlink()
    (kb / "sub" / "x.md").unlink()
    kept = Ingester(small).ingest([kb])  # without --prune: nothing is removed
    assert kept.pruned == [] and set(docs(admin)) == {"kb/a", "kb/old", "kb/sub/x", "other/old"}

    pruned = Ingester(small).ingest([kb], prune=True)
    assert pruned.pruned == ["kb/old", "kb/sub/x"] and pruned.skipped == 1
    assert set(docs(admin)) == set(docs(admin, visible=False)) == {"kb/a", "other/old"}
    assert pruned.as_dict()["pruned"] == 2

    # A file whose front matter now names another doc_id: the old document goes with --prune.
    tree(kb, {"a.md": "---\ndoc_id: renamed\n---\n" + page("чай", 2)})
    renamed = Ingester(small).ingest([kb], prune=True)
    assert renamed.pruned == ["kb/a"] and set(docs(admin)) == {"renamed", "other/old"}

    with pytest.raises(ConfigError, match="--prune needs folders"):
        Ingester(small).ingest([kb / "a.md"], prune=True)


def test_a_file_that_fails_to_read_has_its_document_withdrawn_not_pruned(
    admin: AliasStore, small: Settings, tmp_path: Path
) -> None:
    kb = tree(tmp_path / "kb", {"a.md": page("чай", 2), "b.md": page("лампы", 2)})
    Ingester(small).ingest([kb])
    (kb / "b.md").write_bytes("# Лампы\n\nтекст в cp1251".encode("cp1251"))
    report = Ingester(small).ingest([kb], prune=True)
    # Its new bytes cannot be read, so nothing says the old version may still be served (issue #36:
    # fail closed): withdrawn, and the report says so; not "pruned" (the file is there).
    assert len(report.failed) == 1 and "kb/b) is withdrawn from search" in report.failed[0][1]
    assert report.pruned == [] and report.withdrawn == ["kb/b"]
    assert set(docs(admin)) == {"kb/a"}


def test_long_cyrillic_path_and_collection_are_indexed_with_their_batch(
    admin: AliasStore, small: Settings, tmp_path: Path
) -> None:
    # ~270 Cyrillic characters of path below the root (~540 bytes), in folders within the
    # file system's 255-byte name limit, plus a long collection name.
    deep = "/".join(["раздел-документации-номер-" + str(i) for i in range(11)]) + "/страница.md"
    assert len(deep) > 250 and len(deep.encode("utf-8")) > 512
    kb = tree(tmp_path / "kb", {deep: page("чай", 2), "short.md": page("лампы", 2)})
    collection = "коллекция-" * 20
    report = Ingester(small).ingest([kb], collection=collection.strip("-"))
    assert report.failed == [] and report.indexed == 2
    got = docs(admin)
    long_id = f"{collection.strip('-')}/{deep[:-3]}"
    assert got == {long_id: 2, f"{collection.strip('-')}/short": 2}
    hits = admin.cluster.client.search(
        index=admin.alias, body={"size": 10, "query": {"term": {"doc_id": long_id}}, "_source": ["full_id"]}
    )["hits"]["hits"]
    assert all(len(h["_id"].encode("utf-8")) <= 512 and h["_id"].startswith("~") for h in hits)
    assert sorted(h["_source"]["full_id"] for h in hits)[0].startswith(long_id + "@")
    # Re-ingest: unchanged (the long document too), then a changed long file replaces in place.
    assert Ingester(small).ingest([kb], collection=collection.strip("-")).skipped == 2
    tree(kb, {deep: page("чай", 3)})
    again = Ingester(small).ingest([kb], collection=collection.strip("-"))
    assert again.indexed == 1 and docs(admin, visible=False)[long_id] == 3


def test_an_edited_include_file_re_reads_the_pages_that_include_it(
    admin: AliasStore, small: Settings, tmp_path: Path
) -> None:
    kb = tree(
        tmp_path / "kb",
        {
            "_includes/_note.md": "Общий абзац про тарифы: старая цена.\n",
            "a.md": "# Страница A\n\nПро чай.\n\n{include(_includes/_note.md)}\n",
            "b.md": page("лампы", 2),
        },
    )
    first = Ingester(small).ingest([kb])
    assert first.indexed == 3
    assert Ingester(small).ingest([kb]).skipped == 3  # nothing changed
    tree(kb, {"_includes/_note.md": "Общий абзац про тарифы: новая цена.\n"})
    again = Ingester(small).ingest([kb])
    # a.md's own bytes did not change, but a file it includes did: it is read again.
    assert (again.indexed, again.skipped) == (2, 1)
    texts = admin.cluster.client.search(
        index=admin.alias,
        body={
            "size": 20,
            "query": {"bool": {"filter": [{"term": {"doc_id": "kb/a"}}, visibility_filter(admin.alias)]}},
        },
    )["hits"]["hits"]
    joined = " ".join(h["_source"]["text"] for h in texts)
    assert "новая цена" in joined and "старая цена" not in joined
    assert Ingester(small).ingest([kb]).skipped == 3
