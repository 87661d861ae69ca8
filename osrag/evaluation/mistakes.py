"""Broken copies of the dev sets' questions (pure: text in, text out; no cluster, no model).

Ways a Russian question reaches a search box broken:

* ``layout`` -- typed with the QWERTY layout on: every Cyrillic letter becomes the Latin key it
  sits on (``доставка`` -> ``ljcnfdrf``), and ЙЦУКЕН's ``? . , ; : "`` become ``& / ? $ ^ @``;
  Latin words and identifiers are typed as they are;
* ``translit`` -- everyday Latin transliteration (``щ`` -> ``shch``, ``ж`` -> ``zh``, ``ь`` and
  ``ъ`` dropped as most people drop them: ``skolko``);
* ``typos`` -- one or two Cyrillic words of five letters or more get one edit each (a neighbouring
  ЙЦУКЕН key, a dropped, doubled or swapped letter; never the first letter), seeded per question;
* ``task`` -- the question inside a long task statement (50-90 words) with a line of code, as a
  programming tutorial's exercises read: generic sentences before it, a code sample after it
  (``x = solve(data); print(x)``), seeded per question;
* ``mistyped`` -- *every* Cyrillic word of five letters or more gets one swap of two neighbouring
  letters or one dropped letter (never the first), seeded per word, so a word is mistyped the same
  way wherever it occurs (``osrag eval --perturb mistyped``).

``osrag.evaluation.perturb`` measures the first four; ``osrag eval --perturb KIND`` scores a copy of
every set with its questions broken beside the clean set, on the same index.
"""

from __future__ import annotations

import dataclasses
import hashlib
import random
import re

from osrag.evaluation.datasets import EvalSet

_RU = "йцукенгшщзхъфывапролджэячсмитьбюё" + "ЙЦУКЕНГШЩЗХЪФЫВАПРОЛДЖЭЯЧСМИТЬБЮЁ"
_EN = "qwertyuiop[]asdfghjkl;'zxcvbnm,.`" + 'QWERTYUIOP{}ASDFGHJKL:"ZXCVBNM<>~'
#: ЙЦУКЕН text typed with QWERTY on: letters, and the punctuation that sits on other keys.
TO_QWERTY = str.maketrans(_RU + '?.,;:"№', _EN + "&/?$^@#")
_TRANSLIT = {
    "а": "a", "б": "b", "в": "v", "г": "g", "д": "d", "е": "e", "ё": "yo", "ж": "zh", "з": "z",
    "и": "i", "й": "y", "к": "k", "л": "l", "м": "m", "н": "n", "о": "o", "п": "p", "р": "r",
    "с": "s", "т": "t", "у": "u", "ф": "f", "х": "kh", "ц": "ts", "ч": "ch", "ш": "sh", "щ": "shch",
    "ъ": "", "ы": "y", "ь": "", "э": "e", "ю": "yu", "я": "ya",
}  # fmt: skip
#: Neighbouring keys on ЙЦУКЕН (same row), for substitution typos.
_ROWS = ("йцукенгшщзхъ", "фывапролджэ", "ячсмитьбю")
KINDS = ("clean", "layout", "translit", "typos", "mistyped", "task")
MIN_TYPO_LETTERS = 5


def layout(question: str) -> str:
    return question.translate(TO_QWERTY)


def translit(question: str) -> str:
    out = []
    for ch in question:
        low = ch.lower()
        if low in _TRANSLIT:
            lat = _TRANSLIT[low]
            out.append(lat.capitalize() if ch != low and lat else lat)
        else:
            out.append(ch)
    return "".join(out)


def _neighbour(ch: str, rng: random.Random) -> str:
    for row in _ROWS:
        i = row.find(ch.lower())
        if i >= 0:
            near = [row[j] for j in (i - 1, i + 1) if 0 <= j < len(row)]
            return rng.choice(near)
    return ch


def _edit(word: str, rng: random.Random) -> str:
    i = rng.randrange(1, len(word))
    kind = rng.choice(("sub", "drop", "double", "swap"))
    if kind == "sub":
        return word[:i] + _neighbour(word[i], rng) + word[i + 1 :]
    if kind == "drop":
        return word[:i] + word[i + 1 :]
    if kind == "double":
        return word[:i] + word[i] + word[i:]
    if i == len(word) - 1:
        i -= 1
    return word[:i] + word[i + 1] + word[i] + word[i + 2 :]


