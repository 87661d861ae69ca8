"""The bench corpus (``corpus``) embedded and written the way ingest writes it.

Each chunk gets its own passage embedding; the bulk actions are ingest's own
(``osrag.ingest.prepared.chunk_action``: the stored ``_source`` of ``chunk_source``, the ``_id`` of a
version key made by ``document_version``), and they go through ingest's bulk writer
(``osrag.store.bulk.write``: its retry policy, its request size and concurrency from the settings).
The index, its mapping, the alias and the ``{alias}.state`` hidden list are the caller's.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Iterator
from itertools import islice
from typing import Any

import corpus
import numpy as np

from osrag.chunking import Chunk, ChunkingConfig, Document
from osrag.connection import Cluster
from osrag.ingest.prepared import chunk_action, document_version
from osrag.store import bulk
from osrag.store.versions import version_key

#: Every bench chunk is cut by the markdown chunker with the default config (``corpus.iter_chunks``).
STRATEGY = "markdown"
#: Progress is reported every this many actions handed to the writer.
PROGRESS_EVERY = 20_000


def iter_embedded(
    n_chunks: int, embedder: Any, seed: int = corpus.SEED, batch: int = 1024
) -> Iterator[tuple[Document, Chunk, np.ndarray]]:
    """Chunks with their own passage embedding (``embedder.encode_passages``), in batches."""
    navec = str(embedder.model_name).startswith("navec:")
    count = corpus.navec_token_count if navec else embedder.count_tokens
    chunks = corpus.iter_chunks(n_chunks, count, seed)
    while group := list(islice(chunks, batch)):
        vecs = embedder.encode_passages([c.text for _, c in group])
        for (doc, c), vec in zip(group, vecs):
            yield doc, c, vec


def corpus_version_key(doc: Document, model_name: str) -> str:
    """The document's version key exactly as ingest would make it for the bench's chunking."""
    return version_key(doc.doc_id, document_version(doc, STRATEGY, ChunkingConfig(), model_name))


def actions_for(
    items: Iterable[tuple[Document, Chunk, np.ndarray]], index: str, now: str, model_name: str
) -> Iterator[dict[str, Any]]:
    """Ingest's bulk actions (``osrag.ingest.prepared.chunk_action``) for embedded chunks of ``model_name``."""
    keys: dict[str, str] = {}  # doc_id -> version key: a document's chunks come one after another
    for doc, c, vec in items:
        key = keys.get(doc.doc_id)
        if key is None:
            keys.clear()
            key = keys[doc.doc_id] = corpus_version_key(doc, model_name)
        yield chunk_action(index, doc, c, key, np.round(vec.astype(np.float64), 6).tolist(), now)


def bulk_actions(
    n_chunks: int, embedder: Any, index: str, now: str, seed: int = corpus.SEED
) -> Iterator[dict[str, Any]]:
    """The first ``n_chunks`` chunks as bulk actions into ``index``."""
    return actions_for(iter_embedded(n_chunks, embedder, seed), index, now, str(embedder.model_name))


def write_index(
    cluster: Cluster,
    actions: Iterable[dict[str, Any]],
    index: str,
    *,
    progress: Callable[[int, float], None] | None = None,
) -> dict[str, Any]:
    """Write ``actions`` into ``index`` with ``osrag.store.bulk.write``, refresh off during the write and
    restored after, also on failure. Raises if any item failed after the writer's retries; returns
    counts and timings."""
    client = cluster.client
    client.indices.put_settings(index=index, body={"index": {"refresh_interval": "-1"}})
    t0 = time.perf_counter()
    sent = 0

    def counted() -> Iterator[dict[str, Any]]:
        nonlocal sent
        for action in actions:
            yield action
            sent += 1
            if progress is not None and sent % PROGRESS_EVERY == 0:
                progress(sent, time.perf_counter() - t0)

    try:
        failed = bulk.write(cluster, counted(), f"bench write of {index}")
    finally:
        client.indices.put_settings(index=index, body={"index": {"refresh_interval": None}})
    if failed:
        raise RuntimeError(f"{len(failed)} of {sent} bulk items failed, the first: {str(failed[0])[:500]}")
    bulk_s = time.perf_counter() - t0
    t1 = time.perf_counter()
    client.indices.refresh(index=index)
    return {"written": sent, "bulk_s": bulk_s, "refresh_s": time.perf_counter() - t1}
