"""One bulk-write helper with one retry policy, for ingest and reindex alike.

Items the cluster rejects with 429 (or that fail on a timeout) are retried with
exponential backoff by ``streaming_bulk``; what still fails after the retries is
returned item by item -- never dropped, never raised mid-stream -- so the caller
decides what a failed item means (a document not flipped, an alias not switched).

With ``concurrency`` > 1, requests of ``bulk_chunk_size`` actions go out from a small
thread pool, each through the same ``streaming_bulk`` retry policy (``parallel_bulk``
would not retry), with at most ``concurrency`` requests in flight: the actions are
still consumed lazily, so memory stays bounded.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from itertools import islice
from typing import Any

from osrag.connection import Cluster, translate_errors

#: Retries of a rejected item, and the backoff between them (seconds, doubling up to the cap).
RETRIES = 5
INITIAL_BACKOFF_S = 1
MAX_BACKOFF_S = 30
#: A bulk request carries embeddings; never give it less time than this (seconds).
MIN_REQUEST_TIMEOUT_S = 60.0


def write(
    cluster: Cluster, actions: Iterable[dict[str, Any]], what: str, concurrency: int | None = None
) -> list[dict[str, Any]]:
    """Write ``actions`` in requests of ``bulk_chunk_size``; the items that failed after retries.

    ``concurrency`` (default ``bulk_concurrency``) requests may be in flight at once."""
    s = cluster.settings
    n = s.bulk_concurrency if concurrency is None else concurrency
    if n <= 1:
        return _write_serial(cluster, actions, what)
    failed: list[dict[str, Any]] = []
    with ThreadPoolExecutor(max_workers=n, thread_name_prefix="osrag-bulk") as pool:
        pending: set[Future[list[dict[str, Any]]]] = set()
        try:
            for part in _parts(actions, s.bulk_chunk_size):
                if len(pending) >= n:
                    done, pending = wait(pending, return_when=FIRST_COMPLETED)
                    for f in done:
                        failed.extend(f.result())
                pending.add(pool.submit(_write_serial, cluster, part, what))
        finally:
            # Every request sent is waited for (no write outlives the call), even when the
            # action stream or one request raised; the first error then propagates.
            done, _ = wait(pending)
        for f in done:
            failed.extend(f.result())
    return failed


def _parts(actions: Iterable[dict[str, Any]], size: int) -> Iterator[list[dict[str, Any]]]:
    it = iter(actions)
    while part := list(islice(it, size)):
        yield part


def _write_serial(cluster: Cluster, actions: Iterable[dict[str, Any]], what: str) -> list[dict[str, Any]]:
    from opensearchpy.helpers import streaming_bulk

    s = cluster.settings
    failed: list[dict[str, Any]] = []
    with translate_errors(s.url, what):
        for ok, item in streaming_bulk(
            cluster.client,
            actions,
            chunk_size=s.bulk_chunk_size,
            max_retries=RETRIES,
            initial_backoff=INITIAL_BACKOFF_S,
            max_backoff=MAX_BACKOFF_S,
            raise_on_error=False,
            raise_on_exception=False,
            request_timeout=max(MIN_REQUEST_TIMEOUT_S, s.timeout_s),
        ):
            if not ok:
                failed.append(item)
    return failed


def item_info(item: dict[str, Any]) -> dict[str, Any]:
    """The body of a failed item (``{"index": {...}}`` -> ``{...}``)."""
    return next(iter(item.values()))


def reason(err: Any) -> str:
    """The server's reason for a failed item, with its causes: the top-level reason alone
    ("failed to parse field [embedding]") often hides the useful one ("dimension mismatch")."""
    if not isinstance(err, dict):
        return str(err)
    parts: list[str] = []
    node: Any = err
    while isinstance(node, dict) and len(parts) < 4:
        text = f"{node.get('type')}: {node.get('reason')}" if node.get("type") else str(node.get("reason"))
        if text not in parts:
            parts.append(text)
        node = node.get("caused_by")
    return "; caused by ".join(parts)
