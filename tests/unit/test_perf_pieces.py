"""The pure pieces of the fast query path: the content hash, server-side collapse and its fallback."""

from __future__ import annotations

from osrag.names import content_hash
from osrag.records import ChunkSource
from osrag.search.candidates import Candidate, distinct_hits
from osrag.search.query import candidates_body, collapsed


def test_content_hash_ignores_case_spacing_and_punctuation_only() -> None:
    a = content_hash("Скидка 10 % на лампы.")
    assert a == content_hash("  скидка 10% НА лампы ")
    assert a == content_hash("Скидка—10 %\nна  лампы!")
    assert a != content_hash("Скидка 15 % на лампы.")  # digits are content
    assert a != content_hash("Скидка 10 % на лампу.")  # so are word forms
    assert len(a) == 20 and int(a, 16) >= 0


def test_collapsed_adds_collapse_on_content_hash_and_keeps_the_body() -> None:
    body = candidates_body("bm25", "скидка", None, 40, [])
    got = collapsed(body)
    assert got["collapse"] == {"field": "content_hash"}
    assert {k: v for k, v in got.items() if k != "collapse"} == body
    assert "collapse" not in body  # the original is not changed


def _hit(i: int, text: str, stored: str | None = None) -> Candidate:
    src = {"text": text, **({"content_hash": stored} if stored else {})}
    return Candidate(ChunkSource.of(src, chunk_id=f"c{i}"), fused=1.0 / (i + 1), rank=i + 1)


def test_distinct_hits_keeps_the_best_of_each_text_renumbered_and_cut() -> None:
    hits = [
        _hit(0, "Скидка 10 %"),
        _hit(1, "скидка 10%"),  # the same text: dropped
        _hit(2, "Доставка"),
        _hit(3, "x", stored=content_hash("Доставка")),  # the stored hash wins over the text
        _hit(4, "Возврат"),
        _hit(5, "Гарантия"),
    ]
    got = distinct_hits(hits, depth=3)
    assert [h.chunk_id for h in got] == ["c0", "c2", "c4"]
    assert [h.rank for h in got] == [1, 2, 3]
    assert [h.chunk_id for h in distinct_hits(hits, depth=10)] == ["c0", "c2", "c4", "c5"]
