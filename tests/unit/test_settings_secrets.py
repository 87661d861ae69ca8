"""Secrets and errors on every surface (issue 29, item 5): each row failed or was weak before."""

from __future__ import annotations

import json
import logging
import os
import subprocess
import sys
from typing import Any

import pytest

from osrag.access import PUBLIC
from osrag.cli.read import _parse_filter_options
from osrag.errors import InputError, InvalidSetting
from osrag.search.client import SearchClient
from osrag.settings import MAX_BUDGET_TOKENS, Settings, warn_unknown_env

SECRET = "hunter2-Sekr3t"


@pytest.fixture
def clean_env(monkeypatch: pytest.MonkeyPatch) -> pytest.MonkeyPatch:
    for var in list(os.environ):
        if var.startswith("OSRAG_"):
            monkeypatch.delenv(var)
    return monkeypatch


# ------------------------------------------------------------------ secrets
@pytest.mark.parametrize(
    "render",
    [
        repr,
        str,
        lambda s: str(s.model_dump()),
        lambda s: str(s.model_dump(mode="json")),
        lambda s: s.model_dump_json(),
        lambda s: json.dumps(s.redacted(), default=str),
        lambda s: f"{s!r} {s}",
    ],
    ids=["repr", "str", "model_dump", "model_dump-json", "model_dump_json", "redacted", "format"],
)
@pytest.mark.parametrize("where", ["url", "password"])
def test_settings_never_render_a_password(clean_env: pytest.MonkeyPatch, render: Any, where: str) -> None:
    if where == "url":
        s = Settings(url=f"https://admin:{SECRET}@search.example:9200", _env_file=None)
    else:
        clean_env.setenv("OSRAG_USER", "admin")
        clean_env.setenv("OSRAG_PASSWORD", SECRET)
        s = Settings(_env_file=None)
    shown = render(s)
    assert SECRET not in shown
    assert s.credentials() == ("admin", SECRET)  # still there for the client


def test_the_url_s_password_is_masked_in_a_dump_but_the_host_stays(clean_env: pytest.MonkeyPatch) -> None:
    s = Settings(url=f"https://admin:{SECRET}@search.example:9200", _env_file=None)
    assert s.model_dump()["url"] == "https://admin:***@search.example:9200"
    assert s.url == f"https://admin:{SECRET}@search.example:9200"  # the attribute is what connects


# ------------------------------------------------------------------ one line, naming the field
@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"alias": "Bad Name"}, "invalid Settings(alias='Bad Name'): wrong format"),
        ({"alias": "x" * 5152}, "(5,154 characters)): wrong format"),
        ({"budget_tokens": 10**12}, "invalid Settings(budget_tokens=1000000000000): out of range"),
        ({"url": f"ftp://admin:{SECRET}@h"}, "invalid Settings(url='ftp://admin:***@h')"),
        ({"password": SECRET, "user": ""}, "invalid Settings(user=''): must not be empty"),
    ],
)
def test_bad_settings_arguments_are_one_input_error_line(
    clean_env: pytest.MonkeyPatch, kwargs: dict[str, Any], message: str
) -> None:
    with pytest.raises(InvalidSetting) as err:
        Settings(_env_file=None, **kwargs)
    text = str(err.value)
    assert isinstance(err.value, InputError)  # what the API raises for any bad argument
    assert message in text and "\n" not in text and SECRET not in text
    assert len(text) < 300  # a 5,152-character value is not echoed whole


def test_an_over_long_env_value_is_cut_in_the_error(clean_env: pytest.MonkeyPatch) -> None:
    clean_env.setenv("OSRAG_ALIAS", "Y" * 5152)
    with pytest.raises(InvalidSetting) as err:
        Settings(_env_file=None)
    assert str(err.value).startswith("invalid setting OSRAG_ALIAS='YYYY") and len(str(err.value)) < 300


