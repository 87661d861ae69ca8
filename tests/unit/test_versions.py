"""osrag.store.versions on the shared fake client: new versions are written hidden, shown in one flip,
the replaced ones deleted; what readers see; every flip fenced by the write lock when held."""

from __future__ import annotations

from typing import Any

import pytest

from osrag.chunking import Chunk, Document
from osrag.errors import IndexStateError
from osrag.ingest.prepared import PreparedDoc
from osrag.names import HIDDEN_ID, state_index, visibility_filter
from osrag.store import writelock
from osrag.store.locking import LockRecord
from osrag.store.versions import VersionStore, bounded_id, version_key

ALIAS = "kb"
STATE = state_index(ALIAS)
INDEX = "kb-a"


def prepared(doc_id: str, version: str, n: int = 2) -> PreparedDoc:
    doc = Document(doc_id=doc_id, text="x" * 10 * n, source=f"{doc_id}.md", title=doc_id.upper())
    chunks = [
        Chunk(doc_id, i, f"текст {i}", f"текст {i}", ("Раздел",), "s", None, "text", i * 10, i * 10 + 9, 3)
        for i in range(n)
    ]
    return PreparedDoc(doc, f"{doc_id}.md", version_key(doc_id, version), chunks, vectors=[[0.5, 0.5]] * n)


def scripts(fake_client: Any) -> list[dict[str, Any]]:
    """The parameters of each update of the hidden list, in order."""
    out = []
    for c in fake_client.update.call_args_list:
        assert (c.kwargs["index"], c.kwargs["id"]) == (STATE, HIDDEN_ID)
        out.append(c.kwargs["body"]["script"]["params"])
    return out


def stored(*keys: str) -> dict[str, Any]:
    """The answer to ``stored_versions``: these keys still have chunks."""
    return {"aggregations": {"k": {"buckets": [{"key": k} for k in keys]}}}


@pytest.fixture
def store(fake_cluster: Any, fake_client: Any) -> VersionStore:
    fake_client.update.return_value = {"result": "updated"}
    fake_client.delete_by_query.return_value = {"deleted": 2}
    fake_client.search.return_value = stored()
    return VersionStore(fake_cluster, ALIAS)


def test_a_new_version_is_written_hidden_then_shown_in_one_flip(
    store: VersionStore, fake_client: Any, bulk_server: Any
) -> None:
    new = prepared("d1", "v2")
    outcome = store.write(INDEX, [new], current={"d1": {"d1@v1"}})
    assert outcome.failed == {}

    order = [
        name
        for name, *_ in fake_client.mock_calls
        if name in ("update", "bulk", "indices.refresh", "delete_by_query")
    ]
    assert order[:4] == ["update", "bulk", "indices.refresh", "update"]  # hidden, written, refreshed, flipped
    hide, flip, unhide = scripts(fake_client)
    assert (hide["add"], hide["remove"]) == (["d1@v2"], [])
    assert fake_client.update.call_args_list[0].kwargs["body"]["upsert"] == {"keys": ["d1@v2"]}
    assert (flip["add"], flip["remove"]) == (["d1@v1"], ["d1@v2"])  # one update: old out, new in
    assert fake_client.delete_by_query.call_args.kwargs["body"] == {
        "query": {"terms": {"version_key": ["d1@v1"]}}
    }
    assert (unhide["add"], unhide["remove"]) == ([], ["d1@v1"])  # no chunk of v1 left: forgotten

    assert bulk_server.requests == [["d1@v2:0", "d1@v2:1"]]
    src = bulk_server.sources["d1@v2:0"]
    assert (src["version_key"], src["version"], src["doc_id"], src["chunk_id"]) == (
        "d1@v2",
        "v2",
        "d1",
        "d1:0",
    )


