"""Typed records of what ml-commons answers: models, tasks, connectors (pure; no I/O)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

#: ml-commons model states in which the model answers ``_predict``.
SERVING_STATES = frozenset({"DEPLOYED", "PARTIALLY_DEPLOYED"})


@dataclass(frozen=True)
class ModelInfo:
    """One ml-commons model, as ``GET _plugins/_ml/models/<id>`` describes it."""

    model_id: str
    name: str
    version: str
    state: str  # REGISTERED, DEPLOYING, DEPLOYED, PARTIALLY_DEPLOYED, UNDEPLOYED, DEPLOY_FAILED, ...
    function_name: str  # TEXT_EMBEDDING, TEXT_SIMILARITY, REMOTE, ...
    model_format: str | None = None  # ONNX, TORCH_SCRIPT; None for remote models
    group_id: str | None = None
    content_hash: str | None = None
    content_size: int | None = None
    dimension: int | None = None
    connector_id: str | None = None
    worker_nodes: tuple[str, ...] = ()
    description: str = ""
    query_prefix: str | None = None  # asymmetric models (e5): ml-commons adds these itself
    passage_prefix: str | None = None
    max_length: int | None = None

    @property
    def deployed(self) -> bool:
        return self.state in SERVING_STATES

    @property
    def where(self) -> str:
        """Where inference runs: inside the cluster (a local model) or behind a connector."""
        return "remote (connector)" if self.connector_id or self.function_name == "REMOTE" else "cluster"

    @property
    def label(self) -> str:
        """``name@version (id)``: how every message names the model."""
        return f"{self.name}@{self.version} ({self.model_id})"

    @classmethod
    def from_doc(cls, model_id: str, doc: dict[str, Any]) -> ModelInfo:
        config = doc.get("model_config") or {}
        nodes = doc.get("planning_worker_nodes") or []
        return cls(
            model_id=model_id,
            name=str(doc.get("name", "")),
            version=str(doc.get("model_version", "")),
            state=str(doc.get("model_state", "UNKNOWN")),
            function_name=str(doc.get("function_name", doc.get("algorithm", ""))).upper(),
            model_format=doc.get("model_format"),
            group_id=doc.get("model_group_id"),
            content_hash=doc.get("model_content_hash_value"),
            content_size=doc.get("model_content_size_in_bytes"),
            dimension=config.get("embedding_dimension"),
            connector_id=doc.get("connector_id"),
            worker_nodes=tuple(str(n) for n in nodes),
            description=str(doc.get("description", "")),
            query_prefix=config.get("query_prefix"),
            passage_prefix=config.get("passage_prefix"),
            max_length=config.get("model_max_length"),
        )

    def as_dict(self) -> dict[str, Any]:
        return {
            "model_id": self.model_id,
            "name": self.name,
            "version": self.version,
            "state": self.state,
            "deployed": self.deployed,
            "function_name": self.function_name,
            "format": self.model_format,
            "where": self.where,
            "dimension": self.dimension,
            "content_hash": self.content_hash,
            "connector_id": self.connector_id,
            "group_id": self.group_id,
        }


@dataclass(frozen=True)
class Task:
    """An ml-commons task (register, deploy): its state and, once done, the model it made."""

    task_id: str
    state: str  # CREATED, RUNNING, COMPLETED, FAILED, COMPLETED_WITH_ERROR, CANCELLED
    task_type: str = ""
    model_id: str | None = None
    error: str | None = None

    @property
    def finished(self) -> bool:
        return self.state in {"COMPLETED", "FAILED", "COMPLETED_WITH_ERROR", "CANCELLED"}

    @property
    def succeeded(self) -> bool:
        return self.state == "COMPLETED"

    @classmethod
    def from_doc(cls, task_id: str, doc: dict[str, Any]) -> Task:
        err = doc.get("error")
        if isinstance(err, dict):  # per node: {"node-id": "message"}
            err = "; ".join(f"{k}: {v}" for k, v in err.items())
        return cls(
            task_id, str(doc.get("state", "UNKNOWN")), str(doc.get("task_type", "")), doc.get("model_id"), err
        )


@dataclass(frozen=True)
class LocalModelMeta:
    """What registering a local model zip tells ml-commons before the chunks follow."""

    name: str
    function_name: str  # TEXT_EMBEDDING or TEXT_SIMILARITY
    model_format: str  # ONNX
    content_hash: str  # sha256 of the zip
    content_size: int
    model_config: dict[str, Any]
    description: str = ""

    def body(self, group_id: str, total_chunks: int) -> dict[str, Any]:
        return {
            "name": self.name,
            "function_name": self.function_name,
            "model_format": self.model_format,
            "model_group_id": group_id,
            "model_content_hash_value": self.content_hash,
            "model_content_size_in_bytes": self.content_size,
            "total_chunks": total_chunks,
            "model_config": self.model_config,
            "description": self.description,
        }


@dataclass(frozen=True)
class Embeddings:
    """Vectors ``_predict`` returned, in the order of the texts sent."""

    vectors: list[list[float]]
    model_id: str
    extra: dict[str, Any] = field(default_factory=dict)
