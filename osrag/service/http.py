"""The HTTP service: a thin FastAPI shell over the one query path (``search()`` / ``section()``).

``POST /v1/search`` answers with the ``Envelope`` itself (its pydantic model is the response
model, so the OpenAPI schema is the envelope's); ``GET /v1/sections/{id}`` gives a whole
section; ``GET /healthz`` says the process is up, ``GET /readyz`` that the cluster answers,
the alias resolves and the embedding model is loaded. Every ``/v1`` request is filtered for
the principal ``osrag.service.auth`` makes of its credentials (fail closed).

A bad request gets a 4xx with one line of JSON, ``{"error": "..."}``, naming the field at
fault; a body over the size limit is refused before it is parsed (413); a budget or depth
over this server's limits is a 422, never silently clipped; past ``serve_max_inflight``
searches at once a request gets 503 at once instead of a longer queue. Errors and logs never
carry a credential: the access log has the path and status, not the headers.

The driver is ``SearchClient`` in Starlette's thread pool, one hop per request: in
``bench/results/http.md`` (32 clients, arms interleaved) it did 1.2x the throughput of
``AsyncSearchClient`` on the loop, whose searches hop to a worker thread for each CPU step;
``driver="async"`` keeps the other.
"""

# No `from __future__ import annotations`: FastAPI reads the handlers' annotations, which name
# objects local to create_app.
import asyncio
import json
import logging
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from typing import Annotated, Any, Literal

from fastapi import Depends, FastAPI, Path, Query, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from fastapi.security import HTTPBearer
from pydantic import BaseModel, ConfigDict, Field, field_validator
from starlette.concurrency import run_in_threadpool
from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from osrag import __version__
from osrag.access import Principal
from osrag.envelope import Envelope, Passage
from osrag.errors import (
    ClusterError,
    ClusterUnavailable,
    IndexStateError,
    InputError,
    ModelError,
    OsragError,
)
from osrag.search.query import FILTER_KEYS, MAX_QUESTION_CHARS
from osrag.service.auth import Auth, Forbidden, Unauthenticated
from osrag.settings import Settings
from osrag.vocabulary import DEFAULT_POLICY, Policy

__all__ = ["SearchRequest", "SectionResponse", "create_app", "json_http_protocol"]

log = logging.getLogger(__name__)

Driver = Literal["async", "sync"]
FilterValue = str | bool | list[str]


class SearchRequest(BaseModel):
    """The body of ``POST /v1/search``: ``SearchClient.search``'s arguments, the principal aside."""

    model_config = ConfigDict(extra="forbid", strict=True)

    question: str = Field(
        min_length=1, max_length=MAX_QUESTION_CHARS, description="The question, any language."
    )
    budget_tokens: int | None = Field(
        default=None,
        ge=1,
        description="Token budget of the answer (default OSRAG_BUDGET_TOKENS; server maximum applies).",
    )
    filters: dict[str, FilterValue] = Field(
        default_factory=dict, description=f"Narrow what the caller may see: {', '.join(FILTER_KEYS)}."
    )
    depth: int | None = Field(
        default=None, ge=1, description="Candidates fused (default OSRAG_CANDIDATE_DEPTH)."
    )
    rerank: bool | None = Field(default=None, description="Use the cross-encoder (default OSRAG_RERANK).")
    selection: Policy | None = Field(
        default=None, description=f"Selection policy (default OSRAG_SELECTION, {DEFAULT_POLICY})."
    )

    @field_validator("filters")
    @classmethod
    def _archived_is_a_boolean(cls, value: dict[str, FilterValue]) -> dict[str, FilterValue]:
        # The library also reads the words "true"/"false" (what a CLI key=value carries); a JSON
        # body has real booleans, so the text "true" here is a client's mistake, not a choice.
        flag = value.get("include_archived")
        if flag is not None and not isinstance(flag, bool):
            raise ValueError(f"include_archived must be true or false (a JSON boolean), got {flag!r:.40}")
        return value


class SectionResponse(BaseModel):
    """The body of ``GET /v1/sections/{id}``: its chunks in document order, and whom they were filtered for."""

    section_id: str
    passages: list[Passage]
    access: dict[str, object]


