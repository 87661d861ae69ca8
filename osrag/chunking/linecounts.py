"""Token counts by line, for tokenizers whose count of a text is the sum of its lines' counts.

The chunker asks "does this fit?" of many texts that share most of their lines (a draft and the
draft plus one more paragraph, a list and the list plus one more item): counted whole, the dev docs
tree had ~4x its own size tokenized. A Hugging Face ``tokenizers.Tokenizer`` applies its model to
each pre-token on its own, so when the pre-tokenizer splits at whitespace (a token never spans a
line break) and the normalizer works character by character, the count of a text is exactly the
sum of the counts of its lines. For such a tokenizer each distinct line is tokenized once and a
text's count is a sum of remembered line counts; for any other tokenizer (byte-level BPE, where a
space or a line break is part of a token; sentencepiece's Metaspace, which marks the first word;
regex ``Split`` and ``Replace``; padding or truncation) the text is tokenized whole, as before.

The counts are the same numbers either way (``tests/unit/test_linecounts.py`` checks it on
tokenizers of both kinds); only the time differs.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Mapping
from typing import Any

#: Normalizers that act on each character alone (a line break is never composed or replaced).
_PER_CHAR_NORMALIZERS = frozenset(
    {"NFC", "NFD", "NFKC", "NFKD", "Lowercase", "StripAccents", "BertNormalizer", "Strip"}
)
#: Pre-tokenizers that cut at every whitespace character (and maybe at more), never across one.
_WHITESPACE_PRE_TOKENIZERS = frozenset({"Whitespace", "WhitespaceSplit", "BertPreTokenizer"})
#: Pre-tokenizers that may follow one of those in a sequence: they only cut further, per character.
_FINER_PRE_TOKENIZERS = frozenset({"Punctuation", "Digits"})
#: Post-processors that add nothing when special tokens are not asked for.
_QUIET_POST_PROCESSORS = frozenset({"TemplateProcessing", "BertProcessing", "RobertaProcessing", "ByteLevel"})

#: Characters of lines remembered per tokenizer (all forgotten at once when full: memory stays
#: bounded whatever the texts), and the longest line remembered (longer ones are counted each time).
LINE_CACHE_CHARS = 8_000_000
LONGEST_CACHED_LINE = 8192


def _types(part: Mapping[str, Any] | None, key: str) -> list[str]:
    """The component types of a normalizer or pre-tokenizer (a ``Sequence`` unfolded)."""
    if part is None:
        return []
    if part.get("type") == "Sequence":
        return [t for sub in part.get(key) or () for t in _types(sub, key)]
    return [str(part.get("type"))]


def splits_at_newlines(tokenizer: Any) -> bool:
    """Whether ``tokenizer`` (a ``tokenizers.Tokenizer``) counts any text as the sum of its lines."""
    try:
        spec = json.loads(tokenizer.to_str())
    except Exception:  # not a tokenizers.Tokenizer, or one that cannot describe itself
        return False
    if spec.get("truncation") is not None or spec.get("padding") is not None:
        return False
    if any(t not in _PER_CHAR_NORMALIZERS for t in _types(spec.get("normalizer"), "normalizers")):
        return False
    pre = _types(spec.get("pre_tokenizer"), "pretokenizers")
    if not pre or pre[0] not in _WHITESPACE_PRE_TOKENIZERS:
        return False
    if any(t not in _WHITESPACE_PRE_TOKENIZERS | _FINER_PRE_TOKENIZERS for t in pre):
        return False
    post = spec.get("post_processor")
    if post is not None and post.get("type") not in _QUIET_POST_PROCESSORS:
        return False
    model = spec.get("model") or {}
    if model.get("dropout") not in (None, 0, 0.0):
        return False
    return all("\n" not in str(t.get("content", "")) for t in spec.get("added_tokens") or ())


class LineCounts:
    """A tokenizer's raw token count of a text (no special tokens, no character bound), by line
    when the tokenizer allows it (``splits_at_newlines``), else whole."""

    def __init__(self, tokenizer: Any) -> None:
        self.tokenizer = tokenizer
        self.by_line = splits_at_newlines(tokenizer)
        self._lines: dict[str, int] = {}
        self._chars = 0
        self._lock = threading.Lock()

    def _whole(self, text: str) -> int:
        return len(self.tokenizer.encode(text, add_special_tokens=False).ids)

    def __call__(self, text: str) -> int:
        if not self.by_line:
            return self._whole(text)
        total = 0
        for line in text.split("\n"):
            n = self._lines.get(line)
            if n is None:
                n = self._whole(line)
                if len(line) <= LONGEST_CACHED_LINE:
                    self._remember(line, n)
            total += n
        return total

    def _remember(self, line: str, n: int) -> None:
        with self._lock:
            if self._chars + len(line) > LINE_CACHE_CHARS:
                self._lines.clear()
                self._chars = 0
            if line not in self._lines:
                self._lines[line] = n
                self._chars += len(line)


_COUNTS: dict[int, LineCounts] = {}
_LOCK = threading.Lock()


def raw_token_count(tokenizer: Any, text: str) -> int:
    """``len(tokenizer.encode(text, add_special_tokens=False).ids)``, by line where that is the
    same number (one ``LineCounts`` per tokenizer object, kept with it)."""
    counts = _COUNTS.get(id(tokenizer))
    if counts is None or counts.tokenizer is not tokenizer:
        with _LOCK:
            counts = _COUNTS.get(id(tokenizer))
            if counts is None or counts.tokenizer is not tokenizer:
                counts = _COUNTS[id(tokenizer)] = LineCounts(tokenizer)
    return counts(text)
