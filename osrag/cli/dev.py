"""``osrag dev``: a local OpenSearch node (one per version, secured) or cluster, for development and tests."""

from __future__ import annotations

import sys
from typing import Any

import click

from osrag.cli.common import echo_json
from osrag.settings import load_settings


@click.group()
def dev() -> None:
    """Local OpenSearch with k-NN and neural-search (no Docker): one node per version, secured, or a cluster."""


_version_opt = click.option(
    "--version",
    "version",
    default=None,
    help="OpenSearch version (default OSRAG_DEV_OPENSEARCH_VERSION); each has its own dirs and ports.",
)
_security_opt = click.option(
    "--security", is_flag=True, help="The secured node: TLS with a local CA, basic auth (port 9202)."
)
_nodes_opt = click.option(
    "--nodes", type=click.IntRange(1, 9), default=1, show_default=True, help="More than 1: a local cluster."
)


def _devnode(version: str | None = None, security: bool = False, nodes: int = 1) -> Any:
    from osrag.devnode import DevCluster, DevNode

    log = lambda m: click.echo(f"osrag dev: {m}", err=True)  # noqa: E731
    if nodes > 1:
        if security:
            raise click.ClickException("--security with --nodes > 1 is not supported")
        return DevCluster(load_settings(), log=log, version=version, nodes=nodes)
    return DevNode(load_settings(), log=log, version=version, security=security)


def _print_node(st: Any, as_json: bool) -> None:
    if as_json:
        echo_json(st.as_dict())
        return
    if hasattr(st, "nodes"):
        click.echo(
            f"cluster {st.cluster_name}: {st.health or 'unreachable'}, {st.number_of_nodes} node(s) joined"
        )
        for n in st.nodes:
            state = "up" if n.running else "down"
            click.echo(f"  {n.name}  {n.url}  pid {n.pid or '-'}  {state}  {n.health or ''}".rstrip())
        return
    if not st.running:
        click.echo(f"OpenSearch at {st.url}: not running ({st.detail})")
    else:
        owner = f"pid {st.pid}" if st.started_by_osrag else "not started by osrag"
        click.echo(f"OpenSearch {st.version} at {st.url}: {st.health} ({owner})")
        click.echo(f"plugins: {', '.join(st.plugins) or '(none)'}")
    if getattr(st, "engines", None):
        click.echo(
            "k-NN engines: "
            + ", ".join(f"{e} {'works' if ok == 'yes' else 'no native library'}" for e, ok in st.engines)
        )
    if st.ca_certs:
        click.echo(f"CA file: {st.ca_certs}")
        click.echo(f"admin user: {st.user} (password in {st.password_file})")


@dev.command("up")
@_version_opt
@_security_opt
@_nodes_opt
@click.option(
    "--repair",
    is_flag=True,
    help="If the node dies opening an index (e.g. faiss without its native library), move that "
    "index's data aside (kept under <dev home>/quarantine) and start.",
)
@click.option("--json", "as_json", is_flag=True, help="Machine-readable status.")
def dev_up(version: str | None, security: bool, nodes: int, repair: bool, as_json: bool) -> None:
    """Fetch (once), install and start the node(s); reuse what is already running."""
    node = _devnode(version, security, nodes)
    if repair and nodes > 1:
        raise click.ClickException("--repair is for a single node")
    _print_node(node.up(repair=True) if repair else node.up(), as_json)


@dev.command("down")
@_version_opt
@_security_opt
@_nodes_opt
def dev_down(version: str | None, security: bool, nodes: int) -> None:
    """Stop exactly the node(s) this launcher started (by their pid files)."""
    stopped = _devnode(version, security, nodes).down()
    if nodes > 1:
        click.echo(
            f"stopped node(s) {', '.join(map(str, stopped))}"
            if stopped
            else "no node of the cluster was running"
        )
    else:
        click.echo("stopped" if stopped else "no node started by osrag is running")


@dev.command("status")
@_version_opt
@_security_opt
@_nodes_opt
@click.option("--json", "as_json", is_flag=True)
def dev_status(version: str | None, security: bool, nodes: int, as_json: bool) -> None:
    """Version, plugins and health (a cluster: every node); exit 1 when nothing runs."""
    st = _devnode(version, security, nodes).status()
    _print_node(st, as_json)
    if not st.running:
        sys.exit(1)


@dev.command("stop-node")
@click.argument("n", type=int)
@_version_opt
@click.option("--nodes", type=click.IntRange(2, 9), default=3, show_default=True)
def dev_stop_node(n: int, version: str | None, nodes: int) -> None:
    """Stop node N (1-based) of the local cluster, for fault tests."""
    stopped = _devnode(version, False, nodes).stop_node(n)
    click.echo(f"node {n} stopped" if stopped else f"node {n} was not running")


@dev.command("start-node")
@click.argument("n", type=int)
@_version_opt
@click.option("--nodes", type=click.IntRange(2, 9), default=3, show_default=True)
@click.option("--json", "as_json", is_flag=True)
def dev_start_node(n: int, version: str | None, nodes: int, as_json: bool) -> None:
    """Start node N of the local cluster again and wait until it has rejoined."""
    _print_node(_devnode(version, False, nodes).start_node(n), as_json)
