"""Evaluation on more than one set: the golden set and any BEIR-layout set, side by side.

- ``datasets``: the golden loader (section spans) and the BEIR loader (doc-level qrels);
- ``runs``: indices per set, configurations, ranked lists, top-k vs selection at each budget;
- ``metrics``: ranx for ranked-list metrics and the paired test; budget measures by hand;
- ``report`` and ``plot``: results.json, REPORT.md, one recall-vs-budget PNG per set;
- ``suite``: ``run`` (what ``osrag eval`` calls) and ``compare_settings`` (quick tuning runs).
"""

from osrag.evaluation.datasets import (
    BeirSet,
    EvalSet,
    GoldenSet,
    Query,
    TreeSet,
    load_beir,
    load_dataset,
    load_golden,
    load_tree,
)
from osrag.evaluation.report import format_table, machine_info, write_outputs
from osrag.evaluation.suite import DEFAULT_BUDGETS, EvalConfig, compare_settings, run

__all__ = [
    "DEFAULT_BUDGETS",
    "BeirSet",
    "EvalConfig",
    "EvalSet",
    "GoldenSet",
    "Query",
    "TreeSet",
    "compare_settings",
    "format_table",
    "load_beir",
    "load_dataset",
    "load_golden",
    "load_tree",
    "machine_info",
    "run",
    "write_outputs",
]
