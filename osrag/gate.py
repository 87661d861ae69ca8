"""The lexical relevance gate and the evidence order (no cross-encoder).

Whether a candidate evidently answers the question, independent of the fused score
(which is rank-based and always positive): the share of the question's content words
it contains, the cosine of its stored embedding with the question's, and whether it
names an exact code the question names. Pure functions over ``Hit``s.

The stop list and the five-letter "stem" are a Python approximation of the
``ru_search`` analyzer; they are to be rebuilt on the index's own ``_analyze``.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Sequence
from typing import Any

from osrag.query import Hit

_WORD = re.compile(r"[0-9A-Za-zА-Яа-яЁё_][0-9A-Za-zА-Яа-яЁё_.\-]*[0-9A-Za-zА-Яа-яЁё_]|[0-9A-Za-zА-Яа-яЁё]")
_GATE_STOP = frozenset(
    [
        "и",
        "в",
        "во",
        "на",
        "с",
        "со",
        "как",
        "а",
        "то",
        "все",
        "так",
        "но",
        "да",
        "к",
        "у",
        "же",
        "за",
        "бы",
        "по",
        "от",
        "из",
        "о",
        "об",
        "ли",
        "или",
        "для",
        "при",
        "что",
        "это",
        "этот",
        "эта",
        "эти",
        "какой",
        "какая",
        "какие",
        "какое",
        "где",
        "когда",
        "как",
        "ли",
        "мне",
        "меня",
        "мой",
        "моя",
        "мы",
        "вы",
        "вас",
        "нас",
        "их",
        "его",
        "ее",
        "я",
        "ты",
        "он",
        "она",
        "они",
        "есть",
        "был",
        "была",
        "было",
        "будет",
        "можно",
        "нужно",
        "надо",
        "ли",
        "если",
        "у",
        "также",
        "еще",
        "уже",
    ]
)


@functools.lru_cache(maxsize=65536)
def _stem(word: str) -> str:
    w = word.lower().replace("ё", "е")
    if any(ch.isdigit() for ch in w) or re.search(r"[a-z]", w):
        return w  # identifiers are matched whole
    return w[:5] if len(w) > 5 else w


def query_terms(question: str) -> list[str]:
    return sorted({_stem(w) for w in _WORD.findall(question) if w.lower() not in _GATE_STOP and len(w) > 1})


def _is_identifier(word: str) -> bool:
    """A code such as TEA15, LAMP-LIGHT-MINI, v2.3.1, E_PROMO_3004 (letters with digits, or joined Latin parts)."""
    has_digit = any(ch.isdigit() for ch in word)
    has_alpha = any(ch.isalpha() for ch in word)
    joined_latin = bool(re.search(r"[A-Za-z]", word) and re.search(r"[A-Za-z0-9][-_.][A-Za-z0-9]", word))
    return (has_digit and has_alpha) or joined_latin


def identifier_terms(question: str) -> list[str]:
    """The exact codes a question names, lowercased (matched whole, never stemmed)."""
    return sorted({w.lower() for w in _WORD.findall(question) if _is_identifier(w)})


def names_identifier(identifiers: Sequence[str], text: str) -> bool:
    """True when ``text`` contains one of the question's codes as a whole word (TEA15 is not TEA10)."""
    if not identifiers:
        return False
    have = {w.lower() for w in _WORD.findall(text)}
    return any(i in have for i in identifiers)


def term_coverage(terms: Sequence[str], text: str) -> float:
    """Share of the question's content terms (crudely stemmed) that the text contains."""
    if not terms:
        return 0.0
    have = {_stem(w) for w in _WORD.findall(text)}
    return sum(1 for t in terms if t in have) / len(terms)


def cosines(qvec: Any, vectors: Sequence[Sequence[float] | None]) -> list[float]:
    """Cosine of the (normalised) question vector with each stored (normalised) vector; 0 when absent."""
    import numpy as np

    out = [0.0] * len(vectors)
    if qvec is None:
        return out
    q = np.asarray(qvec, dtype=np.float32)
    rows = [i for i, v in enumerate(vectors) if v and len(v) == len(q)]
    if rows:
        m = np.asarray([vectors[i] for i in rows], dtype=np.float32)
        for i, c in zip(rows, (m @ q).tolist()):
            out[i] = float(c)
    return out


def annotate(question: str, qvec: Any, hits: Sequence[Hit]) -> None:
    """Fill each hit's coverage, cosine, identifier match and relevance (their best)."""
    terms = query_terms(question)
    idents = identifier_terms(question)
    for h, cos in zip(hits, cosines(qvec, [h.source.get("embedding") for h in hits])):
        text = h.source.get("text", "")
        h.coverage, h.cosine = term_coverage(terms, text), cos
        h.ident_match = names_identifier(idents, text)
        h.relevance = max(h.coverage, h.cosine, 1.0 if h.ident_match else 0.0)


def is_relevant(h: Hit, min_coverage: float, min_cosine: float) -> bool:
    """Enough of the question's words, a close embedding, or an exact code the question names."""
    return h.coverage >= min_coverage or h.cosine >= min_cosine or h.ident_match


def relevant_ids(
    hits: Sequence[Hit],
    min_coverage: float,
    min_cosine: float,
    relative_coverage: float,
    relative_cosine: float,
) -> set[str]:
    """Absolute gate per hit, then a relative one: close to the best evidence found.

    The relative part is what keeps "minimal": once the best chunk covers most
    of the question, chunks that cover much less are not worth their tokens.
    """
    passing = [h for h in hits if is_relevant(h, min_coverage, min_cosine)]
    if not passing:
        return set()
    best_cov = max(h.coverage for h in passing)
    best_cos = max(h.cosine for h in passing)
    return {
        h.chunk_id
        for h in passing
        if h.ident_match
        or h.coverage >= relative_coverage * best_cov
        or h.cosine >= relative_cosine * best_cos
    }


def evidence_order(hits: Sequence[Hit]) -> list[Hit]:
    """Reorder fused candidates by how much of the question each one evidently answers.

    Without a cross-encoder, the question's term coverage, the embedding cosine and
    an exact code match are the best per-candidate evidence; the fused rank stays in
    as a prior and breaks ties. Weights measured on golden/ (see golden/report).
    """
    n = max(len(hits), 1)

    def score(pos: int, h: Hit) -> float:
        return 2.0 * h.coverage + h.cosine + (1.0 if h.ident_match else 0.0) + (n - pos) / n

    ranked = sorted(enumerate(hits), key=lambda p: (-score(*p), p[0]))
    return [h for _, h in ranked]
