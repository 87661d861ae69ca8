"""``status`` against the real node: the library dict and ``osrag status`` (text, JSON, errors)."""

from __future__ import annotations

import datetime as dt
import json
import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from osrag import templates
from osrag.admin.status import status
from osrag.ingest.indexing import Ingester
from osrag.settings import Settings
from osrag.store.alias import AliasStore
from osrag.vocabulary import PIPELINES

pytestmark = pytest.mark.integration

GOLDEN = Path(__file__).resolve().parents[2] / "golden" / "corpus"
DOCS = ("account-registration", "promo-tea15", "faq-lamps", "delivery-pickup")
KEYS = {
    "cluster",
    "alias",
    "index",
    "drift",
    "template_version",
    "embedding_model",
    "model_location",
    "dimension",
    "documents",
    "chunks",
    "last_ingest_at",
    "last_ingest_age_s",
    "previous_index",
    "reindex_lock",
    "pipelines",
    "fusion",
    "layout",
    "capabilities",
    "models",
}


@pytest.fixture
def ingested(admin: AliasStore, settings: Settings, tmp_path: Path) -> tuple[Any, dt.datetime, dt.datetime]:
    corpus = tmp_path / "kb"
    corpus.mkdir()
    for name in DOCS:
        (corpus / f"{name}.md").write_text(
            (GOLDEN / f"{name}.md").read_text(encoding="utf-8"), encoding="utf-8"
        )
    (corpus / "extra.md").write_text(
        "---\ndoc_id: extra-note\ntitle: Заметка\ncategory: misc\narchived: false\ntenant: public\n"
        "updated_at: 2026-01-01\n---\n# Заметка\n\nКороткая заметка про упаковку чая в подарочную коробку.\n",
        encoding="utf-8",
    )
    t0 = dt.datetime.now(dt.UTC)
    report = Ingester(settings).ingest([corpus])
    t1 = dt.datetime.now(dt.UTC)
    assert report.failed == [] and report.indexed == len(DOCS) + 1
    return report, t0, t1


def cli(
    settings: Settings, cwd: Path, *args: str, url: str | None = None
) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("OSRAG_")}
    env.update(
        OSRAG_URL=url or settings.url, OSRAG_ALIAS=settings.alias, OSRAG_CACHE_DIR=str(settings.cache_dir)
    )
    return subprocess.run(
        [sys.executable, "-m", "osrag.cli", *args],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )


# ------------------------------------------------------------------ the library dict
@pytest.mark.compat
def test_status_reports_cluster_alias_model_counts_freshness_and_no_drift(
    admin: AliasStore, settings: Settings, ingested: tuple[Any, dt.datetime, dt.datetime]
) -> None:
    report, t0, t1 = ingested
    client = admin.cluster.client
    st = status(settings)
    assert set(st) == KEYS

    c = st["cluster"]
    assert c["version"] == client.info()["version"]["number"]
    # What the server line supports and what was adapted (2.19: equal-weight RRF, osrag collapses)
    caps = st["capabilities"]
    line_3x = c["version"].startswith("3.")
    assert ("weighted_rrf" in caps["in_use"]) is line_3x and bool(caps["adapted"]) is not line_3x
    assert caps["fusion"].startswith(settings.fusion)
    assert st["layout"] == {"settings": {"shards": 1, "replicas": 0}, "index": {"shards": 1, "replicas": 0}}
    assert c["url"] == settings.url and c["health"] in ("green", "yellow")
    assert {"opensearch-knn", "opensearch-neural-search"} <= set(c["plugins"])

    got = client.indices.get_alias(name=settings.alias)
    assert st["alias"] == settings.alias and [st["index"]] == list(got)
    assert (st["embedding_model"], st["dimension"]) == ("navec:news-300d", 300)
    assert st["model_location"] == {"where": "client"}
    assert st["documents"] == report.indexed == len(DOCS) + 1
    assert st["chunks"] == report.chunks == int(client.count(index=settings.alias)["count"])
    assert st["chunks"] > st["documents"]

    last = dt.datetime.fromisoformat(st["last_ingest_at"])
    assert t0 <= last <= t1
    age_max = (dt.datetime.now(dt.UTC) - t0).total_seconds()
    assert 0 <= st["last_ingest_age_s"] <= age_max

    assert st["template_version"] == {
        "files": templates.TEMPLATE_VERSION,
        "cluster": templates.TEMPLATE_VERSION,
    }
    assert st["drift"] == []
    assert (st["previous_index"], st["reindex_lock"], st["fusion"]) == (None, None, settings.fusion)
    assert st["pipelines"] == {v: admin.pipeline_name(v) for v in PIPELINES}
    for name in st["pipelines"].values():
        assert name in client.transport.perform_request("GET", f"/_search/pipeline/{name}")