class ErrorBody(BaseModel):
    """Every error: one line saying what is at fault (never a credential)."""

    error: str


class Ready(BaseModel):
    status: Literal["ready"]
    index: str
    embedding_model: str | None = None
    dimension: int | None = None


_ERRORS: dict[int | str, dict[str, Any]] = {
    code: {"model": ErrorBody, "description": text}
    for code, text in (
        (400, "bad input (an unknown filter, a bad date, body not JSON)"),
        (401, "no usable credential"),
        (403, "the credential does not make a principal"),
        (413, "body over OSRAG_SERVE_MAX_BODY_BYTES"),
        (422, "a field of the wrong kind or over this server's limits"),
        (502, "the cluster refused or failed the request"),
        (503, "the cluster, index or model is not available, or the server is busy"),
    )
}


def _one_line(text: str) -> str:
    return " ".join(str(text).split())


def _error(status: int, message: str, headers: dict[str, str] | None = None) -> JSONResponse:
    return JSONResponse({"error": _one_line(message)}, status_code=status, headers=headers)


def _caller_message(exc: OsragError) -> str:
    """What a caller is told of a server-side failure: never the cluster's address, user, or a local
    path (those are in the server log). Only the alias and index state are the caller's business."""
    if isinstance(exc, ClusterUnavailable):
        return "the search cluster is not reachable (details in the server log)"
    if isinstance(exc, ModelError):
        return "the embedding model is not available (details in the server log)"
    if isinstance(exc, IndexStateError):
        return str(exc)
    return (
        f"the search cluster refused or failed the request ({type(exc).__name__}; details in the server log)"
    )


#: How OpenSearch names a query over ``indices.query.bool.max_clause_count``: the caller's input.
_TOO_MANY_CLAUSES = ("too_many_nested_clauses", "too_many_clauses", "maxClauseCount")


def json_http_protocol() -> type[asyncio.Protocol]:
    """uvicorn's HTTP protocol with its own refusal of a malformed request (a plain-text 400) as
    the one-line JSON every other error is."""
    from uvicorn.protocols.http.auto import AutoHTTPProtocol

    class JsonErrorsProtocol(AutoHTTPProtocol):  # type: ignore[misc,valid-type]
        def send_400_response(self, msg: str) -> None:
            body = json.dumps({"error": _one_line(msg)}).encode()
            head = (
                b"HTTP/1.1 400 Bad Request\r\ncontent-type: application/json\r\n"
                b"content-length: %d\r\nconnection: close\r\n\r\n" % len(body)
            )
            self.transport.write(head + body)
            self.transport.close()

    return JsonErrorsProtocol


#: Whom the readiness probe's one-hit query runs for: public chunks only, and a tenant of its own so
#: that it also passes OSRAG_REQUIRE_TENANT (the hit is never shown to anyone).
_PROBE = Principal.public(tenant="osrag-readiness-probe")


class _TooBusy(Exception):
    pass


class BodyLimit:
    """Reads a request's body up to ``max_bytes`` before the app sees it; more is a 413 at once.

    The body is buffered (it is small by contract) and replayed to the app, so neither a false
    Content-Length nor a chunked upload gets past the limit."""

    def __init__(self, app: ASGIApp, max_bytes: int) -> None:
        self.app = app
        self.max_bytes = max_bytes

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        declared = dict(scope.get("headers") or []).get(b"content-length")
        if declared is not None and declared.isdigit() and int(declared) > self.max_bytes:
            await self._refuse(scope, receive, send)
            return
        chunks: list[bytes] = []
        size = 0
        more = True
        while more:
            message = await receive()
            if message["type"] != "http.request":  # the client went away
                return
            body = message.get("body", b"")
            size += len(body)
            if size > self.max_bytes:
                await self._refuse(scope, receive, send)
                return
            chunks.append(body)
            more = message.get("more_body", False)
        replayed = False

        async def replay() -> Message:
            nonlocal replayed
            if not replayed:
                replayed = True
                return {"type": "http.request", "body": b"".join(chunks), "more_body": False}
            return await receive()

        await self.app(scope, replay, send)

    async def _refuse(self, scope: Scope, receive: Receive, send: Send) -> None:
        resp = _error(413, f"request body is over this server's limit of {self.max_bytes} bytes")
        resp.headers["connection"] = "close"
        await resp(scope, receive, send)


