"""HTTP and MCP refuse what they would otherwise guess at (issue #36), with one line each.

The app is the real FastAPI app (``create_app``) with the real ``Auth``; its search client is a
``Mock(spec=SearchClient)`` that raises what the real one raises, so no cluster is needed. A
refusal before the client is reached is checked to have never called it.
"""

from __future__ import annotations

import asyncio
import time
from typing import Any
from unittest.mock import Mock

import pytest

jwt = pytest.importorskip("jwt")
pytest.importorskip("fastapi")
pytest.importorskip("mcp")

from fastapi.testclient import TestClient  # noqa: E402
from starlette.datastructures import Headers  # noqa: E402

from osrag.access import PUBLIC  # noqa: E402
from osrag.errors import (  # noqa: E402
    ClusterError,
    ClusterUnavailable,
    IndexStateError,
    InputError,
    ModelError,
)
from osrag.search.client import SearchClient  # noqa: E402
from osrag.service.auth import Auth, GatewayHeaders, JwtVerifier, Unauthenticated  # noqa: E402
from osrag.service.http import create_app  # noqa: E402
from osrag.service.mcp import build_server  # noqa: E402
from osrag.settings import Settings  # noqa: E402

SECRET = "k" * 64
SETTINGS = Settings(url="http://127.0.0.1:9", alias="h36-unit", _env_file=None)
GW = {"x-osrag-groups": "staff"}


def app_with(auth: Auth, **client_behaviour: Any) -> tuple[TestClient, Mock]:
    app = create_app(SETTINGS, auth, warm=False)
    client = Mock(spec=SearchClient)
    for name, effect in client_behaviour.items():
        getattr(client, name).side_effect = effect
    app.state.service.client = client
    return TestClient(app, raise_server_exceptions=False), client


@pytest.fixture
def gateway_app() -> tuple[TestClient, Mock]:
    return app_with(Auth(gateway=GatewayHeaders(secret=b"gw-secret")))


def one_line_json(resp: Any, status: int) -> str:
    assert resp.status_code == status, resp.text
    assert resp.headers["content-type"].startswith("application/json")
    body = resp.json()
    assert list(body) == ["error"] and "\n" not in body["error"], body
    return str(body["error"])


# ------------------------------------------------------------------ coercions over HTTP
BAD_BODIES: dict[str, dict[str, Any]] = {
    **{
        f"include_archived={v!r}": {"question": "q", "filters": {"include_archived": v}}
        for v in ("true", "false", "True", "1", "0", "yes", "on", "", ["true"])
    },
    **{
        f"budget={v!r}": {"question": "q", "budget_tokens": v} for v in ("800", "8e2", 800.5, True, "", [800])
    },
    **{f"depth={v!r}": {"question": "q", "depth": v} for v in ("5", 5.5, False)},
    **{f"rerank={v!r}": {"question": "q", "rerank": v} for v in ("true", 1, 0)},
    **{f"question={v!r}": {"question": v} for v in (5, True, ["q"], None)},
    **{f"filters={v!r}": {"question": "q", "filters": v} for v in ("category=a", ["a"], 5)},
    **{f"category={v!r}": {"question": "q", "filters": {"category": v}} for v in (5, [1], {"a": "b"})},
    "extra-field": {"question": "q", "principal": {"groups": ["admin"]}},
    "acl-as-field": {"question": "q", "acl": ["admin"]},
}


@pytest.mark.parametrize("name", sorted(BAD_BODIES))
def test_http_refuses_a_field_of_the_wrong_kind_with_one_line(gateway_app: Any, name: str) -> None:
    http, client = gateway_app
    resp = http.post(
        "/v1/search", json=BAD_BODIES[name], headers={**GW, "x-osrag-gateway-secret": "gw-secret"}
    )
    one_line_json(resp, 422)
    client.search.assert_not_called()