def test_status_before_the_first_ingest(admin: AliasStore, settings: Settings) -> None:
    st = status(settings)
    assert st["index"] == admin.current_index() is not None
    assert (st["documents"], st["chunks"], st["last_ingest_at"], st["last_ingest_age_s"]) == (
        0,
        0,
        None,
        None,
    )
    assert st["drift"] == [] and st["dimension"] == 300


def test_status_without_install(settings: Settings) -> None:
    st = status(settings)
    assert set(st) == KEYS
    # with no index: the model a new index would get, and the reranker, each with its reason
    assert st["models"]["embedding"] == "navec:news-300d"
    assert st["models"]["embedding_source"].startswith("a new index's model: navec:news-300d (configured")
    assert st["models"]["reranker"] is None
    assert st["index"] is None and st["documents"] is None and st["template_version"]["cluster"] is None
    assert any("missing in cluster" in d for d in st["drift"])
    assert any("no index behind the alias" in d for d in st["drift"])


def test_status_shows_drift_and_template_version_mismatch(admin: AliasStore, settings: Settings) -> None:
    client = admin.cluster.client
    rrf = admin.pipeline_name("rrf")
    client.transport.perform_request("DELETE", f"/_search/pipeline/{rrf}")
    body = admin.desired_index_template()
    body["version"] = templates.TEMPLATE_VERSION + 41
    client.indices.put_index_template(name=admin.template_name, body=body)

    st = status(settings)
    assert st["template_version"] == {
        "files": templates.TEMPLATE_VERSION,
        "cluster": templates.TEMPLATE_VERSION + 41,
    }
    assert any(d.startswith(f"search pipeline {rrf}") and "missing in cluster" in d for d in st["drift"])
    assert any(d.startswith(f"index template {admin.template_name}") and "version" in d for d in st["drift"])
    admin.install()
    assert status(settings)["drift"] == []


# ------------------------------------------------------------------ the command
def test_cli_status_json_and_text(
    admin: AliasStore, settings: Settings, tmp_path: Path, ingested: tuple[Any, dt.datetime, dt.datetime]
) -> None:
    proc = cli(settings, tmp_path, "status", "--json")
    assert proc.returncode == 0, proc.stderr
    got = json.loads(proc.stdout)
    want = status(settings)
    assert set(got) == set(want) == KEYS
    for key in KEYS - {"last_ingest_age_s", "cluster", "models"}:
        assert got[key] == want[key], key
    # the CLI's process has its own reranker settings (OSRAG_RERANK unset there); the index's model is the same
    assert {k: got["models"][k] for k in ("embedding", "embedding_source")} == {
        k: want["models"][k] for k in ("embedding", "embedding_source")
    }
    # Health is the whole node's, which other tests' indices can move between green and yellow.
    assert {**got["cluster"], "health": None} == {**want["cluster"], "health": None}
    assert got["cluster"]["health"] in ("green", "yellow")
    assert got["last_ingest_age_s"] <= want["last_ingest_age_s"]

    proc = cli(settings, tmp_path, "status")
    assert proc.returncode == 0, proc.stderr
    out = proc.stdout
    assert f"OpenSearch {want['cluster']['version']} at {settings.url}" in out
    assert f"alias {settings.alias} -> {want['index']}" in out
    assert "model: navec:news-300d (dim 300)" in out
    assert f"\n{got['models']['reranker_source']}\n" in out
    assert (
        f"documents: {want['documents']} · chunks: {want['chunks']} · last ingest: {want['last_ingest_at']}"
        in out
    )
    assert re.search(r"template version: files \d+ · cluster \d+", out) and "drift: none" in out


@pytest.mark.parametrize("args", [("status",), ("status", "--json")])
def test_cli_status_with_an_unreachable_cluster(
    settings: Settings, tmp_path: Path, args: tuple[str, ...]
) -> None:
    proc = cli(settings, tmp_path, *args, url="http://127.0.0.1:9")
    assert proc.returncode != 0
    assert "Traceback" not in proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("osrag: error: "), proc.stderr
    assert "127.0.0.1:9" in lines[0]
    assert proc.stdout == ""
