"""Loading a cross-encoder for ``osrag.search.rerank``: the Hugging Face model as sentence-transformers
loads it (``torch``), or the same model exported once to ONNX and run by ONNX Runtime (``onnx``,
optionally int8-quantised; the export is cached under ``models_dir``). Either way the result is
a ``LoadedModel``: a tokenizer and a function from a tokenised batch to logits.

Both need the ``local-models`` extra (torch; ``onnx`` adds ONNX Runtime), imported only here and
only when a model loads. Whether a model can load is first asked of local facts
(``osrag.model_defaults``): a missing extra or a hub name that is not cached fails at once, with no
network wait, and any failure is remembered for the process.
"""

from __future__ import annotations

import functools
import hashlib
import json
import logging
import os
import re
import shutil
import tempfile
import threading
import warnings
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

import numpy as np

from osrag.errors import ModelError
from osrag.model_defaults import LOCAL_MODELS_EXTRA, why_not_loadable

log = logging.getLogger(__name__)

Backend = Literal["torch", "onnx"]
Quantize = Literal["none", "int8"]
BACKENDS: tuple[str, ...] = ("torch", "onnx")
QUANTIZE: tuple[str, ...] = ("none", "int8")
#: Bumped when the exported files change shape, so an old export is rebuilt, not reused.
ONNX_EXPORT_FORMAT = 2
_EXPORT_LOCK = threading.Lock()


class RerankUnavailable(ModelError):
    """The cross-encoder cannot be loaded or run; results keep the fused order."""


def one_line(exc: BaseException) -> str:
    """An error as one short line (its type and the first line of its message)."""
    return f"{type(exc).__name__}: {(str(exc).splitlines() or [''])[0][:200]}"


@dataclass
class LoadedModel:
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
        raise RerankUnavailable(f"cannot load reranker {name!r}: {one_line(exc)}") from exc


def _torch_model(name: str, device: str) -> LoadedModel:
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
    return LoadedModel(tok, run, _activation_name(ce), _model_limit(ce, tok), "torch", "none")


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


def _onnx_model(name: str, device: str, quantize: str, models_dir: Path | None) -> LoadedModel:
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
    return LoadedModel(tok, run, info["activation"], info.get("max_length"), "onnx", quantize)


#: Loads that failed in this process, by configuration: one attempt per process, then the same
#: error at once (a search never waits for a failure it has already seen).
_FAILED: dict[tuple[str, str, str, str, str | None], RerankUnavailable] = {}
_FAILED_LOCK = threading.Lock()


def load_reranker_model(
    name: str,
    device: str = "cpu",
    backend: str = "torch",
    quantize: str = "none",
    models_dir: str | None = None,
) -> LoadedModel:
    """A model ready to score, once per process and configuration; a failure is known once.

    A hub name that is not in the local cache (or a missing extra) fails at once, without trying
    the network: see ``osrag.model_defaults``. The first failure is logged once per process."""
    key = (name, device, backend, quantize, models_dir)
    known = _FAILED.get(key)
    if known is not None:
        raise known
    try:
        if backend in BACKENDS:
            extra = ("onnxruntime", "onnx") if backend == "onnx" else ()
            why = why_not_loadable(name, extra_modules=extra)
            if why is not None:
                raise RerankUnavailable(f"cannot load reranker {name!r}: {why}")
        return cached_reranker_model(name, device, backend, quantize, models_dir)
    except RerankUnavailable as exc:
        with _FAILED_LOCK:
            if key not in _FAILED:
                _FAILED[key] = exc
                log.warning("reranker off in this process: %s", exc)
        raise


def forget_reranker_models() -> None:
    """Drop the loaded models and the remembered failures (tests; a process that installed a model)."""
    cached_reranker_model.cache_clear()
    with _FAILED_LOCK:
        _FAILED.clear()


@functools.lru_cache(maxsize=4)
def cached_reranker_model(
    name: str,
    device: str = "cpu",
    backend: str = "torch",
    quantize: str = "none",
    models_dir: str | None = None,
) -> LoadedModel:
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
        extra = "onnx" if backend == "onnx" else LOCAL_MODELS_EXTRA
        raise RerankUnavailable(
            f"rerank backend {backend!r} needs the {extra} extra (pip install 'osrag[{extra}]'): {one_line(exc)}"
        ) from exc
    except Exception as exc:
        raise RerankUnavailable(f"cannot load reranker {name!r} ({backend}): {one_line(exc)}") from exc
