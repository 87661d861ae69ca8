"""Russian query variants without an LLM: the wrong keyboard layout, Latin transliteration, typos.

A Russian user's question often reaches the search box as ``ljcnfdrf`` (typed with the English
layout on: ЙЦУКЕН keys read as QWERTY), as ``dostavka`` (transliterated) or as ``доствка`` (a typo).
The BM25 head matches none of these. This module finds such words and gives the BM25 head extra
``should`` clauses of the same request (``osrag.search.query.bm25_head``): the re-typed/transliterated
question on the same fields, and a fuzzy ``match`` of the words that look misspelt.

What counts as such a word is decided by the OpenCorpora dictionary of ``pymorphy3`` (the extra
``osrag[variants]``): a Latin word is layout-switched when its ЙЦУКЕН reading is a Russian word;
transliterated when the whole question is Latin and one of its Cyrillic readings is a Russian word;
misspelt when it is a Cyrillic word of five letters or more that the dictionary does not know.
Identifiers (letters with digits, joined Latin parts, all-caps acronyms, CamelCase), URLs, paths and
e-mail addresses are never read as anything else. An ordinary Russian question (dictionary words) gets
no variant and its request stays byte-identical; without ``pymorphy3`` there are no variants at all.
"""

from __future__ import annotations

import contextlib
import functools
import itertools
import logging
import re
import threading
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any

logger = logging.getLogger(__name__)

__all__ = [
    "Variants",
    "embedding_text",
    "find_variants",
    "layout_switch",
    "transliterations",
    "variant_clauses",
]

_EN = "qwertyuiop[]asdfghjkl;'zxcvbnm,.`" + 'QWERTYUIOP{}ASDFGHJKL:"ZXCVBNM<>~'
_RU = "йцукенгшщзхъфывапролджэячсмитьбюё" + "ЙЦУКЕНГШЩЗХЪФЫВАПРОЛДЖЭЯЧСМИТЬБЮЁ"
#: A ЙЦУКЕН key read as QWERTY, back to the letter the user meant.
LAYOUT = str.maketrans(_EN, _RU)
#: Keys that are letters in ЙЦУКЕН but punctuation in QWERTY.
_KEY_PUNCT = frozenset("[];',.`{}:\"<>~")
_CYR = re.compile(r"[А-Яа-яЁё]")
_LAT = re.compile(r"[A-Za-z]")
_CYR_WORD = re.compile(r"^[А-Яа-яЁё]+$")
#: Punctuation around a word (kept as it is): the marks of both layouts, and what ЙЦУКЕН's ``? . , ; : "``
#: come out as with QWERTY on (``& / ? $ ^ @``).
_EDGE = '?!()«»"“”…&/$^@'
_NOT_TEXT = re.compile(r"://|^www\.|@|/|\\|^\.|\.$")
_CAMEL = re.compile(r"[a-z][A-Z]")

#: Words shorter than this are never called misspelt (short words are too often abbreviations).
MIN_TYPO_LETTERS = 5
#: At most this many words of one question get the fuzzy clause.
MAX_TYPO_WORDS = 8
#: ``fuzziness`` of the typo clause: one edit in a term of 3-5 characters, two above (Lucene's AUTO).
TYPO_FUZZINESS = "AUTO"
#: The first letter of a misspelt word is taken as typed (keeps the expansion small and precise).
TYPO_PREFIX_LENGTH = 1
TYPO_MAX_EXPANSIONS = 20
#: The fuzzy clause is weighed as an exact match: a misspelt word has no exact match to add to.
TYPO_BOOST = 1.0
#: The fuzzy clause's query name: a candidate it matched holds a word one edit away from one the
#: question misspelt, which the relevance gate counts as a shared term (``gate.annotate``).
TYPO_QUERY_NAME = "osrag.typo"

