"""The self-describing answer: what was selected, what it cost, what was left out.

Typed and JSON-serialisable (pydantic), so an app or an agent can act on it
without guessing: ``status`` says whether this is everything relevant, a
budgeted selection, or an explicit "nothing relevant found".
"""

from __future__ import annotations

from typing import Any, Literal, cast

from pydantic import BaseModel, Field

from osrag.records import ChunkSource
from osrag.vocabulary import DEFAULT_FUSION, DEFAULT_POLICY, Fusion, LeftOutReason, Policy, Status


class StageScores(BaseModel):
    fused: float | None = None
    rerank: float | None = None
    relevance: float | None = None


class Passage(BaseModel):
    chunk_id: str
    doc_id: str
    title: str = ""
    heading_path: list[str] = Field(default_factory=list)
    source: str = ""
    section_id: str | None = None
    parent_section_id: str | None = None
    kind: str = "text"  # one of vocabulary.CHUNK_KINDS for what the chunkers write
    text: str
    tokens: int
    start: int | None = None  # character span of the body in the source document, for citations
    end: int | None = None
    # Where a passage of a converted file sits in the original (see osrag.ingest.convert):
    source_format: str | None = None  # pdf, docx, html, pptx; None for Markdown and text
    page: int | None = None  # PDF pages the passage spans
    page_end: int | None = None
    slide: int | None = None  # PPTX slides the passage spans
    slide_end: int | None = None
    anchor: str | None = None  # heading anchor (HTML, or the Markdown heading's id): source#anchor
    url: str | None = None  # ingest --base-url: the page's URL with #anchor, for the reader to follow
    category: str | None = None  # the document's category and tenant (front matter or rules), the
    tenant: str | None = None  # fields a search filters on
    rank: int
    scores: StageScores = Field(default_factory=StageScores)
    via_reserved_slot: bool = False
    rerank_truncated: bool = False
    #: Cut to the sentences that hold the question's terms (``osrag.search.trimming``): ``text``
    #: keeps the heading line and those whole units, ``…`` lines stand for the rest; ``tokens`` is
    #: what was charged, ``full_tokens`` what the whole chunk costs (``section()`` or a search
    #: with trimming off gives it).
    trimmed: bool = False
    full_tokens: int | None = None


def passage_of(src: ChunkSource, rank: int, **extra: Any) -> Passage:
    """The one mapping of a stored chunk to a ``Passage`` (``extra``: the stage's own fields, such
    as its scores and its cost in the budget's count, which replaces the stored ``token_count``)."""
    fields: dict[str, Any] = {
        "chunk_id": src.chunk_id,
        "doc_id": src.doc_id,
        "title": src.title,
        "heading_path": list(src.heading_path),
        "source": src.source,
        "section_id": src.section_id,
        "parent_section_id": src.parent_section_id,
        "kind": src.kind,
        "text": src.text,
        "tokens": src.token_count or 0,
        "rank": rank,
        "start": src.start,
        "end": src.end,
        "category": src.category,
        "tenant": src.tenant,
        **src.location,
    }
    fields.update(extra)
    return Passage(**fields)


def cite(p: Passage) -> str:
    """The URL when the ingest gave one (``--base-url``), else the source with its page, slide or
    anchor: ``guide.pdf p. 2-3``, ``help.html#karty``."""
    if p.url:
        return p.url
    if p.anchor:
        return f"{p.source}#{p.anchor}"
    for unit, first, last in (("p.", p.page, p.page_end), ("slide", p.slide, p.slide_end)):
        if first is not None:
            span = f"{first}-{last}" if last is not None and last != first else f"{first}"
            return f"{p.source} {unit} {span}"
    return p.source


class LeftOutItem(BaseModel):
    chunk_id: str
    doc_id: str
    tokens: int
    reason: LeftOutReason
    duplicate_of: str | None = None


class Freshness(BaseModel):
    alias: str
    index: str
    embedding_model: str | None = None
    dimension: int | None = None
    last_ingest_at: str | None = None
    age_seconds: float | None = None


class RerankInfo(BaseModel):
    model: str | None = None
    #: Where the reranker ran: "client" (this process) or "cluster" (an ml-commons model).
    where: str | None = None
    used: bool = False
    note: str = ""
    #: How many candidates the cross-encoder scored (the rest keep their fused order after them:
    #: past ``OSRAG_RERANK_DEPTH``, or past the deadline of ``OSRAG_RERANK_BUDGET_MS``).
    reranked: int = 0
    #: The deadline in force (ms), when one was.
    budget_ms: float | None = None