class _Service:
    """The one client of the app's life (closed at shutdown), and the in-flight count."""

    def __init__(self, settings: Settings, auth: Auth, driver: Driver) -> None:
        self.s = settings
        self.auth = auth
        self.driver = driver
        self.inflight = 0
        self.last_unready = ""
        self.client: Any
        if driver == "async":
            from osrag.search.asearch import AsyncSearchClient

            self.client = AsyncSearchClient(settings)
        else:
            from osrag.search.client import SearchClient

            self.client = SearchClient(settings)

    async def call(self, method: str, *args: Any, **kwargs: Any) -> Any:
        """``search``/``section``/``retrieve`` on the client, awaited (async) or in the thread pool (sync)."""
        fn: Callable[..., Any] = getattr(self.client, method)
        if self.driver == "async":
            result: Awaitable[Any] = fn(*args, **kwargs)
            return await result
        return await run_in_threadpool(fn, *args, **kwargs)

    async def limited(self, method: str, *args: Any, **kwargs: Any) -> Any:
        """As ``call``, counted against ``serve_max_inflight`` (503 past it, at once)."""
        if self.inflight >= self.s.serve_max_inflight:
            raise _TooBusy
        self.inflight += 1
        try:
            return await self.call(method, *args, **kwargs)
        finally:
            self.inflight -= 1

    async def ready(self) -> Ready:
        """The cluster answers and the alias resolves (a one-hit BM25 query, public chunks
        only, through the same path), and the index's embedding model is loaded."""
        ret = await self.call("retrieve", "готовность", mode="bm25", depth=1, principal=_PROBE)
        embedder = await run_in_threadpool(self.client.embedder)
        return Ready(
            status="ready",
            index=ret.index,
            embedding_model=ret.meta.embedding_model or embedder.model_name,
            dimension=ret.meta.dimension,
        )

    async def close(self) -> None:
        if self.driver == "async":
            await self.client.close()