@pytest.mark.parametrize("value", ["true", "1", "yes"])
def test_section_query_flag_is_a_word_only_in_the_url(gateway_app: Any, value: str) -> None:
    """A query string is text by nature: ``?include_archived=true`` is the boolean's one spelling there."""
    http, client = gateway_app
    client.section.return_value = []
    resp = http.get(
        f"/v1/sections/kb/x?include_archived={value}", headers={**GW, "x-osrag-gateway-secret": "gw-secret"}
    )
    one_line_json(resp, 404)


# ------------------------------------------------------------------ repeated identity headers
REPEATED: dict[str, list[tuple[str, str]]] = {
    "groups-twice": [("x-osrag-groups", "staff"), ("x-osrag-groups", "admin")],
    "groups-thrice": [("x-osrag-groups", "a")] * 3,
    "groups-same-value-twice": [("x-osrag-groups", "staff"), ("x-osrag-groups", "staff")],
    "groups-empty-then-admin": [("x-osrag-groups", ""), ("x-osrag-groups", "admin")],
    "tenant-twice": [("x-osrag-groups", "staff"), ("x-osrag-tenant", "a"), ("x-osrag-tenant", "b")],
    "secret-twice": [("x-osrag-groups", "staff"), ("x-osrag-gateway-secret", "x")],
    "groups-case-variants": [("X-Osrag-Groups", "staff"), ("x-osrag-groups", "admin")],
}


@pytest.mark.parametrize("name", sorted(REPEATED))
@pytest.mark.parametrize("path", ["/v1/search", "/v1/sections/kb/x"])
def test_a_repeated_identity_header_is_400(gateway_app: Any, name: str, path: str) -> None:
    http, client = gateway_app
    headers = [*REPEATED[name], ("x-osrag-gateway-secret", "gw-secret")]
    if path == "/v1/search":
        resp = http.post(path, json={"question": "q"}, headers=headers)
    else:
        resp = http.get(path, headers=headers)
    msg = one_line_json(resp, 400)
    assert "given" in msg and "times" in msg
    client.search.assert_not_called()
    client.section.assert_not_called()


def test_authorization_twice_is_400() -> None:
    http, client = app_with(Auth(jwt=JwtVerifier.from_key(SECRET, "HS256")))
    tok = jwt.encode({"groups": ["staff"], "exp": int(time.time()) + 60}, SECRET, algorithm="HS256")
    resp = http.post(
        "/v1/search",
        json={"question": "q"},
        headers=[("authorization", f"Bearer {tok}"), ("authorization", f"Bearer {tok}")],
    )
    one_line_json(resp, 400)
    client.search.assert_not_called()


@pytest.mark.parametrize(
    "header", ["x-osrag-groups", "x-osrag-tenant", "x-osrag-gateway-secret", "authorization"]
)
def test_repeated_headers_are_seen_by_auth_itself(header: str) -> None:
    auth = Auth(jwt=JwtVerifier.from_key(SECRET, "HS256"), gateway=GatewayHeaders())
    raw = [(header.encode(), b"a"), (header.encode(), b"b"), (b"x-osrag-groups", b"staff")]
    with pytest.raises(InputError, match=f"header {header} is given"):
        auth.principal(Headers(raw=raw))


# ------------------------------------------------------------------ JWT time claims as text
TIME_CLAIMS: dict[str, dict[str, Any]] = {
    **{f"exp={v!r}": {"exp": v} for v in (str(int(time.time()) + 600), "9999999999", "1e12", "600.5")},
    **{f"nbf={v!r}": {"nbf": v} for v in ("0", str(int(time.time()) - 10))},
    **{f"iat={v!r}": {"iat": v} for v in ("0", str(int(time.time())))},
    "exp=true": {"exp": True},
}


