"""Installing templates, pipelines and the first index; drift checks; the CLI around them.

Runs against the session's real node; every test has its own alias and removes
what it installed (``osrag_cleanup`` from test_analysis).
"""

from __future__ import annotations

import copy
import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest
from click.testing import CliRunner
from opensearchpy.exceptions import RequestError

from osrag.cli import cli
from osrag.connection import make_client
from osrag.errors import ClusterError
from osrag.settings import Settings
from osrag.store.alias import AliasStore
from osrag.vocabulary import PIPELINES
from tests.integration.test_analysis import admin, osrag_cleanup  # noqa: F401  (shared fixtures)

pytestmark = pytest.mark.integration


def _alias_indices(settings: Settings) -> dict[str, dict]:
    """Concrete indices behind ``{alias}-*`` → their aliases."""
    got = make_client(settings).indices.get_alias(index=f"{settings.alias}-*", ignore=404)
    return {k: v.get("aliases", {}) for k, v in got.items() if k not in ("error", "status")}


def _drift_pipeline(admin: AliasStore, rank_constant: int = 10) -> str:
    """Change the RRF pipeline on the server behind osrag's back; returns its name."""
    name = admin.pipeline_name("rrf")
    body = copy.deepcopy(admin.desired_pipelines()[name])
    body["phase_results_processors"][0]["score-ranker-processor"]["combination"]["rank_constant"] = (
        rank_constant
    )
    admin.cluster.client.transport.perform_request("PUT", f"/_search/pipeline/{name}", body=body)
    return name


def _cli_env(settings: Settings) -> dict[str, str]:
    return {
        "OSRAG_URL": settings.url,
        "OSRAG_ALIAS": settings.alias,
        "OSRAG_EMBEDDING_MODEL": "navec:news-300d",
    }


# --------------------------------------------------------------------------- install / check
@pytest.mark.compat
def test_install_is_idempotent(admin: AliasStore, settings: Settings) -> None:
    first = admin.current_index()
    before = _alias_indices(settings)
    assert list(before) == [first]
    assert settings.alias in before[first]

    again = admin.install()
    assert again["created_index"] is None
    assert again["index"] == first
    after = _alias_indices(settings)
    assert after == before  # no new index, alias (and is_write_index) unchanged
    assert after[first][settings.alias].get("is_write_index") is True


@pytest.mark.compat
def test_check_reports_pipeline_drift_until_reinstalled(admin: AliasStore) -> None:
    assert admin.check() == []
    name = _drift_pipeline(admin, rank_constant=10)

    drifts = admin.check()
    assert [(d.kind, d.name) for d in drifts] == [("search pipeline", name)]
    # Lists are compared whole, so the difference shows the processors list from the file and from the cluster.
    [diff] = drifts[0].differences
    assert diff.startswith("phase_results_processors: file ")
    file_side, cluster_side = diff.split(" vs cluster ", 1)
    assert '"rank_constant": "60"' in file_side and '"rank_constant": "10"' in cluster_side, diff
    assert name in str(drifts[0])

    admin.install()
    assert admin.check() == []


def test_check_on_missing_alias_reports_everything_missing(
    settings: Settings, osrag_cleanup: Callable[[str], None]
) -> None:
    adm = AliasStore(settings)  # nothing installed for this alias
    drifts = adm.check()
    alias = settings.alias
    expected = {
        ("component template", f"{alias}-analysis"),
        ("index template", f"{alias}-template"),
        ("alias", alias),
    } | {("search pipeline", adm.pipeline_name(v)) for v in PIPELINES}
    assert {(d.kind, d.name) for d in drifts} == expected
    for d in drifts:
        assert d.differences in (["missing in cluster"], ["no index behind the alias"]), d


def test_index_meta_records_the_model(admin: AliasStore, settings: Settings) -> None:
    index = admin.require_index()
    meta = admin.meta(index)
    assert meta.embedding_model == "navec:news-300d"
    assert meta.dimension == 300
    assert meta.stemmer == "russian"
    fp = str(meta.fingerprint)
    assert len(fp) == 10 and fp in index
    assert index.startswith(f"{settings.alias}-{fp}-")
    # The vector field got the model's dimension.
    mapping = admin.cluster.client.indices.get_mapping(index=index)[index]["mappings"]
    assert mapping["properties"]["embedding"]["dimension"] == 300
    assert mapping["dynamic"] == "strict"


def test_strict_mapping_refuses_unknown_fields(admin: AliasStore, settings: Settings) -> None:
    client = admin.cluster.client
    # Control: a document with known fields goes in through the alias.
    ok = client.index(index=settings.alias, body={"chunk_id": "ok", "text": "Лампа LAMP-LIGHT"}, refresh=True)
    assert ok["result"] == "created"

    with pytest.raises(RequestError) as raw:
        client.index(index=settings.alias, body={"chunk_id": "bad", "text": "x", "colour": "red"})
    assert raw.value.status_code == 400
    assert "strict_dynamic_mapping_exception" in str(raw.value)
    with pytest.raises(ClusterError, match="strict_dynamic_mapping_exception"):
        admin.cluster.call(
            "index", client.index, index=settings.alias, body={"chunk_id": "bad", "titel": "typo"}
        )
    assert client.count(index=settings.alias)["count"] == 1


# --------------------------------------------------------------------------- CLI
def test_cli_install_check_exit_codes(
    admin: AliasStore,
    settings: Settings,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.chdir(tmp_path)  # no stray .env from the working directory
    runner = CliRunner()
    env = _cli_env(settings)
    res = runner.invoke(cli, ["install", "--check"], env=env)
    assert res.exit_code == 0, res.output
    assert f"in sync: templates, pipelines and alias {settings.alias}" in res.output

    name = _drift_pipeline(admin)
    res = runner.invoke(cli, ["install", "--check"], env=env)
    assert res.exit_code == 1, res.output
    assert f"search pipeline {name}:" in res.output and "rank_constant" in res.output

    res = runner.invoke(cli, ["install"], env=env)
    assert res.exit_code == 0, res.output
    assert f"-> {admin.current_index()}" in res.output and "created index" not in res.output
    res = runner.invoke(cli, ["install", "--check"], env=env)
    assert res.exit_code == 0, res.output


def test_cli_analyze_prints_tokens(
    admin: AliasStore,
    settings: Settings,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.chdir(tmp_path)
    res = CliRunner().invoke(cli, ["analyze", "LAMP-LIGHT-MINI"], env=_cli_env(settings))
    assert res.exit_code == 0, res.output
    lines = dict(line.strip().split(": ", 1) for line in res.output.strip().splitlines())
    assert lines == {
        # @position, +length for a token spanning several positions (the whole code over its parts)
        "ru_index": "lamp-light-mini@0+3 lamplightmini@0+3 lamp@0 light@1 mini@2",
        "ru_search": "lamp-light-mini@0+3 lamp@0 light@1 mini@2",
        "ru_quote": "lamp@0 light@1 mini@2",
        "ident": "lamp-light-mini@0",
    }


def test_cli_unreachable_cluster_is_one_line_error(unique_name: str, tmp_path: Path) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith("OSRAG_")}
    env.update({"OSRAG_URL": "http://127.0.0.1:9", "OSRAG_ALIAS": unique_name})
    proc = subprocess.run(
        [sys.executable, "-m", "osrag.cli", "install"],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode != 0
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1, proc.stderr
    assert lines[0].startswith("osrag: error:"), proc.stderr
    assert "127.0.0.1:9" in lines[0]
    assert "Traceback" not in proc.stderr + proc.stdout
