"""The LangChain, LlamaIndex and Haystack retrievers on the live node, against the real framework packages.

One small corpus (public and restricted documents, ingested with a base URL so passages carry
one) is installed once for this module in its own alias. Every adapter must give exactly the
passages of ``SearchClient.search`` for the same question, principal, budget and filters -- the
one query path -- with the envelope's status, budget and left-out count on each, sync and async,
and must refuse a search with no principal anywhere (fail closed).
"""

from __future__ import annotations

import asyncio
import os
import uuid
from collections.abc import Iterator
from typing import Any

import pytest

from osrag import PUBLIC, AsyncSearchClient, Principal, SearchClient
from osrag.envelope import Envelope
from osrag.errors import InputError
from osrag.ingest.documents import ReadOptions
from osrag.ingest.indexing import Ingester
from osrag.settings import Settings
from tests.integration.conftest import drop_alias

pytestmark = pytest.mark.integration
# Haystack reports usage to its vendor unless told not to (read when haystack is first imported).
os.environ.setdefault("HAYSTACK_TELEMETRY_ENABLED", "false")

BASE_URL = "https://docs.example.ru/kb"
STAFF = Principal(groups=["staff"])
DOCS: dict[str, tuple[list[str], str]] = {
    "tea15": (
        [],
        "# Зелёный чай TEA15\n\nАртикул TEA15. Японский зелёный чай сенча в упаковке 100 грамм, цена 640 рублей.\n"
        "Заваривать водой 75 градусов две минуты.\n\n## Хранение\n\nХранить в сухом прохладном месте до года.\n",
    ),
    "delivery": (
        [],
        "# Доставка\n\nДоставка по Москве курьером занимает один-два дня и стоит 300 рублей. При заказе от 3000"
        " рублей доставка бесплатная. В другие города заказы идут почтой от трёх до семи дней.\n",
    ),
    "returns": (
        [],
        "# Возврат\n\nВернуть нераспечатанный чай можно в течение четырнадцати дней. Деньги возвращаются на карту"
        " за десять рабочих дней.\n",
    ),
    "staff-discount": (
        ["staff"],
        "# Скидка сотрудникам\n\nСотрудники магазина получают скидку 30 процентов на весь чай и лампы по"
        " служебному коду STAFF30.\n",
    ),
}
TEA = "как заваривать TEA15"
SECRET = "скидка сотрудникам STAFF30"
MANY = "доставка и возврат чая"  # three passages: a budget of the first one's size leaves two out


@pytest.fixture(scope="module")
def corpus(opensearch_url: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Settings]:
    """The corpus in this module's own alias, ingested once; everything removed after."""
    from osrag.store.alias import AliasStore

    settings = Settings(
        url=opensearch_url,
        alias=f"t-integrations-{uuid.uuid4().hex[:8]}",
        embedding_model="navec:news-300d",
        rerank=False,
        cache_dir=Settings().models_dir.parent,
        _env_file=None,
    )
    root = tmp_path_factory.mktemp("kb")
    for doc_id, (acl, body) in DOCS.items():
        acl_line = f"acl: [{', '.join(acl)}]\n" if acl else ""
        front = f"---\ndoc_id: {doc_id}\ntitle: {doc_id}\ncategory: shop\n{acl_line}---\n"
        (root / f"{doc_id}.md").write_text(front + body, encoding="utf-8")
    adm = AliasStore(settings)
    try:
        adm.install()
        report = Ingester(settings).ingest([root], options=ReadOptions(base_url=BASE_URL))
        assert report.failed == [], report.failed
        yield settings
    finally:
        drop_alias(adm.cluster.client, settings.alias)


def tight_budget(env: Envelope) -> int:
    """A budget the first passage of ``env`` fits and the rest do not."""
    assert len(env.passages) >= 2, env.passages
    return env.passages[0].tokens


def same_passages(env: Envelope, ids: list[str | None], texts: list[str]) -> None:
    assert ids == [p.chunk_id for p in env.passages]
    assert texts == [p.text for p in env.passages]


