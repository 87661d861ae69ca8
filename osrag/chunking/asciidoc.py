"""AsciiDoc tables inside Markdown (``|===`` … ``|===``) -> GFM pipe tables the chunker splits by rows."""

from __future__ import annotations

import re
from collections.abc import Sequence

# A cell and its spec: [colspan][.rowspan](+|*)[align][style]| ("2+|", ".2+|", "a|", "^.^|")
_ADOC_CELL = re.compile(r"(?:\d*(?:\.\d+)?[+*])?(?:[<^>]?(?:\.[<^>])?)?[adehlmsv]?\|")


def adoc_tables(text: str, fenced: set[int]) -> str:
    """AsciiDoc tables inside Markdown (``[cols="2,5", options="header"]`` + ``|===`` … ``|===``)
    become GFM pipe tables, which the chunker splits by rows; not inside fenced code."""
    lines = text.split("\n")
    out: list[str] = []
    k = 0
    while k < len(lines):
        if k not in fenced and lines[k].strip().startswith("[cols=") and k + 1 < len(lines):
            nxt = next((j for j in range(k + 1, len(lines)) if lines[j].strip()), k)
            if nxt - 1 > k and lines[nxt].lstrip().startswith("|") and lines[nxt].strip() != "|===":
                lines[nxt - 1] = "|==="  # the opening line is missing: the blank line before the rows opens
        if k in fenced or lines[k].strip() != "|===":
            out.append(lines[k])
            k += 1
            continue
        end = next(
            (j for j in range(k + 1, len(lines)) if lines[j].strip() == "|===" and j not in fenced), -1
        )
        if end < 0:
            out.append(lines[k])
            k += 1
            continue
        attrs = ""
        if out and out[-1].strip().startswith("[") and "cols" in out[-1]:
            attrs = out.pop().strip()
        indent = lines[k][: len(lines[k]) - len(lines[k].lstrip())]
        out.extend(indent + row for row in _adoc_rows(lines[k + 1 : end], attrs))
        k = end + 1
    return "\n".join(out)


def _adoc_rows(body: Sequence[str], attrs: str) -> list[str]:
    cells: list[str] = []
    first_row_len = 0
    header_gap = False
    for n, raw in enumerate(body):
        line = raw.strip()
        if not line:
            if cells and not first_row_len:
                first_row_len, header_gap = len(cells), True
            continue
        m = _ADOC_CELL.match(line)
        if m is None:
            if cells:
                cells[-1] = f"{cells[-1]} {line}".strip()
            continue
        parts = _ADOC_CELL.split(line[m.end() :]) if n >= 0 else []
        cells.extend(p.strip() for p in parts)
    cols = re.search(r'cols\s*=\s*"([^"]*)"', attrs)
    spec = cols.group(1) if cols else ""
    width = (
        sum(int(x.split("*")[0]) if "*" in x and x.split("*")[0].isdigit() else 1 for x in spec.split(","))
        if spec
        else 0
    )
    width = width or first_row_len or len(cells) or 1
    rows = [cells[i : i + width] for i in range(0, len(cells), width)]
    if not rows:
        return []
    rows[-1] += [""] * (width - len(rows[-1]))
    header = "header" in attrs or header_gap
    head, rest = (rows[0], rows[1:]) if header else ([""] * width, rows)

    def fmt(r: Sequence[str]) -> str:
        return "| " + " | ".join(c.replace("|", "\\|") for c in r) + " |"

    return [fmt(head), "|" + "---|" * width, *(fmt(r) for r in rest)]
