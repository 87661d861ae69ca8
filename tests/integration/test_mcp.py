"""``osrag mcp`` on the live node, driven by the MCP SDK's own client: over stdio (the client starts
the server process) and over streamable HTTP (a server process on a free port).

The tools must answer exactly what ``SearchClient.search``/``section`` answer for the principal
fixed on the server's command line, whatever the model passes; the envelope arrives as
structured content matching the tool's output schema, with a readable text beside it.
"""

from __future__ import annotations

import os
import re
import socket
import subprocess
import sys
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import anyio
import pytest

from osrag import PUBLIC, SearchClient
from osrag.envelope import Envelope, Passage
from osrag.settings import Settings
from tests.integration.test_integrations import MANY, SECRET, STAFF, TEA, corpus  # noqa: F401

pytestmark = pytest.mark.integration

mcp = pytest.importorskip("mcp")
from mcp import ClientSession, StdioServerParameters, stdio_client  # noqa: E402
from mcp.client.streamable_http import streamable_http_client  # noqa: E402


def server_env(settings: Settings) -> dict[str, str]:
    """The server's settings: this module's alias on the session node (no .env file in its cwd)."""
    return {
        "OSRAG_URL": settings.url,
        "OSRAG_ALIAS": settings.alias,
        "OSRAG_EMBEDDING_MODEL": str(settings.embedding_model),
        "OSRAG_RERANK": "false",
        "OSRAG_CACHE_DIR": str(settings.cache_dir),
    }


@asynccontextmanager
async def stdio_session(settings: Settings, tmp_path: Path, *principal: str) -> AsyncIterator[ClientSession]:
    params = StdioServerParameters(
        command=sys.executable,
        args=["-m", "osrag.cli", "mcp", *principal],
        env=server_env(settings),
        cwd=tmp_path,
    )
    with (tmp_path / "server.log").open("w") as errlog:
        async with (
            stdio_client(params, errlog=errlog) as (read, write),
            ClientSession(read, write) as session,
        ):
            await session.initialize()
            yield session


def comparable(env: Envelope) -> dict[str, Any]:
    return env.model_dump(exclude={"timings_ms": True, "freshness": {"age_seconds"}})


def run(fn: Callable[[], Awaitable[Any]]) -> Any:
    async def bounded() -> Any:
        with anyio.fail_after(300):
            return await fn()

    return anyio.run(bounded)


