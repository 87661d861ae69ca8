"""Questions over the bench corpus (``corpus``), each with its relevant chunk, and the named
near-duplicate stress case (copies of chunks, digits varied, vectors jittered)."""

from __future__ import annotations

import dataclasses
import functools
import hashlib
import re
from collections.abc import Iterator, Sequence

import numpy as np
from corpus import (
    QUESTION_STARTS,
    SEED,
    build_document,
    docs_for,
    navec_model,
    section_count,
    vocabulary,
)

from osrag.chunking import Chunk, Document


# ------------------------------------------------------------------ queries
@dataclasses.dataclass(frozen=True)
class BenchQuery:
    qid: str
    text: str
    kind: str  # "keywords" | "paraphrase" | "identifier"
    chunk_id: str  # the relevant chunk
    doc_id: str
    heading_path: tuple[str, ...]  # of the relevant section (without the title)


@functools.lru_cache(maxsize=1)
def _neighbour_table(seed: int) -> tuple[np.ndarray, np.ndarray]:
    """Unit vectors of the content vocabulary, for paraphrase by nearest neighbour."""
    v = vocabulary(seed)
    nv = navec_model()
    vecs = np.stack([nv.pq[int(i)] for i in v.navec_ids]).astype(np.float32)
    vecs /= np.maximum(np.linalg.norm(vecs, axis=1, keepdims=True), 1e-9)
    return vecs, v.navec_ids


def _neighbour(word: str, seed: int, rng: np.random.Generator) -> str:
    v = vocabulary(seed)
    try:
        r = v.words.index(word)
    except ValueError:
        return word
    vecs, _ = _neighbour_table(seed)
    sims = vecs @ vecs[r]
    sims[r] = -1.0
    top = np.argpartition(-sims, 5)[:5]
    return v.words[int(top[int(rng.integers(0, 5))])]


def make_queries(n_queries: int, n_chunks: int, seed: int = SEED) -> list[BenchQuery]:
    """``n_queries`` questions, each with one relevant chunk among the first ``n_chunks``.

    A third each: the chunk's rarer words (keywords), the same with half of them replaced by a
    navec neighbour (paraphrase), and the chunk's identifier with a few words (identifier; falls
    back to keywords when the chunk has none). Chunk ids assume one chunk per section, which
    the section lengths guarantee (tests/unit/test_bench_corpus.py checks it).
    """
    n_docs = docs_for(n_chunks, seed)
    sizes = [section_count(seed, i) for i in range(n_docs)]
    full = n_docs - 1 if sum(sizes) > n_chunks else n_docs  # the last doc may be cut
    rng = np.random.default_rng([seed, 2])
    picks = rng.choice(max(full, 1), size=min(n_queries, max(full, 1)), replace=False)
    out: list[BenchQuery] = []
    for qn, i in enumerate(sorted(int(x) for x in picks)):
        doc, sections = build_document(i, seed)
        j = int(rng.integers(0, len(sections)))
        sec = sections[j]
        kind = ("keywords", "paraphrase", "identifier")[qn % 3]
        pool = list(sec.rare_words[: max(6, len(sec.rare_words) // 4)])
        k = min(len(pool), int(rng.integers(3, 6)))
        words = [pool[int(x)] for x in rng.choice(len(pool), k, replace=False)] if pool else []
        if kind == "paraphrase":
            words = [_neighbour(w, seed, rng) if rng.random() < 0.5 else w for w in words]
        if kind == "identifier":
            if sec.identifiers:
                words = [sec.identifiers[0], *words[:2]]
            else:
                kind = "keywords"
        start = QUESTION_STARTS[int(rng.integers(0, len(QUESTION_STARTS)))]
        text = " ".join(x for x in (start, *words) if x)
        out.append(BenchQuery(f"s{qn:04d}", text, kind, f"{doc.doc_id}:{j}", doc.doc_id, sec.heading_path))
    return out


# ------------------------------------------------------------------ the near-duplicate stress case
_DIGITS = re.compile(r"\d+")
#: Norm of the noise added to a copy's vector before renormalising (cosine to the original ≈ 0.995).
NEAR_DUPLICATE_NOISE = 0.1


def vary_digits(text: str, copy: int) -> str:
    """Copy ``copy`` of a text: every digit run replaced by another of the same length; copy 0 verbatim."""
    if copy == 0 or not text:
        return text

    def swap(m: re.Match[str]) -> str:
        run = m.group(0)
        h = int(hashlib.blake2b(f"{copy}:{run}".encode(), digest_size=8).hexdigest(), 16)
        return str(h % 10 ** len(run)).zfill(len(run))

    return _DIGITS.sub(swap, text)


def near_duplicates(
    base: Sequence[tuple[Document, Chunk, np.ndarray]], n: int, seed: int = SEED
) -> Iterator[tuple[Document, Chunk, np.ndarray]]:
    """NEAR-DUPLICATE STRESS CASE, not a realistic corpus: ``n`` chunks cycling over ``base``, copy
    ``i`` with doc ids ``{doc_id}~{i}``, digits varied and the vector jittered (cosine ≈ 0.99 between
    copies). The worst case for HNSW and for dedup before the candidate cut."""
    rng = np.random.default_rng([seed, 3])
    if not base:
        return
    dim = len(base[0][2])
    sigma = NEAR_DUPLICATE_NOISE / np.sqrt(dim)
    for k in range(n):
        copy, j = divmod(k, len(base))
        doc, c, vec = base[j]
        new_id = f"{doc.doc_id}~{copy}"
        v = np.asarray(vec, dtype=np.float64)
        if copy:
            v = v + rng.standard_normal(dim) * sigma
            v /= np.linalg.norm(v)

        def sid(s: str | None, old: str = doc.doc_id, new: str = new_id) -> str | None:
            return new + s[len(old) :] if s and s.startswith(old + "#") else s

        d2 = dataclasses.replace(
            doc,
            doc_id=new_id,
            title=vary_digits(doc.title, copy),
            text=vary_digits(doc.text, copy),
            metadata={**doc.metadata, "doc_id": new_id},
        )
        c2 = dataclasses.replace(
            c,
            doc_id=new_id,
            text=vary_digits(c.text, copy),
            body=vary_digits(c.body, copy),
            heading_path=tuple(vary_digits(h, copy) for h in c.heading_path),
            section_id=sid(c.section_id) or c.section_id,
            parent_section_id=sid(c.parent_section_id),
        )
        yield d2, c2, v.astype(np.float32)
