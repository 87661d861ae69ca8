"""ml-commons failures as one line naming the model (the map from transport errors lives here)."""

from __future__ import annotations

import re
from collections.abc import Iterable
from typing import Any

from osrag.errors import ModelError


class MLCommonsError(ModelError):
    """ml-commons refused or failed a request about a model (the message names it)."""


class ModelMissing(MLCommonsError):
    """The model (or its connector) is not in the cluster."""


class ModelNotDeployed(MLCommonsError):
    """The model is registered but not deployed on any node, so it cannot answer."""


class ClusterModelsUnavailable(MLCommonsError):
    """The cluster has no ml-commons, or refuses it here (a setting or a permission)."""


class ModelNodeLost(MLCommonsError):
    """A node the model ran on left the cluster while it embedded, and neural-search's own retries
    (on the node's disconnection) were spent before ml-commons stopped sending calls to it."""


#: How a bulk item written through the ingest pipeline reads when the node that ran its inference
#: left mid-call (neural-search retries these itself, a few times, before the item fails).
_NODE_LOST = (
    r"(?i)node_(disconnected|not_connected|closed)_exception|Node(Disconnected|NotConnected|Closed)Exception"
    r"|ml/predict\]\s*disconnected|\bNode not connected\b"
)
NODE_LOST_HINT = (
    "a node that ran the model left the cluster during the call (ml-commons sends later calls to the "
    "nodes left)"
)


#: (pattern in ml-commons' reason, error class, the hint that follows the reason)
_MAP: tuple[tuple[str, type[MLCommonsError], str], ...] = (
    (
        r"(?i)model not (found|deployed)|not deployed|Model not ready|no (eligible )?worker node",
        ModelNotDeployed,
        "deploy it: osrag model deploy",
    ),
    (
        r"(?i)(Failed to find model|Fail to find model|model .*not found|index_not_found_exception.*ml-model)",
        ModelMissing,
        "osrag model list shows the models in the cluster",
    ),
    (
        r"(?i)no (ml|eligible) node|only_run_on_ml_node",
        ClusterModelsUnavailable,
        "a single node needs plugins.ml_commons.only_run_on_ml_node=false (docs/cluster-models.md)",
    ),
    (
        r"(?i)native memory",
        ClusterModelsUnavailable,
        "raise plugins.ml_commons.native_memory_threshold (docs/cluster-models.md)",
    ),
    (
        r"(?i)memory circuit breaker",
        ClusterModelsUnavailable,
        "the node's JVM heap is over plugins.ml_commons.jvm_heap_memory_threshold (a bigger heap, or raise it)",
    ),
    (
        r"(?i)trusted.*(url|endpoint)|Connector URL is not matching",
        ClusterModelsUnavailable,
        "add the endpoint to plugins.ml_commons.trusted_connector_endpoints_regex",
    ),
    (
        r"(?i)private ip|Remote inference host name has private ip address",
        ClusterModelsUnavailable,
        "a loopback or private endpoint needs plugins.ml_commons.connector.private_ip_enabled=true",
    ),
    (r"(?i)no handler found for uri", ClusterModelsUnavailable, "is the ml-commons plugin installed?"),
)


def classify(reason: str) -> tuple[type[MLCommonsError], str] | None:
    """(error class, hint) when ``reason`` is one of ml-commons' known failures, else None."""
    for pattern, cls, hint in _MAP:
        if re.search(pattern, reason):
            return cls, hint
    return None


def reason_of(exc: Any) -> tuple[int | str, str]:
    """(status, ml-commons' own reason) from an opensearch-py transport error."""
    status = getattr(exc, "status_code", "?")
    info = getattr(exc, "info", None)
    if isinstance(info, dict):
        err = info.get("error")
        if isinstance(err, dict):
            root = (err.get("root_cause") or [err])[0]
            return status, str(root.get("reason") or root.get("type") or err)
        if err:
            return status, str(err)
        if info.get("message"):
            return status, str(info["message"])
    return status, str(getattr(exc, "error", "") or exc)


def explain(what: str, model: str | None, exc: Any) -> MLCommonsError:
    """One line: which model, which step, ml-commons' reason (first line, bounded), and a hint."""
    from opensearchpy import exceptions as ose

    subject = f"model {model}" if model else "ml-commons"
    if isinstance(exc, ose.ConnectionError):
        return ClusterModelsUnavailable(f"{subject}: {what}: cannot reach the cluster ({type(exc).__name__})")
    status, reason = reason_of(exc)
    reason = " ".join(reason.split())[:300]
    found = classify(reason)
    if found is not None:
        cls, hint = found
        return cls(f"{subject}: {what} failed ({status}): {reason}; {hint}")
    if status == 404 and model:
        return ModelMissing(f"{subject}: {what} failed: not in the cluster (404: {reason})")
    return MLCommonsError(f"{subject}: {what} failed ({status}): {reason}")


def failure_in_items(reasons: Iterable[str], model: str, what: str) -> MLCommonsError | None:
    """One error naming ``model`` when one of the failed bulk items' ``reasons`` is ml-commons saying
    the model cannot embed (not deployed, gone, a breaker open): every later write through the same
    ingest pipeline would fail the same way. Else, when an item failed because a node running the
    model left mid-call, ``ModelNodeLost`` naming it (the items are the model's, not the document's:
    the same write succeeds once the node is gone from ml-commons' routing). Else None."""
    lost: str | None = None
    for raw in reasons:
        why = " ".join(raw.split())[:300]
        found = classify(why)
        if found is not None:
            cls, hint = found
            return cls(f"model {model}: {what} failed: {why}; {hint}")
        if lost is None and re.search(_NODE_LOST, why):
            lost = why
    if lost is not None:
        return ModelNodeLost(f"model {model}: {what} failed: {lost}; {NODE_LOST_HINT}")
    return None


def model_failure(what: str, model: str | None, exc: BaseException) -> MLCommonsError | None:
    """``exc`` (a failed request, or osrag's error wrapping one) as one line naming ``model``
    when ml-commons' reason says the model is missing, not deployed or refused (the patterns of
    ``explain``); None for any other failure, which is not the model's (a missing index)."""
    from opensearchpy import exceptions as ose

    cause: Any = exc
    while cause is not None and not isinstance(cause, ose.TransportError):
        cause = cause.__cause__
    if cause is None or isinstance(cause, ose.ConnectionError):
        return None
    _, reason = reason_of(cause)
    if not any(re.search(pattern, " ".join(reason.split())) for pattern, _, _ in _MAP):
        return None
    return explain(what, model, cause)
