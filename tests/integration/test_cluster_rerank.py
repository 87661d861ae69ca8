"""Rerank in the cluster: a tiny cross-encoder this test builds (ONNX, its own WordPiece
tokenizer.json), registered as TEXT_SIMILARITY, run by a search pipeline's ``rerank`` processor.
Plumbing only: the order the cluster returns must be the order the same model gives here."""

from __future__ import annotations

import hashlib
import json
import uuid
import zipfile
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from osrag.mlcommons.blueprints import rerank_ext, rerank_pipeline, text_similarity_config
from osrag.mlcommons.client import MLCommons
from osrag.mlcommons.records import LocalModelMeta
from tests.integration.ml_natives import deploy_or_skip, remove_model

pytestmark = [pytest.mark.integration, pytest.mark.cluster_model, pytest.mark.slow]
onnx = pytest.importorskip("onnx")
tokenizers = pytest.importorskip("tokenizers")

WORDS = ["чай", "доставка", "москва", "возврат", "лампа", "скидка", "заказ", "день", "курьер", "упаковка"]
DOCS = [
    "доставка по москва курьер за день",
    "возврат чай упаковка",
    "лампа скидка заказ",
    "чай скидка доставка",
]


def _tokenizer(vocab: list[str]) -> dict[str, Any]:
    ids = {w: i for i, w in enumerate(vocab)}
    cls, sep = ids["[CLS]"], ids["[SEP]"]
    return {
        "version": "1.0",
        "truncation": None,
        "padding": None,
        "added_tokens": [
            {
                "id": ids[t],
                "content": t,
                "single_word": False,
                "lstrip": False,
                "rstrip": False,
                "normalized": False,
                "special": True,
            }
            for t in ("[PAD]", "[UNK]", "[CLS]", "[SEP]")
        ],
        "normalizer": {
            "type": "BertNormalizer",
            "clean_text": True,
            "handle_chinese_chars": True,
            "strip_accents": None,
            "lowercase": True,
        },
        "pre_tokenizer": {"type": "BertPreTokenizer"},
        "post_processor": {
            "type": "TemplateProcessing",
            "single": [
                {"SpecialToken": {"id": "[CLS]", "type_id": 0}},
                {"Sequence": {"id": "A", "type_id": 0}},
                {"SpecialToken": {"id": "[SEP]", "type_id": 0}},
            ],
            "pair": [
                {"SpecialToken": {"id": "[CLS]", "type_id": 0}},
                {"Sequence": {"id": "A", "type_id": 0}},
                {"SpecialToken": {"id": "[SEP]", "type_id": 0}},
                {"Sequence": {"id": "B", "type_id": 1}},
                {"SpecialToken": {"id": "[SEP]", "type_id": 1}},
            ],
            "special_tokens": {
                "[CLS]": {"id": "[CLS]", "ids": [cls], "tokens": ["[CLS]"]},
                "[SEP]": {"id": "[SEP]", "ids": [sep], "tokens": ["[SEP]"]},
            },
        },
        "decoder": None,
        "model": {
            "type": "WordPiece",
            "unk_token": "[UNK]",
            "continuing_subword_prefix": "##",
            "max_input_chars_per_word": 100,
            "vocab": ids,
        },
    }


