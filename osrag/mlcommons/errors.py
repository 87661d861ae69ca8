"""ml-commons failures as one line naming the model (the map from transport errors lives here)."""

from __future__ import annotations

import re
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
