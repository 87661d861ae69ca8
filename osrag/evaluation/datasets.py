"""Evaluation sets: the golden set (judged on section spans) and any BEIR-layout set (judged per doc).

Both become an :class:`EvalSet`: questions with their relevant keys and buckets, a way to
turn a retrieved chunk into a key, and a way to put the corpus into an index through the
product's own Ingester (files for golden, one in-memory Document per BEIR row).

* **Golden** relevance is a section: a retrieved chunk counts for a relevant section when it
  comes from the same document and its character span overlaps the section's span, so every
  chunker is judged the same way. Several chunks of one section count once.
* **BEIR** relevance is a corpus document (``qrels/*.tsv``, score > 0). Chunks are keyed by
  their ``doc_id``, so a document split into several chunks counts once, at its best rank.
  A query with no positive judgement is a no-answer question (scored by «nothing found»).
* **A documentation tree** in the BEIR-like layout of ``vkdocs-ru-dev``: ``corpus/`` is a
  folder of files (not ``corpus.jsonl``) ingested as a user would (``osrag ingest corpus/``),
  and a corpus id is a file's path below it. Judged at document level like BEIR: a chunk
  counts for the file it came from. ``load_dataset`` tells the two layouts apart.
"""

from __future__ import annotations

import json
import random
import re
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from osrag.chunking import Document, parse_sections
from osrag.errors import ConfigError
from osrag.ingest.documents import read_document
from osrag.ingest.indexing import Ingester
from osrag.ingest.report import IngestReport
from osrag.ingest.walking import collection_of, find_files
from osrag.records import ChunkSource
from osrag.search.trimming import GAP, split_header

# Query metadata fields of a BEIR set that become per-bucket rows when present (strings only).
BEIR_BUCKET_FIELDS = ("overlap_bucket", "type")
#: A tree set's ``title_overlap`` (share of the query's stems in the target page's H1) is bucketed
#: at the dataset's own line: at or above it the title alone nearly answers the query.
TITLE_OVERLAP_HIGH = 0.8


@dataclass(frozen=True)
class Query:
    qid: str
    text: str
    relevant: Mapping[str, int]  # key -> graded relevance (> 0)
    buckets: Mapping[str, str] = field(default_factory=dict)  # facet -> bucket, e.g. type -> code
    filters: Mapping[str, Any] = field(default_factory=dict)

    @property
    def answerable(self) -> bool:
        return bool(self.relevant)


@dataclass
class EvalSet:
    """One evaluation set; subclasses say how chunks are judged and how the corpus is ingested."""

    name: str
    queries: list[Query]
    # Chunking and stemming variants only mean something for documents with structure.
    chunking_matters: bool = False
    # A real docs tree is ingested as it is: a file the reader fails on is reported with the
    # results (``ingest_failed``), not a reason to stop; a prepared corpus must ingest whole.
    tolerates_failed_files: bool = False
    ingest_failed: dict[str, list[str]] = field(default_factory=dict)  # index variant -> "path: reason"
    # The set whose index this one searches (a perturbed copy of its questions); None: its own.
    index_name: str | None = None

    def key(self, q: Query, src: ChunkSource) -> str:
        """The relevance key of a retrieved chunk (a relevant key, or a neutral id)."""
        raise NotImplementedError

    def ingest(self, ingester: Ingester) -> IngestReport:
        raise NotImplementedError

    def trimmed_key(self, q: Query, src: ChunkSource, text: str) -> str:
        """The key of a passage delivered trimmed to ``text`` (``osrag.search.trimming``). Judged per
        document, any part of the document counts, so it is the chunk's key."""
        return self.key(q, src)

    def sample(self, limit: int | None, seed: int = 0) -> EvalSet:
        """At most ``limit`` queries, a seeded sample kept in file order (quick runs)."""
        if not limit or limit >= len(self.queries):
            return self
        keep = set(random.Random(seed).sample(range(len(self.queries)), limit))
        clone = _copy(self)
        clone.queries = [q for i, q in enumerate(self.queries) if i in keep]
        return clone

    @property
    def answerable(self) -> list[Query]:
        return [q for q in self.queries if q.answerable]