def create_app(settings: Settings, auth: Auth, *, driver: Driver = "sync", warm: bool = True) -> FastAPI:
    """The FastAPI app for ``settings`` (one client for its life), callers known by ``auth``.

    ``warm``: load the model and resolve the alias in the background at start, so the first
    search does not pay for it (``/readyz`` says when that is done)."""
    service = _Service(settings, auth, driver)

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        log.info(
            "osrag serve: alias %s, callers known by %s, %s driver", settings.alias, auth.describe(), driver
        )
        warming = asyncio.create_task(_warm(service)) if warm else None
        try:
            yield
        finally:
            if warming is not None:
                warming.cancel()
            await service.close()

    app = FastAPI(
        title="osrag",
        version=__version__,
        summary="Hybrid retrieval for Russian RAG on OpenSearch: minimal material within a token budget.",
        lifespan=lifespan,
        responses=_ERRORS,
        docs_url=None,  # fastapi's pages fetch their scripts from a CDN: ours come from the install
        redoc_url=None,
    )
    app.state.service = service
    _install_docs(app)
    app.add_middleware(BodyLimit, max_bytes=settings.serve_max_body_bytes)
    _install_error_handlers(app, auth, settings.alias)
    # The bearer scheme is declared for the OpenAPI schema only; ``auth`` reads the header itself.
    bearer = HTTPBearer(auto_error=False, description="A JWT signed by the configured issuer.")

    if auth.bearer:

        async def principal(request: Request, _: Annotated[Any, Depends(bearer)]) -> Principal:
            return auth.principal(request.headers)
    else:

        async def principal(request: Request) -> Principal:  # type: ignore[misc]  # no bearer, no second parameter
            return auth.principal(request.headers)

    Caller = Annotated[Principal, Depends(principal)]

    @app.post("/v1/search", response_model=Envelope, tags=["search"])
    async def search(body: SearchRequest, who: Caller) -> Envelope:
        """The minimal material sufficient to answer the question within the budget, or an
        explicit ``nothing_relevant``, from what the caller may see."""
        _within(
            "budget_tokens",
            body.budget_tokens,
            settings.serve_max_budget_tokens,
            "OSRAG_SERVE_MAX_BUDGET_TOKENS",
        )
        _within("depth", body.depth, settings.serve_max_depth, "OSRAG_SERVE_MAX_DEPTH")
        env: Envelope = await service.limited(
            "search",
            body.question,
            budget_tokens=body.budget_tokens,
            filters=body.filters,
            depth=body.depth,
            rerank=body.rerank,
            selection=body.selection,
            principal=who,
        )
        return env

    @app.get("/v1/sections/{section_id:path}", response_model=SectionResponse, tags=["search"])
    async def section(
        who: Caller,
        section_id: Annotated[
            str, Path(min_length=1, max_length=1000, description="A passage's parent_section_id.")
        ],
        include_archived: Annotated[bool, Query(description="Archived chunks too.")] = False,
    ) -> SectionResponse:
        """The chunks of a section and its direct subsections in document order, filtered like a
        search; a section the caller may not see is a 404, as one that does not exist."""
        parts: list[Passage] = await service.limited(
            "section", section_id, principal=who, filters={"include_archived": include_archived}
        )
        if not parts:
            raise StarletteHTTPException(404, f"no chunks of section {section_id} visible to this caller")
        return SectionResponse(section_id=section_id, passages=parts, access=who.describe())

    @app.get("/healthz", tags=["probes"])
    async def healthz() -> dict[str, str]:
        """The process answers (no cluster call)."""
        return {"status": "ok"}

    @app.get("/readyz", response_model=Ready, tags=["probes"])
    async def readyz() -> Ready | JSONResponse:
        """The cluster answers, the alias resolves and the embedding model is loaded; else 503."""
        try:
            return await service.ready()
        except OsragError as exc:
            if str(exc) != service.last_unready:  # the cause once per change, not once per probe
                service.last_unready = str(exc)
                log.warning("not ready: %s %s", type(exc).__name__, _one_line(str(exc)))
            return _error(503, f"not ready: {_for_callers(exc, settings.alias)}")

    return app


_ASSETS = "/docs-assets"


def _install_docs(app: FastAPI) -> None:
    """``/docs`` (Swagger UI) and ``/redoc`` with their scripts and styles served by this process,
    from the files the ``fastapi-offline`` package ships (the ``server`` extra), so the pages work
    on a machine with no internet. Without that package the two pages say what to install."""
    from fastapi.openapi.docs import get_redoc_html, get_swagger_ui_html, get_swagger_ui_oauth2_redirect_html
    from fastapi.responses import HTMLResponse
    from fastapi.staticfiles import StaticFiles

    try:
        from importlib.resources import files

        static = files("fastapi_offline") / "static"
    except ModuleNotFoundError:
        static = None
    if static is None or not static.is_dir():

        @app.get("/docs", include_in_schema=False)
        @app.get("/redoc", include_in_schema=False)
        async def no_docs() -> JSONResponse:
            return _error(404, "API pages need the fastapi-offline package: pip install 'osrag[server]'")

        return
    app.mount(_ASSETS, StaticFiles(directory=str(static)), name="docs-assets")
    openapi, redirect = app.openapi_url or "/openapi.json", app.swagger_ui_oauth2_redirect_url

    @app.get("/docs", include_in_schema=False)
    async def swagger() -> HTMLResponse:
        return get_swagger_ui_html(
            openapi_url=openapi,
            title="osrag API",
            oauth2_redirect_url=redirect,
            swagger_js_url=f"{_ASSETS}/swagger-ui-bundle.js",
            swagger_css_url=f"{_ASSETS}/swagger-ui.css",
            swagger_favicon_url=f"{_ASSETS}/favicon.png",
        )

    if redirect:

        @app.get(redirect, include_in_schema=False)
        async def swagger_redirect() -> HTMLResponse:
            return get_swagger_ui_oauth2_redirect_html()

    @app.get("/redoc", include_in_schema=False)
    async def redoc() -> HTMLResponse:
        return get_redoc_html(
            openapi_url=openapi,
            title="osrag API",
            redoc_js_url=f"{_ASSETS}/redoc.standalone.js",
            redoc_favicon_url=f"{_ASSETS}/favicon.png",
            with_google_fonts=False,
        )


