"""Remembered reads of included files: a snippet included by hundreds of pages is read once.

Reading an included text (parsing it, rendering its directives, reading what it includes in turn)
is a pure function of the text, its key, the known variables, how deep it sits and whether the
files it includes are already on the include stack -- as long as it neither counts nor refers to
counters (``ReadContext.stateful``) and meets no include cycle (a cycle's note names the whole
stack). Such a read is remembered with what it did besides its text: its notes, and the include
calls it made. On reuse the calls are made again, so the caller's loader still records every file
the document reads (``osrag.ingest.stamps`` watches them), and their answers are compared with the
remembered ones: a nested file whose text changed since makes the entry stale, never the result.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass

from osrag.chunking.directive import IncludeLoader, ReadContext

#: ``read(text, ctx, key, stack)``: the reader, for an included file's text.
Reader = Callable[[str, ReadContext, str, "tuple[str, ...]"], str]

#: Remembered reads (kept by recent use): at most this many, holding at most this many characters
#: of included text and result together (the oldest go first); a longer included text is never kept.
MAX_ENTRIES = 256
MAX_TOTAL_CHARS = 8_000_000
MAX_CHARS = 1_000_000


@dataclass(frozen=True)
class _Call:
    """One include call a read made, and what it answered (hashed: reuse checks it is unchanged)."""

    target: str
    including: str
    answer: int


@dataclass(frozen=True)
class _Entry:
    text: str
    notes: tuple[str, ...]
    calls: tuple[_Call, ...]
    met: frozenset[str]  # the keys of the files it included (none may be on the stack to reuse it)


_Key = tuple[str, str, tuple[tuple[str, str], ...], bool, int]
_MEMO: OrderedDict[_Key, _Entry] = OrderedDict()
_LOCK = threading.Lock()
_chars = 0  # characters held by _MEMO (keys' texts and results)


def _answer(got: tuple[str, str] | None) -> int:
    return hash(got)


def read_included(read: Reader, text: str, ctx: ReadContext, key: str, stack: tuple[str, ...]) -> str:
    """``read(text, ctx, key, stack)`` for an included file, remembered when that is exact."""
    if len(text) > MAX_CHARS:
        return read(text, ctx, key, stack)
    mkey: _Key = (key, text, tuple(sorted(ctx.variables.items())), ctx.include is None, len(stack))
    with _LOCK:
        entry = _MEMO.get(mkey)
        if entry is not None:
            _MEMO.move_to_end(mkey)
    if entry is not None and entry.met.isdisjoint(stack) and _replayed(entry, ctx):
        for note in entry.notes:
            ctx.note(note)
        return entry.text
    return _read_and_remember(read, text, ctx, key, stack, mkey)


def _replayed(entry: _Entry, ctx: ReadContext) -> bool:
    """Make the entry's include calls again; whether every answer is the remembered one."""
    include = ctx.include
    if include is None:
        return not entry.calls
    return all(_answer(include(c.target, c.including)) == c.answer for c in entry.calls)


def _read_and_remember(
    read: Reader, text: str, ctx: ReadContext, key: str, stack: tuple[str, ...], mkey: _Key
) -> str:
    outer_notes, outer_include, stateful = ctx.notes, ctx.include, ctx.stateful
    calls: list[_Call] = []
    met: set[str] = set()
    ctx.notes = []
    if outer_include is not None:
        ctx.include = _logged(outer_include, calls, met)
    try:
        result = read(text, ctx, key, stack)
    finally:
        notes, ctx.notes, ctx.include = ctx.notes, outer_notes, outer_include
        for note in notes:
            ctx.note(note)
    pure = ctx.stateful == stateful and not any("include cycle" in n for n in notes)
    if pure:
        _remember(mkey, _Entry(result, tuple(notes), tuple(calls), frozenset(met)))
    return result


def _size(key: _Key, entry: _Entry) -> int:
    return len(key[1]) + len(entry.text)


def _remember(mkey: _Key, entry: _Entry) -> None:
    global _chars
    with _LOCK:
        old = _MEMO.pop(mkey, None)
        if old is not None:
            _chars -= _size(mkey, old)
        _MEMO[mkey] = entry
        _chars += _size(mkey, entry)
        while _MEMO and (len(_MEMO) > MAX_ENTRIES or _chars > MAX_TOTAL_CHARS):
            k, e = _MEMO.popitem(last=False)
            _chars -= _size(k, e)


def _logged(include: IncludeLoader, calls: list[_Call], met: set[str]) -> IncludeLoader:
    def logged(target: str, including: str) -> tuple[str, str] | None:
        got = include(target, including)
        calls.append(_Call(target, including, _answer(got)))
        if got is not None:
            met.add(got[0])
        return got

    return logged


def forget() -> None:
    """Drop every remembered read (tests; a long-lived process that wants the memory back)."""
    global _chars
    with _LOCK:
        _MEMO.clear()
        _chars = 0
