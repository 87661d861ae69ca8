"""The cross-encoder wrapper, with a tiny BERT cross-encoder the test builds itself (no hub, no download)."""

from __future__ import annotations

import dataclasses
import unicodedata
from collections.abc import Iterator
from pathlib import Path

import pytest

from osrag.errors import ModelError
from osrag.reranker_loading import (
    RerankUnavailable,
    cached_reranker_model,
    forget_reranker_models,
    load_cross_encoder,
)
from osrag.search.rerank import (
    Reranker,
    RerankResult,
    depth_cut,
    length_batches,
    pair_budget,
    rerank_order,
)

MAX_LENGTH = 32
_LETTERS = "абвгдеёжзийклмнопрстуфхцчшщъыьэюяabcdefghijklmnopqrstuvwxyz0123456789"
_WORDS = ["чай", "зеленый", "черный", "лампа", "доставка", "гарантия", "цена", "tea", "lamp", "light", "mini"]


def _plain(text: str) -> str:
    return "".join(c for c in unicodedata.normalize("NFD", text.lower()) if not unicodedata.combining(c))


def build_tiny_cross_encoder(path: Path, seed: int = 1234) -> Path:
    """A 1-layer, 32-wide BERT with one output label, saved with a WordPiece tokenizer limited to 32 tokens."""
    import torch
    from transformers import BertConfig, BertForSequenceClassification, BertTokenizerFast

    path.mkdir(parents=True, exist_ok=True)
    # The tokenizer lowercases and strips accents (й -> и, ё -> е), so the vocabulary is stored that way.
    pieces = [_plain(w) for w in (*_WORDS, *_LETTERS)] + [f"##{_plain(c)}" for c in _LETTERS]
    vocab = list(dict.fromkeys(["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", *pieces]))
    (path / "vocab.txt").write_text("\n".join(vocab) + "\n", encoding="utf-8")
    # from_pretrained on a directory with vocab.txt works across transformers 4 and 5
    # (the constructor's vocab argument was renamed between them).
    tokenizer = BertTokenizerFast.from_pretrained(str(path), model_max_length=MAX_LENGTH)
    assert "[UNK]" not in tokenizer.tokenize("зеленый чай tea")
    torch.manual_seed(seed)
    config = BertConfig(
        vocab_size=len(vocab),
        hidden_size=32,
        num_hidden_layers=1,
        num_attention_heads=2,
        intermediate_size=37,
        max_position_embeddings=64,
        num_labels=1,
        initializer_range=0.2,
    )  # wider than default: scores differ visibly between texts
    model = BertForSequenceClassification(config)
    model.eval()
    model.save_pretrained(path)
    tokenizer.save_pretrained(path)
    return path


