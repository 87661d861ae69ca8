"""The adapters' own logic without a cluster: per-passage metadata, per-call options over defaults,
fail closed, and the MCP tools' arguments, errors and results (the SDK's server, a fake client)."""

from __future__ import annotations

import asyncio
import os
from typing import Any
from unittest.mock import Mock

import pytest

from osrag import PUBLIC, Principal, SearchClient
from osrag.envelope import Passage, StageScores
from osrag.errors import ClusterError, InputError
from osrag.integrations.base import Options
from osrag.integrations.metadata import ENVELOPE_KEYS, passage_metadata, passages_with_metadata
from osrag.search.query import FILTER_KEYS
from osrag.settings import Settings
from tests.unit.test_envelope import envelope, passage

STAFF = Principal(groups=["staff"])
# Haystack reports usage to its vendor unless told not to (read when haystack is first imported).
os.environ.setdefault("HAYSTACK_TELEMETRY_ENABLED", "false")


def fake_client(**search: Any) -> Mock:
    client = Mock(spec=SearchClient)
    client.s = Settings(_env_file=None)
    client.search.return_value = envelope(**search)
    return client


def unreachable() -> SearchClient:
    """A real client whose cluster does not exist: any request would fail, so a refusal came first."""
    return SearchClient(Settings(url="http://127.0.0.1:9", _env_file=None))


# --------------------------------------------------------------------------- metadata
def test_passage_metadata_carries_the_source_scores_and_the_envelope() -> None:
    env = envelope()
    rows = passages_with_metadata(env)
    assert [p.chunk_id for p, _ in rows] == ["brewing:0", "tea15:0"]
    meta = rows[1][1]
    assert meta["doc_id"] == "tea15" and meta["heading_path"] == ["Зелёный чай TEA15 Сенча"]
    assert meta["source"] == "/docs/tea15.md" and meta["citation"] == "/docs/tea15.md"
    assert meta["url"] is None and meta["anchor"] is None
    assert meta["scores"] == {"fused": 0.0157, "rerank": 2.5, "relevance": 1.0}
    assert meta["score"] == 2.5  # the cross-encoder's when it ran
    assert rows[0][1]["score"] == 0.0164  # else the fused one
    assert (meta["trimmed"], meta["full_tokens"]) == (False, None)
    cut = rows[1][0].model_copy(update={"trimmed": True, "full_tokens": 240})
    assert (passage_metadata(env, cut)["trimmed"], passage_metadata(env, cut)["full_tokens"]) == (True, 240)
    assert {k: meta[k] for k in ENVELOPE_KEYS} == {
        "question": env.question,
        "status": "budgeted",
        "budget_tokens": 120,
        "spent_tokens": 110,
        "left_out_count": 2,
        "left_out_for_budget": 1,
        "index": "a-fp-20260101",
        "access": env.access,
        "filters": env.filters,
    }


def test_documents_say_whom_and_with_what_filters_the_answer_was_made() -> None:
    who = {"groups": ["staff"], "tenant": "acme", "public_only": False, "all_access": False}
    env = envelope().model_copy(update={"access": who, "filters": {"category": ["faq"]}})
    tagged = env.passages[0].model_copy(update={"category": "faq", "tenant": "acme"})
    meta = passage_metadata(env, tagged)
    assert meta["access"] == who and meta["filters"] == {"category": ["faq"]}
    assert (meta["category"], meta["tenant"]) == ("faq", "acme")
    assert (
        passage_metadata(env, env.passages[1])["category"],
        passage_metadata(env, env.passages[1])["tenant"],
    ) == (
        None,
        None,
    )
    meta["access"]["groups"].append("x")  # a copy: changing one document's metadata changes no other
    assert passage_metadata(env, tagged)["access"]["groups"] == ["staff"]


