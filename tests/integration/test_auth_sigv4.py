"""OSRAG_AUTH=sigv4 end to end, through a proxy that verifies every signature (sigv4_proxy.py).

install, ingest, search (sync and async), reindex and status run on their own alias with
credentials from the standard AWS chain (here: the environment), each request signed by
opensearch-py's signer and checked by botocore on the other side; a tampered signature and
wrong credentials are refused with one clear line.
"""

from __future__ import annotations

import asyncio
import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest

from osrag.access import Principal
from osrag.admin.reindex import Reindexer
from osrag.admin.status import read_status
from osrag.connection import make_client
from osrag.errors import ClusterError
from osrag.ingest.indexing import Ingester
from osrag.search.asearch import AsyncSearchClient
from osrag.search.client import SearchClient
from osrag.settings import Settings
from osrag.store.alias import AliasStore
from tests.integration.conftest import drop_alias
from tests.integration.sigv4_proxy import FixedCredentials, SigV4Proxy, verify

pytestmark = pytest.mark.integration

REPO = Path(__file__).resolve().parents[2]
GOLDEN = REPO / "golden" / "corpus"
FILES = ("promo-tea15", "faq-lamps", "product-lamp-light-mini", "delivery-pickup")
ALL = Principal.admin_bypass()


@pytest.fixture
def aws_env(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> FixedCredentials:
    """The standard chain sees only these environment credentials (no profile, no instance role)."""
    creds = FixedCredentials()
    for var in ("AWS_PROFILE", "AWS_DEFAULT_PROFILE", "AWS_ROLE_ARN", "AWS_WEB_IDENTITY_TOKEN_FILE"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("AWS_CONFIG_FILE", str(tmp_path / "no-aws-config"))
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", str(tmp_path / "no-aws-credentials"))
    monkeypatch.setenv("AWS_EC2_METADATA_DISABLED", "true")
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", creds.access_key)
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", creds.secret_key)
    monkeypatch.setenv("AWS_SESSION_TOKEN", creds.token or "")
    return creds


@pytest.fixture
def proxy(opensearch_url: str, aws_env: FixedCredentials) -> Iterator[SigV4Proxy]:
    p = SigV4Proxy(opensearch_url, aws_env)
    p.url = p.start()  # type: ignore[attr-defined]
    yield p
    p.stop()


@pytest.fixture
def signed(proxy: SigV4Proxy, settings: Settings, opensearch_url: str) -> Iterator[Settings]:
    """The test's settings, pointed at the verifying proxy with OSRAG_AUTH=sigv4."""
    s = Settings(
        **{
            **settings.model_dump(),
            "url": proxy.url,  # type: ignore[attr-defined]
            "auth": "sigv4",
            "aws_region": proxy.creds.region,
            "aws_service": "es",
        },
        _env_file=None,
    )
    yield s
    drop_alias(make_client(Settings(url=opensearch_url, _env_file=None)), settings.alias)


def _corpus(root: Path) -> Path:
    root.mkdir(parents=True)
    for name in FILES:
        shutil.copy(GOLDEN / f"{name}.md", root / f"{name}.md")
    return root


def test_install_ingest_search_reindex_status_through_a_verifying_proxy(
    signed: Settings, proxy: SigV4Proxy, tmp_path: Path
) -> None:
    AliasStore(signed).install()
    report = Ingester(signed).ingest([_corpus(tmp_path / "kb")])
    assert report.indexed == len(FILES) and not report.failed

    env = SearchClient(signed).search("TEA15 скидка на чай", principal=ALL, budget_tokens=600)
    assert env.passages and env.passages[0].doc_id

    async def async_search() -> list[str]:
        async with AsyncSearchClient(signed) as client:
            got = await client.search("TEA15 скидка на чай", principal=ALL, budget_tokens=600)
            return [p.chunk_id for p in got.passages]

    assert asyncio.run(async_search()) == [p.chunk_id for p in env.passages]

    plan = Reindexer(signed).run()
    st = read_status(signed)
    assert st.alias == signed.alias and plan.target
    assert AliasStore(signed).current_index() == plan.target
    # Every request went through the proxy, signed and verified; none was refused.
    assert proxy.refused == []
    assert proxy.verified > 20
    assert any(p.startswith("POST /_bulk") for p in proxy.paths)
    assert any("/_search" in p for p in proxy.paths)


def test_a_tampered_signature_is_refused_with_a_clear_error(signed: Settings, proxy: SigV4Proxy) -> None:
    from opensearchpy.helpers.signer import Urllib3AWSV4SignerAuth

    import osrag.connection as connection

    class Tampered(Urllib3AWSV4SignerAuth):
        def __call__(self, method, url, body, headers=None):  # type: ignore[no-untyped-def]
            out = super().__call__(method, url, body, headers)
            sig = out["Authorization"][-64:]
            out["Authorization"] = out["Authorization"][:-64] + ("0" if sig[0] != "0" else "1") + sig[1:]
            return out

    client = make_client(signed)
    creds = connection.aws_credentials()
    client.transport.connection_pool.connection.http_auth = Tampered(creds, signed.aws_region, "es")
    cluster = connection.Cluster(signed)
    cluster._client = client
    with pytest.raises(ClusterError) as err:
        cluster.info()
    line = str(err.value)
    assert "403" in line and "signature" in line and "\n" not in line
    assert proxy.refused and proxy.verified == 0


def test_wrong_secret_and_wrong_region_are_refused(
    signed: Settings, proxy: SigV4Proxy, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "not-the-secret")
    with pytest.raises(ClusterError, match="signature we calculated does not match"):
        AliasStore(signed).cluster.info()
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", proxy.creds.secret_key)
    other = signed.model_copy(update={"aws_region": "us-east-1"})
    with pytest.raises(ClusterError, match="scoped to eu-north-1/es"):
        AliasStore(other).cluster.info()
    assert AliasStore(signed).cluster.info()["version"]["number"]
    assert len(proxy.refused) == 2


def test_the_verifier_itself_rejects_a_changed_body(aws_env: FixedCredentials) -> None:
    """The proxy's check can fail: a body changed after signing is caught by its hash."""
    from opensearchpy.helpers.signer import AWSV4Signer

    from osrag.connection import aws_credentials

    signer = AWSV4Signer(aws_credentials(), aws_env.region, aws_env.service)
    url = "http://127.0.0.1:9/idx/_search?size=1"
    headers = {
        **signer.sign("POST", url, b'{"query":{}}'),
        "Host": "127.0.0.1:9",
    }  # as the transport sends it
    assert (
        verify(aws_env, "POST", "http://127.0.0.1:9", "/idx/_search?size=1", headers, b'{"query":{}}') is None
    )
    assert "does not match the body" in (
        verify(aws_env, "POST", "http://127.0.0.1:9", "/idx/_search?size=1", headers, b'{"query":{"x":1}}')
        or ""
    )
    assert "does not match the signature" in (
        verify(aws_env, "POST", "http://127.0.0.1:9", "/idx/_search?size=2", headers, b'{"query":{}}') or ""
    )
