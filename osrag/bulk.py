"""One bulk-write helper with one retry policy, for ingest and reindex alike.

Items the cluster rejects with 429 (or that fail on a timeout) are retried with
exponential backoff by ``streaming_bulk``; what still fails after the retries is
returned item by item -- never dropped, never raised mid-stream -- so the caller
decides what a failed item means (a document not flipped, an alias not switched).
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from osrag.connection import Cluster, translate_errors

#: Retries of a rejected item, and the backoff between them (seconds, doubling up to the cap).
RETRIES = 5
INITIAL_BACKOFF_S = 1
MAX_BACKOFF_S = 30
#: A bulk request carries embeddings; never give it less time than this (seconds).
MIN_REQUEST_TIMEOUT_S = 60.0


def write(cluster: Cluster, actions: Iterable[dict[str, Any]], what: str) -> list[dict[str, Any]]:
    """Stream ``actions`` in chunks of ``bulk_chunk_size``; the items that failed after retries."""
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
