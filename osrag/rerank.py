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

import functools
import hashlib
import json
import os
import re
import shutil
import tempfile
import threading
import time
import warnings
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

import numpy as np

from osrag.errors import ModelError

if TYPE_CHECKING:
    from osrag.settings import Settings

Backend = Literal["torch", "onnx"]
Quantize = Literal["none", "int8"]
BACKENDS: tuple[str, ...] = ("torch", "onnx")
QUANTIZE: tuple[str, ...] = ("none", "int8")
#: Bumped when the exported files change shape, so an old export is rebuilt, not reused.
ONNX_EXPORT_FORMAT = 2
_EXPORT_LOCK = threading.Lock()


class RerankUnavailable(ModelError):
    """The cross-encoder cannot be loaded or run; results keep the fused order."""


def _one_line(exc: BaseException) -> str:
    return f"{type(exc).__name__}: {(str(exc).splitlines() or [''])[0][:200]}"


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


# ------------------------------------------------------------------ models
@dataclass
class _Loaded:
    """A model ready to score: a tokenizer, a function from a tokenised batch to logits,
    and the activation the model was trained with."""

    tokenizer: Any
    run: Any  # Callable[[dict[str, np.ndarray]], np.ndarray]
    activation: str  # "sigmoid" | "identity"
    model_max_length: int | None
    backend: str
    quantize: str


def _activation_name(ce: Any) -> str:
    fn = getattr(ce, "activation_fn", None)
    name = type(fn).__name__ if fn is not None else "Identity"
    if name == "Sigmoid":
        return "sigmoid"
    if name == "Identity":
        return "identity"
    raise RerankUnavailable(f"unsupported cross-encoder activation {name!r} (Sigmoid or Identity only)")


def _model_limit(ce: Any, tokenizer: Any) -> int | None:
    """The model's input limit in tokens (``max_seq_length`` in sentence-transformers >= 5; ``max_length``
    before, now a deprecated alias that warns on every read), else the tokenizer's."""
    value = getattr(ce, "max_seq_length", None) or getattr(ce, "max_length", None)
    if value:
        return int(value)
    value = getattr(tokenizer, "model_max_length", None)
    return int(value) if value and value < 1_000_000 else None


@functools.lru_cache(maxsize=2)
def load_cross_encoder(name: str, device: str = "cpu") -> Any:
    """The sentence-transformers CrossEncoder, once per process (local files first)."""
    try:
        from sentence_transformers import CrossEncoder

        from osrag.model_loading import load_pretrained, quiet_transformers

        quiet_transformers()
        return load_pretrained(CrossEncoder, name, device)
    except Exception as exc:
        raise RerankUnavailable(f"cannot load reranker {name!r}: {_one_line(exc)}") from exc


def _torch_model(name: str, device: str) -> _Loaded:
    import torch

    ce = load_cross_encoder(name, device)
    hf = ce.model
    hf.eval()
    dev = next(hf.parameters()).device

    def run(batch: dict[str, np.ndarray]) -> np.ndarray:
        if hf.training:  # someone switched dropout on (a fine-tune, an exporter): scores would be random
            hf.eval()
        with torch.inference_mode():
            out = hf(**{k: torch.from_numpy(v).to(dev) for k, v in batch.items()})
        return out.logits.float().cpu().numpy()

    tok = ce.tokenizer
    return _Loaded(tok, run, _activation_name(ce), _model_limit(ce, tok), "torch", "none")


def _export_key(name: str) -> str:
    """A cache key for an export: the name, and for a local directory its weights' size and time,
    so a model rebuilt at the same path is exported again."""
    parts = [name]
    path = Path(name)
    if path.is_dir():
        for f in sorted(path.iterdir()):
            if f.suffix in (".safetensors", ".bin", ".json"):
                st = f.stat()
                parts.append(f"{f.name}:{st.st_size}:{st.st_mtime_ns}")
    parts.append(f"format{ONNX_EXPORT_FORMAT}")
    slug = re.sub(r"[^A-Za-z0-9._-]+", "-", path.name or name)[:60]
    return f"{slug}-{hashlib.sha256(chr(0).join(parts).encode()).hexdigest()[:12]}"


