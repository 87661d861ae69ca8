"""Tenants fail closed (issue 29): the access matrix over tenants and groups, against the real node.

The rule (osrag.access, docs/usage.md): a chunk with a tenant is seen only by principals of
that tenant; untenanted chunks are shared; a principal without a tenant sees untenanted chunks
only. Every (principal, head) pair must return exactly what that rule allows -- on the old rule a
principal without a tenant saw every tenant's chunks, so the rows without a tenant fail there.
"""

from __future__ import annotations

from itertools import product
from typing import Any

import pytest

from osrag.access import PUBLIC, Principal
from osrag.ingest.indexing import Ingester
from osrag.search.client import SearchClient
from osrag.settings import Settings
from osrag.store.alias import AliasStore

pytestmark = pytest.mark.integration

QUESTION = "сроки возврата товара ненадлежащего качества"
TENANTS = (None, "acme", "globex")
ACLS = (None, "staff")


def _doc_id(tenant: str | None, acl: str | None) -> str:
    return f"{tenant or 'shared'}-{acl or 'public'}"


DOCS = {_doc_id(t, a): (t, a) for t, a in product(TENANTS, ACLS)}


def _may_see(principal: Principal, tenant: str | None, acl: str | None) -> bool:
    """The documented rule, written independently of osrag.access."""
    if principal.all_access:
        return True
    if acl is not None and acl not in principal.groups:
        return False
    return tenant is None or tenant == principal.tenant


PRINCIPALS = {
    "public": PUBLIC,
    "public-acme": Principal.public(tenant="acme"),
    "staff": Principal(groups=["staff"]),
    "staff-acme": Principal(groups=["staff"], tenant="acme"),
    "staff-globex": Principal(groups=["staff"], tenant="globex"),
    "other-acme": Principal(groups=["other"], tenant="acme"),
    "tenant-only-globex": Principal(tenant="globex"),
    "stranger-tenant": Principal(groups=["staff"], tenant="initech"),
    "bypass": Principal.admin_bypass(),
}


@pytest.fixture(scope="module")
def corpus(opensearch_url: str, tmp_path_factory: pytest.TempPathFactory) -> Any:
    from tests.integration.conftest import drop_alias

    s = Settings(
        url=opensearch_url,
        alias="t-tenant-matrix",
        embedding_model="navec:news-300d",
        rerank=False,
        cache_dir=Settings().models_dir.parent,
        _env_file=None,
    )
    admin = AliasStore(s)
    drop_alias(admin.cluster.client, s.alias)
    admin.install()
    root = tmp_path_factory.mktemp("tenants")
    for doc_id, (tenant, acl) in DOCS.items():
        front = (
            f"doc_id: {doc_id}\n"
            + (f"tenant: {tenant}\n" if tenant else "")
            + (f"acl: [{acl}]\n" if acl else "")
        )
        body = f"# Возврат\n\nСроки возврата товара ненадлежащего качества: памятка {doc_id.replace('-', ' ')}.\n"
        (root / f"{doc_id}.md").write_text(f"---\n{front}---\n{body}", encoding="utf-8")
    report = Ingester(s).ingest([root])
    assert (report.indexed, report.failed) == (len(DOCS), [])
    yield s
    drop_alias(admin.cluster.client, s.alias)


@pytest.mark.parametrize("mode", ["bm25", "knn", "hybrid"])
@pytest.mark.parametrize("who", list(PRINCIPALS))
def test_each_principal_sees_exactly_its_tenant_and_shared_chunks(
    corpus: Settings, who: str, mode: str
) -> None:
    principal = PRINCIPALS[who]
    got = {
        h.source.doc_id
        for h in SearchClient(corpus).retrieve(QUESTION, mode=mode, depth=50, principal=principal).hits
    }
    want = {d for d, (tenant, acl) in DOCS.items() if _may_see(principal, tenant, acl)}
    assert got == want, (who, mode)


def test_no_tenant_never_reads_across_tenants(corpus: Settings) -> None:
    """The design gap of issue 29 in one line: an app that forgets the tenant reads less, not more."""
    got = {
        h.source.doc_id
        for h in SearchClient(corpus)
        .retrieve(QUESTION, mode="bm25", depth=50, principal=PRINCIPALS["staff"])
        .hits
    }
    assert got == {"shared-public", "shared-staff"}
    env = SearchClient(corpus).search(QUESTION, budget_tokens=5000, depth=50, principal=PRINCIPALS["staff"])
    assert {p.doc_id for p in env.passages} | {lo.doc_id for lo in env.left_out} <= got
