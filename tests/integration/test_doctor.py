"""osrag doctor against the real node: all ok on an installed alias with its model, a failing
check (and exit 1) when the alias points nowhere, JSON from the CLI, a sigv4 refusal named."""

from __future__ import annotations

import json
import os

import pytest
from click.testing import CliRunner

from osrag.admin.doctor import diagnose, exit_code
from osrag.cli import cli
from osrag.settings import Settings
from osrag.store.alias import AliasStore

pytestmark = pytest.mark.integration


def test_an_installed_alias_passes_every_check(admin: AliasStore, settings: Settings) -> None:
    checks = {c.name: c for c in diagnose(settings)}
    assert [n for n, c in checks.items() if c.status == "fail"] == []
    assert checks["alias"].detail.startswith(f"{settings.alias} -> {settings.alias}-")
    assert "navec:news-300d" in checks["model"].detail
    assert "ёлк" not in checks["analyzer"].detail.split("->")[1]  # ё folded to е by ru_search
    assert "lucene yes" in checks["k-NN engines"].detail
    assert checks["health"].status in ("ok", "warn")


def test_a_missing_install_fails_with_hints_and_exit_1(
    settings: Settings, monkeypatch: pytest.MonkeyPatch
) -> None:
    checks = diagnose(settings)  # nothing installed for this alias
    failed = {c.name for c in checks if c.status == "fail"}
    assert {"templates/pipelines", "alias"} <= failed
    assert all("osrag install" in c.hint for c in checks if c.name in failed)
    assert exit_code(checks) == 1
    for k in [k for k in os.environ if k.startswith("OSRAG_")]:
        monkeypatch.delenv(k)
    monkeypatch.setenv("OSRAG_URL", settings.url)
    monkeypatch.setenv("OSRAG_ALIAS", settings.alias)
    got = CliRunner().invoke(cli, ["doctor", "--json"])
    assert got.exit_code == 1
    rows = json.loads(got.output)
    assert {r["name"] for r in rows} >= {"reachable", "auth", "server", "alias"}
    assert {r["status"] for r in rows} <= {"ok", "warn", "fail", "skip"}


def test_sigv4_without_credentials_is_an_auth_failure(
    settings: Settings, monkeypatch: pytest.MonkeyPatch, tmp_path
) -> None:  # type: ignore[no-untyped-def]
    for var in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN", "AWS_PROFILE"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("AWS_CONFIG_FILE", str(tmp_path / "none"))
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", str(tmp_path / "none"))
    monkeypatch.setenv("AWS_EC2_METADATA_DISABLED", "true")
    s = Settings(**{**settings.model_dump(), "auth": "sigv4", "aws_region": "eu-north-1"}, _env_file=None)
    (check,) = diagnose(s)
    assert check.name == "auth" and check.status == "fail" and "no AWS credentials" in check.detail
    assert "OSRAG_AWS_REGION" in check.hint


def test_the_index_listing_names_no_system_index(settings: Settings) -> None:
    """doctor lists indices without the dot-named ones: a wildcard reaching a system index makes
    the node answer with a warning header, which the client prints under doctor's lines."""
    import urllib.request
    import uuid

    from osrag.admin.doctor import _USER_INDICES

    def warning_of(pattern: str) -> str | None:
        # a fresh X-Opaque-Id each time: the node sends a given warning once per id
        req = urllib.request.Request(
            f"{settings.url}/{pattern}/_mapping?expand_wildcards=open",
            headers={"X-Opaque-Id": f"osrag-test-{uuid.uuid4()}"},
        )
        with urllib.request.urlopen(req, timeout=30) as resp:
            return resp.headers.get("Warning")

    if warning_of("*") is None:
        pytest.skip("no system index on this node answers a wildcard with a warning")
    assert warning_of(_USER_INDICES) is None
