"""Tag-like dialects: HTML and JSX component tags, BBCode-like lines, YFM ``{% … %}`` and Hugo shortcodes.

Each function reads one directive (already cut out of its line by ``osrag.chunking.scanner``, or a
whole line for BBCode) into a ``Directive``: a known tag or a component becomes its title or label, a
placeholder in angle brackets (``<ID_СЕТИ>``) is left to be text.
"""

from __future__ import annotations

import re

from osrag.chunking.directive import (
    LABELS,
    TITLE_ATTRS,
    Directive,
    ReadContext,
    parse_attrs,
    split_words,
    variable,
)

# Component/tag names that are markup, not placeholders (<ID_СЕТИ>, <token> stay text).
_HTML_TAGS = frozenset(
    [
        "a",
        "abbr",
        "b",
        "big",
        "blockquote",
        "br",
        "center",
        "code",
        "del",
        "details",
        "dfn",
        "div",
        "em",
        "font",
        "hr",
        "i",
        "iframe",
        "img",
        "ins",
        "kbd",
        "li",
        "mark",
        "nobr",
        "ol",
        "p",
        "pre",
        "s",
        "samp",
        "section",
        "small",
        "source",
        "span",
        "strike",
        "strong",
        "sub",
        "summary",
        "sup",
        "table",
        "tbody",
        "td",
        "tfoot",
        "th",
        "thead",
        "tr",
        "u",
        "ul",
        "var",
        "video",
        "audio",
        "figure",
        "figcaption",
        "picture",
        "nav",
        "aside",
        "article",
        "header",
        "footer",
        "main",
        "caption",
        "col",
        "colgroup",
        "dl",
        "dt",
        "dd",
        "wbr",
    ]
)
_VOID_TAGS = frozenset(["br", "hr", "img", "wbr", "source", "col"])
_BREAK_TAGS = frozenset(["br", "hr", "p", "div", "li", "tr", "td", "th", "dt", "dd"])
# Tutorial-engine tags read as block markers (javascript.info style).
_BB_TAGS = frozenset(
    [
        "cut",
        "smart",
        "warn",
        "info",
        "summary",
        "head",
        "online",
        "offline",
        "edit",
        "iframe",
        "codetabs",
        "demo",
        "compare",
        "importance",
        "libs",
        "task",
        "recent",
        "quote",
        "spoiler",
        "hint",
        "tip",
        "note",
    ]
)
_BB_DROP_CONTENT = frozenset({"head"})
_TAG = re.compile(r"<(/?)([A-Za-z][\w.:-]*)((?:\s+(?:[^<>\"'{}]|\"[^\"]*\"|'[^']*'|\{[^{}]*\})*)?)\s*(/?)>")
_BB_LINE = re.compile(r"\[(/?)([a-z][\w-]*)((?:\s[^\]]*)?)\]")
_JSX_KNOWN = frozenset(
    [
        "Tabs",
        "TabItem",
        "Tab",
        "Admonition",
        "Callout",
        "Note",
        "Tip",
        "Warning",
        "Details",
        "Summary",
        "CodeBlock",
        "Steps",
        "Step",
        "Card",
        "Cards",
    ]
)


def yfm(raw: str, ctx: ReadContext) -> Directive:
    words = split_words(raw)
    name = words[0].lower() if words else ""
    rest = words[1:]
    if name == "note":
        kind = rest[0].lower() if rest else "info"
        title = " ".join(rest[1:])
        return Directive("open", "y:note", title or LABELS.get(kind, "Примечание"), label=True)
    if name == "cut":
        return Directive("open", "y:cut", " ".join(rest), block=True)
    if name in ("hint", "callout", "admonition"):  # GitBook: {% hint style="warning" %}
        attrs = parse_attrs(raw)
        kind = (attrs.get("style") or attrs.get("type") or (rest[0] if rest else "info")).lower()
        return Directive(
            "open", f"y:{name}", attrs.get("title") or LABELS.get(kind, "Примечание"), label=True
        )
    if name == "tab":  # GitBook: {% tab title="Windows" %}
        return Directive("open", "y:tab", parse_attrs(raw).get("title", ""), block=True)
    if name in ("list", "if", "ifdef", "changelog", "tabs"):
        return Directive("open", f"y:{name}")
    if name.startswith("end"):
        return Directive("close", f"y:{name[3:]}")
    if name == "include":
        m = re.search(r"\]\(([^)\s]+)\)", raw)
        return Directive("single", "y:include", include=(m.group(1), None) if m else None)
    return Directive("single", f"y:{name}")


