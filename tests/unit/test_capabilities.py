"""The capability model: version lines, missing plugins, and what is adapted (pure, no server)."""

from __future__ import annotations

import pytest

from osrag.capabilities import (
    adapt_search_body,
    from_responses,
    from_server,
    fusion_in_use,
    parse_version,
    pipeline_file,
)
from osrag.errors import ClusterError

PLUGINS = ["opensearch-knn", "opensearch-neural-search", "opensearch-ml"]


def test_versions_parse_and_compare() -> None:
    assert parse_version("2.19.1") == (2, 19, 1)
    assert parse_version("3.6.0-SNAPSHOT") == (3, 6, 0)
    with pytest.raises(ClusterError, match="version"):
        parse_version("latest")


def test_line_219_has_no_weighted_rrf_no_top_level_filter_no_hybrid_collapse() -> None:
    c = from_server("2.19.1", PLUGINS)
    assert not c.weighted_rrf and not c.hybrid_filter and not c.collapse_in_hybrid
    assert c.pagination_depth and c.knn_method_parameters
    assert len(c.adapted) == 3
    assert pipeline_file("hybrid-rrf", c) == "hybrid-rrf-equal"
    assert pipeline_file("hybrid-rrf-explain", c) == "hybrid-rrf-explain-equal"
    assert pipeline_file("hybrid-minmax", c) == "hybrid-minmax"
    assert "equal weights" in fusion_in_use("rrf", (0.8, 0.2), c)
    assert fusion_in_use("minmax", (0.8, 0.2), c) == "minmax 0.8/0.2"


def test_line_3x_uses_everything() -> None:
    c = from_server("3.6.0", PLUGINS)
    assert c.weighted_rrf and c.hybrid_filter and c.collapse_in_hybrid and c.adapted == ()
    assert pipeline_file("hybrid-rrf", c) == "hybrid-rrf"
    assert fusion_in_use("rrf", (0.8, 0.2), c) == "rrf 0.8/0.2"
    # 3.0: the filter, not yet weighted RRF or collapse
    c30 = from_server("3.0.0", PLUGINS)
    assert c30.hybrid_filter and not c30.weighted_rrf and not c30.collapse_in_hybrid


@pytest.mark.parametrize(
    ("version", "plugins", "needle"),
    [
        ("2.18.0", PLUGINS, "older than 2.19"),
        ("2.19.1", ["opensearch-knn"], "opensearch-neural-search missing"),
        ("3.6.0", [], "opensearch-knn, opensearch-neural-search missing"),
    ],
)
def test_unsupported_server_is_one_line_naming_what_is_missing(
    version: str, plugins: list[str], needle: str
) -> None:
    with pytest.raises(ClusterError, match=needle) as err:
        from_server(version, plugins)
    assert "\n" not in str(err.value)


def test_from_responses_reads_info_and_cat_plugins() -> None:
    c = from_responses(
        {"version": {"number": "2.19.1"}},
        [
            {"name": "n", "component": "opensearch-knn"},
            {"name": "n", "component": "opensearch-neural-search"},
        ],
    )
    assert c.version == "2.19.1" and c.plugins == ("opensearch-knn", "opensearch-neural-search")


def _hybrid(**extra: object) -> dict:
    knn = {"knn": {"embedding": {"vector": [0.1], "k": 5, "filter": {"bool": {"filter": ["A"]}}}}}
    return {
        "size": 5,
        "query": {"hybrid": {"queries": [{"match": {"text": "q"}}, knn], "pagination_depth": 5, **extra}},
        "collapse": {"field": "content_hash"},
    }


def test_top_level_filter_moves_into_each_head_before_3_0() -> None:
    body = _hybrid(filter={"term": {"x": 1}})
    got = adapt_search_body(body, from_server("2.19.1", PLUGINS))
    hybrid = got["query"]["hybrid"]
    assert "filter" not in hybrid and hybrid["pagination_depth"] == 5
    lexical, dense = hybrid["queries"]
    assert lexical == {"bool": {"must": [{"match": {"text": "q"}}], "filter": [{"term": {"x": 1}}]}}
    assert dense["knn"]["embedding"]["filter"] == {
        "bool": {"filter": [{"bool": {"filter": ["A"]}}, {"term": {"x": 1}}]}
    }
    assert "collapse" not in got  # 2.19.1 accepts it and silently keeps duplicates
    assert body["query"]["hybrid"]["filter"] == {"term": {"x": 1}}  # the input is not changed


def test_3x_body_is_left_as_built() -> None:
    body = _hybrid(filter={"term": {"x": 1}})
    assert adapt_search_body(body, from_server("3.6.0", PLUGINS)) == body


def test_non_hybrid_collapse_is_kept_on_219() -> None:
    body = {"query": {"match": {"text": "q"}}, "collapse": {"field": "content_hash"}}
    assert adapt_search_body(body, from_server("2.19.1", PLUGINS)) == body
