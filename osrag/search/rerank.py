"""Cross-encoder reranking of the fused candidates (20–50 of them, never the corpus).

Two backends run the same model: ``torch`` (the Hugging Face model as loaded by
sentence-transformers) and ``onnx`` (the same model exported once to ONNX and run
by ONNX Runtime, optionally with int8 dynamic quantisation), which is several times
faster on a small CPU. Both share one input path, so a backend changes speed, not
what the model reads:

* the question is kept whole and the passage is cut to fit ``max_length`` (the
  model's own limit when unset); only a question longer than half the limit is cut
  too, so the passage keeps at least half of the room;
* pairs are scored in batches of similar length, so a short pair is not padded to
  the length of the longest one;
* only the first ``depth`` candidates are scored; the rest keep their fused order
  after them (``RerankResult.order``);
* with a time budget (``budget_ms``), candidates are scored in fused order, a batch at a
  time, while the next batch is expected to end before the deadline; the unscored rest
  keep their fused order (``RerankResult.scored`` says how many were scored).

Models load once per process on first use; an export is cached on disk under
``models_dir``. If the model cannot be loaded or run, ``RerankUnavailable`` says why
and the caller keeps the fused order.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from osrag.errors import ModelError
from osrag.reranker_loading import LoadedModel, RerankUnavailable, load_reranker_model, one_line

if TYPE_CHECKING:
    from osrag.settings import Settings


# ------------------------------------------------------------------ pure parts
def pair_budget(q_len: int, p_len: int, max_length: int, specials: int) -> tuple[int, int]:
    """Tokens kept of (question, passage) so that the pair fits ``max_length``.

    The question is what the passage is judged against, so it is kept whole and the passage
    loses its tail. Only a question longer than half the room is cut (to half), so that a
    pasted paragraph as a question cannot leave the passage nothing; the cut depends on the
    question alone, so every pair of one search reads the same question.
    """
    room = max_length - specials
    if room < 2:
        raise ValueError(f"max_length {max_length} leaves no room for a pair ({specials} special tokens)")
    q_keep = min(q_len, room // 2)
    return q_keep, min(p_len, room - q_keep)


def length_batches(lengths: Sequence[int], batch_size: int) -> list[list[int]]:
    """Indices grouped into batches of similar length (longest first), so padding is small.

    Sorting is stable: equal lengths keep their input order, so the batches are deterministic.
    """
    if batch_size < 1:
        raise ValueError(f"batch_size must be at least 1, got {batch_size}")
    order = sorted(range(len(lengths)), key=lambda i: -lengths[i])
    return [order[i : i + batch_size] for i in range(0, len(order), batch_size)]


def depth_cut(n: int, depth: int | None) -> int:
    """How many of ``n`` candidates are scored: the first ``depth`` (all when None)."""
    if depth is not None and depth < 1:
        raise ValueError(f"rerank depth must be at least 1, got {depth}")
    return n if depth is None else min(n, depth)


def rerank_order(head_scores: Sequence[float], n: int) -> list[int]:
    """Final order of ``n`` candidates: the scored head by score (ties keep their fused order),
    then the unscored tail in its fused order."""
    head = sorted(range(len(head_scores)), key=lambda i: (-head_scores[i], i))
    return head + list(range(len(head_scores), n))


@dataclass(frozen=True)
class RerankResult:
    """Scores per candidate (``None`` past the depth), whether a scored passage was cut to
    ``max_length``, and the order to show the candidates in (indices into the input)."""

    scores: list[float | None]
    truncated: list[bool]
    max_length: int | None
    order: list[int] = field(default_factory=list)
    #: How many candidates (a prefix in fused order) the model scored.
    scored: int = 0
    #: The time budget stopped the scoring before the depth was reached.
    out_of_time: bool = False


# ------------------------------------------------------------------ the reranker
class Reranker:
    """Scores (question, passage) pairs with one cross-encoder; loads it on first use."""

    def __init__(
        self,
        model_name: str,
        device: str = "cpu",
        batch_size: int = 16,
        *,
        backend: str = "torch",
        quantize: str = "none",
        max_length: int | None = None,
        depth: int | None = None,
        models_dir: Path | None = None,
        budget_ms: float | None = None,
        cluster_client: Any | None = None,
    ) -> None:
        if budget_ms is not None and budget_ms <= 0:
            raise ValueError(f"rerank budget must be a positive number of milliseconds, got {budget_ms}")
        self.budget_ms = budget_ms
        self.model_name = model_name
        self.device = device
        self.batch_size = batch_size
        self.backend = backend
        self.quantize = quantize
        self.max_length = max_length
        self.depth = depth
        self.models_dir = models_dir
        self._model: LoadedModel | None = None
        self._load_error: RerankUnavailable | None = None
        # ml:NAME / ml-id:ID: a TEXT_SIMILARITY model in the cluster's ml-commons, reached through
        # the client this callable returns; nothing is loaded here.
        self.cluster_client = cluster_client
        self._cluster_model_id: str | None = None

    @property
    def where(self) -> str:
        return "cluster" if self.model_name.startswith(("ml:", "ml-id:")) else "client"

    def _score_in_cluster(self, question: str, texts: Sequence[str]) -> RerankResult:
        from osrag.mlcommons.blueprints import parse_ref
        from osrag.mlcommons.client import MLCommons

        if self.cluster_client is None:
            raise RerankUnavailable(
                f"reranker {self.model_name!r}: a model in the cluster needs a connection"
            )
        head = depth_cut(len(texts), self.depth)
        try:
            ml = MLCommons(self.cluster_client())
            if self._cluster_model_id is None:
                self._cluster_model_id = ml.find(parse_ref(self.model_name)).model_id
            head_scores = ml.similarity(self._cluster_model_id, question, list(texts[:head]))
        except ModelError as exc:
            raise RerankUnavailable(f"reranker {self.model_name!r} failed: {one_line(exc)}") from exc
        tail = len(texts) - head
        return RerankResult(
            [*head_scores, *([None] * tail)],
            [False] * len(texts),
            None,
            rerank_order(head_scores, len(texts)),
            scored=head,
        )

    @classmethod
    def from_settings(cls, settings: Settings) -> Reranker:
        return cls(
            settings.reranker_model,
            settings.device,
            settings.rerank_batch_size,
            backend=settings.rerank_backend,
            quantize=settings.rerank_quantize,
            max_length=settings.rerank_max_length,
            depth=settings.rerank_depth,
            models_dir=settings.models_dir,
            budget_ms=settings.rerank_budget_ms,
            cluster_client=_client_factory(settings),
        )

    @property
    def model(self) -> LoadedModel:
        # A failed load is remembered: with a hub name and no network, every search would
        # otherwise wait for the same failure again.
        if self._load_error is not None:
            raise self._load_error
        if self._model is None:
            try:
                self._model = load_reranker_model(
                    self.model_name,
                    self.device,
                    self.backend,
                    self.quantize,
                    str(self.models_dir) if self.models_dir else None,
                )
            except RerankUnavailable as exc:
                self._load_error = exc
                raise
        return self._model

    def effective_max_length(self, model: LoadedModel) -> int:
        """The configured limit, never above the model's own (positions past it do not exist)."""
        limits = [x for x in (self.max_length, model.model_max_length) if x]
        return min(limits) if limits else 512

    def score(self, question: str, texts: Sequence[str], budget_ms: float | None = None) -> RerankResult:
        """Scores of the first ``depth`` texts (in their fused order) and the order to show them in.

        ``budget_ms`` (default: the reranker's own ``budget_ms``) is a deadline counted from when
        the loaded model starts on this question: see the module docstring."""
        if not texts:
            return RerankResult([], [], None, [])
        if self.where == "cluster":
            return self._score_in_cluster(question, texts)
        head = depth_cut(len(texts), self.depth)
        model = self.model
        budget = self.budget_ms if budget_ms is None else budget_ms
        deadline = None if budget is None else time.perf_counter() + budget / 1000.0
        try:
            max_len = self.effective_max_length(model)
            head_scores, head_trunc = self._score_pairs(
                model, question, list(texts[:head]), max_len, deadline=deadline
            )
        except Exception as exc:
            raise RerankUnavailable(f"reranker {self.model_name!r} failed: {one_line(exc)}") from exc
        tail = len(texts) - len(head_scores)
        return RerankResult(
            [*head_scores, *([None] * tail)],
            [*head_trunc, *([False] * tail)],
            max_len,
            rerank_order(head_scores, len(texts)),
            scored=len(head_scores),
            out_of_time=len(head_scores) < head,
        )

    def _score_pairs(
        self, model: LoadedModel, question: str, texts: list[str], max_len: int, deadline: float | None = None
    ) -> tuple[list[float], list[bool]]:
        """Scores of ``texts``; with a ``deadline`` (``time.perf_counter``), of the longest prefix
        of them whose batches were expected to end in time (batches of consecutive texts)."""
        tok = model.tokenizer
        specials = tok.num_special_tokens_to_add(pair=True)
        q = tok(question, add_special_tokens=False, return_offsets_mapping=True)
        q_len = len(q["input_ids"])
        p_lens = [len(ids) for ids in tok(texts, add_special_tokens=False)["input_ids"]]
        budgets = [pair_budget(q_len, p, max_len, specials) for p in p_lens]
        truncated = [pk < p for (_, pk), p in zip(budgets, p_lens)]
        q_keep = budgets[0][0] if budgets else q_len
        if q_keep < q_len:  # a very long question: cut at a token boundary, the rest of the text dropped
            question = question[: q["offset_mapping"][q_keep - 1][1]] if q_keep else ""
        scores = np.zeros(len(texts), dtype=np.float64)
        lengths = [qk + pk for qk, pk in budgets]
        if deadline is None:
            batches = length_batches(lengths, self.batch_size)
        else:  # fused order, so that whatever is scored in time is the head of the list
            batches = [
                list(range(i, min(i + self.batch_size, len(texts))))
                for i in range(0, len(texts), self.batch_size)
            ]
        done, spent, per_pair = 0, 0.0, 0.0
        for batch in batches:
            if deadline is not None:
                now = time.perf_counter()
                if now + per_pair * len(batch) > deadline:
                    break
            t0 = time.perf_counter()
            enc = tok(
                [question] * len(batch),
                [texts[i] for i in batch],
                truncation="only_second",
                max_length=max_len,
                padding=True,
                return_tensors="np",
            )
            logits = model.run(dict(enc))
            col = logits.reshape(len(batch), -1)[:, -1].astype(np.float64)
            scores[batch] = 1.0 / (1.0 + np.exp(-col)) if model.activation == "sigmoid" else col
            done += len(batch)
            spent += time.perf_counter() - t0
            per_pair = spent / done  # what the next batch is expected to cost, per pair
        if deadline is not None:
            return [float(s) for s in scores[:done]], truncated[:done]
        return [float(s) for s in scores], truncated


def _client_factory(settings: Settings) -> Any:
    def make() -> Any:
        from osrag.connection import make_client

        return make_client(settings)

    return make