# Transliteration, longest Latin groups first (ГОСТ 7.79-B, ISO 9 and everyday spellings).
_TRANSLIT_GROUPS: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("shch", ("щ",)),
    ("sch", ("щ", "сч")),
    ("zh", ("ж",)),
    ("kh", ("х",)),
    ("ts", ("ц", "тс")),
    ("tz", ("ц",)),
    ("ch", ("ч",)),
    ("sh", ("ш",)),
    ("yu", ("ю",)),
    ("ju", ("ю",)),
    ("iu", ("ю",)),
    ("ya", ("я",)),
    ("ja", ("я",)),
    ("ia", ("я",)),
    ("yo", ("ё", "йо")),
    ("jo", ("ё",)),
    ("ye", ("е",)),
    ("je", ("е",)),
    ("y'", ("ы",)),
    ("''", ("ъ",)),
    ("'", ("ь",)),
    ("a", ("а",)),
    ("b", ("б",)),
    ("c", ("ц", "к")),
    ("d", ("д",)),
    ("e", ("е", "э")),
    ("f", ("ф",)),
    ("g", ("г",)),
    ("h", ("х",)),
    ("i", ("и", "й")),
    ("j", ("й",)),
    ("k", ("к",)),
    ("l", ("л",)),
    ("m", ("м",)),
    ("n", ("н",)),
    ("o", ("о",)),
    ("p", ("п",)),
    ("q", ("к",)),
    ("r", ("р",)),
    ("s", ("с",)),
    ("t", ("т",)),
    ("u", ("у",)),
    ("v", ("в",)),
    ("w", ("в",)),
    ("x", ("кс",)),
    ("y", ("ы", "й")),
    ("z", ("з",)),
)
_TRANSLIT_WORD = re.compile(r"^[A-Za-z']+$")
#: Readings of one word tried against the dictionary, at most (and with a ь put back).
MAX_TRANSLIT_READINGS = 16
MAX_SOFT_SIGN_READINGS = 4
_VOWELS = frozenset("аеёиоуыэюя")
_SOFTENED = frozenset("бвгдзклмнпрстфхцчшщж")


# ------------------------------------------------------------------ the dictionary
class _Lexicon:
    """``pymorphy3``'s dictionary, loaded once on first use (about a second, 15 MB); None if absent."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._morph: Any = None
        self._tried = False

    def morph(self) -> Any:
        if not self._tried:
            with self._lock:
                if not self._tried:
                    try:
                        import pymorphy3

                        self._morph = pymorphy3.MorphAnalyzer()
                    except Exception as exc:  # ImportError, or dictionaries missing/broken
                        logger.warning(
                            "query variants are off: pymorphy3 is not usable (pip install 'osrag[variants]'): %s",
                            exc,
                        )
                    self._tried = True
        return self._morph


_LEXICON = _Lexicon()


def available() -> bool:
    """Whether variants can be made here (the dictionary loads)."""
    return _LEXICON.morph() is not None


@functools.lru_cache(maxsize=65536)
def is_russian_word(word: str) -> bool:
    """A word of the Russian dictionary (any form; ё and е alike)."""
    morph = _LEXICON.morph()
    if morph is None or not _CYR_WORD.match(word):
        return False
    return bool(morph.word_is_known(word.lower()))


# ------------------------------------------------------------------ word shapes
def _core(token: str) -> tuple[str, str, str]:
    """A whitespace token split into leading punctuation, the word, trailing punctuation."""
    start, end = 0, len(token)
    while start < end and token[start] in _EDGE:
        start += 1
    while end > start and token[end - 1] in _EDGE:
        end -= 1
    return token[:start], token[start:end], token[end:]


def _is_code(word: str) -> bool:
    """An identifier, URL, path or address: never read as another language or corrected."""
    if any(ch.isdigit() for ch in word) or "-" in word or "_" in word:
        return True
    if _NOT_TEXT.search(word):
        return True
    letters = [ch for ch in word if ch.isalpha()]
    if len(letters) >= 2 and all(ch.isupper() for ch in letters):
        return True  # an acronym (VK, API, LAMP)
    return bool(_CAMEL.search(word))


def layout_switch(word: str) -> str | None:
    """The word the user meant if ``word`` was typed on ЙЦУКЕН keys with QWERTY on, else None.

    ``ljcnfdrf`` -> ``доставка``, ``rkb.x`` -> ``ключ``; ``console.log``, ``TEA15`` -> None.
    """
    if not word or not _LAT.search(word) or _CYR.search(word):
        return None
    if any(not (ch.isascii() and (ch.isalpha() or ch in _KEY_PUNCT)) for ch in word):
        return None
    if any(ch.isdigit() or ch in "-_/@" for ch in word):
        return None
    letters = [ch for ch in word if ch.isalpha()]
    if len(letters) >= 2 and all(ch.isupper() for ch in letters):
        return None
    if _CAMEL.search(word):
        return None
    meant = word.translate(LAYOUT)
    if not _CYR_WORD.match(meant):
        return None
    return meant if is_russian_word(meant) else None


def _layout_letters(word: str) -> str:
    """``word``'s ЙЦУКЕН reading when it is typed on letter keys only (else ``word`` unchanged)."""
    if any(not (ch.isascii() and (ch.isalpha() or ch in _KEY_PUNCT)) for ch in word):
        return word
    letters = [ch for ch in word if ch.isalpha()]
    if (len(letters) >= 2 and all(ch.isupper() for ch in letters)) or _CAMEL.search(word):
        return word
    return word.translate(LAYOUT)


