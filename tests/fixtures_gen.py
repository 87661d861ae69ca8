"""Small PDF, DOCX, PPTX and HTML files in Russian, written by the tests themselves.

Each file carries headings, a table and a list, so the conversion tests can check
that structure survives into the Markdown the chunker reads. The PDF needs a
Unicode TrueType font for Cyrillic: DejaVu Sans from the system
(``fonts-dejavu-core``) or the copy matplotlib ships.
"""

from __future__ import annotations

import io
from pathlib import Path

# Text that each generated file carries, so tests can look for it after conversion.
PDF_PAGES: list[dict[str, object]] = [
    {
        "heading": "Возврат товара",
        "lines": [
            "Покупатель может вернуть товар надлежащего качества в течение четырнадцати дней.",
            "Чек или иной документ об оплате ускоряет возврат денег.",
        ],
    },
    {
        "heading": "Гарантийный ремонт",
        "lines": [
            "Гарантийный ремонт чайника ТЕА15 выполняет сервисный центр за двадцать дней.",
            "Срок гарантии на лампу LAMP-LIGHT-MINI составляет два года.",
        ],
        "table": [["Товар", "Срок гарантии"], ["Чайник ТЕА15", "12 месяцев"], ["Лампа", "24 месяца"]],
    },
    {
        "heading": "Доставка",
        "lines": ["Курьер привозит заказ по Москве на следующий день после оплаты."],
        "bullets": ["самовывоз из пункта выдачи", "курьерская доставка", "почта России"],
    },
]


def unicode_font(name: str = "DejaVuSans.ttf") -> Path:
    """A TTF with Cyrillic glyphs: the system DejaVu Sans, else matplotlib's copy."""
    system = Path("/usr/share/fonts/truetype/dejavu") / name
    if system.is_file():
        return system
    import matplotlib

    bundled = Path(matplotlib.get_data_path()) / "fonts" / "ttf" / name
    if bundled.is_file():
        return bundled
    raise FileNotFoundError(f"no {name}: install fonts-dejavu-core or matplotlib")


def _pdf():  # type: ignore[no-untyped-def]
    from fpdf import FPDF

    pdf = FPDF()
    pdf.add_font("DejaVu", fname=str(unicode_font()))
    pdf.add_font("DejaVu", style="B", fname=str(unicode_font("DejaVuSans-Bold.ttf")))
    pdf.set_font("DejaVu", size=12)
    return pdf


def make_pdf(path: Path, pages: list[dict[str, object]] | None = None) -> Path:
    """A text PDF, one page per entry: a heading line, paragraphs, a table, bullets."""
    pdf = _pdf()
    for page in pages if pages is not None else PDF_PAGES:
        pdf.add_page()
        pdf.set_font("DejaVu", size=16)
        pdf.multi_cell(0, 10, str(page["heading"]), new_x="LMARGIN", new_y="NEXT")
        pdf.set_font("DejaVu", size=12)
        for line in page.get("lines", []):  # type: ignore[attr-defined]
            pdf.multi_cell(0, 7, str(line), new_x="LMARGIN", new_y="NEXT")
        rows = page.get("table")
        if rows:
            with pdf.table() as table:
                for row in rows:  # type: ignore[attr-defined]
                    r = table.row()
                    for cell in row:
                        r.cell(cell)
        for item in page.get("bullets", []):  # type: ignore[attr-defined]
            pdf.multi_cell(0, 7, f"• {item}", new_x="LMARGIN", new_y="NEXT")
    path.parent.mkdir(parents=True, exist_ok=True)
    pdf.output(str(path))
    return path


def make_encrypted_pdf(path: Path) -> Path:
    """A PDF that opens only with a user password."""
    pdf = _pdf()
    pdf.add_page()
    pdf.multi_cell(0, 7, "Секретный регламент", new_x="LMARGIN", new_y="NEXT")
    pdf.set_encryption(owner_password="owner-secret", user_password="user-secret")
    path.parent.mkdir(parents=True, exist_ok=True)
    pdf.output(str(path))
    return path


def make_broken_pdf(path: Path) -> Path:
    """A PDF header followed by garbage and a truncated body."""
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(b"%PDF-1.7\n1 0 obj\n<< /Type /Catalog /Pages 2 0 R\n" + bytes(range(32, 127)) * 3)
    return path


