"""One bulk-write helper with one retry policy, for ingest and reindex alike.

Items the cluster rejects with 429 (or that fail on a timeout) are retried with
exponential backoff by ``streaming_bulk``; what still fails after the retries is
returned item by item -- never dropped, never raised mid-stream -- so the caller
decides what a failed item means (a document not flipped, an alias not switched).
An item refused with any other 4xx is not retried: the same input fails the same way.

One bad item never fails its neighbours: when the server refuses a whole request with a
4xx (a malformed action fails the request, not just the item), the request's actions are
sent again in halves until the refusal is down to the items that cause it; the others are
written.

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
    cluster: Cluster,
    actions: Iterable[dict[str, Any]],
    what: str,
    concurrency: int | None = None,
    pipeline: str | None = None,
) -> list[dict[str, Any]]:
    """Write ``actions`` in requests of ``bulk_chunk_size``; the items that failed after retries.

    ``concurrency`` (default ``bulk_concurrency``) requests may be in flight at once. ``pipeline``:
    the ingest pipeline every request names (the cluster embeds the chunks there, so requests in
    flight at once are inference spread over the ML nodes)."""
    s = cluster.settings
    n = s.bulk_concurrency if concurrency is None else concurrency
    if n <= 1:
        return _write_serial(cluster, actions, what, pipeline)
    failed: list[dict[str, Any]] = []
    with ThreadPoolExecutor(max_workers=n, thread_name_prefix="osrag-bulk") as pool:
        pending: set[Future[list[dict[str, Any]]]] = set()
        try:
            for part in _parts(actions, s.bulk_chunk_size):
                if len(pending) >= n:
                    done, pending = wait(pending, return_when=FIRST_COMPLETED)
                    for f in done:
                        failed.extend(f.result())
                pending.add(pool.submit(_write_serial, cluster, part, what, pipeline))
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


def _write_serial(
    cluster: Cluster, actions: Iterable[dict[str, Any]], what: str, pipeline: str | None = None
) -> list[dict[str, Any]]:
    failed: list[dict[str, Any]] = []
    for part in _parts(actions, cluster.settings.bulk_chunk_size):
        failed.extend(_write_part(cluster, part, what, pipeline))
    return failed


def _write_part(
    cluster: Cluster, part: list[dict[str, Any]], what: str, pipeline: str | None = None
) -> list[dict[str, Any]]:
    """One request's worth of actions; a whole-request 4xx is split down to its culprits."""
    from opensearchpy.helpers import streaming_bulk

    s = cluster.settings
    failed: list[dict[str, Any]] = []
    refused: list[dict[str, Any]] = []  # items of a request the server refused as a whole
    params: dict[str, Any] = {"pipeline": pipeline} if pipeline else {}
    with translate_errors(s.url, what):
        for ok, item in streaming_bulk(
            cluster.client,
            part,
            chunk_size=len(part),
            max_retries=RETRIES,
            initial_backoff=INITIAL_BACKOFF_S,
            max_backoff=MAX_BACKOFF_S,
            raise_on_error=False,
            raise_on_exception=False,
            request_timeout=max(MIN_REQUEST_TIMEOUT_S, s.timeout_s),
            **params,
        ):
            if ok:
                continue
            if len(part) > 1 and _whole_request_refused(item):
                refused.append(item)
            else:
                failed.append(item)
    if refused:
        by_id = {str(a.get("_id")): a for a in part}
        again = [by_id[i] for i in (str(item_info(r).get("_id")) for r in refused) if i in by_id]
        if len(again) != len(refused):  # cannot tell the items apart: report them as they failed
            return failed + refused
        half = (len(again) + 1) // 2
        for piece in (again[:half], again[half:]):
            if piece:
                failed.extend(_write_part(cluster, piece, what, pipeline))
    return failed


def _whole_request_refused(item: dict[str, Any]) -> bool:
    """The request failed as a whole with a client error (not 429, which is retried): each of
    its items carries the request's exception rather than a result of its own."""
    info = item_info(item)
    status = info.get("status")
    return "exception" in info and isinstance(status, int) and 400 <= status < 500 and status != 429


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