def test_stdio_tools_answer_as_the_configured_principal(corpus: Settings, tmp_path: Path) -> None:
    client = SearchClient(corpus)
    want = client.search(TEA, principal=PUBLIC)
    want_many = client.search(MANY, principal=PUBLIC, budget_tokens=100, filters={"category": "shop"})
    assert want.passages and want_many.passages

    async def main() -> dict[str, Any]:
        got: dict[str, Any] = {}
        async with stdio_session(corpus, tmp_path, "--public-only") as s:
            got["tools"] = {t.name: t for t in (await s.list_tools()).tools}
            got["tea"] = await s.call_tool("search", {"question": TEA})
            got["many"] = await s.call_tool(
                "search", {"question": MANY, "budget_tokens": 100, "filters": {"category": "shop"}}
            )
            got["secret"] = await s.call_tool("search", {"question": SECRET})
            # The model tries to choose who it is: not an argument the tool has.
            got["sneak"] = await s.call_tool(
                "search", {"question": SECRET, "principal": {"groups": ["staff"]}}
            )
            got["sneak_filter"] = await s.call_tool(
                "search", {"question": SECRET, "filters": {"acl": ["staff"]}}
            )
            got["bad_filter"] = await s.call_tool(
                "search", {"question": TEA, "filters": {"updated_after": "вчера"}}
            )
            got["too_big"] = await s.call_tool("search", {"question": TEA, "budget_tokens": 10**6})
            got["empty"] = await s.call_tool("search", {"question": "   "})
            got["section"] = await s.call_tool("section", {"section_id": want.passages[0].section_id})
            got["hidden"] = await s.call_tool("section", {"section_id": "staff-discount#0"})
        return got

    got = run(main)
    tools = got["tools"]
    assert set(tools) == {"search", "section"}
    for tool in tools.values():  # described in Russian and in English
        assert re.search("[а-я]{4}", tool.description) and re.search(r"\b(the|a)\b", tool.description)
        props = set(tool.input_schema["properties"])
        assert not props & {"principal", "groups", "acl", "all_access"}, props
        assert tool.output_schema is not None
    assert set(tools["search"].input_schema["properties"]) == {"question", "budget_tokens", "filters"}

    tea = got["tea"]
    assert not tea.is_error, tea.content
    assert comparable(Envelope.model_validate(tea.structured_content)) == comparable(want)
    text = tea.content[0].text
    assert want.passages[0].text.strip().splitlines()[0] in text
    assert (want.passages[0].url or want.passages[0].source) in text  # the source, for the model to cite
    assert "budget:" in text

    many = Envelope.model_validate(got["many"].structured_content)
    assert comparable(many) == comparable(want_many)
    assert many.filters == {"category": ["shop"]} and many.budget_tokens == 100

    secret = Envelope.model_validate(got["secret"].structured_content)
    assert "staff-discount" not in {p.doc_id for p in secret.passages}
    assert secret.access["public_only"] is True
    sneak = got["sneak"]
    if not sneak.is_error:  # extra arguments ignored: still the server's principal
        assert "staff-discount" not in {
            p.doc_id for p in Envelope.model_validate(sneak.structured_content).passages
        }
    # acl is no filter: refused by the tool's input schema (the SDK's validation message names it).
    assert got["sneak_filter"].is_error and "filters.acl" in got["sneak_filter"].content[0].text
    assert got["bad_filter"].is_error and "updated_after" in got["bad_filter"].content[0].text
    assert got["too_big"].is_error and "budget_tokens" in got["too_big"].content[0].text
    assert got["empty"].is_error and "question" in got["empty"].content[0].text
    for name in ("bad_filter", "empty"):  # osrag's own errors: one line, no traceback
        assert "Traceback" not in got[name].content[0].text and "\n" not in got[name].content[0].text.strip()

    want_section = client.section(want.passages[0].section_id, principal=PUBLIC)
    section = got["section"]
    assert [Passage.model_validate(p) for p in section.structured_content["passages"]] == want_section
    assert want_section[0].text.strip().splitlines()[0] in section.content[0].text
    hidden = got["hidden"]
    assert not hidden.is_error and hidden.structured_content["passages"] == []


def test_stdio_server_for_a_group_sees_its_content(corpus: Settings, tmp_path: Path) -> None:
    want = SearchClient(corpus).search(SECRET, principal=STAFF)
    assert "staff-discount" in {p.doc_id for p in want.passages}

    async def main() -> Any:
        async with stdio_session(corpus, tmp_path, "--group", "staff") as s:
            return await s.call_tool("search", {"question": SECRET})

    got = Envelope.model_validate(run(main).structured_content)
    assert comparable(got) == comparable(want)
    assert got.access["groups"] == ["staff"]


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def test_streamable_http_transport(corpus: Settings, tmp_path: Path) -> None:
    want = SearchClient(corpus).search(TEA, principal=PUBLIC)
    port = free_port()
    env = {**os.environ, **server_env(corpus)}
    with (tmp_path / "server.log").open("w") as log:
        proc = subprocess.Popen(
            [sys.executable, "-m", "osrag.cli", "mcp", "--transport", "streamable-http", "--port", str(port)]
            + ["--public-only"],
            env=env,
            cwd=tmp_path,
            stdout=log,
            stderr=subprocess.STDOUT,
        )
        try:
            deadline = time.monotonic() + 120
            while True:
                assert proc.poll() is None, (tmp_path / "server.log").read_text()
                try:
                    socket.create_connection(("127.0.0.1", port), timeout=1).close()
                    break
                except OSError:
                    assert time.monotonic() < deadline, "the MCP server did not listen within 120 s"
                    time.sleep(0.5)

            async def main() -> Any:
                url = f"http://127.0.0.1:{port}/mcp"
                async with streamable_http_client(url) as (read, write), ClientSession(read, write) as s:
                    await s.initialize()
                    return await s.call_tool("search", {"question": TEA})

            got = run(main)
        finally:
            proc.terminate()
            proc.wait(timeout=30)
    assert not got.is_error, got.content
    assert comparable(Envelope.model_validate(got.structured_content)) == comparable(want)


def test_mcp_without_a_principal_refuses_to_start(tmp_path: Path) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "osrag.cli", "mcp"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=120,
        stdin=subprocess.DEVNULL,
    )
    assert done.returncode == 1
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and "--public-only" in lines[0] and "--group" in lines[0], done.stderr
