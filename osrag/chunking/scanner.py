"""The directive scanner: one prose line -> literal text and directives, and the brace dialect.

Code spans and backslash escapes stay text; ``{…}`` is read here (the brace directives of a docs
portal: notes, tabs, cuts, includes, conditions, variables, links, headings, captions, counters;
YFM variables ``{{ x }}``; MDX comments), and handed to ``osrag.chunking.tags`` for ``{% … %}``,
Hugo shortcodes and ``<tags>``. Also the code-span helpers the renderer uses to drop HTML comments
outside inline code.
"""

from __future__ import annotations

import re

from osrag.chunking.directive import LABELS, Directive, ReadContext, condition, variable
from osrag.chunking.tags import bb_line, html_tag, hugo, yfm

_IDENT = re.compile(r"[A-Za-z][\w-]*")
_YFM_VAR = re.compile(r"\{\{\s*([\w.-]+)\s*\}\}")
_SPECIAL = re.compile(r"[`\\{<]")


def scan_line(line: str, ctx: ReadContext) -> list[str | Directive]:
    """Literal text and directives of one prose line; code spans are text, untouched."""
    if line.lstrip().startswith("["):
        bb = bb_line(line, ctx)
        if bb is not None:
            return bb
    items: list[str | Directive] = []
    buf: list[str] = []
    p, n = 0, len(line)
    while p < n:
        m = _SPECIAL.search(line, p)
        if m is None:
            buf.append(line[p:])
            break
        if m.start() > p:
            buf.append(line[p : m.start()])
            p = m.start()
        ch = line[p]
        if ch == "`":
            end = code_span_end(line, p)
            buf.append(line[p:end])
            p = end
            continue
        if ch == "\\" and p + 1 < n:
            buf.append(line[p : p + 2])
            p += 2
            continue
        got: tuple[int, Directive] | None = None
        if ch == "{":
            got = _brace(line, p, ctx)
        elif ch == "<":
            got = html_tag(line, p)
        if got is None:
            buf.append(ch)
            p += 1
            continue
        end, d = got
        if buf:
            items.append("".join(buf))
            buf = []
        items.append(d)
        p = end
    if buf:
        items.append("".join(buf))
    return items


def directive_text(s: str, ctx: ReadContext) -> str:
    """Directives inside a directive's argument (a caption's counter, a link text's variable)."""
    return "".join(it if isinstance(it, str) else it.text for it in scan_line(s, ctx)).strip()


def _brace(s: str, p: int, ctx: ReadContext) -> tuple[int, Directive] | None:
    if s.startswith("{%", p):
        end = s.find("%}", p + 2)
        return None if end < 0 else (end + 2, yfm(s[p + 2 : end].strip(), ctx))
    if s.startswith("{{<", p) or s.startswith("{{%", p):
        close = ">}}" if s[p + 2] == "<" else "%}}"
        end = s.find(close, p + 3)
        return None if end < 0 else (end + 3, hugo(s[p + 3 : end].strip(), ctx))
    if s.startswith("{{", p):
        m = _YFM_VAR.match(s, p)
        return None if m is None else (m.end(), Directive("single", "var", variable(m.group(1), ctx)))
    if s.startswith("{/*", p):  # an MDX comment
        end = s.find("*/}", p)
        return None if end < 0 else (end + 3, Directive("single", "comment"))
    q = p + 1
    if s.startswith("#", q):  # {#anchor}: kept on a heading line, where the chunker reads it
        end = s.find("}", q)
        if end < 0 or " " in s[q:end]:
            return None
        heading = s[:p].lstrip().startswith("#")
        return end + 1, Directive("single", "anchor", s[p : end + 1] if heading else "")
    closing = s.startswith("/", q)
    m = _IDENT.match(s, q + closing)
    if m is None:
        return None
    name, q = m.group(), m.end()
    if closing:
        return (q + 1, Directive("close", f"b:{name}")) if s.startswith("}", q) else None
    arg = params = ""
    if s.startswith(":", q):
        m2 = re.compile(r":([\w-]+)\}").match(s, q)
        if m2 is None or name != "note":
            return None
        return m2.end(), Directive(
            "open", "b:note", LABELS.get(m2.group(1).lower(), "Примечание"), label=True
        )
    if s.startswith("(", q):
        e = _balanced(s, q, ")")
        if e < 0:
            e = _loose_paren_end(s, q)
        if e < 0:
            return None
        arg, q = s[q + 1 : e - 1], e
    if s.startswith("[", q):
        e = _balanced(s, q, "]")
        if e < 0:
            return None
        params, q = s[q + 1 : e - 1], e
    if not s.startswith("}", q):
        return _loose_link(s, p, name)
    if not (arg or params) and name not in ("tabs", "swagger", "toc", "cut", "note", "anchor"):
        return None
    d = _brace_dir(name, arg, _params(params), ctx, bare=not (arg or params))
    return (q + 1, d) if d is not None else None


