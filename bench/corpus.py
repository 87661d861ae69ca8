"""A realistic, deterministic Russian corpus for the benches, of any size, streamed.

Why: the first benches scaled golden/ up by copying it (hundreds of copies per chunk, vectors
jittered). That is a worst case for HNSW and dedup, and its term statistics do not grow with N.
This generator writes text that behaves like a real knowledge base at any N:

* **Words** are real Russian word forms from the navec vocabulary (inside ``natasha``): about
  130 function words, then content words ranked with a Zipf law (shorter words more frequent),
  and 600 topics, each with its own 250 Zipf-ranked content words, so documents of a topic share
  a vocabulary and their embeddings cluster the way real ones do.
* **Documents** are Markdown: an H1 title, H2/H3 sections, bullet lists, identifiers (product
  codes such as ``LAMP-LIGHT-MINI``, promo codes such as ``TEA15``, SKUs, versions ``v2.3.1``),
  prices, and metadata for filters (category, tenant, acl groups, archived, updated_at).
  Every section body is 45–220 words (lognormal, median ~115), so the real markdown chunker
  makes exactly one chunk per section.
* **Embeddings** (``corpus_index``) are each chunk's own embedding by the embedder given
  (navec: the mean of its word vectors), not copies with noise; the chunks are written through
  ingest's own bulk actions and bulk writer.
* **Queries** (``corpus_queries``) come with their relevant chunk: a few of the chunk's rarer
  words, some replaced by a vector neighbour in navec (often another form of the word or a near
  synonym), some with the chunk's identifier, so recall can be measured.

Document ``i`` depends only on (seed, i), so a corpus of N chunks is a prefix of any larger one,
and any document can be rebuilt alone. Everything is a generator: memory stays flat at any N.

The copy-based corpus survives as a named stress case, ``corpus_queries.near_duplicates``.

API (all deterministic for a seed)::

    corpus.iter_documents(n_docs=None, seed=SEED)      -> Iterator[Document]   (Markdown text + metadata)
    corpus.document_markdown(doc)                      -> str                  (front matter + text, a file)
    corpus.write_markdown(target, n_docs, seed=SEED)   -> int                  (files written)
    corpus.iter_chunks(n_chunks, count_tokens=navec_token_count, seed=SEED) -> Iterator[(Document, Chunk)]
    corpus_index.iter_embedded(n_chunks, embedder, seed=SEED) -> Iterator[(Document, Chunk, vector)]
    corpus_index.bulk_actions(n_chunks, embedder, index, now) -> Iterator[dict]  (ingest's bulk actions)
    corpus_index.write_index(cluster, actions, index)  -> dict                 (osrag.store.bulk.write, refresh off)
    corpus_queries.make_queries(n_queries, n_chunks, seed=SEED) -> list[BenchQuery] (with the relevant chunk)
    corpus_queries.near_duplicates(base, n, seed=SEED) -> Iterator[(Document, Chunk, vector)]
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import functools
import re
import sys
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

import numpy as np

REPO = Path(__file__).resolve().parents[1]
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

from osrag.chunking import Chunk, ChunkingConfig, Document, chunk_document  # noqa: E402

SEED = 20261201
#: Bumped whenever the generated text or vectors change, so a bench rebuilds an old index.
GENERATOR = "bench-corpus-v1"

NAVEC_FILE = "data/emb/navec_news_v1_1B_250K_300d_100q.tar"
N_TOPICS = 600
TOPIC_WORDS = 250
GLOBAL_WORDS = 60_000  # content words in the global Zipf distribution
#: Token mix of running text: function words, the document's topic, the global vocabulary.
P_FUNCTION, P_TOPIC = 0.36, 0.34
SECTION_WORDS = (45, 220)  # clip of the lognormal body length: one chunk of <= 350 navec tokens
SECTION_MEDIAN, SECTION_SIGMA = 115.0, 0.45


def _words(text: str) -> list[str]:
    """A word list written as running text (one list element per word, in order)."""
    return text.split()


FUNCTION_WORDS = _words(
    """
    в и на с не что по для к о из от до за при как это а но или же бы ли то так уже если когда где
    его её их он она они мы вы все всё этот эта эти этого этой тот та те который которая которые
    которых также только ещё может можно нужно нет да был была было были будет будут быть есть после
    перед через под над между без более менее очень чем чтобы даже вот тоже со во об у том тем той
    этом всех всего свой своей своих один одна одно два три раз день года лет время сейчас здесь там
    теперь потом всегда иногда каждый каждая любой другой другие такой такие сам сама сами весь вся
    много мало больше меньше почти около пока либо ни ведь лишь именно
    """
)
CATEGORIES = _words(
    """
    delivery payment products promo account api returns warranty faq support legal hr it security
    finance marketing logistics catalog stores partners
    """
)
TENANTS = ("public", *(f"tenant-{i:02d}" for i in range(1, 20)))
ACL_GROUPS = ("staff", "partners", "support", "finance", "legal")
CODE_PARTS = _words(
    """
    LAMP LIGHT MINI TEA POT GIFT SET PRO MAX AIR NOVA BOX CUP ECO ZEN SMART HOME DUO LITE PLUS NANO
    ULTRA CLASSIC TRAVEL NORD SOLO
    """
)
QUESTION_STARTS = ("как", "где", "сколько", "почему", "когда", "можно ли", "что такое", "какой", "")


def _zipf_cdf(n: int, s: float = 1.07, q: float = 2.7) -> np.ndarray:
    """Cumulative Zipf–Mandelbrot probabilities over ranks 0..n-1."""
    w = 1.0 / np.power(np.arange(n, dtype=np.float64) + q, s)
    c = np.cumsum(w)
    return c / c[-1]


def _draw(rng: np.random.Generator, cdf: np.ndarray, k: int) -> np.ndarray:
    return np.minimum(np.searchsorted(cdf, rng.random(k), side="right"), len(cdf) - 1)


# ------------------------------------------------------------------ vocabulary
@dataclasses.dataclass(frozen=True)
class Vocabulary:
    """Navec word forms split into function words, Zipf-ranked content words and topics."""

    navec_ids: np.ndarray  # navec index of every content word, by global rank
    words: tuple[str, ...]  # the content words, by global rank
    topics: np.ndarray  # (N_TOPICS, TOPIC_WORDS) global ranks, by topic rank
    topic_category: tuple[str, ...]
    global_cdf: np.ndarray
    topic_cdf: np.ndarray
    function_cdf: np.ndarray


_WORD = re.compile(r"^[а-яё]{4,15}$")
_VOWELS = frozenset("аеёиоуыэюя")


def _wordlike(w: str) -> bool:
    """A word form, not an abbreviation (navec keeps many: мфв, пкф): 4+ letters, a normal vowel share."""
    return bool(_WORD.match(w)) and 0.25 <= sum(ch in _VOWELS for ch in w) / len(w) <= 0.65


@functools.lru_cache(maxsize=1)
def navec_model() -> Any:
    import natasha
    from navec import Navec

    return Navec.load(str(Path(natasha.__file__).parent / NAVEC_FILE))


def vocabulary(seed: int = SEED) -> Vocabulary:
    """The word lists for a seed (about two seconds, once per process)."""
    return _vocabulary(int(seed))


@functools.lru_cache(maxsize=2)
def _vocabulary(seed: int) -> Vocabulary:
    nv = navec_model()
    all_words = nv.vocab.words
    fw = set(FUNCTION_WORDS)
    ids = np.array([i for i, w in enumerate(all_words) if _wordlike(w) and w not in fw], dtype=np.int64)
    rng = np.random.default_rng([seed, 0])
    # Zipf's law of abbreviation: frequent words are short. Rank by length plus noise.
    lengths = np.array([len(all_words[i]) for i in ids], dtype=np.float64)
    order = np.argsort(lengths + rng.normal(0.0, 2.5, len(ids)), kind="stable")[:GLOBAL_WORDS]
    navec_ids = ids[order]
    words = tuple(all_words[i] for i in navec_ids)
    # Topic words: mid-frequency and rare words (ranks 300..), each topic its own Zipf order.
    topics = np.stack(
        [rng.choice(np.arange(300, GLOBAL_WORDS), TOPIC_WORDS, replace=False) for _ in range(N_TOPICS)]
    )
    cats = tuple(CATEGORIES[int(x)] for x in rng.integers(0, len(CATEGORIES), N_TOPICS))
    return Vocabulary(
        navec_ids,
        words,
        topics,
        cats,
        _zipf_cdf(GLOBAL_WORDS),
        _zipf_cdf(TOPIC_WORDS, s=1.0, q=1.5),
        _zipf_cdf(len(FUNCTION_WORDS), s=0.9, q=1.0),
    )


# ------------------------------------------------------------------ documents
@dataclasses.dataclass(frozen=True)
class Section:
    heading_path: tuple[str, ...]  # without the title
    level: int  # 2 or 3
    body: str
    rare_words: tuple[str, ...]  # content words of the body, rarest (highest global rank) first
    identifiers: tuple[str, ...]


def _code(rng: np.random.Generator) -> str:
    kind = rng.random()
    if kind < 0.45:
        parts = rng.choice(CODE_PARTS, int(rng.integers(2, 4)), replace=False)
        return "-".join(str(p) for p in parts)
    if kind < 0.7:
        return f"{rng.choice(CODE_PARTS)}{int(rng.integers(5, 60))}"
    if kind < 0.85:
        return f"SKU-{int(rng.integers(10000, 99999))}"
    return f"v{int(rng.integers(1, 6))}.{int(rng.integers(0, 12))}.{int(rng.integers(0, 20))}"


def _number(rng: np.random.Generator) -> str:
    kind = rng.random()
    if kind < 0.4:
        return f"{int(rng.integers(1, 120)) * 10:,} ₽".replace(",", " ")
    if kind < 0.7:
        return f"{int(rng.integers(1, 36))} {rng.choice(['дней', 'месяцев', 'часов', 'минут'])}"
    if kind < 0.85:
        return f"{int(rng.integers(1, 60))} %"
    return f"{int(rng.integers(1, 28)):02d}.{int(rng.integers(1, 12)):02d}.20{int(rng.integers(23, 27))}"


class _Writer:
    """Draws the words of one document (one topic, its own generator). Draws are vectorised per
    section body: a per-word numpy call would make 100K chunks take many minutes."""

    def __init__(self, vocab: Vocabulary, rng: np.random.Generator, topic: int, codes: Sequence[str]) -> None:
        self.v, self.rng, self.topic, self.codes = vocab, rng, topic, list(codes)

    def words(self, k: int) -> tuple[list[str], list[int]]:
        """k running-text words (function, topic or global) and the global ranks of the content ones."""
        rng, v = self.rng, self.v
        kind = rng.random(k)
        fn = _draw(rng, v.function_cdf, k).tolist()
        glob = _draw(rng, v.global_cdf, k)
        topical = v.topics[self.topic][_draw(rng, v.topic_cdf, k)]
        ranks = np.where(kind < P_FUNCTION + P_TOPIC, topical, glob).tolist()
        is_fn = (kind < P_FUNCTION).tolist()
        out = [FUNCTION_WORDS[f] if isf else v.words[r] for f, isf, r in zip(fn, is_fn, ranks)]
        used = [r for isf, r in zip(is_fn, ranks) if not isf]
        return out, used

    def sentences(self, n_words: int, lo: int, hi: int) -> tuple[list[str], list[int], list[str]]:
        """Sentences of lo..hi words totalling n_words, some with an identifier or a number."""
        rng = self.rng
        words, used = self.words(n_words)
        lens = rng.integers(lo, hi + 1, size=n_words // lo + 1).tolist()
        extra = rng.random(len(lens)).tolist()
        pos = rng.random(len(lens)).tolist()
        out: list[str] = []
        idents: list[str] = []
        i = 0
        for n, r, p in zip(lens, extra, pos):
            if i >= len(words):
                break
            sent = words[i : i + n]
            i += n
            at = 1 + int(p * len(sent))
            if self.codes and r < 0.18:
                code = self.codes[int(r * 1000) % len(self.codes)]
                sent.insert(at, code)
                idents.append(code)
            elif r < 0.32:
                sent.insert(at, _number(rng))
            if len(sent) > 7 and r > 0.6:
                cut = 3 + int(p * (len(sent) - 5))
                sent[cut] = sent[cut] + ","
            out.append(
                sent[0][:1].upper() + sent[0][1:] + (" " + " ".join(sent[1:]) if len(sent) > 1 else "")
            )
        return out, used, idents

    def body(self, n_words: int) -> tuple[str, list[int], list[str]]:
        rng = self.rng
        if rng.random() < 0.2:  # a bullet list with a lead-in sentence
            sents, used, idents = self.sentences(max(int(n_words * 0.8), 8), 3, 13)
            items = "\n".join(f"- {x};" for x in sents[1:])
            return f"{sents[0]}:\n\n{items}", used, idents
        sents, used, idents = self.sentences(n_words, 5, 18)
        paragraphs: list[str] = []
        i = 0
        while i < len(sents):
            k = int(rng.integers(2, 6))
            paragraphs.append(". ".join(sents[i : i + k]) + ".")
            i += k
        return "\n\n".join(paragraphs), used, idents

    def heading(self, k: int) -> str:
        ranks = self.v.topics[self.topic][_draw(self.rng, self.v.topic_cdf, k)]
        words = [self.v.words[r] for r in ranks]
        if self.codes and self.rng.random() < 0.15:
            words.append(self.codes[0])
        return words[0][:1].upper() + words[0][1:] + (" " + " ".join(words[1:]) if k > 1 else "")


def _doc_rng(seed: int, i: int) -> np.random.Generator:
    return np.random.default_rng([seed, 1, i])


def section_count(seed: int, i: int) -> int:
    """How many sections (= chunks) document ``i`` has: its generator's first draw, so it is known
    without writing the document."""
    return 1 + int(_doc_rng(seed, i).binomial(9, 0.4))


def build_document(i: int, seed: int = SEED) -> tuple[Document, list[Section]]:
    """Document ``i`` of the corpus for ``seed``, and its sections (one chunk each)."""
    v = vocabulary(seed)
    rng = _doc_rng(seed, i)
    n_sections = 1 + int(rng.binomial(9, 0.4))  # same first draw as section_count
    topic = int(rng.integers(0, N_TOPICS))
    codes = [_code(rng) for _ in range(int(rng.integers(0, 4)))]
    w = _Writer(v, rng, topic, codes)
    title = w.heading(int(rng.integers(2, 6)))
    sections: list[Section] = []
    h2: str | None = None
    for s in range(n_sections):
        level = 3 if (h2 is not None and s > 0 and rng.random() < 0.25) else 2
        heading = w.heading(int(rng.integers(1, 5)))
        if level == 2:
            h2 = heading
        path = (heading,) if level == 2 else (h2 or heading, heading)
        n_words = int(np.clip(rng.lognormal(np.log(SECTION_MEDIAN), SECTION_SIGMA), *SECTION_WORDS))
        body, used, idents = w.body(n_words)
        rare = tuple(v.words[r] for r in sorted(set(used), reverse=True))
        sections.append(Section(path, level, body, rare, tuple(dict.fromkeys(idents))))
    lines = [f"# {title}", ""]
    for sec in sections:
        lines += [f"{'#' * sec.level} {sec.heading_path[-1]}", "", sec.body, ""]
    text = "\n".join(lines)
    doc_id = f"kb-{i:07d}"
    acl = None
    if rng.random() < 0.15:
        acl = ",".join(sorted(set(rng.choice(ACL_GROUPS, int(rng.integers(1, 3))).tolist())))
    tenant_rank = min(int(rng.zipf(1.6)) - 1, len(TENANTS) - 1)
    updated = dt.date(2023, 1, 1) + dt.timedelta(days=int(rng.integers(0, 1430)))
    meta: dict[str, Any] = {
        "doc_id": doc_id,
        "title": title,
        "category": v.topic_category[topic],
        "tenant": TENANTS[tenant_rank],
        "archived": bool(rng.random() < 0.03),
        "updated_at": updated.isoformat(),
        "topic": topic,
    }
    if acl:
        meta["acl"] = acl
    return Document(doc_id, text, source=f"kb/{doc_id}.md", title=title, metadata=meta), sections


def iter_documents(n_docs: int | None = None, seed: int = SEED, start: int = 0) -> Iterator[Document]:
    """Documents ``start``, ``start+1``, ... (endless when ``n_docs`` is None)."""
    i = start
    while n_docs is None or i < start + n_docs:
        yield build_document(i, seed)[0]
        i += 1


def document_markdown(doc: Document) -> str:
    """The document as a Markdown file with YAML front matter, as `osrag ingest` reads it."""
    import yaml

    meta = {k: v for k, v in doc.metadata.items() if k != "topic"}
    return "---\n" + yaml.safe_dump(meta, allow_unicode=True, sort_keys=False) + "---\n\n" + doc.text


def write_markdown(target: Path, n_docs: int, seed: int = SEED, per_dir: int = 1000) -> int:
    """Write ``n_docs`` documents as Markdown files under ``target`` (``per_dir`` files a folder)."""
    for i, doc in enumerate(iter_documents(n_docs, seed)):
        out = Path(target) / f"{i // per_dir:04d}" / f"{doc.doc_id}.md"
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_text(document_markdown(doc), encoding="utf-8")
    return n_docs


def docs_for(n_chunks: int, seed: int = SEED) -> int:
    """How many documents the first ``n_chunks`` chunks come from."""
    i = total = 0
    while total < n_chunks:
        total += section_count(seed, i)
        i += 1
    return i


# ------------------------------------------------------------------ chunks
_NAVEC_TOKEN = re.compile(r"\w+|[^\w\s]+")


def navec_token_count(text: str) -> int:
    """Token count of the navec static model's tokenizer (whitespace + punctuation split), without
    loading it: the chunker calls its counter many times per document, and the model's own
    tokenizer makes chunking 50x slower than this."""
    return len(_NAVEC_TOKEN.findall(text))


def iter_chunks(
    n_chunks: int,
    count_tokens: Callable[[str], int] = navec_token_count,
    seed: int = SEED,
    config: ChunkingConfig | None = None,
) -> Iterator[tuple[Document, Chunk]]:
    """The first ``n_chunks`` chunks, made by the real markdown chunker (the last document may be cut)."""
    cfg = config or ChunkingConfig()
    left = n_chunks
    for doc in iter_documents(None, seed):
        if left <= 0:
            return
        for c in chunk_document(doc, "markdown", cfg, count_tokens)[:left]:
            yield doc, c
            left -= 1
