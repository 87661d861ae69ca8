"""The write path's stages (osrag.ingest.batches) without a node: batching, the writer thread handing
batches back, parse errors, and the report counted on the ingest's own thread."""

from __future__ import annotations

import threading
from typing import Any
from unittest.mock import Mock

import pytest

from osrag.chunking import Chunk, Document
from osrag.errors import DocumentError, WritesRefused
from osrag.ingest import batches
from osrag.ingest.batches import Batch, WriteBehind
from osrag.ingest.filesync import Item
from osrag.ingest.prepared import PreparedDoc
from osrag.ingest.report import FileOutcome, IngestReport
from osrag.store.versions import BatchOutcome, VersionStore


def _chunk(i: int, tokens: int = 5) -> Chunk:
    return Chunk(
        doc_id="d",
        ordinal=i,
        text=f"text {i}",
        body=f"text {i}",
        heading_path=(),
        section_id="s",
        parent_section_id=None,
        kind="text",
        start=0,
        end=6,
        token_count=tokens,
    )


def _prepared(name: str, n_chunks: int = 1) -> PreparedDoc:
    doc = Document(doc_id=name, text="x", source=f"{name}.md", title=name)
    return PreparedDoc(doc, f"{name}.md", f"{name}@v1", [_chunk(i) for i in range(n_chunks)])


def test_fill_closes_a_batch_at_the_document_or_the_chunk_limit() -> None:
    docs = [_prepared("a", 1), _prepared("b", 1), _prepared("c", 5), _prepared("d", 1)]
    got = [[p.doc.doc_id for p in b] for b in batches.fill(docs, max_docs=2, max_chunks=5)]
    assert got == [["a", "b"], ["c"], ["d"]]
    assert list(batches.fill([], 2, 5)) == []


def test_parse_raises_the_read_error_and_refuses_an_overlong_doc_id() -> None:
    err = DocumentError("a.md", "cannot read")
    with pytest.raises(DocumentError, match="cannot read"):
        batches.parse(Item("a.md", err))
    long = Document(doc_id="x" * (batches.MAX_DOC_ID_BYTES + 1), text="t", source="s", title="t")
    with pytest.raises(DocumentError, match="doc_id is 4097 bytes long"):
        batches.parse(Item("b.md", long))
    ok = Document(doc_id="ok", text="t", source="s", title="t")
    assert batches.parse(Item("c.md", ok)) is ok


def test_write_behind_hands_the_batch_back_from_the_writer_thread() -> None:
    threads: list[str] = []

    def work(batch: Batch) -> None:
        threads.append(threading.current_thread().name)
        batch.outcome = BatchOutcome(failed={"b@v1": "bulk write failed: 400 bad"})

    behind = WriteBehind()
    batch = Batch([_prepared("a", 2), _prepared("b")])
    batch.todo = list(batch.docs)
    assert behind.collect() is None
    behind.submit(work, batch)
    with pytest.raises(RuntimeError):
        behind.submit(work, batch)  # one batch in flight at a time
    back = behind.collect()
    behind.close()
    assert back is batch and threads and threads[0].startswith("osrag-ingest")
    assert back.written() == [
        FileOutcome("a.md", "indexed", chunks=2, tokens=10),
        FileOutcome("b.md", "failed", "bulk write failed: 400 bad"),
    ]
    report = IngestReport()
    for outcome in back.written():
        report.add(outcome)
    assert (report.indexed, report.chunks, report.tokens, report.failed) == (
        1,
        2,
        10,
        [("b.md", "bulk write failed: 400 bad")],
    )


def test_a_refused_write_names_the_batch_read_meanwhile_too() -> None:
    def refused(batch: Batch) -> None:
        raise WritesRefused("reindex holds the lock", ["a.md"])

    behind = WriteBehind()
    behind.submit(refused, Batch([_prepared("a")]))
    with pytest.raises(WritesRefused) as exc:
        behind.collect(["b.md"])
    behind.close()
    assert exc.value.not_written == ["a.md", "b.md"] and "also not written" in str(exc.value)


