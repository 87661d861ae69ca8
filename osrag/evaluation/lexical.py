"""The simplest strong lexical baseline, outside OpenSearch: Snowball-stemmed BM25 over the same chunks.

A reference that owes nothing to osrag's analyzer, fields or query building: the chunk texts
the index holds, lower-cased, ё→е, split into ``[0-9a-zа-я]+`` runs, stemmed by the Snowball
Russian stemmer, scored with Lucene's BM25 (k1 = 1.2, b = 0.75, idf = ln(1 + (N - n + 0.5) /
(n + 0.5))). When osrag's BM25 head or hybrid is significantly worse than this on a set,
the analyzer or the query is at fault, not the corpus.
"""

from __future__ import annotations

import math
import re
from collections import Counter, defaultdict
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

_WORD = re.compile(r"[0-9a-zа-я]+")
K1, B = 1.2, 0.75
#: What a ranked source carries (enough for every set's ``key``: golden spans, doc ids).
SOURCE_FIELDS = ("chunk_id", "doc_id", "start", "end", "token_count", "text")


def _stemmer() -> Any:
    import snowballstemmer

    return snowballstemmer.stemmer("russian")


class SnowballBM25:
    """An in-memory inverted index of chunk texts; ``search`` returns the sources, best first."""

    def __init__(self, sources: Iterable[Mapping[str, Any]]) -> None:
        self._stem = _stemmer()
        self._cache: dict[str, str] = {}
        self.sources: list[Mapping[str, Any]] = []
        self._postings: dict[str, list[tuple[int, int]]] = defaultdict(list)
        lengths: list[int] = []
        for src in sources:
            terms = self.terms(str(src.get("text") or ""))
            i = len(self.sources)
            self.sources.append(src)
            lengths.append(len(terms))
            for t, tf in Counter(terms).items():
                self._postings[t].append((i, tf))
        self._len = lengths
        self._avg = (sum(lengths) / len(lengths)) if lengths else 0.0

    def terms(self, text: str) -> list[str]:
        out = []
        for w in _WORD.findall(text.lower().replace("ё", "е")):
            s = self._cache.get(w)
            if s is None:
                s = self._cache[w] = self._stem.stemWord(w)
            out.append(s)
        return out

    def search(self, text: str, k: int) -> list[Mapping[str, Any]]:
        n = len(self.sources)
        scores: dict[int, float] = defaultdict(float)
        for t in set(self.terms(text)):
            post = self._postings.get(t)
            if not post:
                continue
            idf = math.log(1.0 + (n - len(post) + 0.5) / (len(post) + 0.5))
            for i, tf in post:
                norm = tf + K1 * (1.0 - B + B * self._len[i] / self._avg)
                scores[i] += idf * tf * (K1 + 1.0) / norm
        best = sorted(scores.items(), key=lambda p: (-p[1], p[0]))[:k]
        return [self.sources[i] for i, _ in best]


def index_sources(client: Any, index: str, fields: Sequence[str] = SOURCE_FIELDS) -> list[dict[str, Any]]:
    """Every chunk of ``index`` (its listed fields), in a stable order, by ``search_after`` pages."""
    out: list[dict[str, Any]] = []
    after: list[Any] | None = None
    while True:
        body: dict[str, Any] = {
            "size": 1000,
            "_source": list(fields),
            "sort": [{"chunk_id": "asc"}],
            "query": {"match_all": {}},
        }
        if after is not None:
            body["search_after"] = after
        hits = client.search(index=index, body=body)["hits"]["hits"]
        if not hits:
            return out
        out += [h["_source"] for h in hits]
        after = hits[-1]["sort"]