@pytest.mark.parametrize("name", sorted(TIME_CLAIMS))
def test_a_token_whose_time_claim_is_not_a_number_is_refused(name: str) -> None:
    claims = {"groups": ["staff"], "exp": int(time.time()) + 600, **TIME_CLAIMS[name]}
    tok = jwt.encode(claims, SECRET, algorithm="HS256")
    auth = Auth(jwt=JwtVerifier.from_key(SECRET, "HS256"))
    with pytest.raises(Unauthenticated) as got:
        auth.principal({"authorization": f"Bearer {tok}"})
    # PyJWT itself refuses some spellings ("1e12": malformed); the rest it read as numbers before.
    assert tok not in str(got.value) and "\n" not in str(got.value)


def test_a_token_with_numeric_time_claims_is_accepted() -> None:
    now = int(time.time())
    tok = jwt.encode(
        {"groups": ["staff"], "exp": now + 600, "nbf": now - 5, "iat": now}, SECRET, algorithm="HS256"
    )
    who = Auth(jwt=JwtVerifier.from_key(SECRET, "HS256")).principal({"authorization": f"Bearer {tok}"})
    assert who.groups == ("staff",) or list(who.groups) == ["staff"]


# ------------------------------------------------------------------ 5xx bodies and clause overflows
INTERNAL = ("internal-db.corp", "10.1.2.3", "svc_osrag", "/home/alice", "9200")
SERVER_FAILURES: list[tuple[Exception, int]] = [
    (ClusterUnavailable("cannot reach OpenSearch at https://svc_osrag@internal-db.corp:9200"), 503),
    (ClusterUnavailable("TLS error talking to https://10.1.2.3:9200 as svc_osrag"), 503),
    (ClusterError("search failed on internal-db.corp:9200 (user svc_osrag): 500"), 502),
    (ClusterError("security_exception: no permissions for user [svc_osrag] on 10.1.2.3"), 502),
    (ModelError("cannot load /home/alice/.cache/osrag/models/e5 on internal-db.corp"), 503),
]


@pytest.mark.parametrize(
    "exc,status", SERVER_FAILURES, ids=lambda x: type(x).__name__ if isinstance(x, Exception) else str(x)
)
@pytest.mark.parametrize("caller", ["anonymous", "gateway"])
def test_a_server_side_failure_names_no_host_user_or_path(exc: Exception, status: int, caller: str) -> None:
    auth = Auth(public_only=True) if caller == "anonymous" else Auth(gateway=GatewayHeaders())
    http, _ = app_with(auth, search=exc, section=exc)
    headers = {} if caller == "anonymous" else GW
    for resp in (
        http.post("/v1/search", json={"question": "q"}, headers=headers),
        http.get("/v1/sections/kb/x", headers=headers),
    ):
        msg = one_line_json(resp, status)
        assert not any(word in msg for word in INTERNAL), msg


def test_index_state_errors_keep_naming_the_alias() -> None:
    http, _ = app_with(Auth(public_only=True), search=IndexStateError("alias h36-unit does not exist"))
    assert "h36-unit" in one_line_json(http.post("/v1/search", json={"question": "q"}), 503)


def test_readyz_names_no_host_or_user() -> None:
    http, client = app_with(Auth(public_only=True))
    client.retrieve.side_effect = ClusterUnavailable("cannot reach https://svc_osrag@internal-db.corp:9200")
    msg = one_line_json(http.get("/readyz"), 503)
    assert msg.startswith("not ready") and not any(w in msg for w in INTERNAL)


@pytest.mark.parametrize(
    "text",
    [
        "search failed: too_many_nested_clauses: Query contains too many nested clauses; maxClauseCount is 1024",
        "search failed: too_many_clauses: maxClauseCount is set to 1024",
        "search_phase_execution_exception: maxClauseCount is set to 1024",
    ],
)
def test_a_clause_count_overflow_is_a_400(text: str) -> None:
    http, _ = app_with(Auth(public_only=True), search=ClusterError(text))
    assert "fewer filters" in one_line_json(http.post("/v1/search", json={"question": "q"}), 400)


