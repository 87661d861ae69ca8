"""``osrag drop`` and ``osrag delete`` against the real node (issue 23, item 7)."""

from __future__ import annotations

import json
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from osrag.admin import lifecycle
from osrag.cli import cli
from osrag.ingest.indexing import Ingester
from osrag.names import pipeline_name, state_index, visibility_filter
from osrag.settings import Settings
from osrag.store.alias import AliasStore
from osrag.store.versions import VersionStore
from osrag.vocabulary import PIPELINES
from tests.integration.conftest import drop_alias

pytestmark = pytest.mark.integration


@pytest.fixture
def admin(settings: Settings) -> Iterator[AliasStore]:
    adm = AliasStore(settings)
    try:
        adm.install()
        yield adm
    finally:
        drop_alias(adm.cluster.client, adm.alias)


def env(s: Settings, alias: str | None = None) -> dict[str, str]:
    return {
        "OSRAG_URL": s.url,
        "OSRAG_ALIAS": alias or s.alias,
        "OSRAG_CACHE_DIR": str(s.cache_dir),
        "OSRAG_EMBEDDING_MODEL": "navec:news-300d",
    }


def write_tree(root: Path, names: Sequence[str]) -> Path:
    root.mkdir(parents=True, exist_ok=True)
    for n in names:
        (root / f"{n}.md").write_text(
            f"# Страница {n}\n\n## Первый раздел\n\nТекст про чай и {n}.\n\n## Второй раздел\n\nЕщё текст про {n}.\n",
            encoding="utf-8",
        )
    return root


def visible_docs(admin: AliasStore, visible: bool = True) -> dict[str, int]:
    filters = [visibility_filter(admin.alias)] if visible else []
    resp = admin.cluster.client.search(
        index=admin.alias,
        body={
            "size": 0,
            "query": {"bool": {"filter": filters}},
            "aggs": {"d": {"terms": {"field": "doc_id", "size": 1000}}},
        },
        params={"request_cache": "false"},
    )
    return {b["key"]: b["doc_count"] for b in resp["aggregations"]["d"]["buckets"]}


def exists(client: Any, kind: str, name: str) -> bool:
    if kind == "index":
        return bool(client.indices.exists(index=name))
    path = {
        "index template": f"/_index_template/{name}",
        "component template": f"/_component_template/{name}",
        "search pipeline": f"/_search/pipeline/{name}",
    }[kind]
    try:
        client.transport.perform_request("GET", path)
    except Exception:
        return False
    return True


def test_drop_refuses_without_yes_then_removes_only_what_the_alias_owns(
    admin: AliasStore, settings: Settings, tmp_path: Path
) -> None:
    client = admin.cluster.client
    Ingester(settings).ingest([write_tree(tmp_path / "kb", ["a", "b"])])
    # A second alias whose name extends this one ("x" vs "x-light"): its indices match "x-*".
    light = settings.model_copy(update={"alias": f"{admin.alias}-light"})
    light_admin = AliasStore(light)
    light_admin.install()
    try:
        light_index = light_admin.current_index()
        own_index = admin.current_index()
        runner = CliRunner()

        refused = runner.invoke(cli, ["drop"], env=env(settings))
        assert refused.exit_code == 1
        said = refused.stderr
        assert f"index {own_index}" in said and f"state index {state_index(admin.alias)}" in said
        assert f"index template {admin.alias}-template" in said
        assert f"component template {admin.alias}-analysis" in said
        assert all(f"search pipeline {pipeline_name(admin.alias, v)}" in said for v in PIPELINES)
        assert light_index not in said and "refused: nothing removed" in said
        assert exists(client, "index", own_index)  # nothing removed

        done = runner.invoke(cli, ["drop", admin.alias, "--yes", "--json"], env=env(light))
        assert done.exit_code == 0, done.output
        report = json.loads(done.stdout)
        assert report["removed"] is True and report["indices"] == [own_index]
        assert not exists(client, "index", own_index)
        assert not exists(client, "index", state_index(admin.alias))
        assert not client.indices.exists_alias(name=admin.alias)
        assert not exists(client, "index template", f"{admin.alias}-template")
        assert not exists(client, "component template", f"{admin.alias}-analysis")
        assert not any(exists(client, "search pipeline", pipeline_name(admin.alias, v)) for v in PIPELINES)
        # The other alias is whole.
        assert light_admin.current_index() == light_index
        assert exists(client, "index template", f"{light.alias}-template")
        assert all(exists(client, "search pipeline", pipeline_name(light.alias, v)) for v in PIPELINES)
        assert light_admin.check() == []

        again = runner.invoke(cli, ["drop", admin.alias, "--yes"], env=env(settings))
        assert again.exit_code == 0 and "nothing to remove" in again.output
    finally:
        drop_alias(client, light.alias)


