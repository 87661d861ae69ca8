"""The index's ``ru_search`` analyzer in Python: a question's terms without a round trip.

The relevance gate (``osrag.search.gate``) weighs a question by the terms the index's ``ru_search``
analyzer makes of its words. Asking the cluster (``_analyze``) for them cost one more request
for every question with a word the client had not seen; this module makes the same tokens in
process, so every ``search()`` is one request.

It follows the chain of ``index_templates/osrag-analysis.json`` step by step, as Lucene runs it:

1. char filters: ``yo`` (a one-to-one ``mapping``: ё -> е) and ``ident_punct`` (a
   ``pattern_replace`` of punctuation around words by a space; Java's ``\\s`` is ASCII);
2. the ``whitespace`` tokenizer (Java's ``Character.isWhitespace``; a token is cut every 255
   UTF-16 units);
3. ``stop`` with ``ignore_case`` (per code point ``Character.toLowerCase``) -- before the
   delimiter graph, so a stop word inside an identifier still yields its part;
4. ``word_delimiter_graph`` with the search flags (the original kept, word and number parts,
   split on case change, never on letter/digit changes, no catenation);
5. ``lowercase``, the ``keyword_marker`` (a token with a Latin letter or a digit is never
   stemmed) and the Snowball Russian stemmer (``snowballstemmer``, generated from the same
   Snowball source as Lucene's ``RussianStemmer``).

Its parameters (stop words, the mapping, the patterns, the delimiter flags, the stemmer) are
read from the shipped file, and a definition it was not written for is refused
(``Unsupported``) rather than approximated. The query path uses it only on an index created
from these files (``Retriever.local_analyzer`` in ``osrag.search.retrieval_steps``: the index's
fingerprint), and asks ``_analyze`` otherwise.
``tests/integration/test_analyzer_parity.py`` compares it with the index's ``_analyze`` on
every question of the three evaluation sets and fails on any difference. This docstring is the one
place that says why a second implementation of the JSON analyzer exists and what keeps it honest.
"""

from __future__ import annotations

import functools
import re
import threading
import unicodedata
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from osrag import templates

__all__ = ["ANALYZER", "SearchAnalyzer", "Unsupported", "search_analyzer"]

#: The analyzer this module reproduces (the ``text`` field's search analyzer).
ANALYZER = "ru_search"
_CHAIN = {
    "type": "custom",
    "char_filter": ["yo", "ident_punct"],
    "tokenizer": "whitespace",
    "filter": ["ru_stop", "ru_wdg_search", "lowercase", "ru_keywords", "ru_stem"],
}
_WDG_FLAGS = {
    "type": "word_delimiter_graph",
    "preserve_original": True,
    "split_on_case_change": True,
    "split_on_numerics": False,
    "generate_word_parts": True,
    "generate_number_parts": True,
    "catenate_words": False,
    "catenate_numbers": False,
    "catenate_all": False,
    "stem_english_possessive": False,
}
#: ``ident_punct``'s Java pattern, and the same in Python's dialect: Java's ``\s`` is
#: ``[ \t\n\x0B\f\r]`` and Python's look-behind needs one width per branch.
_PUNCT_JAVA = r"""[«»"“”„()\[\]{}<>|*#`~^;!?…—–]|[.,:/\-_'](?=\s|$)|(?<=\s|^)[.,:/\-_']"""
_JAVA_SPACE = "[ \\t\\n\\x0b\\f\\r]"
_PUNCT_PY = (
    r"[«»\"“”„()\[\]{}<>|*#`~^;!?…—–]"
    rf"|[.,:/\-_'](?={_JAVA_SPACE}|$)"
    rf"|(?:(?<={_JAVA_SPACE})|^)[.,:/\-_']"
)
_KEYWORDS_JAVA = ".*[0-9a-z].*"
#: ``CharTokenizer``'s default longest token, in UTF-16 units.
MAX_TOKEN_UTF16 = 255

# word_delimiter_graph's character types (Lucene's WordDelimiterIterator).
_LOWER, _UPPER, _DIGIT, _DELIM = 0x01, 0x02, 0x04, 0x08
_ALPHA = _LOWER | _UPPER
_NOT_SPACE = frozenset("\u00a0\u2007\u202f")  # space separators Java does not call whitespace


class Unsupported(ValueError):
    """The analysis definition is not the one this module reproduces."""