def export_onnx(name: str, target: Path, device: str = "cpu") -> Path:
    """Export a cross-encoder to ``target`` (``model.onnx``, ``model_int8.onnx``, its tokenizer and
    ``osrag-onnx.json``), once: an existing complete export is reused. Written to a temporary
    directory and renamed, so a crash never leaves half an export that looks complete."""
    marker = target / "osrag-onnx.json"
    if marker.exists():
        return target
    with _EXPORT_LOCK:
        if marker.exists():
            return target
        import torch
        from onnxruntime.quantization import QuantType, quantize_dynamic

        ce = load_cross_encoder(name, device)
        tok = ce.tokenizer
        hf = ce.model.to("cpu").eval()
        names = [n for n in ("input_ids", "attention_mask", "token_type_ids") if n in tok.model_input_names]
        sample = tok(["вопрос", "другой вопрос"], ["текст", "ещё текст"], padding=True, return_tensors="pt")
        args = tuple(sample[n] for n in names)
        axes = {n: {0: "batch", 1: "sequence"} for n in names}
        axes["logits"] = {0: "batch"}

        class _Wrap(torch.nn.Module):
            def __init__(self) -> None:
                super().__init__()
                self.hf = hf

            def forward(self, *inputs: Any) -> Any:
                return self.hf(**dict(zip(names, inputs))).logits

        wrap = _Wrap().eval()  # a new module is in training mode; see below
        target.parent.mkdir(parents=True, exist_ok=True)
        tmp = Path(tempfile.mkdtemp(prefix=target.name + ".tmp", dir=target.parent))
        try:
            kwargs: dict[str, Any] = {
                "input_names": names,
                "output_names": ["logits"],
                "dynamic_axes": axes,
                "opset_version": 17,
            }
            with warnings.catch_warnings():  # tracer notes on branches that are constant for an encoder
                warnings.simplefilter("ignore")
                try:  # the TorchScript exporter: no extra dependency, dynamic batch and sequence axes
                    torch.onnx.export(wrap, args, str(tmp / "model.onnx"), dynamo=False, **kwargs)
                except TypeError:  # torch before the dynamo switch
                    torch.onnx.export(wrap, args, str(tmp / "model.onnx"), **kwargs)
            # The exporter restores the wrapper's training flag on exit, recursively: a wrapper left in
            # training mode would switch dropout on in the shared torch model (eval() above prevents it;
            # this makes sure).
            hf.eval()
            fused = _fuse_transformer_ops(tmp / "model.onnx", hf.config)
            quantize_dynamic(
                str(tmp / "model.onnx"),
                str(tmp / "model_int8.onnx"),
                weight_type=QuantType.QInt8,
                # fused ops (com.microsoft domain) have no shape inference: their outputs are float
                extra_options={"DefaultTensorType": 1},  # onnx.TensorProto.FLOAT
            )
            tok.save_pretrained(str(tmp))
            info = {
                "source": name,
                "inputs": names,
                "activation": _activation_name(ce),
                "max_length": _model_limit(ce, tok),
                "torch": torch.__version__,
                "fused": fused,
                "format": ONNX_EXPORT_FORMAT,
            }
            (tmp / "osrag-onnx.json").write_text(json.dumps(info, indent=2), encoding="utf-8")
            try:
                tmp.rename(target)
            except OSError:  # another process finished the same export first: keep theirs
                if not marker.exists():
                    raise
        finally:
            shutil.rmtree(tmp, ignore_errors=True)
    return target


def _fuse_transformer_ops(path: Path, config: Any) -> str | None:
    """Fuse attention, layer norm and GELU (ONNX Runtime's transformer optimizer) in place, before
    quantising: fewer, larger kernels on CPU. Returns what was fused, or None when the graph is left
    as exported (an architecture the optimizer does not know); the export is correct either way."""
    try:
        from onnxruntime.transformers.optimizer import optimize_model

        heads = int(getattr(config, "num_attention_heads", 0) or 0)
        hidden = int(getattr(config, "hidden_size", 0) or 0)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            optimized = optimize_model(str(path), model_type="bert", num_heads=heads, hidden_size=hidden)
        optimized.save_model_to_file(str(path))
        fused = {k: v for k, v in optimized.get_fused_operator_statistics().items() if v}
        return ", ".join(f"{k}:{v}" for k, v in sorted(fused.items())) or "none"
    except Exception:
        return None


