"""A small client for the ml-commons REST API over an opensearch-py client's transport.

Only what osrag needs to get models into a cluster and use them: model groups, local models
registered from a zip uploaded in chunks, connectors and remote models, deploy/undeploy, tasks,
get/search/delete, and ``_predict`` for embeddings. Every failure is an ``MLCommonsError`` whose
message is one line naming the model (``errors.explain``), never ml-commons' stack.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from osrag.mlcommons.blueprints import ModelRef
from osrag.mlcommons.errors import MLCommonsError, ModelMissing, ModelNotDeployed, explain
from osrag.mlcommons.records import Embeddings, LocalModelMeta, ModelInfo, Task

ML = "/_plugins/_ml"
#: ml-commons refuses a chunk over 10 MB (measured against its own rounding), so 8 MiB leaves room.
CHUNK_BYTES = 8 * 1024 * 1024
Progress = Callable[[int, int], None]  # (chunks sent, total chunks)


class MLCommons:
    """ml-commons on one cluster. ``client`` is an ``opensearchpy.OpenSearch`` (its transport is used)."""

    def __init__(self, client: Any, *, poll_seconds: float = 1.0) -> None:
        self._client = client
        self._poll = poll_seconds

    # ------------------------------------------------------------------ plumbing
    @contextmanager
    def _about(self, what: str, model: str | None = None) -> Iterator[None]:
        from opensearchpy import exceptions as ose

        try:
            yield
        except ose.TransportError as exc:  # ConnectionError and the HTTP errors alike
            raise explain(what, model, exc) from exc

    def _req(
        self, method: str, path: str, body: Any = None, *, what: str, model: str | None = None, **kw: Any
    ) -> Any:
        with self._about(what, model):
            return self._client.transport.perform_request(method, path, body=body, **kw)

    # ------------------------------------------------------------------ model groups
    def model_group(self, name: str, description: str = "") -> str:
        """The id of the model group ``name``, registered if there is none yet."""
        found = self._req(
            "POST",
            f"{ML}/model_groups/_search",
            {"query": {"term": {"name.keyword": name}}, "size": 1},
            what=f"search for model group {name!r}",
        )
        hits = (found.get("hits") or {}).get("hits") or []
        if hits:
            return str(hits[0]["_id"])
        made = self._req(
            "POST",
            f"{ML}/model_groups/_register",
            {"name": name, "description": description or name},
            what=f"register model group {name!r}",
        )
        return str(made["model_group_id"])

    # ------------------------------------------------------------------ local models
    def register_local(
        self,
        zip_path: Path,
        meta: LocalModelMeta,
        *,
        group: str | None = None,
        progress: Progress | None = None,
    ) -> ModelInfo:
        """Register ``zip_path`` (an ONNX zip) under ``meta``: the meta document, then every chunk."""
        size = zip_path.stat().st_size
        if size != meta.content_size:
            raise MLCommonsError(
                f"model {meta.name!r}: {zip_path} is {size} bytes, the meta says {meta.content_size}"
            )
        total = max(1, math.ceil(size / CHUNK_BYTES))
        group_id = self.model_group(group or meta.name, meta.description)
        made = self._req(
            "POST", f"{ML}/models/meta", meta.body(group_id, total), what="register", model=meta.name
        )
        model_id = str(made["model_id"])
        try:
            self._upload(zip_path, model_id, meta.name, total, progress)
        except MLCommonsError:
            try:  # a half-uploaded model would only ever fail to deploy
                self._req(
                    "DELETE", f"{ML}/models/{model_id}", what="delete the half-uploaded model", model=model_id
                )
            except MLCommonsError:
                pass
            raise
        return self.get(model_id)

    def _upload(
        self, zip_path: Path, model_id: str, name: str, total: int, progress: Progress | None
    ) -> None:
        with zip_path.open("rb") as fh:
            for n in range(total):
                self._req(
                    "POST",
                    f"{ML}/models/{model_id}/upload_chunk/{n}",
                    fh.read(CHUNK_BYTES),
                    what=f"upload chunk {n + 1}/{total}",
                    model=f"{name} ({model_id})",
                )
                if progress:
                    progress(n + 1, total)

    # ------------------------------------------------------------------ connectors, remote models
    def create_connector(self, body: dict[str, Any]) -> str:
        made = self._req(
            "POST", f"{ML}/connectors/_create", body, what="create connector", model=body.get("name")
        )
        return str(made["connector_id"])

    def connector_name(self, connector_id: str) -> str:
        doc = self._req("GET", f"{ML}/connectors/{connector_id}", what="read connector", model=connector_id)
        return str(doc.get("name", ""))

    def delete_connector(self, connector_id: str) -> None:
        self._req("DELETE", f"{ML}/connectors/{connector_id}", what="delete connector", model=connector_id)

    def register_remote(
        self,
        name: str,
        connector_id: str,
        *,
        group: str | None = None,
        description: str = "",
        model_config: dict[str, Any] | None = None,
    ) -> ModelInfo:
        """Register a remote model behind ``connector_id`` (not deployed yet)."""
        body: dict[str, Any] = {
            "name": name,
            "function_name": "remote",
            "model_group_id": self.model_group(group or name, description),
            "connector_id": connector_id,
            "description": description or name,
        }
        if model_config:
            body["model_config"] = model_config
        made = self._req("POST", f"{ML}/models/_register", body, what="register", model=name)
        model_id = made.get("model_id")
        if not model_id:
            task = self.wait(str(made["task_id"]), model=name)
            model_id = task.model_id
        return self.get(str(model_id))

    # ------------------------------------------------------------------ lifecycle
    def deploy(self, model_id: str, *, wait: bool = True, timeout: float = 600.0) -> ModelInfo:
        """Deploy a registered model on the cluster's eligible nodes; by default wait for the task."""
        made = self._req("POST", f"{ML}/models/{model_id}/_deploy", what="deploy", model=model_id)
        if wait and made.get("task_id") and made.get("status") != "COMPLETED":
            task = self.wait(str(made["task_id"]), model=model_id, timeout=timeout)
            if not task.succeeded:
                raise MLCommonsError(
                    f"model {self._label(model_id)}: deploy {task.state.lower()}: {task.error or 'no reason given'}"
                )
        info = self.get(model_id)
        # The task ends before the model document says so (ml-commons' sync job writes the state).
        deadline = time.monotonic() + min(timeout, 60.0)
        while wait and info.state == "DEPLOYING" and time.monotonic() < deadline:
            time.sleep(self._poll)
            info = self.get(model_id)
        return info

    def undeploy(self, model_id: str) -> ModelInfo:
        self._req("POST", f"{ML}/models/{model_id}/_undeploy", what="undeploy", model=model_id)
        return self.get(model_id)

    def delete(self, model_id: str) -> None:
        """Delete a model, and its model group when no other version is left in it."""
        group = self.get(model_id).group_id
        self._req("DELETE", f"{ML}/models/{model_id}", what="delete", model=model_id)
        if group:
            left = self._req(
                "POST",
                f"{ML}/models/_search",
                {
                    "query": {
                        "bool": {
                            "must": [{"term": {"model_group_id": group}}],
                            "must_not": [{"exists": {"field": "chunk_number"}}],
                        }
                    },
                    "size": 0,
                },
                what="count the model group's models",
                model=model_id,
            )
            if not ((left.get("hits") or {}).get("total") or {}).get("value"):
                try:  # best effort: ml-commons may still count the version just deleted
                    self._req(
                        "DELETE", f"{ML}/model_groups/{group}", what="delete its model group", model=model_id
                    )
                except MLCommonsError:
                    pass

    def task(self, task_id: str) -> Task:
        return Task.from_doc(task_id, self._req("GET", f"{ML}/tasks/{task_id}", what=f"read task {task_id}"))

    def wait(self, task_id: str, *, model: str | None = None, timeout: float = 600.0) -> Task:
        """Poll a task until it ends; ``MLCommonsError`` naming the model on a timeout."""
        deadline = time.monotonic() + timeout
        while True:
            task = self.task(task_id)
            if task.finished:
                return task
            if time.monotonic() > deadline:
                raise MLCommonsError(
                    f"model {model or task.model_id}: task {task_id} still {task.state} after {timeout:.0f} s"
                )
            time.sleep(self._poll)

    # ------------------------------------------------------------------ reading
    def get(self, model_id: str) -> ModelInfo:
        doc = self._req("GET", f"{ML}/models/{model_id}", what="read", model=model_id)
        return ModelInfo.from_doc(model_id, doc)

    def models(self, name: str | None = None) -> list[ModelInfo]:
        """Every model (not its chunks), newest first; only those named ``name`` if given."""
        must: list[dict[str, Any]] = [{"bool": {"must_not": {"exists": {"field": "chunk_number"}}}}]
        if name:
            must.append({"term": {"name.keyword": name}})
        found = self._req(
            "POST",
            f"{ML}/models/_search",
            {"query": {"bool": {"must": must}}, "size": 1000, "sort": [{"created_time": {"order": "desc"}}]},
            what="list models",
        )
        return [
            ModelInfo.from_doc(h["_id"], h.get("_source") or {})
            for h in (found.get("hits") or {}).get("hits") or []
        ]

    def resolve(self, name: str, version: str | None = None) -> ModelInfo:
        """The model named ``name`` (at ``version``, else the newest): ``ModelMissing`` if none."""
        hits = [m for m in self.models(name) if version is None or m.version == str(version)]
        if not hits:
            at = f"@{version}" if version else ""
            raise ModelMissing(
                f"no ml-commons model {name}{at} in the cluster (osrag model list shows what is there)"
            )
        return hits[0]

    def find(self, ref: ModelRef) -> ModelInfo:
        """The model a reference names (``ModelMissing`` naming it when there is none)."""
        if ref.model_id:
            return self.get(ref.model_id)
        return self.resolve(str(ref.name), ref.version)

    # ------------------------------------------------------------------ inference
    def embed(
        self,
        model_id: str,
        texts: Sequence[str],
        *,
        content_type: str | None = None,
        parameters: dict[str, Any] | None = None,
    ) -> Embeddings:
        """Vectors for ``texts`` from a deployed text-embedding model (local or remote).

        ``content_type`` (query/passage) is for a local asymmetric model; ``parameters`` reach a
        remote model's connector (e.g. ``input_type``)."""
        body: dict[str, Any] = {"text_docs": list(texts), "target_response": ["sentence_embedding"]}
        params = dict(parameters or {})
        if content_type:
            params["content_type"] = content_type
        if params:
            body["parameters"] = params
        out = self._req(
            "POST", f"{ML}/_predict/text_embedding/{model_id}", body, what="predict", model=model_id
        )
        # a local model answers one result per text, a remote one one result holding every vector
        vectors = [v for r in out.get("inference_results") or [] for v in _vectors(r)]
        if len(vectors) != len(texts):
            raise MLCommonsError(
                f"model {model_id}: {len(texts)} texts sent, {len(vectors)} vectors returned"
            )
        return Embeddings(vectors, model_id)

    def embed_remote(self, model_id: str, texts: Sequence[str], parameters: dict[str, Any]) -> Embeddings:
        """Vectors from a remote model, its connector's parameters set for this request (e.g.
        ``input_type``), which the text-embedding predict does not pass through."""
        body = {"parameters": {**parameters, "input": list(texts)}}
        out = self._req("POST", f"{ML}/models/{model_id}/_predict", body, what="predict", model=model_id)
        vectors = [v for r in out.get("inference_results") or [] for v in _vectors(r)]
        if len(vectors) != len(texts):
            raise MLCommonsError(
                f"model {model_id}: {len(texts)} texts sent, {len(vectors)} vectors returned"
            )
        return Embeddings(vectors, model_id)

    def similarity(self, model_id: str, question: str, texts: Sequence[str]) -> list[float]:
        """A TEXT_SIMILARITY model's score of (question, text) for each text, in order."""
        body = {"query_text": question, "text_docs": list(texts)}
        out = self._req(
            "POST", f"{ML}/_predict/TEXT_SIMILARITY/{model_id}", body, what="rerank", model=model_id
        )
        scores = [float(v[0]) for r in out.get("inference_results") or [] for v in _vectors(r)]
        if len(scores) != len(texts):
            raise MLCommonsError(f"model {model_id}: {len(texts)} texts sent, {len(scores)} scores returned")
        return scores

    def predict_raw(self, model_id: str, body: dict[str, Any]) -> dict[str, Any]:
        return self._req("POST", f"{ML}/models/{model_id}/_predict", body, what="predict", model=model_id)

    def _label(self, model_id: str) -> str:
        try:
            return self.get(model_id).label
        except MLCommonsError:
            return model_id


def _vectors(result: dict[str, Any]) -> list[list[float]]:
    found = [[float(x) for x in o["data"]] for o in result.get("output") or [] if "data" in o]
    if not found:
        raise MLCommonsError(f"ml-commons answered without an embedding: {str(result)[:200]}")
    return found


__all__ = ["CHUNK_BYTES", "MLCommons", "MLCommonsError", "ModelMissing", "ModelNotDeployed"]