def java_whitespace(ch: str) -> bool:
    """``Character.isWhitespace``: space separators (not the non-breaking ones), line and
    paragraph separators, and the ASCII controls \\t \\n \\v \\f \\r and \\x1c-\\x1f."""
    if ch in "\t\n\x0b\x0c\r\x1c\x1d\x1e\x1f":
        return True
    return unicodedata.category(ch) in ("Zs", "Zl", "Zp") and ch not in _NOT_SPACE


def java_lower(text: str) -> str:
    """``Character.toLowerCase`` per code point (the simple mapping: one character to one)."""
    if text.isascii():
        return text.lower()
    out = []
    for ch in text:
        low = ch.lower()
        out.append(low if len(low) == 1 else ("i" if ch == "\u0130" else ch))
    return "".join(out)


def utf16_len(text: str) -> int:
    return len(text) + sum(1 for ch in text if ord(ch) > 0xFFFF)


@functools.lru_cache(maxsize=4096)
def char_type(ch: str) -> int:
    """The delimiter graph's type of a character: Lucene's table for Latin-1, the Unicode
    category above it; a character outside the BMP is a surrogate pair to Java (letter and digit)."""
    cp = ord(ch)
    if cp > 0xFFFF:
        return _ALPHA | _DIGIT
    cat = unicodedata.category(ch)
    if cp < 256:  # Character.isLowerCase / isUpperCase / isDigit, else a delimiter
        if cat == "Ll" or ch in "\u00aa\u00ba":  # ª º are Other_Lowercase
            return _LOWER
        if cat == "Lu":
            return _UPPER
        return _DIGIT if cat == "Nd" else _DELIM
    if cat == "Lu":
        return _UPPER
    if cat == "Ll":
        return _LOWER
    if cat in ("Lt", "Lm", "Lo", "Mn", "Me", "Mc"):
        return _ALPHA
    if cat in ("Nd", "Nl", "No"):
        return _DIGIT
    if cat == "Cs":
        return _ALPHA | _DIGIT
    return _DELIM


def _is_break(last: int, typ: int) -> bool:
    """Whether a subword ends between characters of these types (split on case change, never
    between letters and digits)."""
    if typ & last:
        return False
    if last & _UPPER and typ & _ALPHA:  # upper -> letter: Power, ABCde
        return False
    # letter <-> digit: TEA15 stays whole
    return not ((last & _ALPHA and typ & _DIGIT) or (last & _DIGIT and typ & _ALPHA))


def subwords(token: str) -> list[tuple[int, int]]:
    """The (start, end) spans of ``token``'s subwords, as WordDelimiterIterator walks them."""
    types = [char_type(c) for c in token]
    start, end = 0, len(token)
    while start < end and types[start] & _DELIM:
        start += 1
    while end > start and types[end - 1] & _DELIM:
        end -= 1
    spans: list[tuple[int, int]] = []
    i = start
    while i < end:
        while i < end and types[i] & _DELIM:
            i += 1
        if i >= end:
            break
        last, j = types[i], i + 1
        while j < end and not _is_break(last, types[j]):
            last = types[j]
            j += 1
        spans.append((i, j))
        i = j
    return spans


def delimit(token: str) -> list[str]:
    """``word_delimiter_graph`` with the search flags: the token itself when it is one subword
    (or delimiters only), else the original first, then every word and number part in order."""
    spans = subwords(token)
    if not spans or spans == [(0, len(token))]:
        return [token]
    return [token, *(token[a:b] for a, b in spans)]


def whitespace_tokens(text: str) -> list[str]:
    """Lucene's ``whitespace`` tokenizer: runs of non-whitespace, cut at 255 UTF-16 units."""
    out: list[str] = []
    cur: list[str] = []
    units = 0
    for ch in text:
        if java_whitespace(ch):
            if cur:
                out.append("".join(cur))
                cur, units = [], 0
            continue
        cur.append(ch)
        units += 2 if ord(ch) > 0xFFFF else 1
        if units >= MAX_TOKEN_UTF16:
            out.append("".join(cur))
            cur, units = [], 0
    if cur:
        out.append("".join(cur))
    return out


def _mapping(defn: Mapping[str, Any]) -> dict[int, str]:
    """A ``mapping`` char filter of one character to one (length-preserving), as a translate table."""
    table: dict[int, str] = {}
    for rule in defn.get("mappings") or []:
        left, sep, right = str(rule).partition("=>")
        left, right = left.strip(), right.strip()
        if not sep or len(left) != 1 or len(right) != 1:
            raise Unsupported(f"char filter mapping {rule!r} is not one character to one")
        table[ord(left)] = right
    return table


