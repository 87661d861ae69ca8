"""The index an ingest writes into: checked before the first batch, kept quiet while many batches
write, and guarded against a reindex for every batch.

- ``prepare``: the alias's index, its ``IndexMeta`` (``osrag.records``), refused while a reindex
  holds the lock or when the configured model is not the index's; fields an older index's
  strict mapping lacks are added, and a refresh interval a crashed ingest left off is restored.
- ``refresh_off`` / ``restore_refresh``: periodic refreshes off during a many-batch ingest (each
  batch refreshes before its flip, so readers lose nothing); the original interval is recorded
  in ``_meta`` first, so a crash is repaired by the next ingest.
- ``guarded``: one batch's write, only while no reindex holds the lock (``osrag.store.locking``).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from typing import Any, TypeVar

from osrag import templates
from osrag.errors import ConfigError, IndexStateError, WritesRefused
from osrag.ingest.context import CONTEXT_FIELD
from osrag.records import IndexMeta
from osrag.settings import Settings
from osrag.store.alias import AliasStore
from osrag.store.locking import (
    describe,
    ensure_state_index,
    holder,
    read_lock,
    register_writer,
    unregister_writer,
)

log = logging.getLogger(__name__)

T = TypeVar("T")

#: Chunk fields that indices made by an older osrag may lack: ingest adds them to the mapping.
ADDED_AFTER_CREATION = (
    "content_hash",
    "collection",
    "origin",
    "file_hash",
    "includes",
    "full_id",
    "meta",
    "url",
)


def prepare(admin: AliasStore, settings: Settings, with_context: bool) -> tuple[str, IndexMeta]:
    """The index behind the alias and its record, ready for this ingest's chunks."""
    cluster = admin.cluster
    index = admin.require_index()
    got = cluster.call("get mapping", cluster.client.indices.get_mapping, index=index)
    mapping = next(iter(got.values()))["mappings"]
    meta = IndexMeta.from_mapping(mapping)
    lock = read_lock(cluster, settings.alias)
    if lock:
        raise IndexStateError(
            f"a reindex into {lock.target} has held the lock since {lock.since}; "
            "ingest is refused so that no write is lost — retry when it finishes (or `osrag reindex --abort`)"
        )
    if settings.embedding_model and settings.embedding_model != meta.embedding_model:
        raise ConfigError(
            f"OSRAG_EMBEDDING_MODEL={settings.embedding_model!r} but index {index} is pinned to "
            f"{meta.embedding_model!r}; run `osrag reindex` to change models"
        )
    if not meta.known:
        raise IndexStateError(f"index {index} has no osrag _meta (not created by osrag?)")
    # Fields an index made by an older osrag lacks (the strict mapping would refuse the chunks):
    # content_hash (template v3; its older chunks lack it, readers collapse in Python there)
    # the sync fields (osrag.ingest.stamps) and the read side's meta/url (osrag.ingest.documents);
    # each as the shipped mapping has it.
    have = mapping.get("properties") or {}
    shipped = templates.chunk_properties()
    wanted = {k: shipped[k] for k in ADDED_AFTER_CREATION + ((CONTEXT_FIELD,) if with_context else ())}
    missing = {k: v for k, v in wanted.items() if k not in have}
    if missing:
        cluster.call(
            "add mapping fields",
            cluster.client.indices.put_mapping,
            index=index,
            body={"properties": missing},
        )
    ensure_state_index(cluster, settings.alias, settings.replicas)
    restore_refresh(admin, index, meta)  # left off by an ingest that died
    return index, meta


def refresh_off(admin: AliasStore, index: str) -> None:
    """Stop periodic refreshes while a many-batch ingest writes, the original value recorded in
    ``_meta`` first (``restore_refresh`` puts it back, after this ingest or a crashed one)."""
    cluster = admin.cluster
    if admin.meta(index).saved_refresh_interval is None:
        got = cluster.call(
            "get refresh interval",
            cluster.client.indices.get_settings,
            index=index,
            name="index.refresh_interval",
        )
        first: dict[str, Any] = next(iter(got.values()), {})
        value = first.get("settings", {}).get("index", {}).get("refresh_interval")
        # Wrapped: the original may itself be None (the cluster default).
        admin.update_meta(index, saved_refresh_interval={"value": value})
    cluster.call(
        "disable refresh",
        cluster.client.indices.put_settings,
        index=index,
        body={"index": {"refresh_interval": "-1"}},
    )


def restore_refresh(admin: AliasStore, index: str, meta: IndexMeta | None = None) -> None:
    """Put back the refresh interval recorded by ``refresh_off`` (None: the default)."""
    saved = (admin.meta(index) if meta is None else meta).saved_refresh_interval
    if saved is None:
        return
    admin.cluster.call(
        "restore refresh",
        admin.cluster.client.indices.put_settings,
        index=index,
        body={"index": {"refresh_interval": saved.get("value")}},
    )
    admin.update_meta(index, saved_refresh_interval=None)


def guarded(
    admin: AliasStore,
    alias: str,
    paths: Sequence[str],
    written_before: int,
    write: Callable[..., T],
    *args: Any,
) -> T:
    """Write one batch only while no reindex holds the lock: the batch registers as a writer,
    then reads the lock; a reindex that took it meanwhile stops the ingest loudly
    (``WritesRefused`` lists the batch) instead of writing into an index whose copy has begun.
    A batch that got in first is waited for and copied by the reindex."""
    cluster = admin.cluster
    record = holder()
    register_writer(cluster, alias, record)
    try:
        lock = read_lock(cluster, alias)
        if lock:
            raise WritesRefused(
                f"{describe(lock)}: ingest stopped so that no write is lost; "
                f"{len(paths)} document(s) of this batch not written: {', '.join(paths)}; later files "
                f"were not read; {written_before} document(s) were written before. Run the same "
                "`osrag ingest` again when the reindex has finished",
                paths,
            )
        return write(*args)
    finally:
        unregister_writer(cluster, alias, record.token)


__all__ = ["guarded", "prepare", "refresh_off", "restore_refresh"]
