"""Conversion to Markdown and the map back to pages, slides and anchors (osrag.ingest.convert)."""

from __future__ import annotations

from pathlib import Path

import pytest

from osrag.chunking import ChunkingConfig, chunk_document
from osrag.errors import DocumentError
from osrag.ingest.convert import SourceMap, convert, slugify, source_format
from osrag.ingest.documents import read_document
from osrag.ingest.prepared import chunk_source
from tests import fixtures_gen as gen

LIMIT = 20_000_000


def _convert(path: Path):  # type: ignore[no-untyped-def]
    fmt = source_format(path)
    assert fmt is not None
    return convert(path, path.read_bytes(), fmt)


# ------------------------------------------------------------------ SourceMap
def test_source_map_locates_spans() -> None:
    m = SourceMap("page", (0, 100, 250), (1, 2, 4))
    assert m.at(0) == 1 and m.at(99) == 1 and m.at(100) == 2 and m.at(10_000) == 4
    assert m.locate(10, 50) == {"page": 1, "page_end": 1}
    assert m.locate(90, 260) == {"page": 1, "page_end": 4}
    # end is exclusive: a span ending exactly where page 2 begins stays on page 1
    assert m.locate(90, 100) == {"page": 1, "page_end": 1}


def test_source_map_anchor_and_text_before_first_heading() -> None:
    m = SourceMap("anchor", (40, 90), ("a", "b"))
    assert m.locate(0, 30) == {}  # the lead before the first heading has no anchor
    assert m.locate(45, 200) == {"anchor": "a"}  # the anchor of the section the span starts in
    assert m.locate(95, 96) == {"anchor": "b"}


def test_slugify_keeps_cyrillic() -> None:
    assert slugify("Возврат денег при отмене") == "возврат-денег-при-отмене"
    assert slugify("  Тариф «Плюс»: 5 %!  ") == "тариф-плюс-5-"
    assert slugify("LAMP-LIGHT-MINI и TEA15") == "lamp-light-mini-и-tea15"


@pytest.mark.parametrize(
    ("name", "fmt"),
    [
        ("a.md", "markdown"),
        ("a.MARKDOWN", "markdown"),
        ("a.mdx", "markdown"),
        ("a.txt", "text"),
        ("a.PDF", "pdf"),
        ("a.docx", "docx"),
        ("a.htm", "html"),
        ("a.html", "html"),
        ("a.pptx", "pptx"),
        ("a.exe", None),
        ("a.png", None),
        ("a.doc", None),
        ("README", None),
    ],
)
def test_source_format_by_suffix(name: str, fmt: str | None) -> None:
    assert source_format(Path(name)) == fmt


# ------------------------------------------------------------------ PDF
def test_pdf_pages_are_mapped(tmp_path: Path) -> None:
    out = _convert(gen.make_pdf(tmp_path / "guide.pdf"))
    assert out.source_format == "pdf"
    md, loc = out.markdown, out.locations
    assert loc is not None and loc.unit == "page" and loc.values == (1, 2, 3)
    for page, spec in enumerate(gen.PDF_PAGES, start=1):
        heading = str(spec["heading"])
        at = md.index(heading)
        assert loc.at(at) == page, heading
        assert md[loc.offsets[page - 1] :].startswith(heading)
    # the Cyrillic text survives, justified spacing is collapsed, bullets become list items
    assert "Гарантийный ремонт чайника ТЕА15 выполняет" in md
    assert "- курьерская доставка" in md
    assert "\x0c" not in md


def test_pdf_chunks_carry_their_page(tmp_path: Path) -> None:
    path = gen.make_pdf(tmp_path / "guide.pdf")
    doc = read_document(path, tmp_path, LIMIT)
    assert doc.metadata["format"] == "pdf" and doc.title == "guide"
    chunks = chunk_document(doc, "markdown", ChunkingConfig(max_tokens=40, min_tokens=5, overlap=0.0))
    assert len(chunks) >= 3
    pages_seen = set()
    for c in chunks:
        src = chunk_source(doc, c, "guide@v1", [0.0], "2026-01-01T00:00:00")
        assert src["source_format"] == "pdf"
        assert 1 <= src["page"] <= src["page_end"] <= 3
        # the page recorded is the page whose text holds the chunk's first character
        first = doc.text[c.start : c.start + 20]
        page_text = _page_text(doc.text, doc.metadata["locations"], src["page"])
        assert first in page_text
        pages_seen.add(src["page"])
    assert pages_seen == {1, 2, 3}


def _page_text(md: str, loc: SourceMap, page: int) -> str:
    i = loc.values.index(page)
    end = loc.offsets[i + 1] if i + 1 < len(loc.offsets) else len(md)
    return md[loc.offsets[i] : end]


