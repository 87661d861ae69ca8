"""The envelope as per-passage metadata: the one mapping every framework adapter shares.

A framework's retriever hands back a flat list of documents, so what the envelope says about
the whole answer (its status, the budget, what was left out, whom it was filtered for and with
which filters) rides on every document, next to
where the passage came from (doc, heading path, source, anchor) and its score at each stage.
Pure: no client, no framework import.
"""

from __future__ import annotations

import copy
from typing import Any

from osrag.envelope import Envelope, Passage, cite
from osrag.records import LOCATION_FIELDS

__all__ = ["ENVELOPE_KEYS", "LLM_KEYS", "passage_metadata", "passage_score", "passages_with_metadata"]

#: The keys that describe the whole answer (the same on every passage of one envelope).
ENVELOPE_KEYS = (
    "question",
    "status",
    "budget_tokens",
    "spent_tokens",
    "left_out_count",
    "left_out_for_budget",
    "index",
    "access",
    "filters",
)

#: The keys worth showing a language model next to the text (the rest is bookkeeping).
LLM_KEYS = ("title", "heading_path", "citation")


def passage_score(p: Passage) -> float | None:
    """The passage's final score: the cross-encoder's when it ran, else the fused one."""
    return p.scores.rerank if p.scores.rerank is not None else p.scores.fused


def passage_metadata(env: Envelope, p: Passage) -> dict[str, Any]:
    """Where ``p`` came from, how it scored at each stage, and what ``env`` says about the answer.

    ``url`` is the page's address when the ingest gave one (``--base-url``), else the source
    when it is a web address, else None; ``citation`` is always there (``envelope.cite``:
    the URL, ``guide.pdf p. 2``, ``help.html#karty``, a path).
    """
    url = p.url or (cite(p) if p.source.startswith(("http://", "https://")) else None)
    meta: dict[str, Any] = {
        "chunk_id": p.chunk_id,
        "doc_id": p.doc_id,
        "title": p.title,
        "heading_path": list(p.heading_path),
        "source": p.source,
        "url": url,
        "anchor": p.anchor,
        "citation": cite(p),
        "section_id": p.section_id,
        "parent_section_id": p.parent_section_id,
        "kind": p.kind,
        "rank": p.rank,
        "tokens": p.tokens,
        "scores": p.scores.model_dump(),
        "score": passage_score(p),
        "via_reserved_slot": p.via_reserved_slot,
        # Trimmed to its evidence sentences: the document's text is not the whole chunk, which
        # costs full_tokens (SearchClient.section gives it).
        "trimmed": p.trimmed,
        "full_tokens": p.full_tokens,
        # The passage's filterable fields, and whom and with what filters the answer was made:
        # an app that caches or forwards documents can tell whose they are.
        "category": p.category,
        "tenant": p.tenant,
        **{
            k: getattr(p, k)
            for k in LOCATION_FIELDS
            if k not in ("anchor", "url") and getattr(p, k) is not None
        },
        "question": env.question,
        "status": env.status,
        "budget_tokens": env.budget_tokens,
        "spent_tokens": env.spent_tokens,
        "left_out_count": len(env.left_out),
        "left_out_for_budget": env.left_out_for_budget,
        "index": env.freshness.index,
        "access": copy.deepcopy(env.access),  # each document its own: one's edits reach no other
        "filters": copy.deepcopy(env.filters),
    }
    return meta


def passages_with_metadata(env: Envelope) -> list[tuple[Passage, dict[str, Any]]]:
    """Each selected passage of ``env`` in rank order, with its metadata."""
    return [(p, passage_metadata(env, p)) for p in env.passages]
