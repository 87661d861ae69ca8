"""`osrag eval` end to end on a slice of the golden set, against the live node."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from osrag import eval as ev
from osrag.settings import Settings

pytestmark = pytest.mark.integration

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture
def prefix(unique_name: str, os_client) -> Iterator[str]:
    yield unique_name
    os_client.indices.delete(index=f"{unique_name}-*", ignore_unavailable=True, expand_wildcards="all")
    for kind in ("_index_template", "_component_template"):
        got = (
            os_client.transport.perform_request("GET", f"/{kind}/{unique_name}-*", params={"ignore": 404})
            or {}
        )
        key = "index_templates" if kind == "_index_template" else "component_templates"
        for item in got.get(key, []):
            os_client.transport.perform_request("DELETE", f"/{kind}/{item['name']}")
    pipes = os_client.transport.perform_request("GET", "/_search/pipeline", params={"ignore": 404}) or {}
    for name in pipes:
        if name.startswith(unique_name):
            os_client.transport.perform_request("DELETE", f"/_search/pipeline/{name}")


def test_eval_slice_writes_table_json_report_and_plot(
    opensearch_url: str, prefix: str, tmp_path: Path
) -> None:
    base = Settings(url=opensearch_url, embedding_model="navec:news-300d", rerank=False, _env_file=None)
    cfg = ev.EvalConfig(
        golden=REPO / "golden" / "golden.jsonl",
        corpus=REPO / "golden" / "corpus",
        out_dir=tmp_path / "report",
        budget=600,
        budgets=(300, 600),
        prefix=prefix,
        limit=12,
    )
    report = ev.run(base, cfg)
    names = [r["config"] for r in report["retrieval"]]
    assert "headings · bm25 russian" in names and "headings · bm25 standard analyzer" in names
    assert any(n.startswith("shipped default") for n in names)
    for row in report["retrieval"]:
        for m in ("hit@3", "hit@5", "hit@20", "recall@20", "mrr", "ndcg@5"):
            assert 0.0 <= row[m] <= 1.0, (row["config"], m)
        assert row["hit@3"] <= row["hit@5"] <= row["hit@20"]
    # The Russian analyzer finds the exact-code questions of the slice.
    bm25 = next(r for r in report["retrieval"] if r["config"] == "headings · bm25 russian")
    assert bm25["hit@20"] > 0.5
    curve = report["budget_curve"]
    assert set(curve) == {"top-k", "top-k, fixed-size chunks", "budget selection"}
    for method, rows in curve.items():
        assert rows["300"]["tokens_per_answered"] <= 300 and rows["600"]["tokens_per_answered"] <= 600, method
    out = tmp_path / "report"
    assert json.loads((out / "results.json").read_text())["questions"] == 12
    md = (out / "REPORT.md").read_text()
    assert "navec:news-300d" in md and "no rerank gain is claimed" in md
    assert (out / "recall_vs_budget.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    table = ev.format_table(report)
    assert "budget selection" in table and "headings · knn" in table