def _readings(word: str) -> list[str]:
    """Cyrillic readings of a Latin word, most usual spelling first (bounded)."""
    low = word.lower()
    parts: list[tuple[str, ...]] = []
    i = 0
    while i < len(low):
        for latin, cyr in _TRANSLIT_GROUPS:
            if low.startswith(latin, i):
                parts.append(cyr)
                i += len(latin)
                break
        else:
            return []
    # ``y``/``i`` after a vowel is usually й (``bolshoy``, ``moi`` aside): that reading first.
    for k in range(1, len(parts)):
        if parts[k] in (("ы", "й"), ("и", "й")) and parts[k - 1][0][-1:] in _VOWELS and parts[k][0] == "ы":
            parts[k] = ("й", "ы")
    return ["".join(c) for c in itertools.islice(itertools.product(*parts), MAX_TRANSLIT_READINGS)]


def _with_soft_sign(reading: str) -> list[str]:
    """``reading`` with one ь after a consonant (people leave it out: ``skolko`` for сколько)."""
    return [
        reading[:i] + "ь" + reading[i:] for i in range(2, len(reading) + 1) if reading[i - 1] in _SOFTENED
    ]


def transliterations(word: str) -> str | None:
    """The Russian word a transliterated Latin ``word`` spells (``dostavka`` -> ``доставка``), or None."""
    if not _TRANSLIT_WORD.match(word) or _is_code(word) or len(word) < 2:
        return None
    readings = _readings(word)
    for reading in readings:
        if is_russian_word(reading):
            return reading
    for reading in readings[:MAX_SOFT_SIGN_READINGS]:
        for soft in _with_soft_sign(reading):
            if is_russian_word(soft):
                return soft
    return None


def is_typo(word: str) -> bool:
    """A Cyrillic word long enough to judge that the dictionary does not know."""
    return bool(_CYR_WORD.match(word)) and len(word) >= MIN_TYPO_LETTERS and not is_russian_word(word)


# ------------------------------------------------------------------ the question
@dataclass(frozen=True)
class Variants:
    """What a question looks like: its re-typed and transliterated readings, its misspelt words."""

    layout: str | None = None  # the question with its layout-switched words re-typed
    translit: str | None = None  # the question with its transliterated words in Cyrillic
    typos: tuple[str, ...] = ()  # Cyrillic words the dictionary does not know

    def __bool__(self) -> bool:
        return bool(self.layout or self.translit or self.typos)

    @property
    def rewritten(self) -> str | None:
        """The question as the user meant it, when some of its words were re-read."""
        return self.layout or self.translit


def _words(question: str) -> list[tuple[str, str, str]]:
    return [_core(t) for t in question.split()]


_OFF = threading.Event()


@contextlib.contextmanager
def disabled() -> Iterator[None]:
    """No variants in this process inside the block: the evaluation's "without" row (not for apps)."""
    _OFF.set()
    try:
        yield
    finally:
        _OFF.clear()


def find_variants(question: str) -> Variants:
    """The variants of ``question`` (empty for an ordinary question, or without the dictionary)."""
    if _OFF.is_set() or _LEXICON.morph() is None:
        return Variants()
    return _find_variants(question)