def hugo(raw: str, ctx: ReadContext) -> Directive:
    raw = raw.rstrip("/").strip()
    if raw.startswith("/"):
        return Directive("close", f"h:{raw[1:].split()[0] if raw[1:].split() else ''}")
    words = split_words(raw)
    name = words[0] if words else ""
    attrs = parse_attrs(raw)
    plain = [w for w in words[1:] if "=" not in w]
    title = next((attrs[a] for a in TITLE_ATTRS if a in attrs), "")
    low = name.lower()
    if low in (
        "hint",
        "notice",
        "alert",
        "callout",
        "admonition",
        "note",
        "tip",
        "warning",
        "info",
        "danger",
    ):
        kind = (attrs.get("type") or (plain[0] if plain else low)).lower()
        return Directive("open", f"h:{name}", title or LABELS.get(kind, "Примечание"), label=True)
    if low in ("tab", "tabs", "details", "expand", "collapse", "spoiler", "accordion"):
        return Directive("open", f"h:{name}", title or (" ".join(plain) if low != "tabs" else ""), block=True)
    if low in ("figure", "img", "image"):
        return Directive("single", f"h:{name}", attrs.get("caption") or attrs.get("alt") or title)
    if low == "param" and plain:
        return Directive("single", "h:param", variable(plain[0], ctx))
    return Directive("single", f"h:{name}")


def html_tag(s: str, p: int) -> tuple[int, Directive] | None:
    """An HTML tag of a known element, or a JSX component tag (``<TabItem label="…">``)."""
    m = _TAG.match(s, p)
    if m is None:
        return None
    closing, name, raw, selfclose = m.group(1), m.group(2), m.group(3) or "", m.group(4)
    if name.startswith("info:") and not raw:  # a tutorial's link to an article: <info:closure>
        return m.end(), Directive("single", "j:info", name[5:].replace("-", " "))
    low = name.lower()
    component = name[0].isupper() and any(c.islower() for c in name) and "_" not in name
    if low not in _HTML_TAGS and not component:
        return None
    if component and not (closing or selfclose or raw.strip() or f"</{name}>" in s or name in _JSX_KNOWN):
        return None  # <Name> alone in prose is a placeholder, not a component
    qual = f"j:{name}"
    if closing:
        return m.end(), Directive("close", qual, " " if low in _BREAK_TAGS else "")
    attrs = parse_attrs(raw)
    title = next((attrs[a] for a in TITLE_ATTRS if a in attrs), "")
    if low in ("admonition", "callout", "note", "aside") or ("type" in attrs and component):
        kind = attrs.get("type", low).lower()
        return m.end(), Directive("open", qual, title or LABELS.get(kind, "Примечание"), label=True)
    if low == "img":
        return m.end(), Directive("single", qual, attrs.get("alt", ""))
    text = title or (" " if low in _BREAK_TAGS else "")
    kind = "single" if selfclose or low in _VOID_TAGS else "open"
    return m.end(), Directive(kind, qual, text, block=bool(title) and component)


def bb_line(line: str, ctx: ReadContext) -> list[str | Directive] | None:
    """A BBCode-like tag alone on its line: ``[smart header="…"]``, ``[/smart]``, ``[cut]``."""
    s = line.strip()
    m = _BB_LINE.fullmatch(s)
    if m is None or s.startswith("[^"):
        return None
    closing, name, raw = m.group(1), m.group(2), m.group(3) or ""
    if name not in _BB_TAGS and not closing:
        return None
    if closing:
        return [Directive("close", f"x:{name}")]
    attrs = parse_attrs(raw)
    title = next((attrs[a] for a in TITLE_ATTRS if a in attrs), "")
    if name in _BB_DROP_CONTENT:
        return [Directive("open", f"x:{name}", hide=True)]
    if name in ("smart", "warn", "info", "summary", "quote", "spoiler", "hint", "tip", "note"):
        label = title or LABELS.get(name, "")
        return [Directive("open", f"x:{name}", label, label=bool(label))]
    return [Directive("single", f"x:{name}")]
