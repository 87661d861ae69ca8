"""Embeddings without a server: lazy loading, the real loading code on a tiny model, navec."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest

from osrag.embedding import Embedder, count_tokens_with, default_prefixes, load_model, resolve_model
from osrag.errors import ModelError
from osrag.settings import Settings

WORDS = [
    "<unk>",
    "<pad>",
    "query",
    "passage",
    ":",
    "чай",
    "чая",
    "возврат",
    "вернуть",
    "доставка",
    "лампа",
    "лампы",
    "зеленый",
    "черный",
    "скидка",
    "промокод",
    "заказ",
    "курьер",
    "оплата",
    "карта",
]
DIM = 16


def build_tiny_model(target: Path, seed: int = 7) -> Path:
    """A real sentence-transformers StaticEmbedding over a 20-word WordLevel vocabulary."""
    from sentence_transformers import SentenceTransformer

    try:
        from sentence_transformers.sentence_transformer.modules import StaticEmbedding
    except ImportError:  # sentence-transformers 5.x
        from sentence_transformers.models import StaticEmbedding
    from tokenizers import Tokenizer, normalizers, pre_tokenizers
    from tokenizers.models import WordLevel

    assert len(WORDS) == 20
    tok = Tokenizer(WordLevel(vocab={w: i for i, w in enumerate(WORDS)}, unk_token="<unk>"))
    tok.normalizer = normalizers.Lowercase()
    tok.pre_tokenizer = pre_tokenizers.Whitespace()
    weights = np.random.default_rng(seed).standard_normal((len(WORDS), DIM)).astype(np.float32)
    weights[0] = 0.0  # <unk> adds nothing, like the navec build
    weights[1] = 0.0
    model = SentenceTransformer(modules=[StaticEmbedding(tok, embedding_weights=weights)], device="cpu")
    model.save(str(target))
    return target


@pytest.fixture(scope="module")
def tiny_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return build_tiny_model(tmp_path_factory.mktemp("models") / "tiny-static")


@pytest.fixture(scope="module")
def tiny_e5_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return build_tiny_model(tmp_path_factory.mktemp("models") / "tiny-multilingual-e5")


# ------------------------------------------------------------------ no I/O before first use
def test_import_and_construction_do_no_io(tmp_path: Path) -> None:
    models_dir = tmp_path / "not-created"
    code = textwrap.dedent(
        f"""
        import json, socket, sys

        def refuse(*a, **k):
            raise AssertionError("network I/O at import or construction")

        socket.socket.connect = refuse
        socket.create_connection = refuse

        import osrag, osrag.search, osrag.indexing, osrag.embedding
        from osrag.embedding import Embedder
        from osrag.settings import Settings

        client = osrag.search.SearchClient(Settings(url="http://127.0.0.1:9", _env_file=None))
        emb = Embedder("navec:news-300d", models_dir={str(models_dir)!r})
        heavy = sorted(m for m in ("torch", "sentence_transformers", "transformers", "opensearchpy", "navec")
                       if m in sys.modules)
        print(json.dumps({{"heavy": heavy, "loaded": emb.loaded, "prefixes": [emb.query_prefix, emb.passage_prefix]}}))
        """
    )
    proc = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=120, cwd=tmp_path
    )
    assert proc.returncode == 0, proc.stderr
    out = json.loads(proc.stdout.strip().splitlines()[-1])
    assert out == {"heavy": [], "loaded": False, "prefixes": ["", ""]}
    assert not models_dir.exists()  # nothing built, nothing created


# ------------------------------------------------------------------ the loading code, tiny model
def test_tiny_model_loads_with_dimension_and_unit_vectors(tiny_dir: Path) -> None:
    emb = Embedder(str(tiny_dir), models_dir=tiny_dir)
    assert not emb.loaded
    assert emb.dimension == DIM
    assert emb.loaded
    vecs = emb.encode_passages(["возврат чая", "доставка лампы курьер", "Скидка ПРОМОКОД"])
    assert vecs.shape == (3, DIM) and vecs.dtype == np.float32
    np.testing.assert_allclose(np.linalg.norm(vecs, axis=1), 1.0, atol=1e-5)
    q = emb.encode_query("возврат чая")
    assert q.shape == (DIM,)
    np.testing.assert_allclose(q, vecs[0], atol=1e-6)  # no prefixes for a non-e5 name
    assert emb.encode_passages([]).shape == (0, DIM)
    assert emb.max_tokens is None  # a static model has no input limit (reports inf)


def test_all_unknown_text_gets_a_defined_unit_vector(tiny_dir: Path) -> None:
    emb = Embedder(str(tiny_dir), models_dir=tiny_dir)
    v = emb.encode_passages(["XJ-9000 qwerty", "возврат"])
    assert np.isfinite(v).all()
    np.testing.assert_allclose(np.linalg.norm(v, axis=1), 1.0, atol=1e-5)
    np.testing.assert_allclose(v[0], np.full(DIM, 1 / np.sqrt(DIM)), atol=1e-6)


def test_count_tokens_uses_the_model_tokenizer(tiny_dir: Path) -> None:
    emb = Embedder(str(tiny_dir), models_dir=tiny_dir)
    assert emb.count_tokens("возврат чая") == 2
    assert emb.count_tokens("Промокод: скидка, XJ") == 5  # word : word , unknown
    assert emb.count_tokens("") == 0
    assert count_tokens_with(emb.model.tokenizer, "чай чай чай") == 3


def test_e5_names_get_query_and_passage_prefixes(tiny_dir: Path, tiny_e5_dir: Path) -> None:
    assert "e5" not in str(tiny_dir)
    plain = Embedder(str(tiny_dir), models_dir=tiny_dir)
    e5 = Embedder(str(tiny_e5_dir), models_dir=tiny_e5_dir)
    assert (plain.query_prefix, plain.passage_prefix) == ("", "")
    assert (e5.query_prefix, e5.passage_prefix) == ("query: ", "passage: ")
    assert default_prefixes("intfloat/multilingual-E5-base") == ("query: ", "passage: ")
    # The prefixes are really prepended: same weights, so only the prefix differs.
    raw = plain.model
    q = e5.encode_query("возврат чая")
    p = e5.encode_passages(["возврат чая"])[0]
    want_q = raw.encode(["query: возврат чая"], normalize_embeddings=True)[0]
    want_p = raw.encode(["passage: возврат чая"], normalize_embeddings=True)[0]
    np.testing.assert_allclose(q, want_q, atol=1e-5)
    np.testing.assert_allclose(p, want_p, atol=1e-5)
    assert not np.allclose(q, p, atol=1e-3)
    # Explicit prefixes (e.g. from an index's _meta) win over the name rule.
    custom = Embedder(str(tiny_e5_dir), models_dir=tiny_e5_dir, query_prefix="", passage_prefix="doc: ")
    assert (custom.query_prefix, custom.passage_prefix) == ("", "doc: ")


def test_model_loaded_once_per_process(tiny_dir: Path) -> None:
    a = Embedder(str(tiny_dir), models_dir=tiny_dir)
    b = Embedder(str(tiny_dir), models_dir=tiny_dir, batch_size=4)
    before = load_model.cache_info()
    assert a.model is b.model
    assert a.model is load_model(str(tiny_dir), "cpu")
    after = load_model.cache_info()
    assert after.misses - before.misses <= 1  # at most one real load, however many embedders


def test_missing_path_gives_one_line_model_error(tmp_path: Path) -> None:
    missing = tmp_path / "no-such-model"
    emb = Embedder(str(missing), models_dir=tmp_path)
    with pytest.raises(ModelError) as ei:
        emb.dimension  # noqa: B018 - first use loads
    msg = str(ei.value)
    assert "\n" not in msg
    assert str(missing) in msg and "cannot load embedding model" in msg
    assert not emb.loaded


def test_broken_model_dir_gives_one_line_model_error(tmp_path: Path) -> None:
    broken = tmp_path / "broken"
    broken.mkdir()
    (broken / "modules.json").write_text("{ not json", encoding="utf-8")
    with pytest.raises(ModelError) as ei:
        Embedder(str(broken), models_dir=tmp_path).encode_query("чай")
    assert "\n" not in str(ei.value) and str(broken) in str(ei.value)


def test_unknown_navec_variant_and_scheme_resolution(tmp_path: Path) -> None:
    with pytest.raises(ModelError, match="unknown navec model 'wiki-100d'"):
        resolve_model("navec:wiki-100d", tmp_path)
    assert resolve_model("intfloat/multilingual-e5-base", tmp_path) == "intfloat/multilingual-e5-base"
    assert not any(tmp_path.iterdir())


def test_navec_rebuild_race_keeps_the_finished_model(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, tiny_dir: Path
) -> None:
    """A second process that finished the build first must not make ours fail."""
    import shutil

    import osrag.embedding as e

    target = tmp_path / "navec-news-300d"
    real_rename = Path.rename

    def rename_after_other_process(self: Path, dst: Path) -> Path:
        if Path(dst) == target and not target.exists():
            shutil.copytree(tiny_dir, target)  # "the other process" wins the race
        return real_rename(self, dst)

    class FakeNavec:  # only the vector file is faked; the build code runs for real
        class vocab:
            words = ["<pad>", "<unk>", "чай"]

        class pq:
            @staticmethod
            def unpack() -> np.ndarray:
                return np.ones((3, 4), dtype=np.float32)

    import navec

    monkeypatch.setattr(navec.Navec, "load", staticmethod(lambda path: FakeNavec))
    monkeypatch.setattr(Path, "rename", rename_after_other_process)
    got = e._build_navec_static("news-300d", tmp_path)
    assert got == target and (target / "modules.json").exists()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["navec-news-300d"]  # our tmp dir is gone


# ------------------------------------------------------------------ navec:news-300d itself
@pytest.mark.slow
def test_navec_news_300d_relates_russian_paraphrases() -> None:
    emb = Embedder("navec:news-300d", models_dir=Settings(_env_file=None).models_dir)
    assert emb.dimension == 300
    ret, ret_para, other = emb.encode_passages(["возврат чая", "вернуть чай", "доставка лампы"])
    assert float(ret @ ret_para) > float(ret @ other) + 0.1
    assert emb.count_tokens("Возврат чая") == 2
    assert emb.count_tokens("ёлка") == emb.count_tokens("елка") == 1
