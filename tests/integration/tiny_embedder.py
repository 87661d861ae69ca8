"""A tiny text-embedding model the cluster_model tests build themselves: an ONNX graph that looks
up one random vector per WordPiece token (``last_hidden_state``; ml-commons mean-pools and
L2-normalises) and its ``tokenizer.json``. Its vocabulary holds e5's prefix words, so a prefix
added once too often (or not at all) changes the vector. Plumbing only: no quality is claimed."""

from __future__ import annotations

import hashlib
import json
import re
import zipfile
from collections.abc import Iterable
from pathlib import Path

import numpy as np

from osrag.mlcommons.blueprints import E5_PREFIXES, text_embedding_config
from osrag.mlcommons.records import LocalModelMeta

DIM = 16


def vocabulary(texts: Iterable[str]) -> list[str]:
    words: set[str] = {"passage", "query", ":"}
    for t in texts:
        words.update(w for w in re.findall(r"\w+|[^\w\s]", t.lower()) if len(w) < 100)
    return ["[PAD]", "[UNK]", "[CLS]", "[SEP]", *sorted(words)]


def graph(n_vocab: int) -> bytes:
    import onnx
    from onnx import TensorProto, helper, numpy_helper

    rng = np.random.default_rng(11)
    emb = numpy_helper.from_array(rng.normal(size=(n_vocab, DIM)).astype(np.float32), "E")
    nodes = [helper.make_node("Gather", ["E", "input_ids"], ["last_hidden_state"])]
    g = helper.make_graph(
        nodes,
        "tiny_embedder",
        [
            helper.make_tensor_value_info(x, TensorProto.INT64, ["batch", "sequence"])
            for x in ("input_ids", "attention_mask")
        ],
        [helper.make_tensor_value_info("last_hidden_state", TensorProto.FLOAT, ["batch", "sequence", DIM])],
        initializer=[emb],
    )
    model = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    onnx.checker.check_model(model)
    return model.SerializeToString()


def build(texts: Iterable[str], path: Path, name: str) -> LocalModelMeta:
    """The zip at ``path`` and the meta to register it under ``name`` (asymmetric, e5's prefixes)."""
    from tests.integration.test_cluster_rerank import _tokenizer

    vocab = vocabulary(texts)
    with zipfile.ZipFile(path, "w") as zf:
        zf.writestr("model.onnx", graph(len(vocab)))
        zf.writestr("tokenizer.json", json.dumps(_tokenizer(vocab), ensure_ascii=False))
    return LocalModelMeta(
        name,
        "TEXT_EMBEDDING",
        "ONNX",
        hashlib.sha256(path.read_bytes()).hexdigest(),
        path.stat().st_size,
        text_embedding_config(DIM, model_type="xlm-roberta", prefixes=E5_PREFIXES),
    )