def _within(name: str, value: int | None, limit: int, setting: str) -> None:
    if value is not None and value > limit:
        raise RequestValidationError(
            [
                {
                    "loc": ("body", name),
                    "msg": f"{value} is above this server's limit {limit} ({setting})",
                    "type": "limit",
                }
            ]
        )


async def _warm(service: _Service) -> None:
    try:
        await service.ready()
        log.info("ready: alias resolved, embedding model loaded")
    except OsragError as exc:
        log.warning("not ready yet: %s", _one_line(str(exc)))
    except Exception:  # warm-up must not kill the server; /readyz reports the same failure
        log.exception("warm-up failed")


def _for_callers(exc: OsragError, alias: str) -> str:
    """A 503's body for whoever calls the API: what is unavailable and that it is worth retrying.
    The operator's detail and fix (a command to run, the cluster's address) stay in the log."""
    if isinstance(exc, ClusterUnavailable):
        what = "the search cluster behind this service does not answer"
    elif isinstance(exc, IndexStateError):
        what = f"the search index of this service ({alias}) is not ready"
    elif isinstance(exc, ModelError):
        what = "the embedding model of this service could not be loaded"
    else:
        return _caller_message(exc)
    return f"{what}; retry later, or ask the service's operator (the cause is in its log)"


def _install_error_handlers(app: FastAPI, auth: Auth, alias: str) -> None:
    challenge = {"WWW-Authenticate": "Bearer"} if auth.bearer else None

    @app.exception_handler(RequestValidationError)
    async def invalid(request: Request, exc: RequestValidationError) -> JSONResponse:
        first = exc.errors()[0] if exc.errors() else {}
        if first.get("type") == "json_invalid":
            return _error(400, "request body is not valid JSON")
        loc = [str(p) for p in first.get("loc", ()) if p not in ("body", "query", "path")]
        where = ".".join(loc) or "request body"
        msg = str(first.get("msg", "invalid")).removeprefix("Value error, ")
        if first.get("type") == "missing":
            msg = "is required"
        return _error(422, f"{where}: {msg}")

    @app.exception_handler(StarletteHTTPException)
    async def http_error(request: Request, exc: StarletteHTTPException) -> JSONResponse:
        return _error(exc.status_code, str(exc.detail), getattr(exc, "headers", None))

    @app.exception_handler(_TooBusy)
    async def busy(request: Request, exc: _TooBusy) -> JSONResponse:
        return _error(503, "too many searches in flight; retry shortly", {"Retry-After": "1"})

    @app.exception_handler(OsragError)
    async def osrag_error(request: Request, exc: OsragError) -> JSONResponse:
        status, headers = _status_of(exc), None
        if isinstance(exc, Unauthenticated):
            headers = challenge
        message = str(exc)
        if isinstance(exc, ClusterError) and any(word in message for word in _TOO_MANY_CLAUSES):
            return _error(400, "the query has more clauses than the cluster allows: use fewer filters")
        if status >= 500:
            log.warning(
                "%s %s: %s %s", request.method, request.url.path, type(exc).__name__, _one_line(message)
            )
            message = _for_callers(exc, alias) if status == 503 else _caller_message(exc)
        return _error(status, message, headers)

    @app.exception_handler(Exception)
    async def unexpected(request: Request, exc: Exception) -> JSONResponse:
        log.error("%s %s failed", request.method, request.url.path, exc_info=exc)
        return _error(500, "internal error (logged on the server)")


def _status_of(exc: OsragError) -> int:
    if isinstance(exc, Unauthenticated):
        return 401
    if isinstance(exc, Forbidden):
        return 403
    if isinstance(exc, InputError):
        return 400
    if isinstance(exc, (ClusterUnavailable, IndexStateError, ModelError)):
        return 503
    if isinstance(exc, ClusterError):
        return 502
    return 500
