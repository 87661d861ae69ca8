"""OSRAG_AUTH: each mode's settings, the client options both clients get, Serverless refusals.

The signing itself is checked end to end by tests/integration/test_auth_sigv4.py (a proxy that
verifies every signature) and the certificate by tests/integration/test_auth_cert.py.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from osrag.capabilities import SERVERLESS_LACKS, detect, refuse_on_serverless, serverless_capabilities
from osrag.cli import main
from osrag.connection import Cluster, auth_options, client_options, make_async_client, make_client
from osrag.errors import ConfigError, InvalidSetting
from osrag.settings import Settings, load_settings

TOKEN = "Bearer tok-3f1c9a77e2b04d1e"


@pytest.fixture
def clean_env(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> pytest.MonkeyPatch:
    for k in list(os.environ):
        if k.startswith("OSRAG_") or k.startswith("AWS_"):
            monkeypatch.delenv(k)
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("AWS_CONFIG_FILE", str(tmp_path / "none"))
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", str(tmp_path / "none"))
    monkeypatch.setenv("AWS_EC2_METADATA_DISABLED", "true")
    return monkeypatch


def pem_pair(tmp_path: Path) -> tuple[Path, Path]:
    cert, key = tmp_path / "client.pem", tmp_path / "client-key.pem"
    cert.write_text("-----BEGIN CERTIFICATE-----\n")
    key.write_text("-----BEGIN PRIVATE KEY-----\n")
    return cert, key


def test_mode_is_inferred_when_unset(clean_env: pytest.MonkeyPatch) -> None:
    assert Settings(_env_file=None).auth_mode == "none"
    assert Settings(user="u", password="p", _env_file=None).auth_mode == "basic"
    assert Settings(url="http://u:p@h:9200", _env_file=None).auth_mode == "basic"
    assert auth_options(Settings(_env_file=None)) == {}


def test_each_mode_refuses_what_it_lacks_or_what_another_mode_needs(
    clean_env: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    cert, key = pem_pair(tmp_path)
    cases = {
        "OSRAG_AUTH=basic needs": dict(auth="basic"),
        "OSRAG_AUTH=header needs OSRAG_AUTH_HEADER": dict(auth="header"),
        "OSRAG_AUTH_HEADER is set but OSRAG_AUTH is none": dict(auth_header=TOKEN),
        "OSRAG_AUTH=cert needs OSRAG_CLIENT_CERT": dict(auth="cert", url="https://h:9200"),
        "is not a readable file": dict(
            auth="cert", url="https://h:9200", client_cert=cert, client_key=tmp_path / "missing"
        ),
        "needs an https://": dict(auth="cert", client_cert=cert, client_key=key),
        "OSRAG_CLIENT_CERT/OSRAG_CLIENT_KEY are set but OSRAG_AUTH is basic": dict(
            user="u", password="p", client_cert=cert, client_key=key
        ),
        "OSRAG_AUTH=sigv4 needs OSRAG_AWS_REGION": dict(auth="sigv4"),
        "OSRAG_AUTH=sigv4 but basic-auth credentials are set too": dict(
            auth="sigv4", aws_region="eu-north-1", user="u", password="p"
        ),
        "OSRAG_AUTH=none but basic-auth credentials": dict(auth="none", url="http://u:p@h"),
    }
    for words, kwargs in cases.items():
        with pytest.raises(InvalidSetting) as err:
            load_settings(_env_file=None, **kwargs)
        assert words in str(err.value), (words, str(err.value))
        assert TOKEN not in str(err.value)


def test_sigv4_region_falls_back_to_the_aws_sdk_variable(clean_env: pytest.MonkeyPatch) -> None:
    clean_env.setenv("AWS_REGION", "eu-west-1")
    s = Settings(auth="sigv4", _env_file=None)
    assert s.effective_aws_region == "eu-west-1"
    with pytest.raises(InvalidSetting, match="OSRAG_AWS_REGION"):
        clean_env.setenv("OSRAG_AWS_REGION", "Europe")
        load_settings(_env_file=None)


def test_header_mode_sends_the_header_and_never_shows_it(clean_env: pytest.MonkeyPatch) -> None:
    clean_env.setenv("OSRAG_AUTH", "header")
    clean_env.setenv("OSRAG_AUTH_HEADER", TOKEN)
    s = load_settings(_env_file=None)
    assert client_options(s)["headers"] == {"Authorization": TOKEN}
    assert TOKEN not in repr(s) and TOKEN not in str(s.redacted())
    client = make_client(s)
    conn = client.transport.connection_pool.connection
    assert conn.headers["authorization"] == TOKEN
    custom = s.model_copy(update={"auth_header_name": "X-Api-Key"})
    assert client_options(custom)["headers"] == {"X-Api-Key": TOKEN}
    # A bad value of another field shows the field; the header value never appears in the error.
    clean_env.setenv("OSRAG_TIMEOUT_S", "-1")
    with pytest.raises(InvalidSetting) as err:
        load_settings(_env_file=None)
    assert TOKEN not in str(err.value)


def test_cert_mode_gives_both_clients_the_certificate_and_key(
    clean_env: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    cert, key = pem_pair(tmp_path)
    s = Settings(auth="cert", url="https://h:9200", client_cert=cert, client_key=key, _env_file=None)
    opts = client_options(s)
    assert opts["client_cert"] == str(cert) and opts["client_key"] == str(key)
    assert "http_auth" not in opts and opts["verify_certs"] is True
    assert client_options(s, asynchronous=True)["client_cert"] == str(cert)


def test_sigv4_uses_opensearch_py_signers_with_the_chain_credentials(clean_env: pytest.MonkeyPatch) -> None:
    from opensearchpy.helpers.asyncsigner import AWSV4SignerAsyncAuth
    from opensearchpy.helpers.signer import Urllib3AWSV4SignerAuth

    s = Settings(auth="sigv4", aws_region="eu-north-1", aws_service="aoss", _env_file=None)
    with pytest.raises(ConfigError, match="found no AWS credentials"):
        client_options(s)
    clean_env.setenv("AWS_ACCESS_KEY_ID", "AKIAUNITTEST")
    clean_env.setenv("AWS_SECRET_ACCESS_KEY", "unit-secret")
    sync = client_options(s)["http_auth"]
    asyn = client_options(s, asynchronous=True)["http_auth"]
    assert isinstance(sync, Urllib3AWSV4SignerAuth) and isinstance(asyn.inner, AWSV4SignerAsyncAuth)
    assert sync.signer.region == "eu-north-1" and sync.signer.service == "aoss"
    headers = sync("GET", "https://x.eu-north-1.aoss.amazonaws.com/idx/_search", None)
    assert headers["Authorization"].startswith("AWS4-HMAC-SHA256 Credential=AKIAUNITTEST/")
    assert "/eu-north-1/aoss/aws4_request" in headers["Authorization"]
    make_async_client(s)  # builds without I/O


@pytest.mark.parametrize("convention", ["3.0 positional", "3.1+ named"])
def test_the_async_signer_hashes_the_body_under_both_calling_conventions(
    clean_env: pytest.MonkeyPatch, convention: str
) -> None:
    """opensearch-py 3.0's aiohttp connection calls the signer as (method, url, query_string, body);
    its own signer then hashes the query string as the body, and a SigV4 endpoint refuses the request."""
    import hashlib

    clean_env.setenv("AWS_ACCESS_KEY_ID", "AKIAUNITTEST")
    clean_env.setenv("AWS_SECRET_ACCESS_KEY", "unit-secret")
    s = Settings(auth="sigv4", aws_region="eu-north-1", _env_file=None)
    signer = client_options(s, asynchronous=True)["http_auth"]
    body = b'{"query": {"match_all": {}}}'
    url = "https://x.eu-north-1.es.amazonaws.com/idx/_search?size=3"
    if convention == "3.0 positional":
        headers = signer("POST", url, "size=3", body)
    else:
        headers = signer(method="POST", url=url, body=body, headers={"content-type": "application/json"})
    assert headers["X-Amz-Content-SHA256"] == hashlib.sha256(body).hexdigest()
    assert headers["Authorization"].startswith("AWS4-HMAC-SHA256 Credential=AKIAUNITTEST/")


def test_serverless_has_fixed_capabilities_and_no_cluster_probes(clean_env: pytest.MonkeyPatch) -> None:
    clean_env.setenv("AWS_ACCESS_KEY_ID", "AKIAUNITTEST")
    clean_env.setenv("AWS_SECRET_ACCESS_KEY", "unit-secret")
    s = Settings(
        url="http://127.0.0.1:1", auth="sigv4", aws_region="eu-north-1", aws_service="aoss", _env_file=None
    )
    cluster = Cluster(s)  # port 1: any request would fail
    assert detect(cluster) == serverless_capabilities()
    assert cluster.health()["status"].startswith("n/a") and cluster.plugins() == []
    caps = serverless_capabilities()
    assert not caps.hybrid_filter and not caps.weighted_rrf and not caps.collapse_in_hybrid
    es = s.model_copy(update={"aws_service": "es"})
    assert not es.serverless


def test_serverless_refuses_commands_up_front_with_one_line(clean_env: pytest.MonkeyPatch) -> None:
    s = Settings(auth="sigv4", aws_region="eu-north-1", aws_service="aoss", _env_file=None)
    for command in SERVERLESS_LACKS:
        with pytest.raises(ConfigError) as err:
            refuse_on_serverless(s, command)
        assert "Serverless" in str(err.value) and "\n" not in str(err.value)
    refuse_on_serverless(s, "search")  # minmax (the default) works there
    with pytest.raises(ConfigError, match="score-ranker-processor"):
        refuse_on_serverless(s.model_copy(update={"fusion": "rrf"}), "search")
    refuse_on_serverless(s.model_copy(update={"aws_service": "es"}), "reindex")  # a domain has _reindex


def test_the_cli_refuses_reindex_on_serverless_before_any_request(
    clean_env: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    for k, v in {
        "OSRAG_URL": "https://127.0.0.1:1",
        "OSRAG_AUTH": "sigv4",
        "OSRAG_AWS_REGION": "eu-north-1",
        "OSRAG_AWS_SERVICE": "aoss",
    }.items():
        clean_env.setenv(k, v)
    with pytest.raises(SystemExit) as done:
        main(["reindex"])
    assert done.value.code == 1
    err = capsys.readouterr().err.strip()
    assert (
        err
        == f"osrag: error: osrag reindex cannot run on OpenSearch Serverless: it lacks {SERVERLESS_LACKS['reindex']}"
    )


def test_serverless_wants_no_rrf_pipeline(clean_env: pytest.MonkeyPatch) -> None:
    """Serverless has no score-ranker-processor: install puts, and drift expects, min-max only."""
    from osrag.store.alias import AliasStore

    clean_env.setenv("AWS_ACCESS_KEY_ID", "AKIAUNITTEST")
    clean_env.setenv("AWS_SECRET_ACCESS_KEY", "unit-secret")
    s = Settings(
        url="http://127.0.0.1:1", auth="sigv4", aws_region="eu-north-1", aws_service="aoss", _env_file=None
    )
    wanted = AliasStore(s).desired_pipelines()  # port 1: any request would fail, none is made
    assert list(wanted) == [f"{s.alias}-hybrid-minmax"]