def _copy(s: EvalSet) -> Any:
    import copy

    return copy.copy(s)


# ------------------------------------------------------------------ golden
class SectionSpans:
    """Character spans of the golden sections, from the corpus documents."""

    def __init__(self, corpus_dir: Path) -> None:
        self.docs: dict[str, Document] = {}
        for path, root in find_files([corpus_dir]):
            doc = read_document(path, root, 50_000_000)
            self.docs[doc.doc_id] = doc

    def span(self, doc_id: str, section: str | None) -> tuple[int, int]:
        doc = self.docs.get(doc_id)
        if doc is None:
            raise ConfigError(f"golden refers to unknown document {doc_id!r}")
        if section is None:
            return 0, len(doc.text)
        for s in parse_sections(doc):
            if s.heading_path and s.heading_path[-1].strip() == section.strip():
                return s.start, s.end
        raise ConfigError(f"golden refers to unknown section {section!r} in {doc_id}")


def section_key(doc_id: str, section: str | None) -> str:
    return f"{doc_id}#{section or '*'}"


def judge(src: ChunkSource, spans: Mapping[str, tuple[str, int, int]]) -> str | None:
    """The relevant section key a chunk (``doc_id``, ``start``, ``end``) overlaps, if any."""
    d, a, b = src.doc_id, src.start, src.end
    if a is None or b is None:
        return None
    for key, (doc, s, e) in spans.items():
        if doc == d and a < e and b > s:
            return key
    return None


@dataclass
class GoldenSet(EvalSet):
    corpus: Path = Path(".")
    spans: dict[str, dict[str, tuple[str, int, int]]] = field(default_factory=dict)  # qid -> key -> span

    texts: dict[str, str] = field(default_factory=dict)  # doc_id -> Document.text (spans index it)

    def key(self, q: Query, src: ChunkSource) -> str:
        return judge(src, self.spans.get(q.qid, {})) or f"~{src.chunk_id}"

    def trimmed_key(self, q: Query, src: ChunkSource, text: str) -> str:
        """Judged on what was delivered, not on the chunk: each kept unit is found in the chunk's
        span of its document and judged on its own span; a unit not found there counts for nothing
        (so trimming can only lose a section here, never gain one)."""
        doc = self.texts.get(src.doc_id, "")
        a, b = src.start or 0, src.end if src.end is not None else len(doc)
        for unit in kept_units(text, src.heading_path, src.title):
            found = _find_unit(doc, unit, a, b)
            if found is not None:
                key = judge(replace(src, start=found[0], end=found[1]), self.spans.get(q.qid, {}))
                if key:
                    return key
        return f"~{src.chunk_id}"

    def ingest(self, ingester: Ingester) -> IngestReport:
        return ingester.ingest([self.corpus])


def load_golden(path: Path, corpus: Path | None = None) -> GoldenSet:
    """The golden file (one JSON object a line) with its corpus (default: ``corpus/`` beside it)."""
    path = Path(path)
    corpus = Path(corpus) if corpus else path.parent / "corpus"
    rows = []
    for n, line in enumerate(_read_lines(path), start=1):
        if not line.strip():
            continue
        try:
            row = json.loads(line)
            rel = [(r["doc_id"], r.get("section")) for r in row.get("relevant", [])]
            rows.append((row["id"], row["question"], row["type"], rel, dict(row.get("filters") or {})))
        except (ValueError, KeyError, TypeError) as exc:
            raise ConfigError(f"{path}:{n}: bad golden line ({exc})") from exc
    spans_of = SectionSpans(corpus)
    queries, spans = [], {}
    for qid, text, qtype, rel, filters in rows:
        spans[qid] = {section_key(d, s): (d, *spans_of.span(d, s)) for d, s in rel}
        queries.append(Query(qid, text, dict.fromkeys(spans[qid], 1), {"type": qtype}, filters))
    texts = {d: doc.text for d, doc in spans_of.docs.items()}
    return GoldenSet(
        name="golden", queries=queries, chunking_matters=True, corpus=corpus, spans=spans, texts=texts
    )