def _load_stemmer(language: str) -> Callable[[str], str]:
    if language != "russian":
        raise Unsupported(f"stemmer {language!r} (only the Snowball russian stemmer is reproduced)")
    from snowballstemmer.russian_stemmer import RussianStemmer

    stemmer = RussianStemmer()
    lock = threading.Lock()  # a Snowball stemmer keeps the word it works on

    def stem(word: str) -> str:
        with lock:
            return str(stemmer.stemWord(word))

    return stem


class SearchAnalyzer:
    """``ru_search`` of one analysis definition: ``tokens`` of a text, ``word_terms`` of a word."""

    def __init__(self, analysis: Mapping[str, Any]) -> None:
        analyzers = analysis.get("analyzer") or {}
        chain = analyzers.get(ANALYZER)
        if chain != _CHAIN:
            raise Unsupported(f"analyzer {ANALYZER} is {chain!r}, not {_CHAIN!r}")
        chars = analysis.get("char_filter") or {}
        filters = analysis.get("filter") or {}
        yo = chars.get("yo") or {}
        if yo.get("type") != "mapping":
            raise Unsupported(f"char filter yo is {yo!r}")
        self._yo = _mapping(yo)
        punct = chars.get("ident_punct") or {}
        if punct != {"type": "pattern_replace", "pattern": _PUNCT_JAVA, "replacement": " "}:
            raise Unsupported(f"char filter ident_punct is {punct!r}")
        self._punct = re.compile(_PUNCT_PY)
        stop = filters.get("ru_stop") or {}
        if (
            stop.get("type") != "stop"
            or stop.get("ignore_case") is not True
            or set(stop)
            - {
                "type",
                "ignore_case",
                "stopwords",
            }
        ):
            raise Unsupported(f"filter ru_stop is {stop!r}")
        self.stopwords = frozenset(java_lower(str(w)) for w in stop.get("stopwords") or [])
        if filters.get("ru_wdg_search") != _WDG_FLAGS:
            raise Unsupported(f"filter ru_wdg_search is {filters.get('ru_wdg_search')!r}")
        kw = filters.get("ru_keywords") or {}
        if kw != {"type": "keyword_marker", "keywords_pattern": _KEYWORDS_JAVA}:
            raise Unsupported(f"filter ru_keywords is {kw!r}")
        stem = filters.get("ru_stem") or {}
        if set(stem) != {"type", "language"} or stem.get("type") != "stemmer":
            raise Unsupported(f"filter ru_stem is {stem!r}")
        self._stem = _load_stemmer(str(stem.get("language")))

    @staticmethod
    def _is_keyword(term: str) -> bool:
        """``.*[0-9a-z].*`` matched whole in Java: ``.`` crosses no line terminator (NEL is the
        only one a whitespace token can hold)."""
        return "\x85" not in term and any("0" <= c <= "9" or "a" <= c <= "z" for c in term)

    def _term(self, token: str) -> str:
        low = java_lower(token)
        return low if self._is_keyword(low) else self._stem(low)

    def char_filtered(self, text: str) -> str:
        return self._punct.sub(" ", text.translate(self._yo))

    def tokens(self, text: str) -> list[str]:
        """Every token ``_analyze`` with ``ru_search`` gives for ``text``, in its order (repeats kept)."""
        out: list[str] = []
        for tok in whitespace_tokens(self.char_filtered(text)):
            if java_lower(tok) in self.stopwords:
                continue
            out.extend(self._term(part) for part in delimit(tok))
        return out

    def word_terms(self, word: str) -> tuple[str, ...]:
        """A question word's distinct terms in order (none for a stop word): what
        ``osrag.search.gate.parse_analyze`` makes of ``_analyze`` for that word."""
        return tuple(dict.fromkeys(self.tokens(word)))

    def words_terms(self, words: Sequence[str]) -> dict[str, tuple[str, ...]]:
        return {w: self.word_terms(w) for w in words}


def shipped_analysis(stemmer: str) -> dict[str, Any]:
    """The ``analysis`` settings ``osrag-analysis.json`` gives a new index with this stemmer."""
    doc = templates.load_template(
        "osrag-analysis", {"template_version": str(templates.TEMPLATE_VERSION), "stemmer": stemmer}
    )
    return dict(doc["template"]["settings"]["analysis"])


@functools.lru_cache(maxsize=4)
def search_analyzer(stemmer: str = "russian") -> SearchAnalyzer:
    """The ``ru_search`` analyzer of the shipped template (``Unsupported`` when it cannot be
    reproduced, e.g. with the ``light_russian`` stemmer)."""
    return SearchAnalyzer(shipped_analysis(stemmer))
