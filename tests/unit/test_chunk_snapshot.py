"""The chunks of the dialect fixtures, the chunking fixture and the golden corpus, read as ingest
reads them, stay exactly what they were: ids, spans, token counts and a hash of each text.

The snapshot (fixtures/chunking/snapshot.jsonl) was written by the reader and chunker as they were
before the ingest speed work of issue 23 (one parse per file where one serves, token counts by line):
those changes must not move a single chunk. Two counters: the default ``simple_token_count`` and a
Hugging Face tokenizer counted through ``count_tokens_with`` (a whitespace pre-tokenizer, so the
count goes by line). A deliberate change of chunking output regenerates the snapshot with
``python tests/unit/test_chunk_snapshot.py`` and says so in its commit.
"""

from __future__ import annotations

import functools
import hashlib
import json
import sys
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[2]
if __name__ == "__main__":
    sys.path.insert(0, str(REPO))

from osrag.chunking import ChunkingConfig, chunk_document  # noqa: E402
from osrag.chunking.model import simple_token_count  # noqa: E402
from osrag.embedding import count_tokens_with  # noqa: E402
from osrag.ingest.documents import ReadOptions, read_tree  # noqa: E402

FIXTURES = Path(__file__).parent / "fixtures"
TREES = (FIXTURES / "dialects", FIXTURES / "chunking", REPO / "golden" / "corpus")
SNAPSHOT = FIXTURES / "chunking" / "snapshot.jsonl"


def _tokenizer() -> Any:
    """A small in-memory tokenizer: NFKC + lower case, whitespace pre-tokenizer, one-word vocab
    (every other word is <unk>, one token each: a count of words and punctuation runs)."""
    from tokenizers import Tokenizer, normalizers, pre_tokenizers
    from tokenizers.models import WordLevel

    tok = Tokenizer(WordLevel({"<unk>": 0, "и": 1}, unk_token="<unk>"))
    tok.normalizer = normalizers.Sequence([normalizers.NFKC(), normalizers.Lowercase()])
    tok.pre_tokenizer = pre_tokenizers.Whitespace()
    return tok


def chunk_rows() -> list[list[Any]]:
    """One row per chunk (or per file not read): counter, chunk id, span, token count, kind, text hash."""
    tok = _tokenizer()
    counters = {
        "simple": simple_token_count,
        "hf-whitespace": functools.lru_cache(maxsize=None)(functools.partial(count_tokens_with, tok)),
    }
    config = ChunkingConfig(max_tokens=120, min_tokens=20, overlap=0.12)
    rows: list[list[Any]] = []
    for name, count in counters.items():
        for tree in TREES:
            for shown, doc in read_tree([tree], ReadOptions()):
                if not hasattr(doc, "text"):
                    rows.append([name, Path(shown).name, "not read", type(doc).__name__])
                    continue
                for c in chunk_document(doc, "markdown", config, count):
                    digest = hashlib.sha256(c.text.encode("utf-8")).hexdigest()[:16]
                    rows.append([name, c.chunk_id, c.start, c.end, c.token_count, c.kind, digest])
    return rows


def _dump(rows: list[list[Any]]) -> str:
    return "".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows)


def test_chunks_are_what_they_were() -> None:
    want = SNAPSHOT.read_text(encoding="utf-8").splitlines()
    got = _dump(chunk_rows()).splitlines()
    for g, w in zip(got, want):
        assert g == w
    assert len(got) == len(want)
    assert len(want) > 200  # the snapshot holds real work


if __name__ == "__main__":
    SNAPSHOT.write_text(_dump(chunk_rows()), encoding="utf-8")
    print(f"wrote {SNAPSHOT}")
