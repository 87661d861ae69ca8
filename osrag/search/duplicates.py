"""Selection's duplicate test (``osrag.search.budget``, rule 3), worked out for a whole candidate list at once.

Which pairs of candidates are near duplicates -- word 3-shingle containment ``>= dup_overlap``
(``budget.shingle_overlap``) -- is the same question for every pair, so it is answered once per ``select`` call with array operations,
rather than pair by pair as the walk meets them (the per-pair form spent ~2.5 ms of a search's
~10 ms of client time on 40 candidates, most of it making word strings). The answers are the
per-pair form's exactly:

- **Words** are the same ``\\w+`` runs of the casefolded text with ё folded to е, found on the
  text's code points with two tables (``_tables``: ``\\w`` is ``str.isalnum()`` or ``_``, which a
  unit test checks for every code point), so no string is made per word. Equal words get one id by
  a polynomial hash whose every repeat is then compared character by character with the word it
  is taken for; a text the tables cannot fold 1:1 (ß, astral letters), a lone surrogate, or a hash
  that would join two different words, sends the whole list through ``words`` instead.
- **Shingles** are triples of word ids (exact: no hash), per text without repeats; the counts each
  pair shares come from one sort of all of them. A pair with a text of one or two words uses
  shorter shingles, as ``shingle_overlap`` does, from the same ids.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Sequence

import numpy as np

__all__ = ["duplicate_pairs", "words"]

_WORD = re.compile(r"\w+")

_BMP = 0x10000
#: Base of the words' polynomial hash (odd, so invertible modulo 2**64).
_P = 0x9E3779B97F4A7C15
_P_INV = pow(_P, -1, 2**64)


@functools.cache
def _tables() -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """For every BMP code point: its casefold with ё as е (when that is one code point), whether
    that fold is one code point, and whether it is a ``\\w`` character."""
    fold = np.arange(_BMP, dtype=np.uint32)
    single = np.ones(_BMP, dtype=bool)
    word = np.zeros(_BMP, dtype=bool)
    for c in range(_BMP):
        ch = chr(c)
        f = ch.casefold().replace("ё", "е")
        if len(f) == 1:
            fold[c] = ord(f)
        else:
            single[c] = False
        word[c] = ch.isalnum() or ch == "_"
    return fold, single, word


class _Powers:
    """P**k and P**-k modulo 2**64 for k below a length that grows as texts need it."""

    def __init__(self) -> None:
        self.up = np.ones(0, dtype=np.uint64)
        self.down = np.ones(0, dtype=np.uint64)

    def upto(self, n: int) -> tuple[np.ndarray, np.ndarray]:
        up, down = self.up, self.down  # one read: another thread may swap them meanwhile
        if up.size < n:
            size = max(n, 2 * up.size, 4096)
            up, down = _doubled(_P, size), _doubled(_P_INV, size)
            self.up, self.down = up, down
        return up, down


def _doubled(base: int, size: int) -> np.ndarray:
    """base**k modulo 2**64 for k < size: each block is the one before times base**len (the
    array product wraps modulo 2**64, which is the arithmetic meant)."""
    out = np.ones(1, dtype=np.uint64)
    while out.size < size:
        step = np.uint64(pow(base, out.size, 2**64))
        out = np.concatenate((out, out * step))
    return out[:size]


_POWERS = _Powers()


def _code_points(texts: Sequence[str]) -> tuple[np.ndarray, np.ndarray] | None:
    """The folded code points of the texts joined by a space, and where each text starts;
    None when a text is not valid Unicode."""
    fold, single, _ = _tables()
    try:
        raw = np.frombuffer(" ".join(texts).encode("utf-32-le"), dtype=np.uint32)
    except UnicodeEncodeError:
        return None
    lengths = [len(t) for t in texts]
    if raw.size and (int(raw.max()) >= _BMP or not single[raw].all()):
        folded = [t.casefold().replace("ё", "е") for t in texts]
        codes = np.frombuffer(" ".join(folded).encode("utf-32-le"), dtype=np.uint32)
        lengths = [len(t) for t in folded]
    else:
        codes = fold[raw]
    starts = np.cumsum([0, *[n + 1 for n in lengths[:-1]]], dtype=np.int64)
    return codes, starts


def _word_mask(codes: np.ndarray) -> np.ndarray:
    _, _, word = _tables()
    if not codes.size or int(codes.max()) < _BMP:
        return word[codes]
    bmp = codes < _BMP
    mask = np.zeros(codes.size, dtype=bool)
    mask[bmp] = word[codes[bmp]]
    for u in np.unique(codes[~bmp]).tolist():
        if chr(u).isalnum():
            mask[codes == u] = True
    return mask


def _fast_words(texts: Sequence[str]) -> tuple[np.ndarray, np.ndarray] | None:
    """(word ids, the text of each word) in text order, or None when only the per-text
    tokenisation can be trusted (see the module docstring)."""
    got = _code_points(texts)
    if got is None:
        return None
    codes, text_starts = got
    edges = np.diff(_word_mask(codes).view(np.int8), prepend=np.int8(0), append=np.int8(0))
    starts = np.flatnonzero(edges == 1)
    ends = np.flatnonzero(edges == -1)
    if not starts.size:
        return np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.int64)
    up, down = _POWERS.upto(codes.size)
    prefix = np.zeros(codes.size + 1, dtype=np.uint64)
    np.multiply(codes, up[: codes.size], out=prefix[1:])
    np.cumsum(prefix, out=prefix)
    hashes = (prefix[ends] - prefix[starts]) * down[starts]  # wraps modulo 2**64, as meant
    # Ids by sorting (np.unique's hash table is slower at these sizes): equal hashes, one id.
    order = np.argsort(hashes, kind="stable")
    ordered = hashes[order]
    new = np.empty(ordered.size, dtype=bool)
    new[0] = True
    np.not_equal(ordered[1:], ordered[:-1], out=new[1:])
    ids = np.empty(ordered.size, dtype=np.int64)
    ids[order] = np.cumsum(new) - 1
    # Every word that shares a hash with an earlier one must be that word, character for character.
    rep = order[new][ids]
    again = np.flatnonzero(rep != np.arange(rep.size))
    if again.size:
        lens = ends - starts
        n_again, n_rep = lens[again], lens[rep[again]]
        if not np.array_equal(n_again, n_rep):
            return None
        offs = np.arange(int(n_again.sum())) - np.repeat(np.cumsum(n_again) - n_again, n_again)
        a = np.repeat(starts[again], n_again) + offs
        b = np.repeat(starts[rep[again]], n_again) + offs
        if not np.array_equal(codes[a], codes[b]):
            return None
    owner = np.searchsorted(text_starts, starts, side="right") - 1
    return ids, owner


def _slow_words(texts: Sequence[str]) -> tuple[np.ndarray, np.ndarray]:
    """(word ids, the text of each word) from ``words`` of each text: exact for any text."""
    vocab: dict[str, int] = {}
    ids: list[int] = []
    owner: list[int] = []
    for t, text in enumerate(texts):
        ws = words(text)
        ids.extend(vocab.setdefault(w, len(vocab)) for w in ws)
        owner.extend([t] * len(ws))
    return np.asarray(ids, dtype=np.int64), np.asarray(owner, dtype=np.int64)


def _kgrams(ids: Sequence[int], n: int) -> set[tuple[int, ...]]:
    """``budget._shingles`` on word ids (a text of at most ``n`` words is one shingle)."""
    if len(ids) <= n:
        return {tuple(ids)}
    return set(zip(*(ids[k:] for k in range(n))))


def _text_pairs(ids: np.ndarray, owner: np.ndarray, n: int, overlap: float) -> set[tuple[int, int]]:
    """(i, j), i < j, whose shingle containment reaches ``overlap``."""
    out: set[tuple[int, int]] = set()
    counts = np.bincount(owner, minlength=n)
    vocab = int(ids.max()) + 1 if ids.size else 1
    obits = max(n - 1, 1).bit_length()
    if vocab**3 << obits >= 2**63:
        raise OverflowError("too many distinct words to pack three of them in a shingle")
    same = owner[:-2] == owner[2:]  # the three words of a window are of one text
    keys = (ids[:-2][same] * vocab + ids[1:-1][same]) * vocab + ids[2:][same]
    packed = np.sort((keys << obits) | owner[:-2][same])
    if packed.size:  # each text's shingles once, in shingle order
        packed = packed[np.concatenate(([True], packed[1:] != packed[:-1]))]
    shingle, text = packed >> obits, packed & ((1 << obits) - 1)
    sizes = np.bincount(text, minlength=n).tolist()
    # Pairs of texts that share a shingle: entries ``d`` apart in the sorted list with the same
    # shingle (texts ascending within one), for every ``d`` up to the most texts one is in.
    codes: list[np.ndarray] = []
    d = 1
    while d < packed.size:
        same_d = shingle[d:] == shingle[:-d]
        if not same_d.any():
            break
        codes.append(text[:-d][same_d] * n + text[d:][same_d])
        d += 1
    if codes:
        shared = np.bincount(np.concatenate(codes), minlength=n * n)
        for code in np.flatnonzero(shared).tolist():
            i, j = divmod(code, n)
            if int(shared[code]) / min(sizes[i], sizes[j]) >= overlap:
                out.add((i, j))
    # A text of one or two words is compared with shorter shingles (``budget._containment``).
    short = [t for t in range(n) if 0 < counts[t] < 3]
    if short:
        bounds = np.concatenate(([0], np.cumsum(counts))).tolist()
        tw = [ids[bounds[t] : bounds[t + 1]].tolist() for t in range(n)]
        for s in short:
            for t in range(n):
                if t == s or not tw[t] or (counts[t] < 3 and t < s):
                    continue
                k = min(3, len(tw[s]), len(tw[t]))
                a, b = _kgrams(tw[s], k), _kgrams(tw[t], k)
                if len(a & b) / min(len(a), len(b)) >= overlap:
                    out.add((min(s, t), max(s, t)))
    return out


def words(text: str) -> list[str]:
    """Lowercased words with ё folded to е, so spelling variants do not hide a repeat: the
    per-text tokenisation (``budget.shingle_overlap``'s), used when the tables cannot be."""
    return _WORD.findall(text.casefold().replace("ё", "е"))


def duplicate_pairs(texts: Sequence[str], dup_overlap: float) -> dict[int, set[int]]:
    """Each candidate's near duplicates among the others (a symmetric relation; absent: none)."""
    n = len(texts)
    got = _fast_words(texts)
    ids, owner = got if got is not None else _slow_words(texts)
    try:
        pairs = _text_pairs(ids, owner, n, dup_overlap)
    except OverflowError:  # a vocabulary past ~200K words: packed shingles would not fit 63 bits
        pairs = _text_pairs_slow(texts, dup_overlap)
    out: dict[int, set[int]] = {}
    for i, j in pairs:
        out.setdefault(i, set()).add(j)
        out.setdefault(j, set()).add(i)
    return out


def _text_pairs_slow(texts: Sequence[str], overlap: float) -> set[tuple[int, int]]:
    """The per-pair containment for every pair (lists too large for packed shingles)."""
    per_text = [words(t) for t in texts]
    shingles: dict[tuple[int, int], set[tuple[str, ...]]] = {}

    def sh(t: int, k: int) -> set[tuple[str, ...]]:
        if (t, k) not in shingles:
            ws = per_text[t]
            shingles[(t, k)] = {tuple(ws)} if len(ws) <= k else set(zip(*(ws[x:] for x in range(k))))
        return shingles[(t, k)]

    out: set[tuple[int, int]] = set()
    for i in range(len(texts)):
        for j in range(i + 1, len(texts)):
            if per_text[i] and per_text[j]:
                k = min(3, len(per_text[i]), len(per_text[j]))
                a, b = sh(i, k), sh(j, k)
                if len(a & b) / min(len(a), len(b)) >= overlap:
                    out.add((i, j))
    return out