def check_meta(env: Envelope, metas: list[dict[str, Any]]) -> None:
    for p, meta in zip(env.passages, metas, strict=True):
        assert meta["doc_id"] == p.doc_id and meta["chunk_id"] == p.chunk_id
        assert meta["heading_path"] == p.heading_path and meta["heading_path"]
        assert meta["source"] == p.source
        assert meta["url"] and meta["url"].startswith(BASE_URL), meta
        assert meta["scores"] == p.scores.model_dump() and meta["scores"]["fused"] is not None
        assert meta["section_id"] == p.section_id
        assert (meta["status"], meta["budget_tokens"], meta["spent_tokens"]) == (
            env.status,
            env.budget_tokens,
            env.spent_tokens,
        )
        assert meta["left_out_count"] == len(env.left_out)
        assert meta["left_out_for_budget"] == env.left_out_for_budget
        # the filterable fields from the stored chunk, whom it was filtered for and with what
        assert meta["category"] == "shop" and meta["tenant"] is None
        assert meta["access"] == env.access and meta["access"]
        assert meta["filters"] == env.filters


def test_langchain_retriever_is_the_search(corpus: Settings) -> None:
    from osrag.integrations.langchain import OsragRetriever

    client = SearchClient(corpus)
    retriever = OsragRetriever(client=client, principal=PUBLIC)
    want = client.search(TEA, principal=PUBLIC)
    docs = retriever.invoke(TEA)
    assert docs, want.message
    same_passages(want, [d.id for d in docs], [d.page_content for d in docs])
    check_meta(want, [d.metadata for d in docs])
    assert {d.metadata["status"] for d in docs} == {"complete"}

    # Per call: a budget smaller than the answer, filters, and another principal.
    tight = tight_budget(client.search(MANY, principal=PUBLIC))
    small = client.search(MANY, principal=PUBLIC, budget_tokens=tight)
    got = retriever.invoke(MANY, budget_tokens=tight)
    assert small.status == "budgeted" and got and got[0].metadata["status"] == "budgeted"
    assert got[0].metadata["left_out_for_budget"] == small.left_out_for_budget > 0
    only = retriever.invoke("доставка", filters={"doc_id": "returns"})
    assert {d.metadata["doc_id"] for d in only} <= {"returns"}
    assert "staff-discount" not in {d.metadata["doc_id"] for d in retriever.invoke(SECRET)}
    staff_docs = retriever.invoke(SECRET, principal=STAFF)
    assert "staff-discount" in {d.metadata["doc_id"] for d in staff_docs}
    assert {tuple(d.metadata["access"]["groups"]) for d in staff_docs} == {("staff",)}

    # Async: through AsyncSearchClient, and without one (the sync client in a thread): the same documents.
    async def both() -> tuple[list[Any], list[Any]]:
        async with AsyncSearchClient(corpus) as aclient:
            on_loop = OsragRetriever(client=client, async_client=aclient, principal=PUBLIC)
            return await asyncio.gather(on_loop.ainvoke(TEA), retriever.ainvoke(TEA))

    for got_async in asyncio.run(both()):
        assert [(d.id, d.page_content) for d in got_async] == [(d.id, d.page_content) for d in docs]

    # Fail closed: no principal on the retriever, the call or the client.
    with pytest.raises(InputError, match="no principal"):
        OsragRetriever(client=client).invoke(TEA)
    with pytest.raises(InputError, match="no principal"):
        asyncio.run(OsragRetriever(client=client).ainvoke(TEA))