class BudgetTokenizer(BaseModel):
    """Which tokenizer counted the budget (``osrag.counting``)."""

    name: str  # the model name, the OSRAG_BUDGET_TOKENIZER value, or a caller's callable
    kind: Literal["embedding-model", "file", "directory", "package", "callable"]
    fingerprint: str | None = None  # hash of its vocabulary and rules; None for a callable
    stored_counts: bool = False  # the index's ingest-time counts were reused (same fingerprint)


class Envelope(BaseModel):
    question: str
    status: Status
    message: str
    budget_tokens: int
    spent_tokens: int
    passages: list[Passage] = Field(default_factory=list)
    left_out: list[LeftOutItem] = Field(default_factory=list)
    left_out_for_budget: int = 0
    duplicates_dropped: int = 0
    below_threshold: int = 0
    candidates: int = 0
    reserved_slot_used: str | None = None
    #: Passages cut to their evidence sentences (``Passage.trimmed``).
    trimmed: int = 0
    # The fusion of the alias's search pipeline (OSRAG_FUSION).
    fusion: Fusion = DEFAULT_FUSION
    # The selection policy that ran: "recall" (the default, recall-safe) or "minimal" (leaner).
    selection: Policy = DEFAULT_POLICY
    rerank: RerankInfo = Field(default_factory=RerankInfo)
    filters: dict[str, object] = Field(default_factory=dict)
    #: Whom the answer was filtered for (``Principal.describe``): groups, tenant, public_only, all_access.
    access: dict[str, object] = Field(default_factory=dict)
    freshness: Freshness
    timings_ms: dict[str, float] = Field(default_factory=dict)
    tokenizer: BudgetTokenizer | None = None  # who counted spent_tokens and passage tokens
    notes: list[str] = Field(default_factory=list)


def render_text(env: Envelope) -> str:
    """The readable view: passages with breadcrumbs, the budget line, then what was left out."""
    lines: list[str] = []
    if env.status == "nothing_relevant":
        lines.append(f"Ничего релевантного не найдено / nothing relevant found: {env.message}")
    for p in env.passages:
        crumb = " > ".join(p.heading_path) or p.title
        score = p.scores.rerank if p.scores.rerank is not None else p.scores.fused
        shown = f", score {score:.4f}" if score is not None else ""
        cut = f" of {p.full_tokens}, trimmed" if p.trimmed else ""
        lines.append(f"[{p.rank}] {p.doc_id} · {crumb}  ({p.tokens}{cut} tok{shown})")
        lines.append(f"    {cite(p)}")
        body = p.text.strip()
        lines.extend("    " + ln for ln in body.splitlines())
        lines.append("")
    counted = f" · counted by {env.tokenizer.name}" if env.tokenizer else ""
    lines.append(
        f"budget: {env.spent_tokens}/{env.budget_tokens} tokens · {env.status} · {len(env.passages)} passage(s) "
        f"from {env.candidates} candidate(s) · {env.selection} selection · fusion {env.fusion} · rerank "
        f"{'on' if env.rerank.used else 'off'}{f' ({env.rerank.note})' if env.rerank.note else ''}{counted}"
    )
    if env.left_out:
        lines.append(
            f"left out: {env.left_out_for_budget} for budget, {env.duplicates_dropped} duplicate(s), "
            f"{env.below_threshold} below the relevance threshold"
        )
        for item in env.left_out:
            extra = f" (duplicate of {item.duplicate_of})" if item.duplicate_of else ""
            lines.append(f"  - {item.chunk_id} {item.tokens} tok: {item.reason}{extra}")
    if env.access:
        a = env.access
        who = (
            "all access (admin bypass)"
            if a.get("all_access")
            else "groups " + ", ".join(map(str, cast("list[Any]", a.get("groups") or [])))
            if a.get("groups")
            else "public only"
        )
        lines.append(f"access: {who}" + (f" · tenant {a['tenant']}" if a.get("tenant") else ""))
    f = env.freshness
    if f.age_seconds is not None:
        age = f"{f.age_seconds / 3600:.1f} h ago"
    else:
        age = f"at {f.last_ingest_at}" if f.last_ingest_at else "never"
    lines.append(f"index: {f.index} ({f.embedding_model}, dim {f.dimension}) · last ingest {age}")
    for n in env.notes:
        lines.append(f"note: {n}")
    return "\n".join(lines)