@pytest.fixture(scope="module")
def tiny_model(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    load_cross_encoder.cache_clear()
    forget_reranker_models()
    yield str(build_tiny_cross_encoder(tmp_path_factory.mktemp("tiny-ce")))
    load_cross_encoder.cache_clear()
    forget_reranker_models()


QUESTION = "зеленый чай цена"
TEXTS = ["зеленый чай tea цена", "лампа lamp light mini", "доставка"]
LONG = " ".join(["гарантия лампа"] * 40)  # far past 32 tokens


def test_score_returns_one_float_per_text(tiny_model: str) -> None:
    res = Reranker(tiny_model).score(QUESTION, TEXTS)
    assert isinstance(res, RerankResult)
    assert len(res.scores) == len(TEXTS) == len(res.truncated)
    assert all(type(s) is float for s in res.scores)
    assert len(set(res.scores)) == len(TEXTS)  # the texts are told apart
    assert res.max_length == MAX_LENGTH


def test_score_is_deterministic_and_independent_of_batching(tiny_model: str) -> None:
    a = Reranker(tiny_model, batch_size=16).score(QUESTION, TEXTS).scores
    b = Reranker(tiny_model, batch_size=16).score(QUESTION, TEXTS).scores
    assert a == b
    one_by_one = [Reranker(tiny_model, batch_size=1).score(QUESTION, [t]).scores[0] for t in TEXTS]
    assert one_by_one == pytest.approx(a, abs=1e-5)


def test_a_rebuilt_model_with_the_same_seed_scores_the_same(tiny_model: str, tmp_path: Path) -> None:
    other = str(build_tiny_cross_encoder(tmp_path / "again"))
    assert Reranker(other).score(QUESTION, TEXTS).scores == pytest.approx(
        Reranker(tiny_model).score(QUESTION, TEXTS).scores, abs=1e-6
    )


def test_truncation_is_flagged_for_a_text_past_max_length(tiny_model: str) -> None:
    res = Reranker(tiny_model).score(QUESTION, [TEXTS[0], LONG, TEXTS[2]])
    assert res.truncated == [False, True, False]
    assert len(res.scores) == 3


def test_empty_candidate_list_needs_no_model() -> None:
    assert Reranker("/nonexistent/model").score("q", []) == RerankResult([], [], None, [])


def test_bad_model_path_raises_rerank_unavailable_with_one_line(tmp_path: Path) -> None:
    missing = str(tmp_path / "no-such-model")
    with pytest.raises(RerankUnavailable) as err:
        Reranker(missing).score("чай", ["чай"])
    assert isinstance(err.value, ModelError)
    msg = str(err.value)
    assert "\n" not in msg
    assert msg.startswith(f"cannot load reranker {missing!r}:")
    assert len(msg) < 400


def test_a_directory_that_is_not_a_model_raises_rerank_unavailable(tmp_path: Path) -> None:
    (tmp_path / "junk").mkdir()
    (tmp_path / "junk" / "config.json").write_text("{not json", encoding="utf-8")
    with pytest.raises(RerankUnavailable, match="cannot load reranker"):
        Reranker(str(tmp_path / "junk")).score("чай", ["чай"])


def test_a_failing_model_raises_rerank_unavailable(tiny_model: str) -> None:
    def broken(batch: object) -> object:
        raise RuntimeError("CUDA out of memory\nsecond line")

    r = Reranker(tiny_model)
    r._model = dataclasses.replace(r.model, run=broken)
    with pytest.raises(RerankUnavailable) as err:
        r.score("чай", ["чай"])
    assert str(err.value) == f"reranker {tiny_model!r} failed: RuntimeError: CUDA out of memory"


def test_model_is_loaded_once_per_process(tiny_model: str) -> None:
    load_cross_encoder.cache_clear()
    forget_reranker_models()
    first, second = Reranker(tiny_model), Reranker(tiny_model)
    first.score(QUESTION, TEXTS)
    second.score(QUESTION, TEXTS)
    first.score(QUESTION, TEXTS)
    assert first.model is second.model
    info = cached_reranker_model.cache_info()
    assert info.misses == 1
    assert info.hits >= 1


def test_a_failed_load_is_remembered_not_retried(tmp_path) -> None:
    from osrag.search import rerank as rr

    missing = str(tmp_path / "no-such-model")
    r = rr.Reranker(missing)
    with pytest.raises(RerankUnavailable) as first:
        r.score("вопрос", ["текст"])
    calls = cached_reranker_model.cache_info().misses
    with pytest.raises(RerankUnavailable) as second:
        r.score("вопрос", ["текст"])
    assert second.value is first.value
    assert cached_reranker_model.cache_info().misses == calls  # no second load attempt


# ------------------------------------------------------------------ pure parts
def test_pair_budget_keeps_the_question_whole_and_cuts_the_passage() -> None:
    assert pair_budget(10, 20, 64, 3) == (10, 20)  # fits: nothing cut
    assert pair_budget(10, 500, 64, 3) == (10, 51)  # passage cut to the room the question leaves
    assert sum(pair_budget(10, 500, 64, 3)) + 3 == 64


def test_pair_budget_cuts_only_a_question_longer_than_half_the_room() -> None:
    room = 64 - 3
    assert pair_budget(31, 500, 64, 3) == (30, 31)  # 31 > 61 // 2: cut to half
    assert pair_budget(30, 500, 64, 3) == (30, 31)  # exactly half: whole
    assert pair_budget(200, 5, 64, 3) == (room // 2, 5)
    with pytest.raises(ValueError, match="no room"):
        pair_budget(1, 1, 4, 3)


def test_length_batches_group_similar_lengths_longest_first() -> None:
    lengths = [5, 100, 7, 90, 6, 95]
    assert length_batches(lengths, 2) == [[1, 5], [3, 2], [4, 0]]
    assert sorted(i for b in length_batches(lengths, 4) for i in b) == list(range(6))
    assert length_batches([3, 3, 3], 2) == [[0, 1], [2]]  # ties keep input order
    assert length_batches([], 8) == []
    with pytest.raises(ValueError):
        length_batches([1], 0)


def test_depth_cut_and_order_keep_the_tail_in_fused_order() -> None:
    assert depth_cut(40, None) == 40
    assert depth_cut(40, 10) == 10
    assert depth_cut(5, 10) == 5
    with pytest.raises(ValueError):
        depth_cut(5, 0)
    assert rerank_order([0.1, 0.9, 0.5], 6) == [1, 2, 0, 3, 4, 5]
    assert rerank_order([0.5, 0.5], 2) == [0, 1]  # ties keep fused order
    assert rerank_order([], 3) == [0, 1, 2]


def test_depth_scores_only_the_head(tiny_model: str) -> None:
    texts = [*TEXTS, "гарантия", "цена доставка"]
    full = Reranker(tiny_model).score(QUESTION, texts)
    cut = Reranker(tiny_model, depth=2).score(QUESTION, texts)
    assert cut.scores[:2] == pytest.approx(full.scores[:2], abs=1e-6)
    assert cut.scores[2:] == [None, None, None]
    assert cut.order[2:] == [2, 3, 4]
    assert sorted(cut.order[:2]) == [0, 1]
    assert full.order == sorted(range(5), key=lambda i: -full.scores[i])


def test_a_long_passage_is_cut_but_the_question_is_read_whole(tiny_model: str) -> None:
    # Same question, passage = a prefix that fills the room + different tails: with the question
    # kept whole, the tail past the limit cannot change the score.
    question = "зеленый чай цена доставка"
    head = " ".join(["лампа"] * 40)
    a = Reranker(tiny_model).score(question, [head + " чай", head + " доставка гарантия"])
    assert a.truncated == [True, True]
    assert a.scores[0] == pytest.approx(a.scores[1], abs=1e-6)
    # ...while the question's last word does change it (it was not cut away).
    b = Reranker(tiny_model).score("зеленый чай цена лампа", [head + " чай"])
    assert b.scores[0] != pytest.approx(a.scores[0], abs=1e-6)


def test_max_length_setting_caps_the_model_limit(tiny_model: str) -> None:
    res = Reranker(tiny_model, max_length=16).score(QUESTION, [TEXTS[0], LONG])
    assert res.max_length == 16
    assert res.truncated == [False, True]
    assert Reranker(tiny_model, max_length=4096).score(QUESTION, TEXTS).max_length == MAX_LENGTH


def test_int8_needs_the_onnx_backend(tiny_model: str) -> None:
    with pytest.raises(RerankUnavailable, match="onnx"):
        Reranker(tiny_model, quantize="int8").score(QUESTION, TEXTS)
    with pytest.raises(RerankUnavailable, match="unknown rerank backend"):
        Reranker(tiny_model, backend="tensorrt").score(QUESTION, TEXTS)


def _onnx_or_skip() -> None:
    for mod in ("onnxruntime", "onnx"):
        pytest.importorskip(mod, reason=f"{mod} is not installed (pip install 'osrag[onnx]')")


def test_onnx_backend_ranks_like_torch(tiny_model: str, tmp_path: Path) -> None:
    _onnx_or_skip()
    texts = [*TEXTS, LONG, "чай tea", "цена гарантия доставка", "mini lamp"]
    torch_res = Reranker(tiny_model).score(QUESTION, texts)
    onnx_res = Reranker(tiny_model, backend="onnx", models_dir=tmp_path).score(QUESTION, texts)
    assert (tmp_path / "rerank-onnx").is_dir()  # exported once, cached under models_dir
    assert onnx_res.scores == pytest.approx(torch_res.scores, abs=1e-5)
    assert onnx_res.order == torch_res.order
    assert onnx_res.truncated == torch_res.truncated
    # the export leaves the shared torch model as it was (eval mode: no dropout)
    assert Reranker(tiny_model).score(QUESTION, texts).scores == pytest.approx(torch_res.scores, abs=1e-7)
    int8 = Reranker(tiny_model, backend="onnx", quantize="int8", models_dir=tmp_path).score(QUESTION, texts)
    assert len(int8.scores) == len(texts)
    assert all(isinstance(s, float) for s in int8.scores)


class FakeClock:
    """``time.perf_counter`` for the rerank deadline: it moves only when the model runs."""

    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def _timed_reranker(tiny_model: str, clock: FakeClock, per_batch_s: float, **kw: object) -> Reranker:
    r = Reranker(tiny_model, batch_size=2, **kw)  # type: ignore[arg-type]
    loaded = r.model
    run = loaded.run

    def slow(batch: dict[str, object]) -> object:
        clock.now += per_batch_s
        return run(batch)  # type: ignore[arg-type]

    r._model = dataclasses.replace(loaded, run=slow)
    return r


SIX = [*TEXTS, "гарантия", "цена доставка", "чай"]


def test_a_rerank_budget_scores_in_fused_order_until_the_deadline(
    tiny_model: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    from osrag.search import rerank

    full = Reranker(tiny_model).score(QUESTION, SIX)
    assert full.scored == 6 and not full.out_of_time
    clock = FakeClock()
    monkeypatch.setattr(rerank.time, "perf_counter", clock)
    # 10 ms per batch of two: the first two batches end at 20 ms; a third is expected to end at
    # 30 ms, past the 25 ms deadline, so it is not started.
    got = _timed_reranker(tiny_model, clock, 0.010, budget_ms=25).score(QUESTION, SIX)
    assert got.scored == 4 and got.out_of_time
    assert got.scores[:4] == pytest.approx(full.scores[:4], abs=1e-6)
    assert got.scores[4:] == [None, None]
    assert sorted(got.order[:4]) == [0, 1, 2, 3] and got.order[4:] == [4, 5]  # the rest: fused order
    assert got.order[:4] == sorted(range(4), key=lambda i: -full.scores[i])
    # A budget given to score() wins over the reranker's own; a generous one scores everything.
    roomy = _timed_reranker(tiny_model, clock, 0.010, budget_ms=25).score(QUESTION, SIX, budget_ms=1000)
    assert roomy.scored == 6 and not roomy.out_of_time and roomy.order == full.order
    # Past the deadline before the first batch: nothing scored, the fused order kept.
    late = _timed_reranker(tiny_model, clock, 0.010, budget_ms=25)

    class SlowTokenizer:
        def __init__(self, tok: object) -> None:
            self.tok = tok

        def __call__(self, *a: object, **kw: object) -> object:
            clock.now += 1.0
            return self.tok(*a, **kw)  # type: ignore[operator]

        def __getattr__(self, name: str) -> object:
            return getattr(self.tok, name)

    late._model = dataclasses.replace(late.model, tokenizer=SlowTokenizer(late.model.tokenizer))
    none = late.score(QUESTION, SIX)
    assert none.scored == 0 and none.out_of_time and none.order == list(range(6))
    with pytest.raises(ValueError, match="rerank budget"):
        Reranker(tiny_model, budget_ms=0)


def test_the_envelope_says_how_many_were_reranked_within_the_budget(
    tiny_model: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    from osrag.records import ChunkSource
    from osrag.search import rerank
    from osrag.search.candidates import Candidate
    from osrag.search.client import SearchClient
    from osrag.settings import Settings

    clock = FakeClock()
    monkeypatch.setattr(rerank.time, "perf_counter", clock)
    s = Settings(url="http://127.0.0.1:1", alias="t-unit", _env_file=None, rerank_budget_ms=25)
    sc = SearchClient(s, reranker=_timed_reranker(tiny_model, clock, 0.010))
    hits = [
        Candidate(ChunkSource(chunk_id=f"c{i}", text=t), fused=1.0 - i / 10, rank=i + 1)
        for i, t in enumerate(SIX)
    ]
    notes: list[str] = []
    ordered, info = sc._rerank(QUESTION, hits, True, notes, {})
    assert info.used and info.reranked == 4 and info.budget_ms == 25
    assert "rerank budget 25 ms: 4 of 6 candidates scored" in info.note
    assert [h.chunk_id for h in ordered[4:]] == ["c4", "c5"]
    assert all(h.rerank is None for h in ordered[4:]) and all(h.rerank is not None for h in ordered[:4])
    # Without a budget (the default) every candidate is scored, as before.
    plain = SearchClient(
        Settings(url="http://127.0.0.1:1", alias="t-unit", _env_file=None), reranker=Reranker(tiny_model)
    )
    _, info = plain._rerank(
        QUESTION,
        [Candidate(h.source, h.fused, h.rank) for h in hits],
        True,
        [],
        {},
    )
    assert info.reranked == 6 and info.budget_ms is None and "budget" not in info.note
