"""Token counts by line (osrag.chunking.linecounts): the same numbers as counting whole, and
counting by line only for tokenizers where that is exact."""

from __future__ import annotations

from typing import Any

import pytest

tokenizers = pytest.importorskip("tokenizers")

from tokenizers import Tokenizer, normalizers, pre_tokenizers  # noqa: E402
from tokenizers.models import BPE, WordLevel, WordPiece  # noqa: E402

from osrag.chunking.linecounts import LineCounts, raw_token_count, splits_at_newlines  # noqa: E402
from osrag.embedding import count_tokens_with  # noqa: E402

TEXTS = [
    "",
    "\n",
    "one line, no break",
    "Заголовок\n\nПервый абзац. Второе предложение!\n- пункт\n  - вложенный пункт\n",
    "tabs\tand  spaces\r\nand CRLF\r\n\r\nend",
    "ÉCOLE e\u0301cole ﬁn ＡＢＣ\n①②\nΣΑΣ σας",  # composed/decomposed, ligature, full width, sigma
    "a\n\n\n\nb " * 50,
    "```python\ndef f(x):\n    return x  # comment\n```\n| a | b |\n|---|---|\n| 1 | 2 |",
    "слово" * 3000,  # one line longer than the line cache takes
]


def whole(tok: Any, text: str) -> int:
    return len(tok.encode(text, add_special_tokens=False).ids)


def word_level(pre: Any, norm: Any = None) -> Any:
    tok = Tokenizer(WordLevel({"<unk>": 0, "и": 1, "line": 2}, unk_token="<unk>"))
    tok.normalizer = norm or normalizers.Sequence([normalizers.NFKC(), normalizers.Lowercase()])
    tok.pre_tokenizer = pre
    return tok


def word_piece() -> Any:
    vocab = {"[UNK]": 0, "[CLS]": 1, "[SEP]": 2, "за": 3, "##го": 4, "a": 5, "##b": 6, "line": 7}
    tok = Tokenizer(WordPiece(vocab, unk_token="[UNK]"))
    tok.normalizer = normalizers.BertNormalizer(lowercase=True)
    tok.pre_tokenizer = pre_tokenizers.BertPreTokenizer()
    return tok


ADDITIVE = {
    "word-level, whitespace": lambda: word_level(pre_tokenizers.Whitespace()),
    "word-level, whitespace split + digits": lambda: word_level(
        pre_tokenizers.Sequence(
            [pre_tokenizers.WhitespaceSplit(), pre_tokenizers.Digits(individual_digits=True)]
        )
    ),
    "word-piece, bert": word_piece,
}
WHOLE = {
    "byte-level": lambda: word_level(pre_tokenizers.ByteLevel(add_prefix_space=False)),
    "metaspace": lambda: word_level(pre_tokenizers.Metaspace()),
    "regex replace normalizer": lambda: word_level(
        pre_tokenizers.Whitespace(), normalizers.Replace(tokenizers.Regex(r"\n\s*"), " ")
    ),
    "no pre-tokenizer": lambda: Tokenizer(BPE()),
}


@pytest.mark.parametrize("name", list(ADDITIVE))
def test_additive_tokenizers_count_by_line_and_the_counts_are_the_same(name: str) -> None:
    tok = ADDITIVE[name]()
    assert splits_at_newlines(tok)
    counts = LineCounts(tok)
    assert counts.by_line
    for text in TEXTS:
        assert counts(text) == whole(tok, text), text[:40]
        assert raw_token_count(tok, text) == whole(tok, text)


@pytest.mark.parametrize("name", list(WHOLE))
def test_other_tokenizers_are_counted_whole(name: str) -> None:
    tok = WHOLE[name]()
    assert not splits_at_newlines(tok)
    assert not LineCounts(tok).by_line
    for text in TEXTS:
        assert raw_token_count(tok, text) == whole(tok, text)


def test_padding_or_truncation_turns_line_counting_off() -> None:
    padded = ADDITIVE["word-level, whitespace"]()
    padded.enable_padding(length=16)
    truncated = ADDITIVE["word-level, whitespace"]()
    truncated.enable_truncation(max_length=4)
    assert not splits_at_newlines(padded)
    assert not splits_at_newlines(truncated)


def test_the_count_by_line_differs_from_a_line_sum_where_it_would_be_wrong() -> None:
    """Byte-level tokens carry their line breaks: summing lines would drop them, so it is not done."""
    tok = WHOLE["byte-level"]()
    text = "a\nb\n"
    assert whole(tok, text) != sum(whole(tok, s) for s in text.split("\n"))
    assert raw_token_count(tok, text) == whole(tok, text)


def test_count_tokens_with_keeps_the_character_bound() -> None:
    tok = ADDITIVE["word-level, whitespace"]()
    long_word = "x" * 95
    assert count_tokens_with(tok, long_word) == 10  # one token, but never below len / 10
    assert count_tokens_with(tok, "two words\nand more") == 4


def test_not_a_tokenizer_is_not_counted_by_line() -> None:
    assert not splits_at_newlines(object())


def test_the_line_cache_stays_within_its_budget(monkeypatch: pytest.MonkeyPatch) -> None:
    import osrag.chunking.linecounts as lc

    monkeypatch.setattr(lc, "LINE_CACHE_CHARS", 100)
    tok = ADDITIVE["word-level, whitespace"]()
    counts = LineCounts(tok)
    text = "\n".join(f"строка номер {i} с несколькими словами" for i in range(40))
    assert counts(text) == whole(tok, text)
    assert counts(text) == whole(tok, text)  # counted again after the cache was emptied
    assert 0 < counts._chars <= 100
    assert sum(len(s) for s in counts._lines) == counts._chars
