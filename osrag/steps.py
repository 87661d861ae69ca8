"""The steps of the query path: what it asks of OpenSearch (``Call``) and of the CPU (``Work``).

The query path (``osrag.search.client.QuerySteps``) is a generator that yields these and is sent
their results. ``drive`` is its one driver; what answers a step is the transport object handed to
it: a ``SyncTransport`` (``SearchClient``: the call inline) or an ``AsyncTransport``
(``AsyncSearchClient``: the call awaited, the work in a thread). The loop is written once, as a
coroutine: with a sync transport it never suspends, so ``drive`` runs it to its end at once and
returns the value; with an async one it returns the coroutine to await. Pure: nothing here talks
to a server.
"""

from __future__ import annotations

from collections.abc import Callable, Coroutine, Generator
from dataclasses import dataclass
from typing import Any, TypeVar, overload

from osrag.errors import OsragError

T = TypeVar("T")


@dataclass(frozen=True)
class Call:
    """One OpenSearch request: a dotted client method (``"search"``, ``"indices.get_mapping"``),
    its keyword arguments, and what to call it in an error line. Both opensearch-py clients
    have the same methods, so one ``Call`` serves the sync and the async driver."""

    what: str
    method: str
    kwargs: dict[str, Any]


@dataclass(frozen=True)
class Work:
    """CPU-bound work (embedding, cross-encoder, selection): inline when sync, a thread when async."""

    fn: Callable[[], Any]


#: A query-path generator: yields steps, is sent their results, returns ``T``.
Steps = Generator[Call | Work, Any, T]


class Transport:
    """What answers the steps: ``answer`` one step; ``finished``/``failed`` hear how the drive ended."""

    async def answer(self, step: Call | Work) -> Any:
        raise NotImplementedError

    def finished(self, result: Any) -> None:
        """The steps returned ``result``."""

    def failed(self, exc: BaseException) -> None:
        """The steps ended with ``exc`` (raised on to the caller)."""


class SyncTransport(Transport):
    """A transport whose ``answer`` never suspends: it answers inline."""


class Inline(SyncTransport):
    """A sync transport that answers each step with a plain function (a tool or a test standing in
    for the cluster)."""

    def __init__(self, answer: Callable[[Call | Work], Any]) -> None:
        self._answer = answer

    async def answer(self, step: Call | Work) -> Any:
        return self._answer(step)


class AsyncTransport(Transport):
    """A transport whose ``answer`` awaits (a request on an event loop, work in a thread)."""


async def _loop(steps: Steps[T], transport: Transport) -> T:
    """Answer every step with ``transport`` to the end of ``steps``.

    An ``OsragError`` raised while answering is thrown into the generator at the step that
    asked, so the path handles a refused request where it made it (e.g. a moved alias).
    """
    try:
        try:
            step = next(steps)
            while True:
                try:
                    result = await transport.answer(step)
                except OsragError as exc:
                    step = steps.throw(exc)
                else:
                    step = steps.send(result)
        except StopIteration as done:
            value: T = done.value
        finally:
            steps.close()
    except BaseException as exc:
        transport.failed(exc)
        raise
    transport.finished(value)
    return value


@overload
def drive(steps: Steps[T], transport: SyncTransport) -> T: ...
@overload
def drive(steps: Steps[T], transport: AsyncTransport) -> Coroutine[Any, Any, T]: ...
@overload
def drive(steps: Steps[T], transport: Transport) -> T | Coroutine[Any, Any, T]: ...
def drive(steps: Steps[T], transport: Transport) -> T | Coroutine[Any, Any, T]:
    """Drive ``steps`` with ``transport``: the value (sync transport), or a coroutine to await."""
    run = _loop(steps, transport)
    if isinstance(transport, AsyncTransport):
        return run
    try:
        run.send(None)
    except StopIteration as done:
        return done.value  # type: ignore[no-any-return]
    run.close()
    raise RuntimeError(f"{type(transport).__name__} suspended: a sync transport must answer inline")


__all__ = ["AsyncTransport", "Call", "Inline", "Steps", "SyncTransport", "Transport", "Work", "drive"]
