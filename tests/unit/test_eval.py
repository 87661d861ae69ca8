from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

import pytest

from osrag import eval as ev
from osrag.errors import ConfigError
from osrag.search import Hit

REPO = Path(__file__).resolve().parents[2]
GOLDEN = REPO / "golden" / "golden.jsonl"
CORPUS = REPO / "golden" / "corpus"


def test_golden_set_is_complete_and_every_reference_resolves() -> None:
    qs = ev.load_golden(GOLDEN)
    assert len(qs) >= 40 and len({q.qid for q in qs}) == len(qs)
    types = Counter(q.qtype for q in qs)
    for t in ("exact_id", "paraphrase", "two_conditions", "table", "code", "multi_doc", "no_answer"):
        assert types[t] >= 5, t
    spans = ev.SectionSpans(CORPUS)
    assert len(spans.docs) >= 30
    for q in qs:
        keys = spans.keys_for(q)  # raises on an unknown doc or section
        assert bool(keys) == (q.qtype != "no_answer")
        for doc, s, e in keys.values():
            assert 0 <= s < e <= len(spans.docs[doc].text)


def test_bad_golden_line_names_file_and_line(tmp_path: Path) -> None:
    p = tmp_path / "g.jsonl"
    p.write_text(json.dumps({"id": "a", "question": "q", "type": "t"}) + "\n{broken\n")
    with pytest.raises(ConfigError, match=r"g.jsonl:2"):
        ev.load_golden(p)


def _hit(cid: str, doc: str, start: int, end: int, text: str = "w") -> Hit:
    return Hit(
        chunk_id=cid, source={"doc_id": doc, "start": start, "end": end, "text": text}, fused=0.0, rank=0
    )


def test_judge_by_span_overlap() -> None:
    rel = {"d#A": ("d", 100, 200)}
    assert ev.judge({"doc_id": "d", "start": 150, "end": 400}, rel) == "d#A"
    assert ev.judge({"doc_id": "d", "start": 200, "end": 300}, rel) is None  # touching is not overlapping
    assert ev.judge({"doc_id": "x", "start": 150, "end": 160}, rel) is None
    keys = ev.ranked_keys([_hit("d:0", "d", 0, 50), _hit("d:1", "d", 120, 130)], rel)
    assert keys == ["~d:0", "d#A"]
    m = ev.retrieval_metrics(keys, ["d#A"])
    assert m["hit@3"] == 1.0 and m["mrr"] == 0.5


def test_topk_baseline_stops_at_the_first_chunk_that_does_not_fit() -> None:
    hits = [_hit("a", "d", 0, 1, "x " * 5), _hit("b", "d", 0, 1, "x " * 10), _hit("c", "d", 0, 1, "x")]
    count = lambda t: len(t.split())  # noqa: E731
    assert [h.chunk_id for h in ev.topk_within_budget(hits, 12, count)] == ["a"]
    assert [h.chunk_id for h in ev.topk_within_budget(hits, 16, count)] == ["a", "b", "c"]


def test_delivery_metrics_count_off_topic_tokens() -> None:
    rel = {"d#A": ("d", 0, 10), "d#B": ("d", 10, 20)}
    got = ev.delivery_metrics(
        [({"doc_id": "d", "start": 0, "end": 5}, 30), ({"doc_id": "x", "start": 0, "end": 5}, 10)], rel
    )
    assert got["recall_in_budget"] == 0.5 and got["answered"] == 1.0
    assert got["tokens"] == 40 and got["off_topic_share"] == pytest.approx(0.25)