def make_image_pdf(path: Path) -> Path:
    """A 'scan': one page holding only a picture, no text layer."""
    from PIL import Image, ImageDraw

    img = Image.new("RGB", (400, 120), "white")
    ImageDraw.Draw(img).rectangle((20, 20, 380, 100), outline="black", width=3)
    buf = io.BytesIO()
    img.save(buf, format="PNG")
    buf.seek(0)
    from fpdf import FPDF

    pdf = FPDF()
    pdf.add_page()
    pdf.image(buf, x=10, y=10, w=180)
    path.parent.mkdir(parents=True, exist_ok=True)
    pdf.output(str(path))
    return path


def make_docx(path: Path) -> Path:
    """Headings (levels 1-2), paragraphs, a bulleted list and a table."""
    import docx

    d = docx.Document()
    d.add_heading("Программа лояльности", level=1)
    d.add_paragraph("Бонусные баллы начисляются за каждую покупку в магазине.")
    d.add_heading("Начисление баллов", level=2)
    d.add_paragraph("Один балл равен одному рублю скидки.")
    for item in ("покупка в магазине", "покупка на сайте", "отзыв о товаре"):
        d.add_paragraph(item, style="List Bullet")
    d.add_heading("Уровни участников", level=2)
    table = d.add_table(rows=3, cols=2)
    for r, (a, b) in enumerate([("Уровень", "Кешбэк"), ("Серебряный", "3 %"), ("Золотой", "5 %")]):
        table.cell(r, 0).text = a
        table.cell(r, 1).text = b
    path.parent.mkdir(parents=True, exist_ok=True)
    d.save(str(path))
    return path


def make_pptx(path: Path) -> Path:
    """Three slides: a title slide, a bulleted slide and a slide with a table."""
    from pptx import Presentation
    from pptx.util import Inches

    prs = Presentation()
    s1 = prs.slides.add_slide(prs.slide_layouts[0])
    s1.shapes.title.text = "Обучение операторов"
    s1.placeholders[1].text = "Вводный курс для новых сотрудников поддержки"
    s2 = prs.slides.add_slide(prs.slide_layouts[1])
    s2.shapes.title.text = "Правила общения"
    body = s2.placeholders[1].text_frame
    body.text = "Здороваться с клиентом по имени"
    for line in ("Не перебивать клиента", "Подтверждать решение письмом"):
        body.add_paragraph().text = line
    s3 = prs.slides.add_slide(prs.slide_layouts[5])
    s3.shapes.title.text = "Время ответа"
    tbl = s3.shapes.add_table(3, 2, Inches(1), Inches(2), Inches(6), Inches(1.5)).table
    for r, (a, b) in enumerate([("Канал", "Срок ответа"), ("Чат", "2 минуты"), ("Почта", "4 часа")]):
        tbl.cell(r, 0).text = a
        tbl.cell(r, 1).text = b
    path.parent.mkdir(parents=True, exist_ok=True)
    prs.save(str(path))
    return path


HTML = """<!DOCTYPE html>
<html lang="ru"><head><meta charset="utf-8"><title>Справка: оплата</title>
<style>h1 {color: red}</style><script>var x = 1;</script></head>
<body>
<h1 id="oplata">Оплата заказа</h1>
<p>Заказ можно оплатить картой, через СБП или наличными курьеру.</p>
<h2 id="karty">Банковские карты</h2>
<p>Принимаются карты «Мир», Visa и Mastercard.</p>
<table>
<tr><th>Способ</th><th>Комиссия</th></tr>
<tr><td>Карта</td><td>0 %</td></tr>
<tr><td>СБП</td><td>0 %</td></tr>
</table>
<h2><a name="rassrochka"></a>Рассрочка</h2>
<p>Рассрочка на шесть месяцев доступна для заказов дороже десяти тысяч рублей.</p>
<h2>Возврат денег при отмене</h2>
<ul><li>на карту за три рабочих дня</li><li>на счёт СБП в течение суток</li></ul>
<h3>Возврат денег при отмене</h3>
<p>Повторный заголовок получает уникальный якорь.</p>
</body></html>
"""


def make_html(path: Path, text: str = HTML) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
    return path
