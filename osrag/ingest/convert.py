"""PDF, DOCX, HTML and PPTX to Markdown, with a map back to pages, slides and anchors.

Why Markdown: one chunker (``osrag.chunking``) already knows how to cut headings,
tables and lists; converting every format to Markdown keeps those rules in one
place. The conversion itself is markitdown's (its per-format converters are
called directly, so no file-type guessing model is loaded): it is light, pure
Python, and works offline. Docling was set aside because its PDF pipeline
needs layout models fetched from a model hub at run time.

Why a source map: a passage cut from converted Markdown must still be citable
in the original (page 3 of the PDF, slide 2, ``#karty`` of the HTML page).
``SourceMap`` records, for each character offset in the Markdown where a page,
slide or heading begins, which one it is; the ingester looks up a chunk's span.

* PDF: every page is converted on its own (split with pypdfium2), so each page's
  text and its offset in the joined Markdown are known exactly.
* PPTX: markitdown marks slides with ``<!-- Slide number: N -->``; the comments
  are removed from the text and kept as offsets.
* HTML: before conversion each ``<h1>``..``<h6>`` gets an invisible private-use
  marker; after conversion the markers are removed and their offsets kept. The
  anchor is the heading's ``id`` (or an ``id``/``name`` inside it), else a slug
  of its text, made unique the way GitHub does (``-1``, ``-2``).
"""

from __future__ import annotations

import io
import re
from bisect import bisect_right
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from osrag.errors import DocumentError

# suffix -> source format; text formats are read as text, the others converted.
FORMATS: dict[str, str] = {
    ".md": "markdown",
    ".markdown": "markdown",
    ".mdx": "markdown",  # MDX: Markdown with JSX; the dialect reader drops imports and component tags
    ".txt": "text",
    ".pdf": "pdf",
    ".docx": "docx",
    ".html": "html",
    ".htm": "html",
    ".pptx": "pptx",
}
TEXT_FORMATS = frozenset({"markdown", "text"})
SUFFIXES: tuple[str, ...] = tuple(FORMATS)

_MARK = "\ue000{}\ue001"
_MARK_RE = re.compile("\ue000(\\d+)\ue001")
_SLIDE_RE = re.compile(r"^<!-- Slide number: (\d+) -->\n?", re.MULTILINE)
_BULLET_RE = re.compile(r"^[ \t]*[•●▪◦■‣][ \t]*", re.MULTILINE)
_SPACES_RE = re.compile(r"(?<=\S)[ \t]{2,}(?=\S)")


def source_format(path: Path) -> str | None:
    """The format a file is read as, from its suffix; None when osrag cannot read it."""
    return FORMATS.get(path.suffix.lower())


def unsupported_reason(path: Path) -> str:
    shown = path.suffix or "(no suffix)"
    return f"unsupported format {shown} (osrag reads {', '.join(SUFFIXES)})"


# ---------------------------------------------------------------- the source map
@dataclass(frozen=True)
class SourceMap:
    """Offsets in the Markdown where a page, slide or heading anchor begins.

    ``unit`` is ``page``, ``slide`` or ``anchor``; ``offsets`` ascend and pair
    with ``values``. Text before the first offset has no location.
    """

    unit: str
    offsets: tuple[int, ...]
    values: tuple[int | str, ...]

    def at(self, pos: int) -> int | str | None:
        i = bisect_right(self.offsets, pos) - 1
        return self.values[i] if i >= 0 else None

    def locate(self, start: int, end: int) -> dict[str, Any]:
        """Chunk fields for the span ``start:end``: page/page_end, slide/slide_end or anchor."""
        first = self.at(start)
        if first is None:
            return {}
        if self.unit == "anchor":
            return {"anchor": first}
        last = self.at(max(start, end - 1))
        return {self.unit: first, f"{self.unit}_end": last if last is not None else first}


@dataclass(frozen=True)
class Converted:
    """A converted file: its Markdown, the title the file declares, where text came from."""

    markdown: str
    source_format: str
    title: str | None = None
    locations: SourceMap | None = None


# ---------------------------------------------------------------- entry point
def convert(path: Path, data: bytes, fmt: str) -> Converted:
    """Convert ``data`` (the bytes of ``path``) from ``fmt`` to Markdown.

    Raises DocumentError naming the file and the reason; any converter failure
    becomes one, so one bad file never stops a batch.
    """
    name = str(path)
    try:
        if fmt == "pdf":
            out = _pdf(name, data)
        elif fmt == "pptx":
            out = _pptx(data)
        elif fmt == "html":
            out = _html(data)
        elif fmt == "docx":
            out = _docx(data)
        else:
            raise DocumentError(name, f"no converter for format {fmt!r}")
    except DocumentError:
        raise
    except ImportError as exc:
        raise DocumentError(
            name,
            f"cannot convert {fmt.upper()}: {exc.name or exc} is not installed (pip install 'osrag[formats]')",
        ) from exc
    except Exception as exc:  # a converter's own error: the file is damaged or unusual
        detail = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise DocumentError(name, f"broken {fmt.upper()} file ({type(exc).__name__}: {detail})") from exc
    if not out.markdown.strip():
        raise DocumentError(name, f"no text in this {fmt.upper()} file")
    return out