def kept_units(text: str, heading_path: Sequence[str] = (), title: str = "") -> list[str]:
    """The lines of a trimmed passage's text after its heading line, without the gap lines."""
    _, body = split_header(text, heading_path, title)
    return [ln for ln in body.split("\n") if ln.strip() and ln.strip() != GAP]


def _find_unit(doc: str, unit: str, start: int, end: int) -> tuple[int, int] | None:
    """Where ``unit`` (whitespace-normalised by the trimmer) sits in ``doc[start:end]``."""
    words = unit.split()
    if not words:
        return None
    m = re.compile(r"\s+".join(map(re.escape, words))).search(doc, start, end)
    return (m.start(), m.end()) if m else None


# ------------------------------------------------------------------ BEIR
@dataclass
class BeirSet(EvalSet):
    docs: list[Document] = field(default_factory=list)

    def key(self, q: Query, src: ChunkSource) -> str:
        return src.doc_id

    def ingest(self, ingester: Ingester) -> IngestReport:
        return ingester.ingest_documents(self.docs)


def _read_lines(path: Path) -> list[str]:
    try:
        return path.read_text(encoding="utf-8").splitlines()
    except OSError as exc:
        raise ConfigError(f"cannot read {path}: {exc.strerror or exc}") from exc
    except UnicodeDecodeError as exc:
        raise ConfigError(f"{path}: not UTF-8 ({exc.reason} at byte {exc.start})") from exc


def _jsonl(path: Path) -> Iterator[tuple[int, dict[str, Any]]]:
    for n, line in enumerate(_read_lines(path), start=1):
        if not line.strip():
            continue
        try:
            row = json.loads(line)
        except ValueError as exc:
            raise ConfigError(f"{path}:{n}: not JSON ({exc})") from exc
        if not isinstance(row, dict) or not isinstance(row.get("_id"), str) or not row["_id"]:
            raise ConfigError(f"{path}:{n}: a row must be an object with a non-empty string _id")
        yield n, row


def _qrels_file(qrels_dir: Path, split: str | None) -> Path:
    files = sorted(qrels_dir.glob("*.tsv")) if qrels_dir.is_dir() else []
    if not files:
        raise ConfigError(f"{qrels_dir}: no qrels/*.tsv file")
    if split:
        chosen = qrels_dir / f"{split}.tsv"
        if not chosen.is_file():
            names = ", ".join(f.stem for f in files)
            raise ConfigError(f"{qrels_dir}: no {split}.tsv (splits here: {names})")
        return chosen
    if (qrels_dir / "test.tsv").is_file():
        return qrels_dir / "test.tsv"
    if len(files) > 1:
        names = ", ".join(f.stem for f in files)
        raise ConfigError(f"{qrels_dir}: several splits ({names}) and no test.tsv; name one")
    return files[0]


def read_qrels(path: Path) -> dict[str, dict[str, int]]:
    """``query-id<TAB>corpus-id<TAB>score`` lines (an optional header line); positive scores only."""
    out: dict[str, dict[str, int]] = {}
    for n, line in enumerate(_read_lines(path), start=1):
        if not line.strip():
            continue
        parts = line.rstrip("\n").split("\t")
        if n == 1 and parts[0].strip().lower() in ("query-id", "query_id", "qid"):
            continue
        if len(parts) != 3:
            raise ConfigError(f"{path}:{n}: expected query-id, corpus-id and score separated by tabs")
        qid, did, score = (p.strip() for p in parts)
        try:
            grade = int(score)
        except ValueError as exc:
            raise ConfigError(f"{path}:{n}: score {score!r} is not an integer") from exc
        if grade > 0:
            out.setdefault(qid, {})[did] = grade
        else:
            out.setdefault(qid, {})
    return out