def _brace_dir(name: str, arg: str, params: dict[str, str], ctx: ReadContext, bare: bool) -> Directive | None:
    b = f"b:{name}"
    if name == "note":
        return Directive("open", b, "Примечание", label=True)
    if name in ("tabs", "swagger", "toc", "anchor"):
        return Directive("open" if name == "tabs" else "single", b)
    if name in ("tab", "cut"):
        return Directive("open", b, directive_text(arg, ctx), block=True)
    if name in ("ifdef", "ifndef"):
        cond = condition(arg, ctx)
        hide = cond is not None and cond == (name == "ifndef")
        return Directive(
            "open", b, hide=hide, cond="" if cond is not None else f"{name}:{arg.replace(' ', '')}"
        )
    if name == "includetag":
        return Directive("open", b, tag=arg.strip())
    if name == "include":
        tags = params.get("tags")
        return Directive(
            "single",
            b,
            include=(arg.strip(), frozenset(t.strip() for t in tags.split(",")) if tags else None),
        )
    if name == "var":
        return Directive("single", b, variable(arg.strip(), ctx))
    if name == "linkto":
        return Directive("single", b, directive_text(params.get("text", ""), ctx))
    if name == "heading":
        anchor = params.get("id", "").strip()
        title = directive_text(arg, ctx)
        return Directive("single", b, f"{title} {{#{anchor}}}" if anchor else title)
    if name == "caption":
        return Directive("open", b, directive_text(arg, ctx))
    if name == "counter":
        ctx.stateful += 1
        ctx.counters[arg] = ctx.counters.get(arg, 0) + 1
        number = str(ctx.counters[arg])
        if params.get("id"):
            ctx.numbers[params["id"]] = number
        return Directive("single", b, number)
    if name == "const":
        ctx.stateful += 1
        return Directive("single", b, ctx.numbers.get(arg.strip(), ""))
    if name == "params" or bare:
        return Directive("single", b)
    if "text" in params:  # an unknown link-like directive: its text
        return Directive("single", b, directive_text(params["text"], ctx))
    return None


def _params(raw: str) -> dict[str, str]:
    """``text=Общими сетями`` / ``id=x;align=right`` -> dict (values may hold directives)."""
    out: dict[str, str] = {}
    depth = 0
    cur: list[str] = []
    items: list[str] = []
    for ch in raw:
        if ch in "({[":
            depth += 1
        elif ch in ")}]":
            depth -= 1
        if ch == ";" and depth == 0:
            items.append("".join(cur))
            cur = []
        else:
            cur.append(ch)
    items.append("".join(cur))
    for item in items:
        k, sep, v = item.partition("=")
        if sep:
            out[k.strip()] = v.strip()
    return out


def _balanced(s: str, p: int, close: str) -> int:
    """Index after the bracket closing the one at ``p``; -1 if the line ends first."""
    pairs = {"(": ")", "[": "]", "{": "}"}
    want = [close]
    q = p + 1
    while q < len(s):
        ch = s[q]
        if ch in pairs:
            want.append(pairs[ch])
        elif want and ch == want[-1]:
            want.pop()
            if not want:
                return q + 1
        q += 1
    return -1


def _loose_link(s: str, p: int, name: str) -> tuple[int, Directive] | None:
    """A link directive with its brackets out of order (``{linkto(#x[text=Слова]})``): its text."""
    end = s.find("}", p)
    if name == "linkto" and (end < 0 or "text=" not in s[p:end]):  # never closed: the target goes
        close = s.find(")", p)
        return (close + 1, Directive("single", f"b:{name}")) if close > 0 else None
    if name != "linkto":
        return None
    text = s[s.index("text=", p) + 5 : end].split("]", 1)[0]
    return end + 1 + s.startswith(")", end + 1), Directive("single", f"b:{name}", text.strip())


def _loose_paren_end(s: str, q: int) -> int:
    """For an argument with a stray bracket (``{heading(A (b)[id=x]}``): after the first ``)`` that
    a ``}`` or a ``[…]}`` follows; -1 when there is none."""
    e = s.find(")", q)
    while e >= 0:
        if s.startswith("}", e + 1):
            return e + 1
        if s.startswith("[", e + 1):
            b = s.find("]", e + 1)
            if b >= 0 and s.startswith("}", b + 1):
                return e + 1
        e = s.find(")", e + 1)
    return -1


def code_span_end(s: str, p: int) -> int:
    """End of the inline code span opening at ``p`` (a backtick run), or ``p + run`` if unclosed."""
    run = 1
    while p + run < len(s) and s[p + run] == "`":
        run += 1
    q = p + run
    while True:
        a = s.find("`" * run, q)
        if a < 0:
            return p + run
        b = a
        while b < len(s) and s[b] == "`":
            b += 1
        if b - a == run:
            return b
        q = b


def _find_outside_code(s: str, needle: str, pos: int) -> int:
    while True:
        a = s.find(needle, pos)
        if a < 0:
            return -1
        tick = s.find("`", pos, a)
        if tick < 0:
            return a
        end = code_span_end(s, tick)
        pos = end if end > tick else tick + 1
        if end > a:
            continue
        return _find_outside_code(s, needle, pos)


def drop_comments(s: str) -> str:
    """HTML comments go (a comment over several lines leaves its line breaks)."""
    out: list[str] = []
    pos = 0
    while True:
        a = _find_outside_code(s, "<!--", pos)
        if a < 0:
            out.append(s[pos:])
            return "".join(out)
        b = s.find("-->", a + 4)
        end = len(s) if b < 0 else b + 3
        out.append(s[pos:a])
        out.append("\n" * s.count("\n", a, end))
        pos = end