# ------------------------------------------------------------------ unknown variables
def test_an_unknown_osrag_variable_warns_naming_the_closest(
    clean_env: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    env = {
        "OSRAG_BUDGET_TOKEN": "5",
        "OSRAG_MAX_FILE_MB": "20",
        "OSRAG_DEDUP_COSINE": "0.95",
        "OSRAG_BUDGET_TOKENS": "5",
        "OSRAG_TEST_OPENSEARCH_URL": "x",
    }
    with caplog.at_level(logging.WARNING, logger="osrag.settings"):
        got = warn_unknown_env(env)
    assert got == [
        "OSRAG_BUDGET_TOKEN is not an osrag setting and is ignored; did you mean OSRAG_BUDGET_TOKENS?",
        "OSRAG_DEDUP_COSINE is not read any more: use nothing: a near duplicate is a fixed text-overlap "
        "test (docs/selection.md, «Knobs that remain»)",
        "OSRAG_MAX_FILE_MB is not read any more: use OSRAG_MAX_FILE_BYTES (in bytes: 20 MB is 20000000)",
    ]
    assert [r.getMessage() for r in caplog.records] == got
    assert warn_unknown_env(env) == []  # once per process


def test_settings_warn_on_load(clean_env: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture) -> None:
    clean_env.setenv("OSRAG_RERANK_DEPHT", "10")
    with caplog.at_level(logging.WARNING, logger="osrag.settings"):
        Settings(_env_file=None)
    assert any(
        "OSRAG_RERANK_DEPHT" in r.getMessage() and "OSRAG_RERANK_DEPTH" in r.getMessage()
        for r in caplog.records
    )


# ------------------------------------------------------------------ budgets capped alike
def test_budgets_are_capped_the_same_on_every_surface(clean_env: pytest.MonkeyPatch) -> None:
    assert Settings.model_fields["budget_tokens"].metadata[-1].le == MAX_BUDGET_TOKENS  # type: ignore[union-attr]
    client = SearchClient(
        Settings(url="http://127.0.0.1:9", alias="nowhere", rerank=False, _env_file=None), principal=PUBLIC
    )
    with pytest.raises(InputError, match=r"budget_tokens: 1 to 1,000,000"):
        client.search("чай", budget_tokens=10**12)
    with pytest.raises(InputError, match=r"got 1000000000000000000000000000000000000000?… \(budget_tokens"):
        client.search("чай", budget_tokens=10**100)
    p = _cli("search", "чай", "--public-only", "--budget", str(10**12))
    assert p.returncode == 2 and b"--budget" in p.stderr and b"1<=x<=1000000" in p.stderr


# ------------------------------------------------------------------ filters on the CLI
def test_a_repeated_filter_is_combined_never_replaced() -> None:
    assert _parse_filter_options(("doc_id=a", "doc_id=b")) == {"doc_id": "a,b"}
    assert _parse_filter_options(("category=x", "meta.tags=a", "meta.tags=b")) == {
        "category": "x",
        "meta.tags": "a,b",
    }
    assert _parse_filter_options(("include_archived=true", "include_archived=true")) == {
        "include_archived": "true"
    }
    import click

    with pytest.raises(click.BadParameter, match="include_archived given twice"):
        _parse_filter_options(("include_archived=true", "include_archived=false"))


def _cli(*args: str) -> subprocess.CompletedProcess[bytes]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("OSRAG_")}
    env.update(OSRAG_URL="http://127.0.0.1:9", OSRAG_TIMEOUT_S="1", OSRAG_MAX_RETRIES="0")
    return subprocess.run(
        [sys.executable, "-m", "osrag.cli", *args], capture_output=True, env=env, timeout=120
    )


def test_analyze_of_nothing_is_an_error() -> None:
    p = _cli("analyze", "")
    assert p.returncode == 2 and b"TEXT" in p.stderr and b"is empty" in p.stderr
    p = _cli("analyze", "   ")
    assert p.returncode == 2
