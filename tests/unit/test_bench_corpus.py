"""The bench corpus generator (bench/corpus.py): deterministic, realistic in shape, one chunk per section."""

from __future__ import annotations

import re
import sys
from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("natasha", reason="the bench corpus draws its words from navec inside natasha")

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "bench"))

import corpus
import corpus_index
import corpus_queries

from osrag.chunking import ChunkingConfig, chunk_document
from osrag.ingest.prepared import document_version
from osrag.store.versions import version_key


def test_a_document_depends_only_on_seed_and_index() -> None:
    a, secs_a = corpus.build_document(7)
    b, secs_b = corpus.build_document(7)
    assert a == b and secs_a == secs_b
    assert corpus.build_document(7, seed=corpus.SEED + 1)[0].text != a.text
    assert corpus.build_document(8)[0].text != a.text
    # a corpus is a prefix of a larger one
    small = [d.doc_id for d in corpus.iter_documents(5)]
    assert small == [d.doc_id for d in corpus.iter_documents(9)][:5]


def test_documents_look_like_a_russian_knowledge_base() -> None:
    docs = [corpus.build_document(i) for i in range(60)]
    text = "\n".join(d.text for d, _ in docs)
    assert all(d.text.startswith("# ") for d, _ in docs)
    assert "\n## " in text and "\n### " in text and "\n- " in text
    words = re.findall(r"[а-яё]+", text.lower())
    assert len(words) > 60 * 300
    counts = np.sort(np.unique(words, return_counts=True)[1])[::-1]
    assert counts[0] > 20 * counts[200]  # Zipf-like: a few words are very frequent
    assert len(counts) > 3000  # ...and the vocabulary is large
    assert re.search(r"\b[A-Z]+-[A-Z]+\b", text)  # product codes
    assert re.search(r"\bv\d+\.\d+\.\d+\b", text) or re.search(r"\bSKU-\d{5}\b", text)
    metas = [d.metadata for d, _ in docs]
    assert {m["category"] for m in metas} <= set(corpus.CATEGORIES)
    assert len({m["tenant"] for m in metas}) > 1
    assert any("acl" in m for m in metas) and not all("acl" in m for m in metas)
    assert all(re.fullmatch(r"\d{4}-\d{2}-\d{2}", m["updated_at"]) for m in metas)


def test_the_real_chunker_makes_one_chunk_per_section() -> None:
    for i in range(120):
        doc, sections = corpus.build_document(i)
        chunks = chunk_document(doc, "markdown", ChunkingConfig(), corpus.navec_token_count)
        assert len(chunks) == len(sections) == corpus.section_count(corpus.SEED, i), doc.doc_id
        for c, s in zip(chunks, sections):
            assert c.heading_path == (doc.title, *s.heading_path)
            assert c.body == s.body
            assert 40 <= c.token_count <= 350


def test_iter_chunks_streams_exactly_n() -> None:
    chunks = list(corpus.iter_chunks(57))
    assert len(chunks) == 57
    assert len({c.chunk_id for _, c in chunks}) == 57
    assert corpus.docs_for(57) == len({d.doc_id for d, _ in chunks})


def test_queries_name_a_chunk_that_contains_their_words() -> None:
    n = 400
    queries = corpus_queries.make_queries(9, n)
    assert queries == corpus_queries.make_queries(9, n)
    by_id = {c.chunk_id: c for _, c in corpus.iter_chunks(n)}
    kinds = {q.kind for q in queries}
    assert "paraphrase" in kinds and "keywords" in kinds
    for q in queries:
        chunk = by_id[q.chunk_id]  # the relevant chunk is in the corpus of n chunks
        assert chunk.heading_path[1:] == q.heading_path
        words = [w for w in q.text.split() if w not in corpus.QUESTION_STARTS and w not in ("можно", "ли")]
        present = sum(w.lower() in chunk.text.lower() for w in words)
        if q.kind == "paraphrase":
            assert present >= 1 or len(words) <= 2
        else:
            assert present == len(words), (q, chunk.text[:200])


class _FakeEmbedder:
    """Hash-of-text vectors: distinctness of the generator's texts, without loading navec weights."""

    model_name = "test:hash"

    def count_tokens(self, text: str) -> int:
        return corpus.navec_token_count(text)

    def encode_passages(self, texts: list[str]) -> np.ndarray:
        out = np.stack([np.random.default_rng(abs(hash(t)) % 2**32).standard_normal(8) for t in texts])
        return (out / np.linalg.norm(out, axis=1, keepdims=True)).astype(np.float32)


def test_bulk_actions_have_the_ingest_shape() -> None:
    acts = list(corpus_index.bulk_actions(12, _FakeEmbedder(), "idx", "2026-12-01T00:00:00+00:00"))
    assert len(acts) == 12
    src = acts[0]["_source"]
    for key in (
        "chunk_id",
        "doc_id",
        "text",
        "body",
        "heading_path",
        "breadcrumb",
        "version_key",
        "embedding",
    ):
        assert key in src
    assert acts[0]["_id"] == f"{src['version_key']}:{src['ordinal']}"
    assert len({a["_id"] for a in acts}) == 12
    # Keyed as ingest keys versions (osrag.store.versions), not by a hash of the bench's own.
    doc = corpus.build_document(0)[0]
    version = document_version(doc, "markdown", ChunkingConfig(), _FakeEmbedder.model_name)
    assert src["doc_id"] == doc.doc_id and src["version_key"] == version_key(doc.doc_id, version)
    assert len({tuple(a["_source"]["embedding"]) for a in acts}) == 12


def test_near_duplicates_are_the_named_stress_case() -> None:
    base = list(corpus_index.iter_embedded(3, _FakeEmbedder()))
    copies = list(corpus_queries.near_duplicates(base, 7))
    assert [d.doc_id for d, _, _ in copies][:4] == [
        base[0][0].doc_id + "~0",
        base[1][0].doc_id + "~0",
        base[2][0].doc_id + "~0",
        base[0][0].doc_id + "~1",
    ]
    v0, v1 = copies[0][2], copies[3][2]
    assert 0.98 < float(v0 @ v1) < 1.0  # near, not equal