@functools.lru_cache(maxsize=4096)
def _find_variants(question: str) -> Variants:
    words = _words(question)
    cyr_words = sum(1 for _, w, _ in words if _CYR.search(w))
    latin = [(i, w) for i, (_, w, _) in enumerate(words) if _LAT.search(w) and not _CYR.search(w)]

    # Layout: each Latin word whose ЙЦУКЕН reading is Russian; one- and two-letter words (prepositions
    # such as d -> в, r -> к) only beside a longer switched word.
    switched = {i: m for i, w in latin if not _is_code_for_layout(w) and (m := layout_switch(w))}
    if switched and all(len(words[i][1]) <= 2 for i in switched):
        switched = {}
    # When most of the Latin words are switched, the rest were likely typed the same way: names and
    # terms no dictionary knows (``Ghjyrjc`` -> Бронкос) are read both ways (``Kubernetes`` may be
    # just that); a dotted word that is no Russian word stays a code (``console.log``).
    plain = [(i, w) for i, w in latin if not _is_code_for_layout(w)]
    if switched and 2 * len(switched) >= len(plain):
        for i, w in plain:
            if i in switched or "." in w or "," in w:
                continue
            if _CYR_WORD.match(m := _layout_letters(w)):
                switched[i] = f"{w} {m}"
    layout = _rebuild(words, switched) if switched else None

    # Transliteration: only a question with no Cyrillic word at all (a Russian question's Latin words
    # are product names and terms, read as they are).
    # A word with no dictionary reading (``skolko``: the soft sign left out) is read by its usual
    # spelling and goes to the fuzzy clause with the misspelt words.
    translit = None
    guessed: list[str] = []
    if not cyr_words and latin:
        read = {i: r for i, w in latin if i not in switched and (r := _translit_token(w))}
        if any(len(words[i][1]) > 2 for i in read):
            for i, w in latin:
                core, tail = _split_tail(w)
                if i in switched or i in read or not _TRANSLIT_WORD.match(core) or _is_code(core):
                    continue
                first = _readings(core)[:1]
                if first:
                    read[i] = first[0] + tail
                    if len(first[0]) >= MIN_TYPO_LETTERS:
                        guessed.append(first[0])
            translit = _rebuild(words, read)

    # Misspelt: unknown lower-case words; a capitalised word after the first is a name (Лютера,
    # Бронкос), which a dictionary does not know either.
    typos: list[str] = list(dict.fromkeys(guessed))
    for n, (_, w, _) in enumerate(words):
        if n and w[:1].isupper():
            continue
        if is_typo(w) and w.lower() not in typos:
            typos.append(w.lower())
    return Variants(layout=layout, translit=translit, typos=tuple(typos[:MAX_TYPO_WORDS]))


def _split_tail(word: str) -> tuple[str, str]:
    """A Latin word and the sentence punctuation after it (``lampy,`` -> ``lampy``, ``,``)."""
    core = word.rstrip(",.:;")
    return core, word[len(core) :]


def _translit_token(word: str) -> str | None:
    core, tail = _split_tail(word)
    read = transliterations(core)
    return read + tail if read else None


def _is_code_for_layout(word: str) -> bool:
    # ``.`` and ``,`` are letters in ЙЦУКЕН (ю, б): a dotted word is a code only when its reading
    # is no Russian word (layout_switch decides); everything else of _is_code holds.
    if "." in word or "," in word:
        return any(ch.isdigit() for ch in word) or "-" in word or "_" in word or bool(_NOT_TEXT.search(word))
    return _is_code(word)


def _rebuild(words: list[tuple[str, str, str]], replaced: Mapping[int, str]) -> str:
    return " ".join(pre + replaced.get(i, w) + post for i, (pre, w, post) in enumerate(words))


def variant_clauses(question: str, fields: Mapping[str, float]) -> list[dict[str, Any]]:
    """Extra ``should`` clauses for the BM25 head: ``[]`` for an ordinary question.

    ``fields`` are the head's fields and boosts (the re-read question is matched the way the
    question itself is); misspelt words get one fuzzy ``match`` on the ``text`` field.
    """
    v = find_variants(question)
    if not v:
        return []
    out: list[dict[str, Any]] = []
    for text in dict.fromkeys(t for t in (v.layout, v.translit) if t):
        for name, boost in fields.items():
            clause: dict[str, Any] = {"query": text}
            if boost != 1.0:
                clause["boost"] = boost
            out.append({"match": {name: clause}})
    if v.typos:
        out.append(
            {
                "match": {
                    "text": {
                        "query": " ".join(v.typos),
                        "fuzziness": TYPO_FUZZINESS,
                        "prefix_length": TYPO_PREFIX_LENGTH,
                        "max_expansions": TYPO_MAX_EXPANSIONS,
                        "boost": TYPO_BOOST,
                        "_name": TYPO_QUERY_NAME,
                    }
                }
            }
        )
    return out


def embedding_text(question: str) -> str:
    """What the dense head embeds: the question as the user meant it when its words were re-read."""
    v = find_variants(question)
    return v.rewritten or question
