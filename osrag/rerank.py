"""Cross-encoder reranking of the fused candidates (20–50 of them, never the corpus).

The model loads once per process on first use. Pairs longer than the model's
input limit are truncated by the model; we count tokens first so the answer can
say which candidates were judged on a truncated text. If the model cannot be
loaded, ``RerankUnavailable`` says why and the caller keeps the fused order.
"""

from __future__ import annotations

import functools
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from osrag.errors import ModelError


class RerankUnavailable(ModelError):
    """The cross-encoder cannot be loaded or run; results keep the fused order."""


@functools.lru_cache(maxsize=2)
def load_cross_encoder(name: str, device: str = "cpu") -> Any:
    try:
        from sentence_transformers import CrossEncoder

        from osrag.embedding import load_pretrained, quiet_transformers

        quiet_transformers()
        return load_pretrained(CrossEncoder, name, device)
    except Exception as exc:
        raise RerankUnavailable(
            f"cannot load reranker {name!r}: {type(exc).__name__}: {(str(exc).splitlines() or [''])[0][:200]}"
        ) from exc


@dataclass(frozen=True)
class RerankResult:
    scores: list[float]
    truncated: list[bool]
    max_length: int | None


class Reranker:
    def __init__(self, model_name: str, device: str = "cpu", batch_size: int = 16) -> None:
        self.model_name = model_name
        self.device = device
        self.batch_size = batch_size
        self._model: Any | None = None
        self._load_error: RerankUnavailable | None = None

    @property
    def model(self) -> Any:
        # A failed load is remembered: with a hub name and no network, every search would
        # otherwise wait for the same failure again.
        if self._load_error is not None:
            raise self._load_error
        if self._model is None:
            try:
                self._model = load_cross_encoder(self.model_name, self.device)
            except RerankUnavailable as exc:
                self._load_error = exc
                raise
        return self._model

    def score(self, question: str, texts: Sequence[str]) -> RerankResult:
        if not texts:
            return RerankResult([], [], None)
        model = self.model
        try:
            raw = model.predict(
                [(question, t) for t in texts],
                batch_size=self.batch_size,
                show_progress_bar=False,
                convert_to_numpy=True,
            )
            scores = [float(x) for x in (raw.reshape(len(texts), -1)[:, -1] if raw.ndim > 1 else raw)]
            max_len = _max_length(model)
            truncated = [False] * len(texts)
            tok = getattr(model, "tokenizer", None)
            if tok is not None and max_len:
                for i, t in enumerate(texts):
                    n = len(
                        tok(question, t, add_special_tokens=True, truncation=False, verbose=False)[
                            "input_ids"
                        ]
                    )
                    truncated[i] = n > max_len
        except Exception as exc:
            first_line = (str(exc).splitlines() or [""])[0][:200]
            raise RerankUnavailable(
                f"reranker {self.model_name!r} failed: {type(exc).__name__}: {first_line}"
            ) from exc
        return RerankResult(scores, truncated, int(max_len) if max_len else None)


def _max_length(model: Any) -> int | None:
    """The model's input limit in tokens (``max_seq_length`` in sentence-transformers >= 5; ``max_length``
    before, now a deprecated alias that warns on every read), else the tokenizer's."""
    value = getattr(model, "max_seq_length", None) or getattr(model, "max_length", None)
    if value:
        return int(value)
    value = getattr(getattr(model, "tokenizer", None), "model_max_length", None)
    return int(value) if value and value < 1_000_000 else None