@pytest.mark.parametrize("count", [65, 500, 2000])
def test_thousands_of_meta_filters_are_a_one_line_4xx(count: int) -> None:
    from osrag.search.query import parse_filters

    http, _ = app_with(Auth(public_only=True), search=lambda q, **kw: parse_filters(kw["filters"]))
    body = {"question": "q", "filters": {f"meta.k{i}": "v" for i in range(count)}}
    assert "filters given" in one_line_json(http.post("/v1/search", json=body), 400)


# ------------------------------------------------------------------ MCP
MCP_BAD: dict[str, dict[str, Any]] = {
    **{f"budget={v!r}": {"question": "q", "budget_tokens": v} for v in ("800", "8e2", 800.5, True, 10**9, 0)},
    **{
        f"include_archived={v!r}": {"question": "q", "filters": {"include_archived": v}}
        for v in ("true", "false", "1", 1, 0)
    },
    **{f"category={v!r}": {"question": "q", "filters": {"category": v}} for v in (5, [1], True)},
    **{f"meta={v!r}": {"question": "q", "filters": {"meta": v}} for v in ({"k": 5}, {"k": [1]}, "k=v")},
    "unknown-filter": {"question": "q", "filters": {"acl": ["admin"]}},
    "empty-question": {"question": ""},
    "question-number": {"question": 5},
    "many-at-once": {"question": "", "budget_tokens": "800", "filters": {"include_archived": "true"}},
}


@pytest.fixture(scope="module")
def mcp_server() -> tuple[Any, Mock]:
    client = Mock(spec=SearchClient)
    client.s = SETTINGS
    return build_server(client, PUBLIC), client


@pytest.mark.parametrize("name", sorted(MCP_BAD))
def test_mcp_refuses_coercions_with_one_line(mcp_server: Any, name: str) -> None:
    from mcp.server.mcpserver.exceptions import ToolError

    server, client = mcp_server
    with pytest.raises(ToolError) as got:
        asyncio.run(server.call_tool("search", MCP_BAD[name]))
    msg = str(got.value)
    assert "\n" not in msg and msg.startswith("tool search: "), msg
    assert "errors.pydantic.dev" not in msg
    client.search.assert_not_called()


@pytest.mark.parametrize(
    "args",
    [{"section_id": ""}, {"section_id": 5}, {"section_id": "x", "filters": {"include_archived": "true"}}],
)
def test_mcp_section_refusals_are_one_line(mcp_server: Any, args: dict[str, Any]) -> None:
    from mcp.server.mcpserver.exceptions import ToolError

    server, client = mcp_server
    with pytest.raises(ToolError) as got:
        asyncio.run(server.call_tool("section", args))
    assert "\n" not in str(got.value) and str(got.value).startswith("tool section: ")
    client.section.assert_not_called()


def test_mcp_osrag_error_is_one_line(mcp_server: Any) -> None:
    from mcp.server.mcpserver.exceptions import ToolError

    server, client = mcp_server
    client.search.side_effect = InputError("filter x\nwants text")
    try:
        with pytest.raises(ToolError) as got:
            asyncio.run(server.call_tool("search", {"question": "q", "budget_tokens": 800}))
    finally:
        client.search.side_effect = None
    assert "\n" not in str(got.value) and "wants text" in str(got.value)


@pytest.mark.parametrize("exc", [e for e, _ in SERVER_FAILURES], ids=lambda e: type(e).__name__)
def test_mcp_server_side_failure_names_no_host_user_or_path(mcp_server: Any, exc: Exception) -> None:
    from mcp.server.mcpserver.exceptions import ToolError

    server, client = mcp_server
    client.search.side_effect = exc
    try:
        with pytest.raises(ToolError) as got:
            asyncio.run(server.call_tool("search", {"question": "q"}))
    finally:
        client.search.side_effect = None
    msg = str(got.value)
    assert "\n" not in msg and not any(word in msg for word in INTERNAL), msg
