"""The recursive fallback for prose too long for one chunk: sentences, lines, word runs.

Russian abbreviations and initials are known, so a cut does not land after "т. е.".
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence

# --------------------------------------------------------------------------
# Sentence / line / word splitting (the recursive fallback)
# --------------------------------------------------------------------------

_WORD_RE = re.compile(r"\S+")
_SENT_END_RE = re.compile(r"[.!?…]+[»\"”’)\]]*(?=\s)")
_SPACE_RE = re.compile(r"\s+")
_DOTTED_ABBR_RE = re.compile(r"^(?:[^\W\d_]{1,3}\.)+[^\W\d_]{1,3}$")
# Multi-letter abbreviations that end with a dot but rarely end a sentence.
# Single letters ("т. е.", "и т. д.", "г.", initials "А. С.") are handled by rule.
_ABBREVIATIONS = frozenset(
    [
        "гг",
        "вв",
        "см",
        "ср",
        "стр",
        "рис",
        "табл",
        "прим",
        "напр",
        "руб",
        "коп",
        "тыс",
        "млн",
        "млрд",
        "трлн",
        "др",
        "пр",
        "им",
        "ул",
        "кв",
        "обл",
        "респ",
        "проф",
        "акад",
        "доц",
        "ст",
        "пп",
        "гл",
        "разд",
        "илл",
        "мин",
        "сек",
        "изд",
        "ред",
        "сокр",
        "англ",
        "лат",
        "тел",
        "каб",
        "корп",
        "пос",
        "эт",
        "зам",
        "нач",
        "etc",
        "e.g",
        "i.e",
        "vs",
        "mr",
        "mrs",
        "dr",
        "no",
        "fig",
    ]
)


def _is_sentence_break(seg: str, m: re.Match[str], after: int) -> bool:
    if seg[after].islower():
        return False  # "... т. е. так", "2024 г. в ..." : a sentence starts upper-case
    if m.group().rstrip('»"”’)]') != ".":
        return True
    k = m.start()
    while k > 0 and not seg[k - 1].isspace():
        k -= 1
    word = seg[k : m.start()].lstrip("([«\"'“„")
    if len(word) == 1 and word.isalpha():
        return False  # т. д. / г. / initials
    return not (word.lower() in _ABBREVIATIONS or _DOTTED_ABBR_RE.match(word))


def sentence_bounds(seg: str) -> list[tuple[int, int]]:
    """Sentence spans in ``seg`` (trimmed, local offsets)."""
    out: list[tuple[int, int]] = []
    cur = 0
    for m in _SENT_END_RE.finditer(seg):
        sp = _SPACE_RE.match(seg, m.end())
        after = sp.end() if sp else m.end()
        if after >= len(seg):
            break
        if _is_sentence_break(seg, m, after):
            out.append((cur, m.end()))
            cur = after
    out.append((cur, len(seg)))
    return [t for t in (trim_span(seg, a, b) for a, b in out) if t]


def trim_span(text: str, a: int, b: int) -> tuple[int, int] | None:
    while a < b and text[a].isspace():
        a += 1
    while b > a and text[b - 1].isspace():
        b -= 1
    return (a, b) if a < b else None


def sentence_spans(text: str, s: int, e: int) -> list[tuple[int, int]]:
    return [(s + a, s + b) for a, b in sentence_bounds(text[s:e])]


def _line_spans(text: str, s: int, e: int) -> list[tuple[int, int]]:
    out: list[tuple[int, int]] = []
    pos = s
    for raw in text[s:e].split("\n"):
        t = trim_span(text, pos, pos + len(raw))
        if t:
            out.append(t)
        pos += len(raw) + 1
    return out


def _group_words(text: str, s: int, e: int, fits: Callable[[str], bool]) -> list[tuple[int, int]]:
    """Greedy word runs that fit; a word that alone does not fit stays whole."""
    words = [(m.start(), m.end()) for m in _WORD_RE.finditer(text, s, e)]
    out: list[tuple[int, int]] = []
    i = 0
    n = len(words)

    def ok(j: int) -> bool:
        return fits(text[words[i][0] : words[j][1]])

    while i < n:
        if not ok(i):
            out.append(words[i])
            i += 1
            continue
        good, step = i, 1
        while good + step < n and ok(good + step):  # gallop, then bisect
            good += step
            step *= 2
        lo, hi = good, min(good + step, n - 1)
        while lo < hi:
            mid = (lo + hi + 1) // 2
            if ok(mid):
                lo = mid
            else:
                hi = mid - 1
        out.append((words[i][0], words[lo][1]))
        i = lo + 1
    return out


def split_units(
    text: str,
    s: int,
    e: int,
    fits: Callable[[str], bool],
    fits_tight: Callable[[str], bool],
    level: int = 0,
) -> list[tuple[int, int]]:
    """Recursive split: whole -> sentences -> lines -> word runs.

    Coarser separators are tried first because they carry more meaning; word
    runs are sized with ``fits_tight`` so that overlap still has room.
    """
    if fits(text[s:e]):
        return [(s, e)]
    if level >= 2:
        return _group_words(text, s, e, fits_tight)
    parts = sentence_spans(text, s, e) if level == 0 else _line_spans(text, s, e)
    if len(parts) <= 1:
        return split_units(text, s, e, fits, fits_tight, level + 1)
    out: list[tuple[int, int]] = []
    for a, b in parts:
        out.extend(split_units(text, a, b, fits, fits_tight, level + 1))
    return out


def group_spans(
    text: str, units: Sequence[tuple[int, int]], fits: Callable[[str], bool]
) -> list[tuple[int, int]]:
    out: list[tuple[int, int]] = []
    cur: tuple[int, int] | None = None
    for a, b in units:
        if cur is not None and fits(text[cur[0] : b]):
            cur = (cur[0], b)
            continue
        if cur is not None:
            out.append(cur)
        cur = (a, b)
    if cur is not None:
        out.append(cur)
    return out


def prefixed(header: str, body: str) -> str:
    return f"{header}\n{body}" if header else body