def _onnx_model(name: str, device: str, quantize: str, models_dir: Path | None) -> _Loaded:
    import onnxruntime as ort
    from transformers import AutoTokenizer

    base = models_dir if models_dir is not None else Path(tempfile.gettempdir()) / f"osrag-{os.getuid()}"
    target = export_onnx(name, base / "rerank-onnx" / _export_key(name), device)
    info = json.loads((target / "osrag-onnx.json").read_text(encoding="utf-8"))
    opts = ort.SessionOptions()
    opts.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
    opts.intra_op_num_threads = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else 0
    # No busy-waiting between runs: the threads would otherwise spin on the cores that torch (the
    # embedder) and the HTTP client need in the same process, and slow both down.
    opts.add_session_config_entry("session.intra_op.allow_spinning", "0")
    file = "model_int8.onnx" if quantize == "int8" else "model.onnx"
    session = ort.InferenceSession(str(target / file), opts, providers=["CPUExecutionProvider"])
    inputs = list(info["inputs"])

    def run(batch: dict[str, np.ndarray]) -> np.ndarray:
        feed = {k: np.ascontiguousarray(batch[k], dtype=np.int64) for k in inputs}
        return np.asarray(session.run(["logits"], feed)[0], dtype=np.float32)

    tok = AutoTokenizer.from_pretrained(str(target))
    return _Loaded(tok, run, info["activation"], info.get("max_length"), "onnx", quantize)


@functools.lru_cache(maxsize=4)
def load_reranker_model(
    name: str,
    device: str = "cpu",
    backend: str = "torch",
    quantize: str = "none",
    models_dir: str | None = None,
) -> _Loaded:
    """A model ready to score, once per process and configuration."""
    if backend not in BACKENDS:
        raise RerankUnavailable(f"unknown rerank backend {backend!r}; expected one of {', '.join(BACKENDS)}")
    if quantize not in QUANTIZE:
        raise RerankUnavailable(
            f"unknown rerank quantisation {quantize!r}; expected one of {', '.join(QUANTIZE)}"
        )
    if backend == "torch" and quantize != "none":
        raise RerankUnavailable("int8 quantisation needs the onnx rerank backend (OSRAG_RERANK_BACKEND=onnx)")
    try:
        if backend == "torch":
            return _torch_model(name, device)
        return _onnx_model(name, device, quantize, Path(models_dir) if models_dir else None)
    except RerankUnavailable:
        raise
    except ImportError as exc:
        raise RerankUnavailable(
            f"rerank backend {backend!r} needs onnxruntime and onnx (pip install 'osrag[onnx]'): {_one_line(exc)}"
        ) from exc
    except Exception as exc:
        raise RerankUnavailable(f"cannot load reranker {name!r} ({backend}): {_one_line(exc)}") from exc


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
        self._model: _Loaded | None = None
        self._load_error: RerankUnavailable | None = None

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
        )

    @property
    def model(self) -> _Loaded:
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

    def effective_max_length(self, model: _Loaded) -> int:
        """The configured limit, never above the model's own (positions past it do not exist)."""
        limits = [x for x in (self.max_length, model.model_max_length) if x]
        return min(limits) if limits else 512

    def score(self, question: str, texts: Sequence[str], budget_ms: float | None = None) -> RerankResult:
        """Scores of the first ``depth`` texts (in their fused order) and the order to show them in.

        ``budget_ms`` (default: the reranker's own ``budget_ms``) is a deadline counted from when
        the loaded model starts on this question: see the module docstring."""
        if not texts:
            return RerankResult([], [], None, [])
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
            raise RerankUnavailable(f"reranker {self.model_name!r} failed: {_one_line(exc)}") from exc
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
        self, model: _Loaded, question: str, texts: list[str], max_len: int, deadline: float | None = None
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
