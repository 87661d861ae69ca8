"""What the index says about the codes a question names (TEA15, LAMP-LIGHT-MINI, v2.3.1).

The relevance gate (``osrag.search.gate``) needs to know which of the question's Latin codes an answer
must hold. Not the code's punctuation decides that but the index: a code the index holds rarely
is what the question is about, and a code it never saw while it holds the code's siblings is a
thing it does not have. Both come from one ``global`` aggregation on the candidates search
(``code_aggs``), read by ``parse_code_evidence`` and decided by ``required_codes``. Pure.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

#: The aggregation that carries each Latin code's document frequency in the whole-identifier
#: subfield and the size of its family there.
CODE_AGG = "osrag_codes"
CODE_FIELD = "text.ident"
#: A code held by at most this share of the index's chunks is rare: a chunk about it holds it.
RARE_CODE_SHARE = 0.005
_FAMILY_HEAD = re.compile(r"^[a-z]{2,}")


def code_family(code: str) -> str | None:
    """The Lucene regexp of a code's siblings in ``text.ident``: the same leading letters followed
    by a separator or a digit (TEA15 -> tea10, tea-green-sencha-100; LAMP-FLOOR-ARC -> lamp-light).
    None for a code with fewer than two leading Latin letters (p.s, 2000px, v2): no family to know."""
    m = _FAMILY_HEAD.match(code)
    return f"{m.group(0)}[-_.0-9].*" if m else None


def code_aggs(codes: Sequence[str]) -> dict[str, Any]:
    """Per code: its document frequency in ``text.ident`` and how many chunks hold its family."""
    fam = [code_family(c) for c in codes]
    return {
        CODE_AGG: {
            "global": {},
            "aggs": {
                "df": {"filters": {"filters": [{"term": {CODE_FIELD: c}} for c in codes]}},
                "family": {
                    "filters": {
                        "filters": [
                            {"regexp": {CODE_FIELD: {"value": f}}} if f else {"match_none": {}} for f in fam
                        ]
                    }
                },
            },
        }
    }


@dataclass(frozen=True)
class CodeEvidence:
    """What the index says about the question's Latin codes: document frequency, family size."""

    df: Mapping[str, int]
    family: Mapping[str, int]
    doc_count: int


def parse_code_evidence(resp: Mapping[str, Any], codes: Sequence[str]) -> CodeEvidence:
    """The ``CodeEvidence`` of a search made with ``code_aggs(codes)``."""
    agg = (resp.get("aggregations") or {}).get(CODE_AGG)
    if agg is None:
        raise ValueError(f"the search response lacks the {CODE_AGG} aggregation")
    df = list(((agg.get("df") or {}).get("buckets")) or [])
    fam = list(((agg.get("family") or {}).get("buckets")) or [])
    if len(df) != len(codes) or len(fam) != len(codes):
        raise ValueError(f"code evidence for {len(codes)} codes was asked, {len(df)}/{len(fam)} came back")
    return CodeEvidence(
        {c: int(b.get("doc_count") or 0) for c, b in zip(codes, df)},
        {c: int(b.get("doc_count") or 0) for c, b in zip(codes, fam)},
        int(agg.get("doc_count") or 0),
    )


def required_codes(ev: CodeEvidence, rare_share: float = RARE_CODE_SHARE) -> tuple[str, ...]:
    """The codes an answer must hold, by what the index says of them, not by their punctuation.

    * a code the index never saw whole, while it holds its family (TEA-MATCHA-30 in a catalogue of
      TEA-... articles): the question asks for a thing the index does not have;
    * a rare code the index holds (at most ``rare_share`` of its chunks): a chunk about it holds
      it, and the lexical head asks for it whole, so candidates without it are about other things.

    A word the index has never seen and has no family for (a URL piece, ``2000px``, ``p.s``), or a
    common one (``console.log`` throughout a JavaScript tutorial), is evidence like any other term
    and never decides «nothing relevant» alone.
    """
    limit = max(1.0, rare_share * ev.doc_count)
    return tuple(c for c, df in ev.df.items() if (df == 0 and ev.family.get(c, 0) > 0) or (0 < df <= limit))