def test_url_anchor_and_pages_come_along() -> None:
    env = envelope()
    web = passage(1, "faq:0", ["FAQ"], "текст", 5, anchor="karty").model_copy(
        update={"source": "https://help.example.ru/faq.html"}
    )
    assert passage_metadata(env, web)["url"] == "https://help.example.ru/faq.html#karty"
    assert passage_metadata(env, web)["anchor"] == "karty"
    given = passage(1, "kb:0", ["KB"], "текст", 5, url="https://docs.example.ru/kb#x", anchor="x")
    assert passage_metadata(env, given)["url"] == "https://docs.example.ru/kb#x"
    pdf = passage(1, "g:0", ["G"], "текст", 5, source_format="pdf", page=2, page_end=3)
    pdf = pdf.model_copy(update={"source": "guide.pdf"})
    meta = passage_metadata(env, pdf)
    assert (meta["page"], meta["page_end"], meta["source_format"]) == (2, 3, "pdf")
    assert meta["citation"] == "guide.pdf p. 2-3" and meta["url"] is None
    assert "slide" not in meta  # absent locations are left out, not None


# --------------------------------------------------------------------------- options
def test_call_options_over_defaults() -> None:
    defaults = Options(PUBLIC, 500, {"category": "faq"})
    got = defaults.merged(STAFF, None, {"doc_id": "x"})
    assert got == Options(STAFF, 500, {"category": "faq", "doc_id": "x"})
    assert defaults.merged(None, 90, {"category": "promo"}) == Options(PUBLIC, 90, {"category": "promo"})
    assert defaults.merged() == defaults
    with pytest.raises(InputError, match="filters must be a mapping"):
        defaults.merged(filters="category=faq")  # type: ignore[arg-type]


def test_langchain_passes_the_call_over_the_retriever() -> None:
    pytest.importorskip("langchain_core")
    from osrag.integrations.langchain import OsragRetriever

    client = fake_client()
    retriever = OsragRetriever(
        client=client, principal=PUBLIC, budget_tokens=300, filters={"category": "faq"}
    )
    docs = retriever.invoke("чай", principal=STAFF, filters={"kind": "text"})
    client.search.assert_called_once_with(
        "чай", principal=STAFF, budget_tokens=300, filters={"category": "faq", "kind": "text"}
    )
    assert [d.id for d in docs] == ["brewing:0", "tea15:0"]
    assert docs[0].page_content.startswith("Вода") and docs[0].metadata["status"] == "budgeted"
    # ainvoke without an async client: the sync client in a thread, same arguments.
    asyncio.run(retriever.ainvoke("чай"))
    assert client.search.call_args.kwargs["principal"] == PUBLIC


@pytest.mark.parametrize("framework", ["langchain", "llamaindex", "haystack"])
def test_no_principal_anywhere_is_refused_before_any_request(framework: str) -> None:
    client = unreachable()
    if framework == "langchain":
        pytest.importorskip("langchain_core")
        from osrag.integrations.langchain import OsragRetriever as LC

        calls = [
            lambda: LC(client=client).invoke("чай"),
            lambda: asyncio.run(LC(client=client).ainvoke("чай")),
        ]
    elif framework == "llamaindex":
        pytest.importorskip("llama_index.core")
        from osrag.integrations.llamaindex import OsragRetriever as LI

        calls = [lambda: LI(client).retrieve("чай"), lambda: asyncio.run(LI(client).aretrieve("чай"))]
    else:
        pytest.importorskip("haystack")
        from osrag.integrations.haystack import OsragRetriever as HS

        calls = [lambda: HS(client).run("чай"), lambda: asyncio.run(HS(client).run_async("чай"))]
    for call in calls:
        with pytest.raises(InputError, match="no principal"):
            call()


def test_llamaindex_with_options_is_a_copy() -> None:
    pytest.importorskip("llama_index.core")
    from osrag.integrations.llamaindex import OsragRetriever

    client = fake_client()
    base = OsragRetriever(client, principal=PUBLIC)
    one = base.with_options(principal=STAFF, budget_tokens=50)
    assert base.options == Options(PUBLIC, None, {}) and one.options == Options(STAFF, 50, {})
    nodes = one.retrieve("чай")
    assert client.search.call_args.kwargs == {"principal": STAFF, "budget_tokens": 50, "filters": {}}
    assert [n.score for n in nodes] == [0.0164, 2.5]
    assert nodes[1].node.ref_doc_id == "tea15"


