"""The steps of the query path: what it asks of OpenSearch (``Call``) and of the CPU (``Work``).

The query path (``osrag.search.client.QuerySteps``) is a generator that yields these and is sent
their results, so that one path serves a sync driver (``run_steps``, used by
``SearchClient``) and an async one (``osrag.search.asearch``). Pure: nothing here talks to a server.
"""

from __future__ import annotations

from collections.abc import Callable, Generator
from dataclasses import dataclass
from typing import Any, TypeVar

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


def run_steps(steps: Steps[T], answer: Callable[[Call | Work], Any]) -> T:
    """Drive ``steps`` to the end, answering each with ``answer`` (the sync driver).

    An ``OsragError`` raised while answering is thrown into the generator at the step that
    asked, so the path handles a refused request where it made it (e.g. a moved alias).
    """
    try:
        step = next(steps)
        while True:
            try:
                result = answer(step)
            except OsragError as exc:
                step = steps.throw(exc)
            else:
                step = steps.send(result)
    except StopIteration as done:
        return done.value  # type: ignore[no-any-return]
    finally:
        steps.close()