def typos(question: str, rng: random.Random) -> str:
    """One or two Cyrillic words of five letters or more, one edit each (unchanged if none)."""
    tokens = question.split(" ")
    eligible = [
        i
        for i, t in enumerate(tokens)
        if len(t) >= MIN_TYPO_LETTERS and all("а" <= c.lower() <= "я" or c.lower() == "ё" for c in t)
    ]
    if not eligible:
        return question
    for i in rng.sample(eligible, min(len(eligible), rng.choice((1, 2)))):
        tokens[i] = _edit(tokens[i], rng)
    return " ".join(tokens)


def perturb(question: str, kind: str, seed: int, qid: str) -> str:
    """``question`` broken the ``kind`` way; deterministic for (seed, question id)."""
    if kind == "clean":
        return question
    if kind == "layout":
        return layout(question)
    if kind == "translit":
        return translit(question)
    if kind == "typos":
        digest = hashlib.sha256(f"{seed}:{qid}".encode()).digest()
        return typos(question, random.Random(int.from_bytes(digest[:8], "big")))
    if kind == "mistyped":
        return mistyped(question, seed)
    if kind == "task":
        digest = hashlib.sha256(f"{seed}:{qid}:task".encode()).digest()
        return task(question, random.Random(int.from_bytes(digest[:8], "big")))
    raise ValueError(f"unknown perturbation {kind!r}; known: {', '.join(KINDS)}")


_CYR_WORD = re.compile(r"[А-Яа-яЁё]+")


def _word_rng(seed: int, word: str) -> random.Random:
    digest = hashlib.sha256(f"{seed}:{word.lower()}".encode()).digest()
    return random.Random(int.from_bytes(digest[:8], "big"))


def mistype_word(word: str, rng: random.Random) -> str:
    """One swap of two neighbouring letters or one dropped letter, never the first letter."""
    i = rng.randrange(1, len(word))
    if rng.random() < 0.5:
        return word[:i] + word[i + 1 :]
    if i == len(word) - 1:
        i -= 1
    return word[:i] + word[i + 1] + word[i] + word[i + 2 :]


def mistyped(question: str, seed: int) -> str:
    """Every Cyrillic word of ``MIN_TYPO_LETTERS`` letters or more mistyped once (seeded per word)."""

    def one(m: re.Match[str]) -> str:
        w = m.group(0)
        return mistype_word(w, _word_rng(seed, w)) if len(w) >= MIN_TYPO_LETTERS else w

    return _CYR_WORD.sub(one, question)


def perturbed(evalset: EvalSet, kind: str, seed: int, rename: bool = False) -> EvalSet:
    """A copy of the set whose questions are broken the ``kind`` way (judgements unchanged).

    ``rename``: the copy is named ``{name}~{kind}`` (a set of its own in a report) and searches the
    clean set's index (``index_name``), so nothing is ingested twice.
    """
    clone = dataclasses.replace(evalset)
    clone.queries = [dataclasses.replace(q, text=perturb(q.text, kind, seed, q.qid)) for q in evalset.queries]
    if rename:
        clone.index_name = evalset.index_name or evalset.name
        clone.name = f"{evalset.name}~{kind}"
    return clone


#: Sentences a task statement wraps its question in (generic: they name no subject of any set).
_TASK_OPENINGS = (
    "Я разбираюсь с заданием из учебного курса и не могу понять, что именно от меня требуется.",
    "Ниже описана задача, над которой я сижу уже второй день, и решение пока не получается.",
    "Преподаватель дал упражнение, в котором нужно сначала ответить на вопрос, а потом написать код.",
    "Подскажите, пожалуйста, как правильно подойти к следующей задаче, я запутался в условии.",
)
_TASK_MIDDLES = (
    "Условие такое, и ответ нужен точный, без общих слов.",
    "Сначала нужно найти ответ в материалах курса, затем проверить его на примере.",
    "Результат нужно вывести на экран в понятном виде, а промежуточные шаги объяснить.",
    "Важно не только получить ответ, но и понять, откуда он берётся.",
)
_TASK_CODE = (
    "Пример заготовки: data = load(); answer = solve(data); print(answer)",
    "Мой код сейчас выглядит так: result = find(items, key=None); print(result)",
    "Проверка: assert check(answer) == True; иначе выводится ошибка",
)


def task(question: str, rng: random.Random) -> str:
    """``question`` inside a long task statement with a line of code (generic words around it)."""
    return " ".join(
        [
            rng.choice(_TASK_OPENINGS),
            rng.choice(_TASK_MIDDLES),
            f"Вопрос: {question}",
            rng.choice(_TASK_MIDDLES),
            rng.choice(_TASK_CODE),
        ]
    )
