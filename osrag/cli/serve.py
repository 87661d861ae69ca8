"""``osrag serve``: the HTTP service (``osrag.service.http``) under uvicorn.

Who is asking must be knowable before the server starts: a JWT key (``OSRAG_SERVE_JWT_KEY``
or ``OSRAG_SERVE_JWT_KEY_FILE``), ``--trust-gateway-headers``, or ``--public-only``; with none
it refuses to start (one line, exit 1).
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

import click

from osrag.cli.common import default_of
from osrag.errors import ConfigError
from osrag.settings import load_settings


@click.command()
@click.option(
    "--host", default=None, help=f"Interface to bind (default OSRAG_SERVE_HOST, {default_of('serve_host')})."
)
@click.option(
    "--port", type=int, default=None, help=f"Port (default OSRAG_SERVE_PORT, {default_of('serve_port')})."
)
@click.option(
    "--jwt-key-file",
    type=click.Path(dir_okay=False, path_type=Path),
    default=None,
    help="The JWT key: the issuer's public key (PEM) or the HS* secret (OSRAG_SERVE_JWT_KEY_FILE).",
)
@click.option(
    "--trust-gateway-headers",
    is_flag=True,
    default=None,
    help="Take the caller's groups and tenant from a trusted gateway's headers "
    f"({default_of('serve_gateway_groups_header')}, {default_of('serve_gateway_tenant_header')}).",
)
@click.option(
    "--public-only", is_flag=True, default=None, help="Serve public chunks only, to anyone; no credentials."
)
@click.option(
    "--driver",
    type=click.Choice(["async", "sync"]),
    default="sync",
    show_default=True,
    help="SearchClient in the thread pool (measured ahead: bench/results/http.md) or AsyncSearchClient on the loop.",
)
@click.option("--log-level", type=click.Choice(["debug", "info", "warning", "error"]), default="info")
def serve(
    host: str | None,
    port: int | None,
    jwt_key_file: Path | None,
    trust_gateway_headers: bool | None,
    public_only: bool | None,
    driver: str,
    log_level: str,
) -> None:
    """Serve POST /v1/search, GET /v1/sections/{id}, /healthz and /readyz over HTTP (OpenAPI at /openapi.json)."""
    try:
        import uvicorn

        from osrag.service.auth import auth_from_settings
        from osrag.service.http import create_app, json_http_protocol
    except ImportError as exc:
        raise ConfigError(
            f"osrag serve needs the server extra: pip install 'osrag[server]' ({exc.name} missing)"
        ) from exc

    overrides: dict[str, Any] = {}
    for name, value in (
        ("serve_host", host),
        ("serve_port", port),
        ("serve_jwt_key_file", jwt_key_file),
        ("serve_trust_gateway_headers", trust_gateway_headers),
        ("serve_public_only", public_only),
    ):
        if value is not None:
            overrides[name] = value
    # The service's own lines (how callers are known, readiness) show at INFO even without -v.
    service_log = logging.getLogger("osrag.service")
    if service_log.getEffectiveLevel() > logging.INFO:
        service_log.setLevel(logging.INFO)
    s = load_settings(**overrides)
    auth = auth_from_settings(s)
    app = create_app(s, auth, driver="async" if driver == "async" else "sync")
    uvicorn.run(
        app,
        host=s.serve_host,
        port=s.serve_port,
        log_level=log_level,
        server_header=False,
        # Idle keep-alive connections outlive the usual proxy/client idle timeouts (60 s), so the
        # other side closes them first: a request sent just as the server closed one would be lost.
        timeout_keep_alive=75,
        # X-Forwarded-* only from the loopback proxy (uvicorn's default list), never from anyone.
        forwarded_allow_ips="127.0.0.1",
        http=json_http_protocol(),
    )
