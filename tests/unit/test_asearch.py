"""The two drivers of the one query path: the same steps, answered inline or awaited.

The live-node equality of sync and async answers is in tests/integration/test_async.py;
here the plumbing: CPU work leaves the event loop, a refused request is thrown back into
the path where it was made, construction does no I/O, an unreachable node is one line.
"""

from __future__ import annotations

import asyncio
import threading
from typing import Any

import pytest

from osrag import PUBLIC, AsyncSearchClient, SearchClient
from osrag.errors import ClusterError, ClusterUnavailable
from osrag.settings import Settings
from osrag.steps import Call, Inline, Steps, Work, drive


def path_under_test(log: list[str]) -> Steps[tuple[Any, int]]:
    """A small path: one request that is refused and recovered from, one that answers, one CPU step."""
    try:
        yield Call("first", "search", {"index": "a"})
    except ClusterError as exc:
        log.append(f"recovered: {exc}")
    got = yield Call("second", "search", {"index": "b"})
    thread = yield Work(threading.get_ident)
    return got, thread


async def answer_search(index: str) -> dict[str, Any]:
    """The async client's search in the driver's unit test only (the integration test uses the node)."""
    if index == "a":
        from opensearchpy.exceptions import TransportError

        raise TransportError(400, "refused", {"error": "refused"})
    return {"index": index}


def settings() -> Settings:
    return Settings(url="http://127.0.0.1:1", alias="t-unit", _env_file=None, max_retries=0, timeout_s=2)


def test_async_driver_runs_work_off_the_loop_and_throws_refusals_back(fake_async_client: Any) -> None:
    fake_async_client.search.side_effect = answer_search
    client = AsyncSearchClient(settings())
    client._transport.client = fake_async_client
    log: list[str] = []

    async def main() -> tuple[tuple[Any, int], int]:
        return await drive(path_under_test(log), client._transport), threading.get_ident()

    (got, work_thread), loop_thread = asyncio.run(main())
    assert got == {"index": "b"}
    assert work_thread != loop_thread  # the CPU step ran in a worker thread
    assert log == ["recovered: OpenSearch first failed: 400 refused"]
    assert [c.kwargs for c in fake_async_client.search.await_args_list] == [{"index": "a"}, {"index": "b"}]


def test_sync_driver_answers_the_same_steps_inline() -> None:
    log: list[str] = []

    def answer(step: Call | Work) -> Any:
        if isinstance(step, Work):
            return step.fn()
        if step.kwargs["index"] == "a":
            raise ClusterError("OpenSearch first failed: 400 refused")
        return {"index": step.kwargs["index"]}

    got, thread = drive(path_under_test(log), Inline(answer))
    assert got == {"index": "b"} and thread == threading.get_ident()
    assert log == ["recovered: OpenSearch first failed: 400 refused"]


def test_construction_does_no_io_and_an_unreachable_node_is_one_line() -> None:
    client = AsyncSearchClient(settings(), principal=PUBLIC)  # port 1: nothing listens
    assert client._transport.client is None

    async def main() -> None:
        async with client:
            with pytest.raises(ClusterUnavailable) as err:
                await client.search("чай")
            assert "\n" not in str(err.value) and "127.0.0.1:1" in str(err.value)
        assert client._transport.client is None

    asyncio.run(main())
    with pytest.raises(ClusterUnavailable):  # and the sync client says the same
        SearchClient(settings(), principal=PUBLIC).search("чай")