def test_drop_keeps_a_component_another_template_is_composed_of(
    admin: AliasStore, settings: Settings
) -> None:
    client = admin.cluster.client
    other = f"{admin.alias}-borrower"
    client.indices.put_index_template(
        name=other,
        body={"index_patterns": [f"{other}-*"], "composed_of": [f"{admin.alias}-analysis"], "priority": 1},
    )
    try:
        plan = lifecycle.plan_drop(settings)
        assert plan.component_templates == []
        assert plan.kept == [f"component template {admin.alias}-analysis: used by index template {other}"]
        lifecycle.drop(settings, plan)
        assert exists(client, "component template", f"{admin.alias}-analysis")
        assert not exists(client, "index template", f"{admin.alias}-template")
    finally:
        client.indices.delete_index_template(name=other, ignore=404)


def test_delete_a_document_is_atomic_and_leaves_the_others(
    admin: AliasStore, settings: Settings, tmp_path: Path
) -> None:
    Ingester(settings).ingest([write_tree(tmp_path / "kb", ["a", "b", "c"])])
    before = visible_docs(admin)
    assert set(before) == {"kb/a", "kb/b", "kb/c"}
    seen: list[dict[str, int]] = []

    class Watching(VersionStore):
        """Records what readers see at each step of the removal."""

        def hide(self, add: Sequence[str] = (), remove: Sequence[str] = ()) -> None:
            seen.append(visible_docs(admin))
            super().hide(add=add, remove=remove)

        def delete_versions(self, index: str, keys: Sequence[str]) -> None:
            seen.append(visible_docs(admin))
            super().delete_versions(index, keys)

    real = lifecycle.VersionStore
    lifecycle.VersionStore = Watching  # type: ignore[misc]
    try:
        report = lifecycle.delete_documents(settings, ["kb/b"])
    finally:
        lifecycle.VersionStore = real  # type: ignore[misc]
    assert report.documents == ["kb/b"] and report.versions == 1
    # Before the one hide: all of kb/b; after it (at the delete): none of it, never a part.
    assert seen[0] == before and seen[1] == {"kb/a": before["kb/a"], "kb/c": before["kb/c"]}
    assert visible_docs(admin) == visible_docs(admin, visible=False) == seen[1]
    got = admin.cluster.client.get(index=state_index(admin.alias), id="hidden")["_source"]
    assert got["keys"] == [] and got.get("writer") is None  # nothing left hidden, lock released


def test_delete_a_collection_and_refuse_what_is_not_there(
    admin: AliasStore, settings: Settings, tmp_path: Path
) -> None:
    Ingester(settings).ingest(
        [write_tree(tmp_path / "kb", ["a", "b"]), write_tree(tmp_path / "other", ["a"])]
    )
    runner = CliRunner()
    out = runner.invoke(cli, ["delete", "--collection", "kb"], env=env(settings))
    assert out.exit_code == 0, out.output
    assert "removed 2 document(s)" in out.stdout
    assert set(visible_docs(admin, visible=False)) == {"other/a"}

    missing = runner.invoke(cli, ["delete", "--doc", "other/a", "--doc", "nope"], env=env(settings))
    assert missing.exit_code == 1 and "not found in alias" in missing.stderr and "nope" in missing.stderr
    assert visible_docs(admin, visible=False) == {}

    usage = runner.invoke(cli, ["delete"], env=env(settings))
    assert usage.exit_code == 2
