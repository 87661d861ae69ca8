"""OSRAG_AUTH=cert against the secured 2.19.1 node: a client certificate instead of a password.

The node accepts a client certificate signed by its CA (``clientauth_mode: OPTIONAL``, the
``clientcert`` authenticator first); the user is the certificate's DN, and the DN is mapped to
the alias's writer and admin roles (``osrag install --roles``' roles). With that certificate alone, osrag
ingests, searches (sync and async) and reads status; a certificate whose DN is mapped to
nothing is refused by the server with one line.
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from osrag.access import Principal
from osrag.admin.roles import API, desired_roles, install_roles, map_user, role_names, security_request
from osrag.admin.status import read_status
from osrag.connection import Cluster, make_client
from osrag.errors import ClusterError
from osrag.ingest.indexing import Ingester
from osrag.search.asearch import AsyncSearchClient
from osrag.search.client import SearchClient
from osrag.settings import Settings
from osrag.store.alias import AliasStore
from tests.integration.conftest import drop_alias
from tests.integration.test_roles import secured_settings, write_docs

pytestmark = [pytest.mark.integration, pytest.mark.security]

ALL = Principal.admin_bypass()
QUESTION = "регламент резервного копирования сервера"


@dataclass
class CertWorld:
    admin: Settings
    cert: Settings  # OSRAG_AUTH=cert with a certificate whose DN is mapped to the writer role
    unmapped: Settings  # a certificate of the same CA whose DN has no role
    dn: str


def _cert_settings(admin: Settings, cert: Path, key: Path) -> Settings:
    data = admin.model_dump(exclude={"user", "password"})
    return Settings(**{**data, "auth": "cert", "client_cert": cert, "client_key": key}, _env_file=None)


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory) -> Iterator[CertWorld]:
    from osrag.devnode import DevNode

    base = secured_settings()
    node = DevNode(Settings(), security=True)
    alias = f"t-cert-{uuid.uuid4().hex[:8]}"
    admin = base.model_copy(
        update={
            "alias": alias,
            "embedding_model": "navec:news-300d",
            "rerank": False,
            "cache_dir": Settings().models_dir.parent,
        }
    )
    cert, key, dn = node.client_cert_files("osrag-test-app")
    other_cert, other_key, _ = node.client_cert_files("osrag-test-unmapped")
    cluster = Cluster(admin)
    AliasStore(admin).install()
    install_roles(cluster, alias)
    map_user(cluster, role_names(alias)["writer"], dn)
    map_user(cluster, role_names(alias)["admin"], dn)  # status reads templates and pipelines (drift)
    try:
        yield CertWorld(
            admin, _cert_settings(admin, cert, key), _cert_settings(admin, other_cert, other_key), dn
        )
    finally:
        for name in desired_roles(alias):
            security_request(cluster, "DELETE", f"{API}/roles/{name}", f"delete role {name}", ok_404=True)
            security_request(
                cluster, "DELETE", f"{API}/rolesmapping/{name}", f"delete mapping {name}", ok_404=True
            )
        drop_alias(make_client(admin), alias)


def test_the_server_knows_the_certificate_as_its_dn(world: CertWorld) -> None:
    client = make_client(world.cert)
    who = client.transport.perform_request("GET", "/_plugins/_security/authinfo")
    assert who["user_name"] == world.dn
    assert role_names(world.cert.alias)["writer"] in who["roles"]


def test_ingest_search_and_status_with_the_certificate_alone(world: CertWorld, tmp_path: Path) -> None:
    assert world.cert.auth_mode == "cert" and world.cert.credentials() is None
    report = Ingester(world.cert).ingest([write_docs(tmp_path / "kb", {"pub1": (), "pub2": ()})])
    assert report.indexed == 2 and not report.failed

    env = SearchClient(world.cert).search(QUESTION, principal=ALL, budget_tokens=600)
    assert {p.doc_id.rsplit("/", 1)[-1] for p in env.passages} >= {"pub1"}

    async def async_search() -> list[str]:
        async with AsyncSearchClient(world.cert) as client:
            got = await client.search(QUESTION, principal=ALL, budget_tokens=600)
            return [p.chunk_id for p in got.passages]

    assert asyncio.run(async_search()) == [p.chunk_id for p in env.passages]
    assert read_status(world.cert).alias == world.cert.alias


def test_a_certificate_mapped_to_no_role_is_refused_in_one_line(world: CertWorld) -> None:
    with pytest.raises(ClusterError) as err:
        SearchClient(world.unmapped).search(QUESTION, principal=ALL, budget_tokens=300)
    line = str(err.value)
    assert "403" in line and "\n" not in line
    assert "PRIVATE KEY" not in line