# ---------------------------------------------------------------- PDF
def _pdf(name: str, data: bytes) -> Converted:
    import pypdfium2 as pdfium
    from markitdown import StreamInfo
    from markitdown.converters import PdfConverter

    try:
        pdf = pdfium.PdfDocument(data)
    except pdfium.PdfiumError as exc:
        msg = str(exc)
        if "password" in msg.lower():
            raise DocumentError(name, "encrypted PDF (opens only with a password); decrypt it first") from exc
        detail = msg[msg.find("(") + 1 : msg.rfind(")")] if "(" in msg else msg
        raise DocumentError(name, f"broken PDF ({detail.removeprefix('PDFium: ')})") from exc
    try:
        title = (pdf.get_metadata_dict().get("Title") or "").strip() or None
        converter = PdfConverter()
        parts: list[str] = []
        offsets: list[int] = []
        pages: list[int] = []
        size = 0
        for i in range(len(pdf)):
            page = pdf[i]
            textpage = page.get_textpage()
            has_text = textpage.count_chars() > 0
            textpage.close()
            page.close()
            if not has_text:
                continue
            single = pdfium.PdfDocument.new()
            single.import_pages(pdf, [i])
            buf = io.BytesIO()
            single.save(buf)
            single.close()
            buf.seek(0)
            text = _tidy_pdf_text(converter.convert(buf, StreamInfo(extension=".pdf")).markdown)
            if not text:
                continue
            if parts:
                size += 2  # the blank line between pages
            offsets.append(size)
            pages.append(i + 1)
            parts.append(text)
            size += len(text)
    finally:
        pdf.close()
    if not parts:
        raise DocumentError(name, "no text layer (image-only or scanned PDF; OCR is not supported)")
    return Converted("\n\n".join(parts), "pdf", title, SourceMap("page", tuple(offsets), tuple(pages)))


def _tidy_pdf_text(text: str) -> str:
    """Page text as Markdown the chunker understands: bullets as list items, no form
    feeds, single spaces between words (justified lines come out with runs of spaces)."""
    text = text.replace("\x0c", "").replace("\r\n", "\n")
    text = _BULLET_RE.sub("- ", text)
    text = _SPACES_RE.sub(" ", text)
    return re.sub(r"\n{3,}", "\n\n", text).strip()


# ---------------------------------------------------------------- PPTX
def _pptx(data: bytes) -> Converted:
    from markitdown import StreamInfo
    from markitdown.converters import PptxConverter

    md = PptxConverter().convert(io.BytesIO(data), StreamInfo(extension=".pptx")).markdown
    out: list[str] = []
    offsets: list[int] = []
    slides: list[int] = []
    size, last = 0, 0
    for m in _SLIDE_RE.finditer(md):
        kept = md[last : m.start()]
        out.append(kept)
        size += len(kept)
        offsets.append(size)
        slides.append(int(m.group(1)))
        last = m.end()
    out.append(md[last:])
    text = "".join(out)
    # Trim leading blank space, shifting the offsets with it.
    lead = len(text) - len(text.lstrip())
    return Converted(
        text.strip(),
        "pptx",
        None,
        SourceMap("slide", tuple(max(0, o - lead) for o in offsets), tuple(slides)),
    )


# ---------------------------------------------------------------- HTML
def slugify(text: str) -> str:
    """GitHub-style heading slug: lower case, word characters and hyphens, spaces to hyphens."""
    return re.sub(r"[^\w\- ]", "", text.strip().lower()).replace(" ", "-")


def _html(data: bytes) -> Converted:
    from bs4 import BeautifulSoup
    from markitdown.converters import HtmlConverter

    soup = BeautifulSoup(data, "html.parser")
    anchors: list[str] = []
    used: dict[str, int] = {}
    for i, h in enumerate(soup.find_all(["h1", "h2", "h3", "h4", "h5", "h6"])):
        anchors.append(_heading_anchor(h, used))
        h.insert(0, _MARK.format(i))
    res = HtmlConverter().convert_string(str(soup))
    md, offsets, values = _take_markers(res.markdown, anchors)
    title = (res.title or "").strip() or None
    return Converted(md, "html", title, SourceMap("anchor", tuple(offsets), tuple(values)))


def _heading_anchor(h: Any, used: dict[str, int]) -> str:
    """The heading's own id, an id/name inside it, else a unique slug of its text."""
    explicit = h.get("id")
    if not explicit:
        inner = h.find(lambda t: t.get("id") or (t.name == "a" and t.get("name")))
        if inner is not None:
            explicit = inner.get("id") or inner.get("name")
    if explicit:
        anchor = str(explicit)
        used[anchor] = used.get(anchor, 0)
        return anchor
    base = slugify(h.get_text(" ", strip=True)) or "section"
    n = used.get(base)
    if n is None:
        used[base] = 0
        return base
    while True:
        n += 1
        candidate = f"{base}-{n}"
        if candidate not in used:
            used[base] = n
            used[candidate] = 0
            return candidate


def _take_markers(md: str, anchors: list[str]) -> tuple[str, list[int], list[str]]:
    """Remove the heading markers; each one's offset is the start of its line."""
    text = _MARK_RE.sub("", md)
    offsets: list[int] = []
    values: list[str] = []
    removed = 0
    for m in _MARK_RE.finditer(md):
        pos = m.start() - removed  # where the marker stood in the cleaned text
        removed += m.end() - m.start()
        offsets.append(text.rfind("\n", 0, pos) + 1)
        values.append(anchors[int(m.group(1))])
    lead = len(text) - len(text.lstrip())
    return text.strip(), [max(0, o - lead) for o in offsets], values


# ---------------------------------------------------------------- DOCX
def _docx(data: bytes) -> Converted:
    from markitdown import StreamInfo
    from markitdown.converters import DocxConverter

    md = DocxConverter().convert(io.BytesIO(data), StreamInfo(extension=".docx")).markdown
    return Converted(md.strip(), "docx")


__all__ = [
    "FORMATS",
    "SUFFIXES",
    "TEXT_FORMATS",
    "Converted",
    "SourceMap",
    "convert",
    "slugify",
    "source_format",
    "unsupported_reason",
]
