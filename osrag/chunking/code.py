"""Fenced code pieces: cut between functions/classes, then statements, then lines,
carrying the enclosing signatures so each piece still says where it lives.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence

from osrag.chunking.frame import Env, Frame, Piece
from osrag.chunking.markdown import Block, Line, content_end, content_start, indent_width
from osrag.chunking.splitting import prefixed

# ---- code ----------------------------------------------------------------

_DECORATOR_RE = re.compile(r"^@[\w.]+")
_UNIT_RE = re.compile(
    r"^(?:"
    r"(?:async\s+)?def\s+\w+"
    r"|(?:export\s+(?:default\s+)?)?(?:declare\s+)?(?:abstract\s+)?class\s+[\w$]+"
    r"|(?:export\s+(?:default\s+)?)?(?:async\s+)?function\b"
    r"|(?:export\s+)?(?:const|let|var)\s+[\w$]+\s*(?::[^=]*)?=\s*(?:async\s+)?function\b"
    r"|(?:export\s+)?(?:interface|enum)\s+[\w$]+"
    r"|func\s"
    r"|(?:pub(?:\([^)]*\))?\s+)?(?:async\s+)?(?:fn|struct|enum|trait|impl)\b"
    r")"
)
_ARROW_RE = re.compile(
    r"^(?:export\s+)?(?:const|let|var)\s+[\w$]+\s*(?::[^=]*)?=\s*(?:async\s+)?(?:\(|[\w$]+\s*=>)"
)
_CLASS_RE = re.compile(
    r"^(?:(?:export\s+(?:default\s+)?)?(?:declare\s+)?(?:abstract\s+)?class\s+[\w$]+"
    r"|(?:pub(?:\([^)]*\))?\s+)?(?:impl|trait)\b)"
)
_METHOD_RE = re.compile(
    r"^(?:(?:static|async|public|private|protected|readonly|override|get|set)\s+)*"
    r"(?!(?:if|for|while|switch|catch|return|function|else|do|try|new|await|typeof|throw)\b)"
    r"(?:constructor|[A-Za-z_$#][\w$]*)\s*(?:<[^>]*>)?\s*\([^;]*$"
)
_COMMENT_RE = re.compile(r"^(?:#(?!!)|//|/\*|\*|--\s)")
_TRAILING_COMMENT_RE = re.compile(r"\s+(?:#|//).*$")


def _is_unit_start(lines: Sequence[Line], i: int, hi: int, member: bool) -> bool:
    s = lines[i].text.strip()
    if _DECORATOR_RE.match(s) or _UNIT_RE.match(s):
        return True
    if _ARROW_RE.match(s):
        return any("=>" in lines[k].text for k in range(i, min(hi, i + 3) + 1))
    return member and bool(_METHOD_RE.match(s))


def _unit_bounds(lines: Sequence[Line], lo: int, hi: int, indent: int, member: bool) -> list[int]:
    """Lines that open a function/class at ``indent``; decorators and a
    directly preceding comment block travel with the definition."""
    nb = [i for i in range(lo, hi + 1) if lines[i].text.strip()]
    bounds: list[int] = []
    for idx, i in enumerate(nb):
        if indent_width(lines[i].text) != indent or not _is_unit_start(lines, i, hi, member):
            continue
        if idx > 0:
            p = lines[nb[idx - 1]].text
            if indent_width(p) == indent and _DECORATOR_RE.match(p.strip()):
                continue
        j = idx
        while (
            j > 0
            and nb[j - 1] == nb[j] - 1
            and indent_width(lines[nb[j - 1]].text) == indent
            and _COMMENT_RE.match(lines[nb[j - 1]].text.strip())
        ):
            j -= 1
        bounds.append(nb[j])
    return bounds


def _ranges(lines: Sequence[Line], starts: Sequence[int], hi: int) -> list[tuple[int, int]]:
    out: list[tuple[int, int]] = []
    for n, a in enumerate(starts):
        b = starts[n + 1] - 1 if n + 1 < len(starts) else hi
        while b > a and not lines[b].text.strip():
            b -= 1
        if lines[a].text.strip() or a < b:
            out.append((a, b))
    return out


_CodeFits = Callable[[int, int, tuple[str, ...]], bool]


def _signature(t: str) -> str:
    return _TRAILING_COMMENT_RE.sub("", t.rstrip())


def _pack_code(
    lines: Sequence[Line],
    fits: _CodeFits,
    units: Sequence[tuple[int, int]],
    scopes: tuple[int, ...],
    level: str,
) -> list[tuple[int, int, tuple[str, ...]]]:
    def ctx(a: int) -> tuple[str, ...]:
        return tuple(_signature(lines[k].text) for k in scopes if k < a)

    out: list[tuple[int, int, tuple[str, ...]]] = []
    cur: tuple[int, int] | None = None
    for a, b in units:
        if cur is not None and fits(cur[0], b, ctx(cur[0])):
            cur = (cur[0], b)
            continue
        if cur is not None:
            out.append((cur[0], cur[1], ctx(cur[0])))
            cur = None
        if fits(a, b, ctx(a)):
            cur = (a, b)
        elif level == "line":
            out.append((a, b, ctx(a)))  # one over-long line: kept whole
        else:
            out.extend(_split_code_unit(lines, fits, a, b, scopes, level))
    if cur is not None:
        out.append((cur[0], cur[1], ctx(cur[0])))
    return out


def _split_code_unit(
    lines: Sequence[Line],
    fits: _CodeFits,
    a: int,
    b: int,
    scopes: tuple[int, ...],
    level: str,
) -> list[tuple[int, int, tuple[str, ...]]]:
    """A unit that does not fit: a class splits at its members (the class
    line is carried into later pieces); a function at its top-level
    statements (its signature carried); whatever is left, by lines."""
    sig = next(
        (
            i
            for i in range(a, b + 1)
            if lines[i].text.strip()
            and not _DECORATOR_RE.match(lines[i].text.strip())
            and not _COMMENT_RE.match(lines[i].text.strip())
        ),
        None,
    )
    if level == "statement":
        units = [(i, i) for i in range(a, b + 1) if lines[i].text.strip()]
        return _pack_code(lines, fits, units, scopes, "line")
    if sig is not None and _CLASS_RE.match(lines[sig].text.strip()):
        base = indent_width(lines[sig].text)
        member_indent = next(
            (
                indent_width(lines[i].text)
                for i in range(sig + 1, b + 1)
                if lines[i].text.strip() and indent_width(lines[i].text) > base
            ),
            None,
        )
        if member_indent is not None:
            bounds = [x for x in _unit_bounds(lines, sig + 1, b, member_indent, True) if x > a]
            if bounds:
                units = _ranges(lines, [a, *bounds], b)
                return _pack_code(lines, fits, units, (*scopes, sig), "member")
    inner = scopes
    if sig is not None and _is_unit_start(lines, sig, b, True):
        inner = (*scopes, sig)
        if level != "statement":
            starts = _statement_starts(lines, sig, b)
            if starts:
                units = _ranges(lines, [a, *starts], b)
                return _pack_code(lines, fits, units, inner, "statement")
    units = [(i, i) for i in range(a, b + 1) if lines[i].text.strip()]
    return _pack_code(lines, fits, units, inner, "line")


_CONTINUATION_RE = re.compile(r"^(?:[)\]}]|else\b|elif\b|except\b|finally\b|catch\b|\.|&&|\|\||\+|\?|:)")


def _statement_starts(lines: Sequence[Line], sig: int, b: int) -> list[int]:
    """Top-level statements of a function body: the "logical blocks" to cut
    between before falling back to single lines."""
    body = [i for i in range(sig + 1, b + 1) if lines[i].text.strip()]
    if not body:
        return []
    base = indent_width(lines[sig].text)
    indent = next((indent_width(lines[i].text) for i in body if indent_width(lines[i].text) > base), None)
    if indent is None:
        return []
    out: list[int] = []
    for n, i in enumerate(body):
        t = lines[i].text
        if n == 0 or indent_width(t) != indent or _CONTINUATION_RE.match(t.strip()):
            continue
        prev = lines[body[n - 1]].text.rstrip()
        if prev.endswith(("(", "[", "{", ",", "\\")) and indent_width(lines[body[n - 1]].text) == indent:
            continue  # still inside a bracketed expression
        out.append(i)
    return out


def code_pieces(env: Env, frame: Frame, block: Block, intro: tuple[int, int] | None, bi: int) -> list[Piece]:
    """Whole when it fits; else at top-level def/class boundaries, each piece
    re-fenced with the original opener; lines only as the last resort."""
    text, L = env.text, env.lines
    lead = intro[0] if intro else block.start
    whole = text[lead : block.end]
    if frame.fits(whole) or block.last == block.first:
        return [Piece(whole, lead, block.end, "code", bi)]
    fence = block.fence or "```"  # indented code is re-fenced in its pieces
    opener = L[block.first].text.strip() if block.fence else fence
    lo = block.first + 1 if block.fence else block.first
    hi = block.last - 1 if block.fence and block.closed else block.last
    while lo <= hi and not L[lo].text.strip():
        lo += 1
    while hi >= lo and not L[hi].text.strip():
        hi -= 1
    if lo > hi:
        return [Piece(whole, lead, block.end, "code", bi)]
    intro_text = text[intro[0] : intro[1]] if intro else ""

    def render(a: int, b: int, ctx: tuple[str, ...]) -> str:
        code = text[L[a].start : content_end(L[b])]
        return prefixed(intro_text, "\n".join((opener, *ctx, code, fence)))

    def fits(a: int, b: int, ctx: tuple[str, ...]) -> bool:
        return frame.fits(render(a, b, ctx))

    indent = min(indent_width(L[i].text) for i in range(lo, hi + 1) if L[i].text.strip())
    units = _ranges(L, [lo, *[x for x in _unit_bounds(L, lo, hi, indent, False) if x > lo]], hi)
    out: list[Piece] = []
    for a, b, ctx in _pack_code(L, fits, units, (), "unit"):
        start = lead if a == lo else content_start(L[a])
        end = block.end if b == hi else content_end(L[b])
        out.append(Piece(render(a, b, ctx), start, end, "code", bi))
    return out