def test_embed_records_outcomes_on_the_batch_and_reuses_stored_vectors() -> None:
    store = Mock(spec=VersionStore)
    store.taken_by_others.return_value = {"taken": "other/file.md"}
    store.visible_versions.return_value = {"same": {"same@v1"}, "changed": {"changed@v0"}}
    store.stored_vectors.return_value = {"text 0": [0.5]}
    model = Mock(spec=batches.LazyModel)
    model.pipeline_model.return_value = None  # a model that runs here: vectors from encode_passages
    model.get.return_value.encode_passages.side_effect = lambda texts: [[1.0] for _ in texts]
    batch = Batch([_prepared("taken"), _prepared("same"), _prepared("changed", 2)])
    batches.embed(batch, store, "idx", model, replace=False)
    assert [(o.path, o.status) for o in batch.embedded] == [("taken.md", "failed"), ("same.md", "skipped")]
    assert [p.doc.doc_id for p in batch.todo] == ["changed"]
    assert batch.todo[0].vectors == [[0.5], [1.0]] and batch.reused_vectors == 1
    store.stored_vectors.assert_called_once_with("idx", ["changed@v0"])
    model.get.return_value.encode_passages.assert_called_once_with(["text 1"])


def test_the_ingest_report_is_only_written_on_the_ingesting_thread(monkeypatch: Any) -> None:
    """The writer thread never touches the report: every write to it comes from one thread."""
    from osrag.ingest import indexing

    writers: set[str] = set()
    real_add = IngestReport.add

    def add(self: IngestReport, outcome: FileOutcome) -> None:
        writers.add(threading.current_thread().name)
        real_add(self, outcome)

    monkeypatch.setattr(IngestReport, "add", add)
    ing = indexing.Ingester.__new__(indexing.Ingester)
    ing.s = Mock(ingest_batch_docs=1, ingest_batch_chunks=100)
    ing.admin = Mock()
    ing.replace = True
    ing.store = Mock(spec=VersionStore)
    ing.store.visible_versions.return_value = {}

    def written(index: str, batch: Batch) -> None:
        batch.outcome = BatchOutcome()

    monkeypatch.setattr(ing, "_guarded_write", written)
    monkeypatch.setattr(batches, "embed", lambda b, *a, **k: b.todo.extend(b.docs))
    monkeypatch.setattr(indexing.target, "refresh_off", lambda *a: None)
    monkeypatch.setattr(indexing.target, "restore_refresh", lambda *a: None)
    docs = [_prepared(n) for n in ("a", "b", "c")]
    monkeypatch.setattr(ing, "_prepare", lambda items, model, report, progress: iter(docs))
    report = IngestReport()
    ing._write_all("idx", Mock(), [], report, None)
    assert report.indexed == 3 and writers == {threading.current_thread().name}


def test_embed_tells_a_watcher_slice_by_slice_and_gives_the_same_vectors() -> None:
    store = Mock(spec=VersionStore)
    store.taken_by_others.return_value = {}
    store.visible_versions.return_value = {}
    store.stored_vectors.return_value = {}
    model = Mock(spec=batches.LazyModel)
    model.pipeline_model.return_value = None
    model._settings = Mock(embedding_batch_size=2)
    model.get.return_value.encode_passages.side_effect = lambda texts: [[float(t.split()[-1])] for t in texts]
    told: list[tuple[int, int, int]] = []
    whole = Batch([_prepared("a", 3), _prepared("b", 2)])
    batches.embed(whole, store, "idx", model, replace=False)
    watched = Batch([_prepared("a", 3), _prepared("b", 2)])
    batches.embed(watched, store, "idx", model, replace=False, on_embedded=lambda *t: told.append(t))
    assert [p.vectors for p in watched.todo] == [p.vectors for p in whole.todo]
    assert told == [(0, 5, 2), (2, 5, 2), (4, 5, 2), (5, 5, 2)]  # one encoder batch (2) per slice