def test_llamaindex_retriever_is_the_search(corpus: Settings) -> None:
    from llama_index.core.schema import MetadataMode

    from osrag.integrations.llamaindex import OsragRetriever

    client = SearchClient(corpus)
    retriever = OsragRetriever(client, principal=PUBLIC)
    want = client.search(TEA, principal=PUBLIC)
    nodes = retriever.retrieve(TEA)
    assert nodes, want.message
    same_passages(want, [n.node.node_id for n in nodes], [n.node.get_content() for n in nodes])
    check_meta(want, [n.node.metadata for n in nodes])
    assert [n.score for n in nodes] == [p.scores.fused for p in want.passages]
    assert nodes[0].node.ref_doc_id == want.passages[0].doc_id
    # What the LLM sees: the text with its title, heading path and citation, not the bookkeeping.
    shown = nodes[0].node.get_content(metadata_mode=MetadataMode.LLM)
    assert want.passages[0].text in shown and "citation" in shown and "left_out_count" not in shown

    tight = tight_budget(client.search(MANY, principal=PUBLIC))
    small = retriever.with_options(budget_tokens=tight).retrieve(MANY)
    assert small and small[0].node.metadata["status"] == "budgeted"
    assert retriever.retrieve(MANY)[0].node.metadata["status"] == "complete"  # the copy left this one alone
    hidden = {n.node.metadata["doc_id"] for n in retriever.retrieve(SECRET)}
    seen = {n.node.metadata["doc_id"] for n in retriever.with_options(principal=STAFF).retrieve(SECRET)}
    assert "staff-discount" not in hidden and "staff-discount" in seen

    async def both() -> tuple[list[Any], list[Any]]:
        async with AsyncSearchClient(corpus) as aclient:
            on_loop = OsragRetriever(client, async_client=aclient, principal=PUBLIC)
            return await asyncio.gather(on_loop.aretrieve(TEA), retriever.aretrieve(TEA))

    for got in asyncio.run(both()):
        assert [(n.node.node_id, n.score) for n in got] == [(n.node.node_id, n.score) for n in nodes]

    with pytest.raises(InputError, match="no principal"):
        OsragRetriever(client).retrieve(TEA)


def test_haystack_component_in_pipelines(corpus: Settings) -> None:
    from haystack import Pipeline

    from osrag.integrations.haystack import OsragRetriever

    client = SearchClient(corpus)
    want = client.search(TEA, principal=PUBLIC)
    component = OsragRetriever(client, principal=PUBLIC)
    out = component.run(TEA)
    assert out["envelope"].model_dump(exclude={"timings_ms", "freshness"}) == want.model_dump(
        exclude={"timings_ms", "freshness"}
    )
    docs = out["documents"]
    same_passages(want, [d.id for d in docs], [d.content for d in docs])
    check_meta(want, [d.meta for d in docs])
    assert [d.score for d in docs] == [p.scores.fused for p in want.passages]

    # In a pipeline, with the per-call inputs as pipeline inputs; the envelope is an output too.
    pipe = Pipeline()
    pipe.add_component("retriever", OsragRetriever(client))
    res = pipe.run({"retriever": {"query": SECRET, "principal": STAFF, "budget_tokens": 400}})["retriever"]
    assert "staff-discount" in {d.meta["doc_id"] for d in res["documents"]}
    assert res["envelope"].access["groups"] == ["staff"]
    res = pipe.run({"retriever": {"query": SECRET, "principal": PUBLIC}})["retriever"]
    assert "staff-discount" not in {d.meta["doc_id"] for d in res["documents"]}
    nothing = pipe.run({"retriever": {"query": "квантовая хромодинамика глюоны", "principal": PUBLIC}})
    assert nothing["retriever"]["documents"] == []
    assert nothing["retriever"]["envelope"].status == "nothing_relevant"
    with pytest.raises(Exception, match="no principal"):
        pipe.run({"retriever": {"query": TEA}})

    async def run_async() -> dict[str, Any]:
        async with AsyncSearchClient(corpus) as aclient:
            apipe = Pipeline()  # Haystack 3 runs one pipeline both ways; run_async awaits run_async
            apipe.add_component("retriever", OsragRetriever(client, async_client=aclient, principal=PUBLIC))
            out = await apipe.run_async({"retriever": {"query": MANY, "budget_tokens": tight}})
            assert aclient._transport.client is not None  # the component's run_async ran, on the async client
            return out

    tight = tight_budget(client.search(MANY, principal=PUBLIC))
    got = asyncio.run(run_async())["retriever"]
    assert got["envelope"].status == "budgeted" and got["documents"]
    assert [d.id for d in got["documents"]] == [
        p.chunk_id for p in client.search(MANY, principal=PUBLIC, budget_tokens=tight).passages
    ]