def test_a_document_whose_chunks_failed_is_never_shown(
    store: VersionStore, fake_client: Any, bulk_server: Any
) -> None:
    bulk_server.item_status = {"d2@v2:1": [400]}
    outcome = store.write(INDEX, [prepared("d1", "v2"), prepared("d2", "v2")], current={"d2": {"d2@v1"}})
    assert list(outcome.failed) == ["d2@v2"] and "400" in outcome.failed["d2@v2"]
    assert [i["index"]["_id"] for i in outcome.failed_items] == ["d2@v2:1"]
    flip = scripts(fake_client)[1]
    assert (flip["add"], flip["remove"]) == ([], ["d1@v2"])  # d2 keeps v1 visible
    deleted = fake_client.delete_by_query.call_args.kwargs["body"]["query"]["terms"]["version_key"]
    assert deleted == ["d2@v2"]  # its partial v2 goes


def test_a_version_whose_chunks_survived_the_delete_stays_hidden(
    store: VersionStore, fake_client: Any, bulk_server: Any
) -> None:
    fake_client.search.return_value = stored("d1@v1")
    store.write(INDEX, [prepared("d1", "v2")], current={"d1": {"d1@v1"}})
    assert len(scripts(fake_client)) == 2  # hidden + flip; no un-hiding of d1@v1


def test_remove_hides_then_deletes(store: VersionStore, fake_client: Any) -> None:
    fake_client.search.return_value = stored("b@1")
    assert store.remove(INDEX, ["b@1", "a@1", "a@1"]) == ["b@1"]
    hide, unhide = scripts(fake_client)
    assert hide["add"] == ["a@1", "b@1"] and unhide["remove"] == ["a@1"]


def test_visible_versions_ask_the_alias_with_the_hidden_list_applied(
    store: VersionStore, fake_client: Any
) -> None:
    fake_client.search.return_value = {
        "aggregations": {"d": {"buckets": [{"key": "d1", "v": {"buckets": [{"key": "d1@v1"}]}}]}}
    }
    assert store.visible_versions(["d1", "d2"]) == {"d1": {"d1@v1"}}
    call = fake_client.search.call_args.kwargs
    assert call["index"] == ALIAS
    assert call["body"]["query"]["bool"]["filter"] == [
        {"terms": {"doc_id": ["d1", "d2"]}},
        visibility_filter(ALIAS),
    ]
    fake_client.search.reset_mock()
    assert store.visible_versions([]) == {}
    fake_client.search.assert_not_called()


def test_taken_by_others_names_another_file_with_the_same_id(store: VersionStore, fake_client: Any) -> None:
    fake_client.search.return_value = {
        "aggregations": {"d": {"buckets": [{"key": "d1", "v": {"buckets": [{"key": "other/d1.md"}]}}]}}
    }
    docs = [prepared("d1", "v").doc, prepared("d2", "v").doc]
    assert store.taken_by_others(docs) == {"d1": "other/d1.md"}


def test_a_flip_is_fenced_by_the_write_lock(
    store: VersionStore, fake_cluster: Any, fake_client: Any, node: Any
) -> None:
    store.lock = writelock.WriteLock(fake_cluster, ALIAS, "ingest", wait_s=0)
    store.hide(add=["d1@v2"])
    body = fake_client.update.call_args.kwargs["body"]
    assert body["script"]["params"]["fence"] == store.lock.token and "upsert" not in body
    assert body["script"]["source"].startswith(writelock.FENCE)

    other = LockRecord(token="o", since="s", pid=7, host="h2", what="osrag drop kb", expires_ms=2**62)
    node.put(STATE, HIDDEN_ID, {"keys": [], "writer": other.as_dict()})
    fake_client.update.return_value = {"result": "noop"}
    with pytest.raises(writelock.WriteLost, match="lost to osrag drop kb \\(pid 7 on h2\\)"):
        store.hide(remove=["d1@v2"])
    assert issubclass(writelock.WriteLost, IndexStateError)


def test_an_id_over_512_bytes_is_hashed() -> None:
    assert bounded_id("short") == "short"
    long = "д" * 300
    assert bounded_id(long).startswith("~") and len(bounded_id(long).encode()) <= 512