def _graph(n_vocab: int) -> bytes:
    """score = w . mean(E[ids] * (1 + type)) over the pair's real tokens: a deterministic toy that
    weighs the document's tokens twice, enough for an order to check."""
    from onnx import TensorProto, helper, numpy_helper

    rng = np.random.default_rng(7)
    dim = 8
    inits = [
        numpy_helper.from_array(rng.normal(size=(n_vocab, dim)).astype(np.float32), "E"),
        numpy_helper.from_array(rng.normal(size=(dim, 1)).astype(np.float32), "W"),
        numpy_helper.from_array(np.array([-1], dtype=np.int64), "axis_last"),
        numpy_helper.from_array(np.array([1], dtype=np.int64), "axis_seq"),
        numpy_helper.from_array(np.array(1.0, dtype=np.float32), "one"),
    ]
    n = helper.make_node
    nodes = [
        n("Gather", ["E", "input_ids"], ["emb"]),
        n("Cast", ["attention_mask"], ["maskf"], to=TensorProto.FLOAT),
        n("Cast", ["token_type_ids"], ["typef"], to=TensorProto.FLOAT),
        n("Add", ["typef", "one"], ["wt"]),
        n("Mul", ["wt", "maskf"], ["w2"]),
        n("Unsqueeze", ["w2", "axis_last"], ["w3"]),
        n("Mul", ["emb", "w3"], ["weighted"]),
        n("ReduceSum", ["weighted", "axis_seq"], ["summed"], keepdims=0),
        n("ReduceSum", ["maskf", "axis_seq"], ["count"], keepdims=1),
        n("Div", ["summed", "count"], ["pooled"]),
        n("MatMul", ["pooled", "W"], ["logits"]),
    ]
    graph = helper.make_graph(
        nodes,
        "toy_cross_encoder",
        [
            helper.make_tensor_value_info(x, TensorProto.INT64, ["batch", "seq"])
            for x in ("input_ids", "attention_mask", "token_type_ids")
        ],
        [helper.make_tensor_value_info("logits", TensorProto.FLOAT, ["batch", 1])],
        initializer=inits,
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    onnx.checker.check_model(model)
    return model.SerializeToString()


@pytest.fixture(scope="module")
def toy(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Any, bytes]:
    vocab = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", *WORDS]
    tok = _tokenizer(vocab)
    graph = _graph(len(vocab))
    path = tmp_path_factory.mktemp("ce") / "toy-ce.zip"
    with zipfile.ZipFile(path, "w") as zf:
        zf.writestr("model.onnx", graph)
        zf.writestr("tokenizer.json", json.dumps(tok, ensure_ascii=False))
    return path, tokenizers.Tokenizer.from_str(json.dumps(tok)), graph


def _local_scores(tok: Any, graph: bytes, question: str, docs: list[str]) -> list[float]:
    import onnxruntime as ort

    sess = ort.InferenceSession(graph)
    out = []
    for d in docs:
        e = tok.encode(question, d)
        feed = {"input_ids": [e.ids], "attention_mask": [e.attention_mask], "token_type_ids": [e.type_ids]}
        out.append(float(sess.run(None, {k: np.array(v, dtype=np.int64) for k, v in feed.items()})[0][0][0]))
    return out


def test_the_cluster_reranks_with_a_text_similarity_model(
    os_client: Any, toy: tuple[Path, Any, bytes]
) -> None:
    path, tok, graph = toy
    ml = MLCommons(os_client, poll_seconds=0.5)
    name = f"t-ce-{uuid.uuid4().hex[:8]}"
    meta = LocalModelMeta(
        name,
        "TEXT_SIMILARITY",
        "ONNX",
        hashlib.sha256(path.read_bytes()).hexdigest(),
        path.stat().st_size,
        text_similarity_config(),
    )
    info = ml.register_local(path, meta)
    index, pipeline = f"{name}-idx", f"{name}-rerank"
    try:
        info = deploy_or_skip(ml, info.model_id)
        os_client.indices.create(index=index, body={"settings": {"number_of_replicas": 0}})
        for i, d in enumerate(DOCS):
            os_client.index(index=index, id=str(i), body={"text": d}, refresh=True)
        os_client.transport.perform_request(
            "PUT", f"/_search/pipeline/{pipeline}", body=rerank_pipeline(info.model_id, "text")
        )
        question = "доставка чай"
        got = os_client.search(
            index=index,
            params={"search_pipeline": pipeline},
            body={"query": {"match_all": {}}, "size": len(DOCS), "ext": rerank_ext(question)},
        )
        order = [int(h["_id"]) for h in got["hits"]["hits"]]
        want = _local_scores(tok, graph, question, DOCS)
        assert order == sorted(range(len(DOCS)), key=lambda i: -want[i])
        assert [round(h["_score"], 4) for h in got["hits"]["hits"]] == [round(want[i], 4) for i in order]
    finally:
        os_client.indices.delete(index=index, ignore=[404])
        os_client.transport.perform_request("DELETE", f"/_search/pipeline/{pipeline}", params={"ignore": 404})
        remove_model(ml, info.model_id)


def test_search_reranks_in_the_cluster_and_says_so(
    os_client: Any, settings: Any, toy: tuple[Path, Any, bytes], tmp_path: Path
) -> None:
    """OSRAG_RERANKER_MODEL=ml:NAME: osrag's search sends its candidates through the alias's rerank
    pipeline (fusion, then the ``rerank`` response processor), in the one search request; the
    order is the toy model's own, the envelope names the reranker and says it ran in the cluster.
    The same through ``_predict`` when the pipeline path is off; a model gone: ranked without it,
    the note names it."""
    from osrag import PUBLIC, SearchClient
    from osrag.ingest.indexing import Ingester
    from osrag.names import rerank_pipeline_name
    from osrag.store.alias import AliasStore
    from tests.integration.conftest import drop_alias
    from tests.integration.test_async import write_corpus

    path, tok, graph = toy
    ml = MLCommons(os_client, poll_seconds=0.5)
    name = f"t-ce-{uuid.uuid4().hex[:8]}"
    meta = LocalModelMeta(
        name,
        "TEXT_SIMILARITY",
        "ONNX",
        hashlib.sha256(path.read_bytes()).hexdigest(),
        path.stat().st_size,
        text_similarity_config(),
    )
    info = ml.register_local(path, meta)
    s = settings.model_copy(update={"rerank": True, "reranker_model": f"ml:{name}", "rerank_depth": 3})
    admin = AliasStore(s)
    question = "сколько стоит доставка по Москве?"
    try:
        deploy_or_skip(ml, info.model_id)
        admin.install()  # the fusion pipelines and the rerank pipeline of the cluster model
        pipeline = rerank_pipeline_name(s.alias, s.fusion)
        assert admin.installed("search pipeline", pipeline) is not None
        assert not [d for d in admin.check() if d.name == pipeline]
        Ingester(s, admin=admin).ingest([write_corpus(tmp_path / "kb")])

        client = SearchClient(s, principal=PUBLIC)
        sent: list[dict[str, Any]] = []
        answer = client._transport.answer

        async def spy(step: Any) -> Any:
            if getattr(step, "method", None) == "search":
                sent.append(step.kwargs)
            return await answer(step)

        client._transport.answer = spy  # type: ignore[method-assign]
        # The fused candidates of the same request (same depth, so the same k and pagination).
        ret_fused = SearchClient(s, principal=PUBLIC).retrieve(question, depth=10)
        env = client.search(question, budget_tokens=2000, depth=10)
        assert len(sent) == 1 and sent[0]["params"]["search_pipeline"] == pipeline
        assert sent[0]["body"]["ext"] == rerank_ext(question) and sent[0]["body"]["size"] == 3
        assert env.rerank.used and env.rerank.where == "cluster" and env.rerank.model == f"ml:{name}", (
            env.rerank
        )
        assert env.rerank.reranked == 3  # min(depth, rerank_depth): the processor scores every hit it gets
        # The first three fused candidates, in the toy model's order with its scores.
        texts = {h.chunk_id: h.text for h in ret_fused.hits[:3]}
        want = _local_scores(tok, graph, question, list(texts.values()))
        scored = {cid: w for cid, w in zip(texts, want)}
        got = [(p.chunk_id, p.scores.rerank) for p in env.passages]
        assert got and {cid for cid, _ in got} <= set(scored)
        assert [cid for cid, _ in got] == sorted((cid for cid, _ in got), key=lambda c: -scored[c])
        assert all(abs(float(sc or 0) - scored[cid]) < 1e-3 for cid, sc in got), (got, scored)

        # The same model through _predict (the pipeline path off): the same order.
        by_predict = SearchClient(s, principal=PUBLIC)
        by_predict.rerank_in_pipeline = False
        env2 = by_predict.search(question, budget_tokens=2000, depth=3)
        assert env2.rerank.used and env2.rerank.where == "cluster"
        assert [p.chunk_id for p in env2.passages] == [p.chunk_id for p in env.passages]

        ml.undeploy(info.model_id)  # gone from the nodes: ranked without it, the note names it
        env = SearchClient(s, principal=PUBLIC).search(question, budget_tokens=400)
        assert not env.rerank.used and name in env.rerank.note and "\n" not in env.rerank.note, env.rerank
        assert env.passages  # the search itself still answers, in fused order
    finally:
        drop_alias(admin.cluster.client, settings.alias)
        os_client.transport.perform_request(
            "DELETE", f"/_search/pipeline/{rerank_pipeline_name(s.alias, s.fusion)}", params={"ignore": 404}
        )
        remove_model(ml, info.model_id)
