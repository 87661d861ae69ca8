"""What osrag logs and traces on a real node, and that no record of a run carries a secret.

The secret scan captures EVERY record that reaches the root logger at DEBUG (osrag's, the
OpenSearch client's, urllib3's, botocore's) while install, ingest, searches, status and
refused requests run with a password (basic), a header token (header) and SigV4 keys (through
the verifying proxy), and the CLI's own JSON lines at -vv.
"""

from __future__ import annotations

import logging
import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest
from pydantic import SecretStr

from osrag.access import Principal
from osrag.admin.status import read_status
from osrag.cli import main
from osrag.errors import ClusterError, OsragError
from osrag.ingest.indexing import Ingester
from osrag.observability import question_hash, records_text
from osrag.search.client import SearchClient
from osrag.settings import Settings
from osrag.store.alias import AliasStore
from tests.integration.sigv4_proxy import FixedCredentials, SigV4Proxy
from tests.integration.test_auth_sigv4 import aws_env  # noqa: F401 -- a fixture

pytestmark = pytest.mark.integration

REPO = Path(__file__).resolve().parents[2]
GOLDEN = REPO / "golden" / "corpus"
ALL = Principal.admin_bypass()
QUESTION = "TEA15 скидка на чай"
PASSWORD = "pw-Secret-7781-osrag"
TOKEN = "Bearer hdr-Secret-9921-osrag"


class Capture(logging.Handler):
    def __init__(self) -> None:
        super().__init__(logging.DEBUG)
        self.records: list[logging.LogRecord] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.records.append(record)


@pytest.fixture
def captured() -> Iterator[Capture]:
    root = logging.getLogger()
    handler, level = Capture(), root.level
    root.addHandler(handler)
    root.setLevel(logging.DEBUG)
    try:
        yield handler
    finally:
        root.removeHandler(handler)
        root.setLevel(level)


def _kb(root: Path) -> Path:
    root.mkdir(parents=True)
    for name in ("promo-tea15", "faq-lamps"):
        shutil.copy(GOLDEN / f"{name}.md", root / f"{name}.md")
    return root


def _as(settings: Settings, **update: object) -> Settings:
    return Settings(**{**settings.model_dump(), **update}, _env_file=None)


def test_no_record_of_a_run_carries_a_secret(
    admin: AliasStore,
    settings: Settings,
    aws_env: FixedCredentials,
    opensearch_url: str,
    tmp_path: Path,
    captured: Capture,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    # basic (the plain node ignores the credentials; the client still sends and could log them)
    basic = _as(settings, user="osrag-user", password=SecretStr(PASSWORD))
    Ingester(basic).ingest([_kb(tmp_path / "kb")])
    SearchClient(basic).search(QUESTION, principal=ALL, budget_tokens=400)
    read_status(basic)
    with pytest.raises(OsragError):  # an error path too
        SearchClient(_as(basic, alias="t-missing-alias-obs")).search(QUESTION, principal=ALL)
    # header
    header = _as(settings, auth="header", auth_header=SecretStr(TOKEN))
    SearchClient(header).search(QUESTION, principal=ALL, budget_tokens=400)
    # sigv4, through the verifying proxy; one refused request
    proxy = SigV4Proxy(opensearch_url, aws_env)
    url = proxy.start()
    try:
        signed = _as(settings, url=url, auth="sigv4", aws_region=aws_env.region)
        SearchClient(signed).search(QUESTION, principal=ALL, budget_tokens=400)
        with pytest.raises(ClusterError):
            SearchClient(_as(signed, aws_region="us-east-1")).search(QUESTION, principal=ALL)
    finally:
        proxy.stop()
    assert proxy.verified > 0 and proxy.refused
    # the CLI at -vv, JSON lines on stderr, header mode from the environment
    for k, v in {
        "OSRAG_URL": opensearch_url,
        "OSRAG_ALIAS": settings.alias,
        "OSRAG_AUTH": "header",
        "OSRAG_AUTH_HEADER": TOKEN,
        "OSRAG_EMBEDDING_MODEL": "navec:news-300d",
        "OSRAG_RERANK": "false",
        "OSRAG_CACHE_DIR": str(settings.cache_dir),
    }.items():
        monkeypatch.setenv(k, v)
    with pytest.raises(SystemExit) as done:
        main(["-vv", "--log-format", "json", "search", QUESTION, "--public-only", "--json"])
    assert done.value.code == 0
    cli_err = capsys.readouterr().err

    text = records_text(captured.records) + "\n" + cli_err
    assert len(captured.records) > 50  # the run was really captured, every library's records
    assert f"search {question_hash(QUESTION)}" in text and '"logger": "osrag.search"' in cli_err
    for secret in (PASSWORD, TOKEN, TOKEN.split()[1], aws_env.secret_key, aws_env.token or "-"):
        assert secret not in text, f"a log record carries {secret[:6]}…"


def test_a_search_record_and_a_warning_for_the_degradation(
    admin: AliasStore, settings: Settings, caplog: pytest.LogCaptureFixture
) -> None:
    with caplog.at_level(logging.INFO, logger="osrag"):
        env = SearchClient(settings).search(QUESTION, principal=ALL, budget_tokens=400)
    assert env.notes  # nothing ingested yet: the envelope says so
    (rec,) = [r for r in caplog.records if r.name == "osrag.search" and r.levelno == logging.INFO]
    f = rec.osrag  # type: ignore[attr-defined]
    assert f["requests"] >= 1 and f["status"] == env.status and "total" in f["ms"]
    warnings = [
        r.osrag["degradation"]  # type: ignore[attr-defined]
        for r in caplog.records
        if r.name == "osrag.search" and r.levelno == logging.WARNING
    ]
    assert warnings == env.notes


def test_ingest_logs_each_file_and_a_summary(
    admin: AliasStore, settings: Settings, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    kb = _kb(tmp_path / "kb")
    (kb / "broken.pdf").write_bytes(b"not a pdf")
    with caplog.at_level(logging.DEBUG, logger="osrag.ingest"):
        report = Ingester(settings).ingest([kb])
    outcomes = {
        Path(r.osrag["path"]).name: r.osrag["outcome"]  # type: ignore[attr-defined]
        for r in caplog.records
        if "outcome" in getattr(r, "osrag", {})
    }
    assert outcomes == {"promo-tea15.md": "indexed", "faq-lamps.md": "indexed", "broken.pdf": "failed"}
    (summary,) = [r for r in caplog.records if "indexed" in getattr(r, "osrag", {})]
    assert summary.levelno == logging.INFO and summary.osrag["indexed"] == report.indexed == 2  # type: ignore[attr-defined]
