from __future__ import annotations

import json

import pytest

from osrag import templates
from osrag.capabilities import from_server
from osrag.errors import ConfigError
from osrag.settings import Settings
from osrag.store.alias import AliasStore, _compare


def test_whole_placeholder_keeps_type_and_inline_is_text() -> None:
    node = {"a": "{{n}}", "b": ["{{w}}", "x{{n}}y"], "c": {"d": "{{flag}}"}}
    out = templates.render(node, {"n": 3, "w": [0.5, 0.5], "flag": True})
    assert out == {"a": 3, "b": [[0.5, 0.5], "x3y"], "c": {"d": True}}


def test_unknown_placeholder_is_an_error_naming_it() -> None:
    with pytest.raises(ConfigError, match="missing_one"):
        templates.render({"a": "{{missing_one}}"}, {})


@pytest.mark.parametrize("version", ["3.6.0", "2.19.1"])
def test_every_shipped_json_file_parses_and_renders(version: str) -> None:
    # No server: the capabilities a server of this version would report, and an address where
    # nothing listens, so any request would fail the test.
    admin = AliasStore(Settings(url="http://127.0.0.1:1", alias="unit", _env_file=None))
    admin._caps = from_server(version, ["opensearch-knn", "opensearch-neural-search"])
    comps = admin.desired_components()
    assert set(comps) == {"unit-analysis"}
    tpl = admin.desired_index_template()
    assert tpl["index_patterns"] and all(p.startswith("unit") for p in tpl["index_patterns"])
    assert tpl["template"]["mappings"]["dynamic"] == "strict"
    pipes = admin.desired_pipelines()
    rrf = pipes[admin.pipeline_name("rrf")]["phase_results_processors"][0]["score-ranker-processor"]
    assert rrf["combination"]["technique"] == "rrf"
    assert rrf["combination"]["rank_constant"] == 60
    # Weighted RRF from 3.1; the equal-weight file before it (2.19 refuses the weights).
    assert ("weights" in json.dumps(rrf)) == (version == "3.6.0")
    knn = templates.load_template(
        "knn-field", {"dimension": 7, "engine": "lucene", "m": 16, "ef_construction": 128}
    )
    assert knn["embedding"]["dimension"] == 7
    # No placeholder survives rendering anywhere.
    assert "{{" not in json.dumps([comps, tpl, pipes], ensure_ascii=False)


def test_fingerprint_changes_with_model_and_dimension() -> None:
    a = templates.fingerprint("m1", 300, 1)
    assert a == templates.fingerprint("m1", 300, 1)
    assert a != templates.fingerprint("m2", 300, 1)
    assert a != templates.fingerprint("m1", 384, 1)


def test_drift_compare_normalises_server_strings_and_reports_differences() -> None:
    want = {"template": {"settings": {"index.knn": True, "number_of_shards": 1}}, "version": 1}
    have = {"template": {"settings": {"index": {"knn": "true", "number_of_shards": "1"}}}, "version": 1}
    assert _compare(want, have) == []
    have["template"]["settings"]["index"]["number_of_shards"] = "2"
    diffs = _compare(want, have)
    assert len(diffs) == 1 and "number_of_shards" in diffs[0]