def load_beir(directory: Path, split: str | None = None, name: str | None = None) -> BeirSet:
    """A BEIR-layout directory: ``corpus.jsonl``, ``queries.jsonl``, ``qrels/<split>.tsv``.

    Without ``split``: ``test.tsv`` if present, else the only qrels file.

    Queries are those named in the qrels file (BEIR keeps every split's queries in one file);
    qrels that name an unknown query or document are an error, not silently dropped.
    """
    directory = Path(directory)
    if not directory.is_dir():
        raise ConfigError(f"dataset {directory}: not a directory")
    for part in ("corpus.jsonl", "queries.jsonl"):
        if not (directory / part).is_file():
            raise ConfigError(f"dataset {directory}: missing {part}")
    split_file = _qrels_file(directory / "qrels", split)
    docs: dict[str, Document] = {}
    for n, row in _jsonl(directory / "corpus.jsonl"):
        text = row.get("text")
        if not isinstance(text, str) or not text.strip():
            raise ConfigError(f"{directory / 'corpus.jsonl'}:{n}: document {row['_id']!r} has no text")
        if row["_id"] in docs:
            raise ConfigError(f"{directory / 'corpus.jsonl'}:{n}: duplicate _id {row['_id']!r}")
        title = row.get("title") or ""
        docs[row["_id"]] = Document(
            doc_id=row["_id"],
            text=text,
            source=f"{directory.name}/{row['_id']}",
            title=str(title),
            metadata={"archived": False, "format": "text"},
        )
    texts: dict[str, tuple[str, dict[str, str]]] = {}
    for n, row in _jsonl(directory / "queries.jsonl"):
        text = row.get("text")
        if not isinstance(text, str) or not text.strip():
            raise ConfigError(f"{directory / 'queries.jsonl'}:{n}: query {row['_id']!r} has no text")
        meta = row.get("metadata") or {}
        buckets = {k: meta[k] for k in BEIR_BUCKET_FIELDS if isinstance(meta.get(k), str)}
        texts[row["_id"]] = (text, buckets)
    qrels = read_qrels(split_file)
    queries = []
    for qid, rel in qrels.items():
        if qid not in texts:
            raise ConfigError(f"{split_file}: query {qid!r} is not in queries.jsonl")
        unknown = [d for d in rel if d not in docs]
        if unknown:
            raise ConfigError(f"{split_file}: query {qid!r} judges unknown document {unknown[0]!r}")
        queries.append(Query(qid, texts[qid][0], rel, texts[qid][1]))
    return BeirSet(name=name or directory.name, queries=queries, docs=list(docs.values()))


def bucket_facets(queries: Sequence[Query]) -> dict[str, list[str]]:
    """facet -> its bucket values, sorted (the per-bucket rows of a set)."""
    out: dict[str, set[str]] = {}
    for q in queries:
        for k, v in q.buckets.items():
            out.setdefault(k, set()).add(v)
    return {
        k: sorted(v, key=lambda b: (_BUCKET_ORDER.get(b, len(_BUCKET_ORDER)), b))
        for k, v in sorted(out.items())
    }


# Ordinal bucket names read best in their own order, not the alphabet's.
_BUCKET_ORDER = {"low": 0, "mid": 1, "high": 2}


# ------------------------------------------------------------------ a documentation tree
@dataclass
class TreeSet(EvalSet):
    """Files under ``corpus`` ingested as they are; a chunk is judged by the file it came from."""

    corpus: Path = Path(".")
    pages: dict[str, str] = field(default_factory=dict)  # the reader's doc_id -> corpus id (file path)

    def key(self, q: Query, src: ChunkSource) -> str:
        d = src.doc_id
        return self.pages.get(d, d)

    def ingest(self, ingester: Ingester) -> IngestReport:
        return ingester.ingest([self.corpus])


