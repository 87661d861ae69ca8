"""The recall-safe selection contract (issue 11, item 4) on a slice of both eval sets, live node.

The eval harness's own code ranks, selects and scores (``osrag.evaluation.suite.evaluate_set``),
so the contract is asserted on exactly what ``osrag eval`` reports: at every budget the default
selection's recall within budget is at least plain top-k's minus 0.02, «nothing relevant» on
answerable dev-set questions stays within 1 %, and the golden no-answer questions still get it
at least 4 times in 7. Slow (a few minutes: two corpora ingested, ~500 searches).
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from osrag.evaluation import runs, suite
from osrag.evaluation.datasets import load_beir, load_golden
from osrag.settings import Settings

pytestmark = [pytest.mark.integration, pytest.mark.slow]

REPO = Path(__file__).resolve().parents[2]
DEV = REPO.parent / "shared" / "datasets" / "xquad-ru-dev"
BUDGETS = (150, 600, 1500, 2500)
DEV_SLICE = 60
RECALL_SLACK = 0.02
MAX_NOTHING_ON_ANSWERABLE = 0.01
# Of golden's 7 no-answer questions: the two whose code is in no candidate. The gate refuses only
# when the evidence forces it (docs/selection.md, issue 35); navec's fitted thresholds caught 4, at the
# price of refusing answerable questions on sets nobody tuned them on.
MIN_NO_ANSWER_CAUGHT = 2
NAVEC = "navec:news-300d"


@pytest.fixture
def prefix(unique_name: str, os_client: Any) -> Iterator[str]:
    yield unique_name
    os_client.indices.delete(index=f"{unique_name}-*", ignore_unavailable=True, expand_wildcards="all")
    for kind, key in (("_index_template", "index_templates"), ("_component_template", "component_templates")):
        got = (
            os_client.transport.perform_request("GET", f"/{kind}/{unique_name}-*", params={"ignore": 404})
            or {}
        )
        for item in got.get(key, []):
            os_client.transport.perform_request("DELETE", f"/{kind}/{item['name']}")
    pipes = os_client.transport.perform_request("GET", "/_search/pipeline", params={"ignore": 404}) or {}
    for name in pipes:
        if name.startswith(unique_name):
            os_client.transport.perform_request("DELETE", f"/_search/pipeline/{name}")


def _check(result: dict[str, Any], name: str) -> list[str]:
    """Contract violations of one set's budget table (empty when it holds)."""
    bad = []
    for b in BUDGETS:
        sel = result["budget"][runs.SELECTION][str(b)]
        top = result["budget"][runs.TOPK][str(b)]
        if sel["recall_in_budget"] < top["recall_in_budget"] - RECALL_SLACK:
            bad.append(
                f"{name} @ {b}: selection recall {sel['recall_in_budget']:.3f} < top-k "
                f"{top['recall_in_budget']:.3f} - {RECALL_SLACK}"
            )
    return bad


@pytest.mark.skipif(not DEV.is_dir(), reason=f"the dev set is not at {DEV}")
def test_default_selection_is_recall_safe_on_both_sets(opensearch_url: str, prefix: str) -> None:
    # navec, the light model: its cosines spread widest, so the gate's floor matters most here.
    base = suite.eval_settings(Settings(url=opensearch_url, embedding_model=NAVEC, _env_file=None))
    assert base.selection == "recall"  # the contract is about the shipped default
    cfg = suite.EvalConfig(budgets=BUDGETS, depth=base.candidate_depth, prefix=prefix, full=False, workers=2)
    golden = load_golden(REPO / "golden" / "golden.jsonl")
    dev = load_beir(DEV).sample(DEV_SLICE)
    assert len(golden.queries) - len(golden.answerable) == 7

    got_golden = suite.evaluate_set(base, golden, cfg, lambda m: None)
    got_dev = suite.evaluate_set(base, dev, cfg, lambda m: None)

    assert _check(got_golden, "golden") + _check(got_dev, "dev") == []
    for b in BUDGETS:
        nothing_dev = got_dev["nothing_found"][runs.SELECTION][str(b)]["answerable"]
        assert nothing_dev <= MAX_NOTHING_ON_ANSWERABLE, (b, nothing_dev)
        caught = round(7 * got_golden["nothing_found"][runs.SELECTION][str(b)]["no_answer"])
        assert caught >= MIN_NO_ANSWER_CAUGHT, (b, caught)
        for got in (got_golden, got_dev):  # the budget is a hard limit for both methods
            for method in (runs.SELECTION, runs.TOPK):
                assert got["budget"][method][str(b)]["tokens_per_answered"] <= b, (got["name"], method, b)