def test_pdf_blank_pages_are_skipped_but_numbering_kept(tmp_path: Path) -> None:
    pages = [dict(gen.PDF_PAGES[0]), {"heading": ""}, dict(gen.PDF_PAGES[2])]
    out = _convert(gen.make_pdf(tmp_path / "gap.pdf", pages))
    assert out.locations is not None and out.locations.values == (1, 3)
    assert out.locations.at(out.markdown.index("Доставка")) == 3


def test_encrypted_pdf_is_a_named_error(tmp_path: Path) -> None:
    path = gen.make_encrypted_pdf(tmp_path / "secret.pdf")
    with pytest.raises(DocumentError) as ei:
        read_document(path, tmp_path, LIMIT)
    assert ei.value.path == str(path)
    assert "encrypted PDF" in ei.value.reason and "\n" not in str(ei.value)


def test_broken_pdf_is_a_named_error(tmp_path: Path) -> None:
    path = gen.make_broken_pdf(tmp_path / "broken.pdf")
    with pytest.raises(DocumentError) as ei:
        read_document(path, tmp_path, LIMIT)
    assert ei.value.path == str(path) and "broken PDF" in ei.value.reason
    assert "\n" not in str(ei.value)


def test_truncated_pdf_is_a_named_error(tmp_path: Path) -> None:
    good = gen.make_pdf(tmp_path / "good.pdf").read_bytes()
    path = tmp_path / "cut.pdf"
    path.write_bytes(good[: len(good) // 3])
    with pytest.raises(DocumentError) as ei:
        read_document(path, tmp_path, LIMIT)
    assert ei.value.path == str(path) and "PDF" in ei.value.reason


def test_image_only_pdf_is_a_named_error(tmp_path: Path) -> None:
    path = gen.make_image_pdf(tmp_path / "scan.pdf")
    with pytest.raises(DocumentError) as ei:
        read_document(path, tmp_path, LIMIT)
    assert "no text layer" in ei.value.reason and "OCR" in ei.value.reason


def test_pdf_title_from_metadata(tmp_path: Path) -> None:
    from fpdf import FPDF

    pdf = FPDF()
    pdf.add_font("DejaVu", fname=str(gen.unicode_font()))
    pdf.set_font("DejaVu", size=12)
    pdf.set_title("Регламент возвратов")
    pdf.add_page()
    pdf.multi_cell(0, 7, "Возврат в течение четырнадцати дней.")
    path = tmp_path / "titled.pdf"
    pdf.output(str(path))
    assert read_document(path, tmp_path, LIMIT).title == "Регламент возвратов"


# ------------------------------------------------------------------ DOCX
def test_docx_headings_list_and_table_become_markdown(tmp_path: Path) -> None:
    path = gen.make_docx(tmp_path / "loyalty.docx")
    out = _convert(path)
    md = out.markdown
    assert out.source_format == "docx" and out.locations is None
    assert "# Программа лояльности" in md
    assert "## Начисление баллов" in md
    assert "* покупка на сайте" in md
    assert "| Серебряный | 3 % |" in md
    doc = read_document(path, tmp_path, LIMIT)
    assert doc.title == "Программа лояльности"
    chunks = chunk_document(doc, "markdown", ChunkingConfig(max_tokens=60, min_tokens=1, overlap=0.0))
    paths = {c.heading_path for c in chunks}
    assert ("Программа лояльности", "Уровни участников") in paths
    table = [c for c in chunks if "Золотой" in c.text]
    assert table and table[0].heading_path[-1] == "Уровни участников"
    src = chunk_source(doc, chunks[0], "loyalty@v1", [0.0], "2026-01-01T00:00:00")
    assert src["source_format"] == "docx" and "page" not in src and "anchor" not in src


# ------------------------------------------------------------------ PPTX
def test_pptx_slides_are_mapped_and_comments_removed(tmp_path: Path) -> None:
    out = _convert(gen.make_pptx(tmp_path / "training.pptx"))
    md, loc = out.markdown, out.locations
    assert "<!--" not in md and "Slide number" not in md
    assert loc is not None and loc.unit == "slide" and loc.values == (1, 2, 3)
    assert loc.at(md.index("# Обучение операторов")) == 1
    assert loc.at(md.index("Не перебивать клиента")) == 2
    assert loc.at(md.index("| Почта | 4 часа |")) == 3
    for off, title in zip(loc.offsets, ("# Обучение", "# Правила", "# Время"), strict=True):
        assert md[off:].startswith(title)


def test_pptx_chunks_carry_their_slide(tmp_path: Path) -> None:
    path = gen.make_pptx(tmp_path / "training.pptx")
    doc = read_document(path, tmp_path, LIMIT)
    chunks = chunk_document(doc, "markdown", ChunkingConfig(max_tokens=60, min_tokens=1, overlap=0.0))
    by_heading = {
        c.heading_path[-1]: chunk_source(doc, c, "t@v1", [0.0], "2026-01-01T00:00:00") for c in chunks
    }
    assert by_heading["Правила общения"]["slide"] == 2
    assert by_heading["Время ответа"]["slide"] == 3
    assert by_heading["Время ответа"]["source_format"] == "pptx"


# ------------------------------------------------------------------ HTML
def test_html_anchors_from_ids_names_and_slugs(tmp_path: Path) -> None:
    out = _convert(gen.make_html(tmp_path / "pay.html"))
    md, loc = out.markdown, out.locations
    assert out.title == "Справка: оплата"
    assert "\ue000" not in md and "\ue001" not in md
    assert "var x" not in md and "color: red" not in md  # script and style are dropped
    assert loc is not None and loc.values == (
        "oplata",  # the heading's id
        "karty",
        "rassrochka",  # <a name> inside the heading
        "возврат-денег-при-отмене",  # no id: a slug of the text
        "возврат-денег-при-отмене-1",  # the same text again: made unique
    )
    assert md[loc.offsets[1] :].startswith("## Банковские карты")
    assert loc.at(md.index("| Карта | 0 % |")) == "karty"
    assert loc.at(md.index("* на карту за три рабочих дня")) == "возврат-денег-при-отмене"


def test_html_chunks_carry_their_anchor(tmp_path: Path) -> None:
    path = gen.make_html(tmp_path / "pay.html")
    doc = read_document(path, tmp_path, LIMIT)
    assert doc.title == "Справка: оплата"
    chunks = chunk_document(doc, "markdown", ChunkingConfig(max_tokens=60, min_tokens=1, overlap=0.0))
    srcs = [chunk_source(doc, c, "p@v1", [0.0], "2026-01-01T00:00:00") for c in chunks]
    table = next(s for s in srcs if "Комиссия" in s["text"])
    assert table["anchor"] == "karty" and table["source_format"] == "html"
    assert next(s for s in srcs if "шесть месяцев" in s["text"])["anchor"] == "rassrochka"
    assert (
        next(s for s in srcs if "Повторный заголовок" in s["text"])["anchor"] == "возврат-денег-при-отмене-1"
    )


def test_html_in_another_charset(tmp_path: Path) -> None:
    html = (
        '<html><head><meta charset="windows-1251"></head><body><h1>Доставка</h1><p>Курьер.</p></body></html>'
    )
    path = tmp_path / "cp.htm"
    path.write_bytes(html.encode("cp1251"))
    out = _convert(path)
    assert "# Доставка" in out.markdown and "Курьер." in out.markdown


def test_empty_html_is_a_named_error(tmp_path: Path) -> None:
    path = gen.make_html(tmp_path / "empty.html", "<html><body>  </body></html>")
    with pytest.raises(DocumentError, match="no text"):
        read_document(path, tmp_path, LIMIT)


# ------------------------------------------------------------------ suffix gate and damaged files
@pytest.mark.parametrize("name", ["tool.exe", "photo.png", "notes.rst", "README"])
def test_unsupported_suffix_is_refused_even_when_named(tmp_path: Path, name: str) -> None:
    path = tmp_path / name
    path.write_text("# Похоже на Markdown\n\nНо суффикс не тот.\n", encoding="utf-8")
    with pytest.raises(DocumentError) as ei:
        read_document(path, tmp_path, LIMIT)
    assert ei.value.path == str(path) and ei.value.reason.startswith("unsupported format")
    assert ".pdf" in ei.value.reason  # says what is supported


@pytest.mark.parametrize(("name", "label"), [("deck.pptx", "PPTX"), ("memo.docx", "DOCX")])
def test_damaged_office_file_is_a_named_error(tmp_path: Path, name: str, label: str) -> None:
    path = tmp_path / name
    path.write_bytes(b"PK\x03\x04 not really a zip archive" * 10)
    with pytest.raises(DocumentError) as ei:
        read_document(path, tmp_path, LIMIT)
    assert ei.value.reason.startswith(f"broken {label} file") and "\n" not in ei.value.reason


def test_size_limit_applies_before_conversion(tmp_path: Path) -> None:
    path = gen.make_pdf(tmp_path / "guide.pdf")
    with pytest.raises(DocumentError, match="file too large"):
        read_document(path, tmp_path, 1000)


def test_an_mdx_page_ingests_to_clean_text(tmp_path: Path) -> None:
    page = tmp_path / "docs" / "install.mdx"
    page.parent.mkdir()
    page.write_text(
        'import Tabs from "@theme/Tabs";\nexport const meta = { x: 1 };\n\n# Установка\n\n'
        '<Tabs>\n<TabItem value="pip" label="pip">\n\nПоставьте пакет командой pip.\n\n</TabItem>\n</Tabs>\n\n'
        "{/* черновик */}\n\nГотово.\n",
        encoding="utf-8",
    )
    doc = read_document(page, tmp_path)
    assert doc.title == "Установка"
    text = " ".join(c.text for c in chunk_document(doc, "markdown", ChunkingConfig()))
    assert "Поставьте пакет командой pip." in text and "Готово." in text
    for markup in ("import ", "export ", "<Tabs", "TabItem", "{/*", "черновик"):
        assert markup not in text, markup