# --------------------------------------------------------------------------- MCP
def test_mcp_filters_are_the_query_filters() -> None:
    pytest.importorskip("mcp")
    from osrag.service.mcp import Filters

    assert set(Filters.model_fields) == {*FILTER_KEYS, "meta"}
    got = Filters(category="faq", meta={"tags": ["intro"], "lang": "ru"}).to_query()
    assert got == {"category": "faq", "meta.tags": ["intro"], "meta.lang": "ru"}


def test_mcp_server_needs_a_principal() -> None:
    pytest.importorskip("mcp")
    from osrag.service.mcp import build_server

    with pytest.raises(InputError, match="no principal"):
        build_server(fake_client(), None)  # type: ignore[arg-type]


def test_mcp_tools_call_the_client_as_the_server_principal() -> None:
    pytest.importorskip("mcp")
    from mcp.server.mcpserver.exceptions import ToolError

    from osrag.service.mcp import build_server

    client = fake_client()
    client.section.return_value = [
        Passage(
            chunk_id="a:0", doc_id="a", heading_path=["A"], text="раздел", tokens=3, rank=1, source="a.md"
        )
    ]
    server = build_server(client, STAFF, max_budget_tokens=500)

    async def main() -> Any:
        res = await server.call_tool("search", {"question": "чай", "filters": {"category": ["faq"]}})
        sec = await server.call_tool("section", {"section_id": "a#0"})
        with pytest.raises(ToolError, match="budget_tokens"):
            await server.call_tool("search", {"question": "чай", "budget_tokens": 501})
        client.search.side_effect = ClusterError("the cluster refused: shard failure")
        # A cluster failure reaches an MCP caller as one generic line; the detail stays in the log.
        with pytest.raises(
            ToolError, match=r"^Error executing tool search: the search backend failed"
        ) as shard:
            await server.call_tool("search", {"question": "чай"})
        assert "shard failure" not in str(shard.value)
        client.search.side_effect = RuntimeError("internal detail http://user:secret@host")
        with pytest.raises(ToolError) as crash:
            await server.call_tool("search", {"question": "чай"})
        return res, sec, str(crash.value)

    res, sec, crash = asyncio.run(main())
    client.search.assert_any_call("чай", principal=STAFF, budget_tokens=None, filters={"category": ["faq"]})
    assert res.structured_content["status"] == "budgeted" and "budget: 110/120" in res.content[0].text
    assert "/docs/tea15.md" in res.content[0].text  # sources in the readable text
    client.section.assert_called_once_with("a#0", principal=STAFF, filters=None)
    assert sec.structured_content["passages"][0]["text"] == "раздел" and "раздел" in sec.content[0].text
    assert "secret" not in crash  # an unexpected error's text never reaches the model


def test_stage_scores_round_trip_through_metadata() -> None:
    p = passage(1, "x:0", ["X"], "t", 1, scores=StageScores(fused=0.5))
    assert passage_metadata(envelope(), p)["scores"] == {"fused": 0.5, "rerank": None, "relevance": None}


def test_haystack_pipeline_round_trip_keeps_the_principal_not_the_client(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    pytest.importorskip("haystack")
    from haystack import Pipeline

    from osrag.integrations.haystack import OsragRetriever

    monkeypatch.setenv("OSRAG_URL", "http://writer:s3cret@127.0.0.1:9")
    pipe = Pipeline()
    tenant_staff = Principal(groups=["staff"], tenant="acme")
    pipe.add_component("r", OsragRetriever(unreachable(), principal=tenant_staff, filters={"kind": "text"}))
    dumped = pipe.dumps()
    assert "s3cret" not in dumped and "127.0.0.1:9" not in dumped  # no client, no settings
    loaded = Pipeline.loads(dumped, allowed_modules=["osrag.integrations.haystack"]).get_component("r")
    assert loaded.options == Options(tenant_staff, None, {"kind": "text"})
    assert loaded.client.s.url == "http://writer:s3cret@127.0.0.1:9"  # built from OSRAG_* on load
