"""The names of what osrag keeps in the cluster for an alias, and the query pieces every
reader and writer agree on (the closed word sets themselves live in ``osrag.vocabulary``).

The store (installs, writes), ingest, reindex and search (reads) all import from here and never from each other for these names. Pure:
no client, no I/O.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import re
from typing import Any

from osrag.vocabulary import DEFAULT_FUSION, PIPELINES, PipelineVariant

__all__ = [
    "ANALYZERS",
    "HIDDEN_ID",
    "age_seconds",
    "content_hash",
    "index_regex",
    "pipeline_name",
    "rerank_pipeline_name",
    "state_index",
    "template_name",
    "utcnow",
    "visibility_filter",
]

#: The analyzers the index template installs (admin's debugging view lists them).
ANALYZERS = ("ru_index", "ru_search", "ru_quote", "ident")
#: The one document of the state index that lists the version keys readers must not see.
HIDDEN_ID = "hidden"


def pipeline_name(alias: str, variant: PipelineVariant = DEFAULT_FUSION) -> str:
    """The alias's search pipeline of ``variant`` (the shipped fusion's when not named)."""
    return f"{alias}-{PIPELINES[variant]}"


def rerank_pipeline_name(alias: str, variant: PipelineVariant = DEFAULT_FUSION) -> str:
    """The alias's fusion pipeline of ``variant`` followed by the ``rerank`` response processor of
    its cluster cross-encoder (``OSRAG_RERANKER_MODEL=ml:…``)."""
    return f"{pipeline_name(alias, variant)}-rerank"


def template_name(alias: str) -> str:
    return f"{alias}-template"


def state_index(alias: str) -> str:
    return f"{alias}.state"


def index_regex(alias: str) -> str:
    """The names ``AliasStore.create_index`` gives the alias's indices (``{alias}-{fingerprint}-{timestamp}``),
    as an unanchored regex: ``{alias}-*`` would also match an alias that extends this one."""
    return rf"{re.escape(alias)}-[0-9a-f]{{10}}-[0-9]{{17}}"


def visibility_filter(alias: str) -> dict[str, Any]:
    """The clause every read adds (on both heads): hide pending and retired versions."""
    return {
        "bool": {
            "must_not": [
                {"terms": {"version_key": {"index": state_index(alias), "id": HIDDEN_ID, "path": "keys"}}}
            ]
        }
    }


#: Characters that do not change what a chunk says (case, spacing, punctuation) are dropped
#: before hashing, so copies that differ only in them share a hash; digits and words stay.
_NOT_WORD = re.compile(r"[\W_]+")


def content_hash(text: str) -> str:
    """The ``content_hash`` keyword of a chunk, made from its body (the section text without
    the heading path): equal for chunks with the same words in the same order (case, spacing
    and punctuation aside), even under different headings. Readers collapse candidates on it, so a text
    repeated across documents takes one candidate slot, not forty."""
    norm = _NOT_WORD.sub(" ", text.casefold()).strip()
    return hashlib.sha1(norm.encode("utf-8")).hexdigest()[:20]


def utcnow() -> dt.datetime:
    return dt.datetime.now(dt.UTC)


def age_seconds(iso_time: str | None, now: dt.datetime | None = None) -> float | None:
    """Seconds since ``iso_time`` (a recorded ingest), or None when absent or unreadable
    (unparsable or without a timezone, e.g. a hand-edited ``_meta``)."""
    if not iso_time:
        return None
    try:
        return ((now or utcnow()) - dt.datetime.fromisoformat(iso_time)).total_seconds()
    except (TypeError, ValueError):
        return None
