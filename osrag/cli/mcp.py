"""``osrag mcp``: the MCP server (``osrag.service.mcp``) over stdio or streamable HTTP.

The principal is fixed here, before the server starts (``--group``/``--tenant`` or
``--public-only``); with none it refuses to start. There is no ``--all-access``: an agent's
tools read as a named caller, never as the admin bypass.
"""

from __future__ import annotations

import ipaddress
import logging

import click

from osrag.errors import ConfigError
from osrag.settings import load_settings

log = logging.getLogger(__name__)


def _loopback(host: str) -> bool:
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return host == "localhost"


@click.command()
@click.option(
    "--transport",
    type=click.Choice(["stdio", "streamable-http"]),
    default="stdio",
    show_default=True,
    help="stdio (the client starts this process) or streamable HTTP (a long-running server).",
)
@click.option("--host", default="127.0.0.1", show_default=True, help="Interface for streamable HTTP.")
@click.option("--port", type=click.IntRange(1, 65535), default=8000, show_default=True)
@click.option("--path", "http_path", default="/mcp", show_default=True, help="Endpoint path for HTTP.")
@click.option("--group", "groups", multiple=True, help="An ACL group the server reads as (repeatable).")
@click.option("--tenant", default=None, help="The tenant the server reads as.")
@click.option("--public-only", is_flag=True, help="Read public chunks only.")
@click.option(
    "--max-budget",
    type=click.IntRange(1, 1_000_000),
    default=8000,
    show_default=True,
    help="The largest token budget a tool call may ask for.",
)
def mcp(
    transport: str,
    host: str,
    port: int,
    http_path: str,
    groups: tuple[str, ...],
    tenant: str | None,
    public_only: bool,
    max_budget: int,
) -> None:
    """Serve search and section as MCP tools, reading as a caller fixed here: give --group/--tenant
    or --public-only (the model never chooses whose eyes the text is for)."""
    from osrag.access import make_principal
    from osrag.search.client import SearchClient

    principal = make_principal(groups, tenant, public_only)
    if principal is None:
        raise ConfigError(
            "osrag mcp needs the caller it reads as: --group G (repeatable) and/or --tenant T, "
            "or --public-only; it never serves restricted content to an unnamed caller"
        )
    try:
        from osrag.service.mcp import build_server
    except ImportError as exc:
        raise ConfigError(f"osrag mcp needs the mcp extra: pip install 'osrag[mcp]' ({exc})") from exc
    server = build_server(SearchClient(load_settings()), principal, max_budget_tokens=max_budget)
    if transport == "stdio":
        server.run("stdio")
        return
    if not _loopback(host):
        log.warning(
            "MCP over HTTP on %s: anyone who reaches it reads as %s; put it behind an authenticating proxy",
            host,
            principal.describe(),
        )
    server.run("streamable-http", host=host, port=port, streamable_http_path=http_path)