def _tree_pages(corpus: Path) -> dict[str, str]:
    """doc_id -> corpus id for every file the reader would take, by the reader's own naming rule
    (``{collection}/{path without suffix}``, the collection being the root folder's name)."""
    coll = collection_of(corpus)
    out: dict[str, str] = {}
    for path, root in find_files([corpus]):
        rel = path.relative_to(root)
        out[f"{coll}/{rel.with_suffix('').as_posix()}"] = rel.as_posix()
    return out


def _queries_file(directory: Path, split: str) -> Path:
    """``queries-<split>.jsonl`` when the set keeps that split's questions apart, else ``queries.jsonl``."""
    own = directory / f"queries-{split}.jsonl"
    return own if own.is_file() else directory / "queries.jsonl"


def load_tree(directory: Path, split: str | None = None, name: str | None = None) -> TreeSet:
    """A documentation tree: ``corpus/`` (files), ``queries[-<split>].jsonl``, ``qrels/<split>.tsv``.

    Without ``split``: ``test``. A judged corpus id must be a file under ``corpus/`` that the
    reader takes; anything else is an error, not silently dropped.
    """
    directory = Path(directory)
    corpus = directory / "corpus"
    if not corpus.is_dir():
        raise ConfigError(f"dataset {directory}: no corpus/ folder")
    split_file = _qrels_file(directory / "qrels", split)
    qfile = _queries_file(directory, split_file.stem)
    if not qfile.is_file():
        raise ConfigError(f"dataset {directory}: missing {qfile.name}")
    pages = _tree_pages(corpus)
    files = set(pages.values())
    texts: dict[str, tuple[str, dict[str, str]]] = {}
    for n, row in _jsonl(qfile):
        text = row.get("text")
        if not isinstance(text, str) or not text.strip():
            raise ConfigError(f"{qfile}:{n}: query {row['_id']!r} has no text")
        meta = row.get("metadata") or {}
        buckets = {k: meta[k] for k in BEIR_BUCKET_FIELDS if isinstance(meta.get(k), str)}
        overlap = row.get("title_overlap")
        if isinstance(overlap, (int, float)) and not isinstance(overlap, bool):
            buckets["title_overlap"] = (
                f">= {TITLE_OVERLAP_HIGH:g}" if overlap >= TITLE_OVERLAP_HIGH else f"< {TITLE_OVERLAP_HIGH:g}"
            )
        texts[row["_id"]] = (text, buckets)
    queries = []
    for qid, rel in read_qrels(split_file).items():
        if qid not in texts:
            raise ConfigError(f"{split_file}: query {qid!r} is not in {qfile.name}")
        unknown = [d for d in rel if d not in files]
        if unknown:
            raise ConfigError(f"{split_file}: query {qid!r} judges {unknown[0]!r}, not a file under {corpus}")
        queries.append(Query(qid, texts[qid][0], rel, texts[qid][1]))
    label = name or (directory.name if split_file.stem == "test" else f"{directory.name}-{split_file.stem}")
    return TreeSet(
        name=label,
        queries=queries,
        chunking_matters=False,
        tolerates_failed_files=True,
        corpus=corpus,
        pages=pages,
    )


def load_dataset(directory: Path, split: str | None = None) -> EvalSet:
    """A BEIR directory (``corpus.jsonl``) or a documentation tree (``corpus/``), by what it holds."""
    directory = Path(directory)
    if (directory / "corpus.jsonl").is_file():
        return load_beir(directory, split)
    if (directory / "corpus").is_dir():
        return load_tree(directory, split)
    raise ConfigError(f"dataset {directory}: neither corpus.jsonl nor a corpus/ folder")
