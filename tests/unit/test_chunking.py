"""Unit tests for osrag.chunking: one test (at least) per chunking rule."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from osrag.chunking import (
    Chunk,
    ChunkingConfig,
    Document,
    chunk_document,
    chunk_fixed,
    chunk_markdown,
    chunk_text,
    parse_sections,
    simple_token_count,
)

FIXTURES = Path(__file__).parent / "fixtures" / "chunking"
REGLAMENT = (FIXTURES / "reglament.md").read_text(encoding="utf-8")

count = simple_token_count


def cfg(max_tokens: int, min_tokens: int = 0, overlap: float = 0.0, **kw: bool) -> ChunkingConfig:
    return ChunkingConfig(max_tokens=max_tokens, min_tokens=min_tokens, overlap=overlap, **kw)


def span(doc: Document, c: Chunk) -> str:
    return doc.text[c.start : c.end]


# --------------------------------------------------------------------------
# Token counter, config, empty input
# --------------------------------------------------------------------------


def test_simple_token_count_words_and_punctuation() -> None:
    assert count("") == 0
    assert count("Привет, мир!") == 4
    assert count("в 2024 г. — срок_1") == 6  # в 2024 г . — срок_1
    assert count("a-b") == 3


def test_config_validation() -> None:
    with pytest.raises(ValueError):
        ChunkingConfig(max_tokens=0)
    with pytest.raises(ValueError):
        ChunkingConfig(max_tokens=50, min_tokens=60)
    with pytest.raises(ValueError):
        ChunkingConfig(overlap=0.6)
    assert ChunkingConfig(max_tokens=100, overlap=0.12).overlap_tokens == 12


@pytest.mark.parametrize("text", ["", "   \n\n\t  \n"])
@pytest.mark.parametrize("strategy", ["markdown", "text", "fixed"])
def test_empty_document_gives_no_chunks(text: str, strategy: str) -> None:
    doc = Document("empty", text)
    assert chunk_document(doc, strategy) == []
    assert parse_sections(doc) == []


def test_unknown_strategy_rejected() -> None:
    with pytest.raises(ValueError, match="semantic"):
        chunk_document(Document("d", "текст"), "semantic")


def test_dispatch_matches_direct_calls() -> None:
    doc = Document("d", REGLAMENT)
    assert chunk_document(doc, "markdown") == chunk_markdown(doc)
    assert chunk_document(doc, "text") == chunk_text(doc)
    assert chunk_document(doc, "fixed") == chunk_fixed(doc)


# --------------------------------------------------------------------------
# parse_sections
# --------------------------------------------------------------------------

SECTIONS_MD = """Преамбула до заголовков.

# А

текст а

## Б

```bash
# это комментарий в коде, а не заголовок
echo ok
```

### В

текст в

## Г

текст г

# Д

#### Е

конец
"""


def test_parse_sections_nesting_ids_and_ends() -> None:
    doc = Document("s", SECTIONS_MD)
    secs = parse_sections(doc)
    by_id = {s.section_id: s for s in secs}
    assert [s.section_id for s in secs] == ["s#root", "s#0", "s#1", "s#2", "s#3", "s#4", "s#5"]
    assert [s.level for s in secs] == [0, 1, 2, 3, 2, 1, 4]
    assert [s.parent_id for s in secs] == [None, None, "s#0", "s#1", "s#0", None, "s#4"]
    assert by_id["s#2"].heading_path == ("А", "Б", "В")
    assert by_id["s#5"].heading_path == ("Д", "Е")  # skipped levels still nest

    text = doc.text
    assert text[by_id["s#root"].start : by_id["s#root"].end] == "Преамбула до заголовков."
    a = text[by_id["s#0"].start : by_id["s#0"].end]
    assert a.startswith("# А") and a.endswith("текст г")  # includes subsections
    b = text[by_id["s#1"].start : by_id["s#1"].end]
    assert b.startswith("## Б") and b.endswith("текст в") and "## Г" not in b
    assert text[by_id["s#3"].start : by_id["s#3"].end] == "## Г\n\nтекст г"
    assert text[by_id["s#4"].start : by_id["s#4"].end].endswith("конец")
    assert "комментарий" not in " ".join(" ".join(s.heading_path) for s in secs)


def test_fence_right_after_paragraph_hides_headings() -> None:
    md = "# Один\n\nПример:\n```bash\n# комментарий\necho 1\n```\n"
    assert [s.heading_path for s in parse_sections(Document("f", md))] == [("Один",)]
    [c] = chunk_markdown(Document("f", md), cfg(100))
    assert c.kind == "code" and c.body.startswith("Пример:\n```bash")


def test_parse_sections_without_headings_is_root_only() -> None:
    secs = parse_sections(Document("x", "\n\nПросто текст.\n"))
    assert len(secs) == 1
    assert secs[0].section_id == "x#root" and secs[0].level == 0
    assert (secs[0].start, secs[0].end) == (2, 15)


def test_parse_sections_no_root_when_document_starts_with_heading() -> None:
    secs = parse_sections(Document("x", "# Один\n\nтекст\n"))
    assert [s.section_id for s in secs] == ["x#0"]


# --------------------------------------------------------------------------
# Breadcrumbs and heading paths
# --------------------------------------------------------------------------

DEEP_MD = """# Договор

## Приемка работ

### Требования к срокам

#### Сроки для этапа 1

Этап 1 завершается не позднее 30 календарных дней с даты аванса, иначе начисляется неустойка.
"""


def test_deep_headings_breadcrumb() -> None:
    doc = Document("deep", DEEP_MD)
    [c] = chunk_markdown(doc, cfg(200))
    path = ("Договор", "Приемка работ", "Требования к срокам", "Сроки для этапа 1")
    assert c.heading_path == path
    assert c.text == "Договор > Приемка работ > Требования к срокам > Сроки для этапа 1\n\n" + c.body
    assert c.body.startswith("Этап 1 завершается")
    secs = parse_sections(doc)
    assert c.section_id == secs[-1].section_id == "deep#3"
    assert c.parent_section_id == "deep#2"
    assert c.token_count == count(c.text)


def test_title_leads_breadcrumb_only_when_different() -> None:
    same = chunk_markdown(Document("d", DEEP_MD, title="Договор"), cfg(200))
    assert same[0].heading_path[0] == "Договор" and same[0].heading_path[1] == "Приемка работ"
    other = chunk_markdown(Document("d", DEEP_MD, title="Регламент подряда"), cfg(200))
    assert other[0].heading_path[:2] == ("Регламент подряда", "Договор")
    assert other[0].text.startswith("Регламент подряда > Договор > ")


def test_breadcrumb_can_be_disabled() -> None:
    [c] = chunk_markdown(Document("d", DEEP_MD), cfg(200, breadcrumb=False))
    assert c.text == c.body
    assert c.heading_path[-1] == "Сроки для этапа 1"


def test_breadcrumb_is_repeated_in_every_piece_of_a_long_section() -> None:
    para = " ".join(f"Пункт {i} требует отдельного согласования с заказчиком." for i in range(30))
    doc = Document("d", f"# Договор\n\n## Сроки\n\n{para}\n")
    chunks = chunk_markdown(doc, cfg(60, overlap=0.1))
    assert len(chunks) > 3
    for c in chunks:
        assert c.text.startswith("Договор > Сроки\n\n")
        assert c.heading_path == ("Договор", "Сроки")


# --------------------------------------------------------------------------
# Tables
# --------------------------------------------------------------------------

TABLE_HEADER = "| № | Услуга | Цена, руб. | Срок |"
TABLE_SEP = "|---|---|---:|---|"
TABLE_ROWS = [f"| {i} | Доставка в зону {i} | {i * 150} | {i % 5 + 1} дн. |" for i in range(1, 41)]
TABLE_MD = (
    "# Тарифы\n\nТарифы действуют с 1 марта.\n\nТаблица 2. Стоимость доставки по зонам\n"
    + "\n".join([TABLE_HEADER, TABLE_SEP, *TABLE_ROWS])
    + "\n\nЦены указаны без НДС.\n"
)


def test_long_table_split_by_rows_with_header_in_every_piece() -> None:
    doc = Document("t", TABLE_MD)
    config = cfg(90)
    chunks = chunk_markdown(doc, config)
    pieces = [c for c in chunks if TABLE_SEP in c.body]
    assert len(pieces) >= 4
    source_lines = set(doc.text.splitlines())
    for c in pieces:
        lines = c.body.splitlines()
        caption = lines.index("Таблица 2. Стоимость доставки по зонам")
        assert lines[caption + 1 : caption + 3] == [TABLE_HEADER, TABLE_SEP]
        assert all(line in source_lines for line in lines if line)  # no row was cut
        assert c.token_count <= config.max_tokens
        assert c.kind in ("table", "mixed")
        first_row = next(line for line in lines if line in TABLE_ROWS)
        last_row = [line for line in lines if line in TABLE_ROWS][-1]
        assert first_row in span(doc, c) and last_row in span(doc, c)
    for row in TABLE_ROWS:  # every row exactly once
        assert sum(c.body.count(row) for c in chunks) == 1, row
    assert sum(c.body.count("Цены указаны без НДС.") for c in chunks) == 1


def test_caption_stays_prose_when_repeating_it_would_break_the_limit() -> None:
    caption = "Таблица 3. Подробная расшифровка тарифов на доставку по всем зонам"
    rows = TABLE_ROWS[:12]
    md = f"# Тарифы\n\n{caption}\n" + "\n".join([TABLE_HEADER, TABLE_SEP, *rows])
    limit = max(count(f"Тарифы\n\n{TABLE_HEADER}\n{TABLE_SEP}\n{row}") for row in rows)
    chunks = chunk_markdown(Document("t", md), cfg(limit))
    assert all(c.token_count <= limit for c in chunks)
    assert sum(caption in c.body for c in chunks) == 1
    assert all(TABLE_HEADER in c.body for c in chunks if any(r in c.body for r in rows))


def test_small_table_stays_whole_with_caption() -> None:
    md = "Ставки:\n\n" + "\n".join([TABLE_HEADER, TABLE_SEP, *TABLE_ROWS[:3]])
    [c] = chunk_markdown(Document("t", md), cfg(200))
    assert c.kind == "table"
    assert c.body == md
    assert (c.start, c.end) == (0, len(md))


# --------------------------------------------------------------------------
# Code
# --------------------------------------------------------------------------

FUNCS = [
    f'''def compute_{i}(value, factor={i}):
    """Считает значение номер {i}."""
    result = value * factor + {i}
    return result'''
    for i in range(5)
]
CLASS = '''class Repository:  # хранилище
    """Хранилище документов."""

    def __init__(self, path):
        self.path = path
        self.items = []

    def add(self, item):
        self.items.append(item)
        return len(self.items)

    @property
    def size(self):
        return len(self.items)

    async def flush(self):
        await write(self.path, self.items)
        self.items = []'''
LONG_BODY = [f"    x{i} = compute_{i % 5}(x{i - 1}, {i})" for i in range(1, 40)]
LONG_FUNC = "def very_long(x0):\n" + "\n".join(LONG_BODY) + "\n    return x39"
CODE = "import os\n\n" + "\n\n\n".join([*FUNCS, CLASS, LONG_FUNC])
CODE_MD = f"# Модуль\n\nПример модуля:\n\n```python\n{CODE}\n```\n\nКонец примера.\n"


def code_lines(c: Chunk) -> list[str]:
    lines = c.body.splitlines()
    i = lines.index("```python")
    j = len(lines) - 1 - lines[::-1].index("```")
    return lines[i + 1 : j]


def test_long_code_split_at_function_boundaries() -> None:
    doc = Document("c", CODE_MD)
    config = cfg(70)
    chunks = chunk_markdown(doc, config)
    code = [c for c in chunks if "```python" in c.body]
    assert len(code) > 5
    for c in code:
        lines = c.body.splitlines()
        assert lines[0] == "Пример модуля:"  # the lead-in travels with every piece
        assert (lines[1] == "```python" and lines[-1] == "```") or c.kind == "mixed"
        assert c.token_count <= config.max_tokens
    for f in FUNCS:  # each small function is whole, in exactly one piece
        assert sum(f in c.body for c in code) == 1, f
        assert sum(f.splitlines()[0] in c.body for c in code) == 1
    # no piece starts in the middle of a function that would have fitted
    for c in code:
        first = code_lines(c)[0]
        assert not first.startswith("    result") and not first.startswith('    """Считает')


def test_class_split_at_methods_carries_class_signature() -> None:
    doc = Document("c", CODE_MD)
    code = [c for c in chunk_markdown(doc, cfg(70)) if "```python" in c.body]
    methods = ["def __init__", "def add", "def size", "async def flush"]
    holders = [c for c in code if any(m in c.body for m in methods)]
    assert len(holders) >= 2
    for c in holders:
        first = code_lines(c)[0]
        assert first in ("class Repository:", "class Repository:  # хранилище")
    carried = [c for c in holders if "Хранилище документов" not in c.body]
    assert carried and all(code_lines(c)[0] == "class Repository:" for c in carried)
    for m in methods:  # a method that fits is never split
        holder = [c for c in code if m in c.body]
        assert len(holder) == 1
    assert sum("@property\n    def size" in c.body for c in code) == 1  # decorator stays


def test_overlong_function_split_by_whole_lines_with_signature() -> None:
    doc = Document("c", CODE_MD)
    config = cfg(70)
    code = [c for c in chunk_markdown(doc, config) if "very_long" in c.body]
    assert len(code) >= 3
    seen: list[str] = []
    for c in code:
        body = code_lines(c)
        assert body[0] == "def very_long(x0):"
        for line in body[1:]:
            assert line in LONG_BODY or line == "    return x39"  # never mid-line
        seen.extend(body[1:])
        assert c.token_count <= config.max_tokens
    assert seen == [*LONG_BODY, "    return x39"]  # every line once, in order


def test_function_split_between_top_level_statements() -> None:
    func = """def penalty_rate(days: int) -> Decimal:
    \"\"\"Ставка неустойки по таблице 1 договора поставки.\"\"\"
    if days <= 5:
        return Decimal("0.001")
    if days <= 10:
        return Decimal("0.002")
    if days <= 20:
        return Decimal("0.003")
    return Decimal("0.005")"""
    doc = Document("c", f"```python\n{func}\n```")
    chunks = chunk_markdown(doc, cfg(40))
    assert len(chunks) >= 2
    for c in chunks:
        lines = code_lines(c)
        assert lines[0] == "def penalty_rate(days: int) -> Decimal:"
        for n, line in enumerate(lines):  # an "if" never leaves its body behind
            if line.lstrip().startswith("if "):
                assert lines[n + 1].startswith("        return")


def test_small_code_block_kept_whole() -> None:
    md = f"```python\n{FUNCS[0]}\n\n{FUNCS[1]}\n```"
    [c] = chunk_markdown(Document("c", md), cfg(200))
    assert c.kind == "code" and c.body == md


JS_MD = """```ts
import { x } from "y";

export function alpha(a: number): number {
  const b = a * 2;
  return b + 1;
}

const beta = (s: string) => {
  return s.trim().toLowerCase();
};

function gamma(list) {
  return list.map((v) => v * 2).filter(Boolean);
}
```"""


def test_js_code_split_at_function_boundaries() -> None:
    chunks = chunk_markdown(Document("j", JS_MD), cfg(45))
    assert len(chunks) >= 2
    for c in chunks:
        assert c.body.startswith("```ts\n") and c.body.endswith("\n```")
    for head, tail in [
        ("export function alpha", "return b + 1;\n}"),
        ("const beta = (s: string) => {", "toLowerCase();\n};"),
        ("function gamma(list)", ".filter(Boolean);\n}"),
    ]:
        [holder] = [c for c in chunks if head in c.body]
        assert tail in holder.body


# --------------------------------------------------------------------------
# Lists
# --------------------------------------------------------------------------

LEAD_IN = "Перед подписанием акта проверьте следующее:"
ITEMS = [
    (
        f"{i}. Пункт номер {i} о приемке работ",
        [f"   - подпункт {i}.1 про акт", f"   - подпункт {i}.2 про подпись"],
    )
    for i in range(1, 9)
]
LIST_MD = (
    f"## Приемка\n\n{LEAD_IN}\n\n"
    + "\n".join("\n".join([head, *subs]) for head, subs in ITEMS)
    + "\n\nПосле проверки подпишите акт.\n"
)


def test_long_list_keeps_lead_in_and_sub_items() -> None:
    doc = Document("l", LIST_MD)
    config = cfg(60)
    chunks = chunk_markdown(doc, config)
    pieces = [c for c in chunks if any(head in c.body for head, _ in ITEMS)]
    assert len(pieces) >= 3
    for c in pieces:
        assert c.body.startswith(LEAD_IN + "\n")
        assert c.token_count <= config.max_tokens
    for head, subs in ITEMS:
        [holder] = [c for c in pieces if head + "\n" in c.body or c.body.endswith(head)]
        for sub in subs:  # sub-items stay with their parent item
            assert sub in holder.body
            assert sum(sub in c.body for c in chunks) == 1
    assert pieces[0].start == doc.text.index(LEAD_IN)
    for c in pieces[1:]:  # spans point at the new items, not the repeated lead-in
        assert LEAD_IN not in span(doc, c)
        assert re.match(r"\d\. Пункт", span(doc, c))


def test_list_item_with_many_sub_items_repeats_parent_line() -> None:
    subs = [f"  - требование {i} к оформлению исполнительной документации" for i in range(12)]
    md = "Проверьте:\n\n- Документация\n" + "\n".join(subs) + "\n- Подписи\n"
    doc = Document("l", md)
    config = cfg(40)
    chunks = chunk_markdown(doc, config)
    holders = [c for c in chunks if "требование" in c.body]
    assert len(holders) >= 3
    for c in holders:
        assert c.body.startswith("Проверьте:\n- Документация\n")
        assert c.token_count <= config.max_tokens
    for sub in subs:
        assert sum(sub in c.body for c in chunks) == 1


def test_list_lazy_continuation_and_fenced_code_inside_item() -> None:
    md = (
        "- первый пункт длинный\nи его продолжение\n- второй пункт:\n\n  ```\n  - не пункт\n  ```\n- третий\n"
    )
    [c] = chunk_markdown(Document("l", md), cfg(100))
    assert c.kind == "list"
    assert c.body == md.strip()


def test_small_list_with_lead_in_kept_whole() -> None:
    md = "Комиссия проверяет:\n\n- объем\n- качество\n  - материалы\n- сроки\n"
    [c] = chunk_markdown(Document("l", md), cfg(100))
    assert c.kind == "list"
    assert c.body == md.strip()


# --------------------------------------------------------------------------
# Footnotes
# --------------------------------------------------------------------------

FOOT_MD = """# Договор

## Стороны

Стороны действуют добросовестно[^good] и соблюдают сроки.

## Оплата

Оплата производится в течение 5 рабочих дней[^days]. Аванс не предусмотрен.

## Прочее

Прочие условия определяются приложением. Сноска без ссылки ниже останется текстом.

[^good]: Принцип добросовестности закреплен в ст. 1 ГК РФ.
[^days]: Рабочими считаются дни, кроме выходных и праздничных.
[^lost]: Эта сноска нигде не упомянута.
"""


def test_footnote_definition_travels_with_reference() -> None:
    chunks = chunk_markdown(Document("f", FOOT_MD), cfg(100))
    good = "[^good]: Принцип добросовестности закреплен в ст. 1 ГК РФ."
    days = "[^days]: Рабочими считаются дни, кроме выходных и праздничных."
    [c_good] = [c for c in chunks if "добросовестно[^good]" in c.body]
    [c_days] = [c for c in chunks if "дней[^days]" in c.body]
    assert c_good.body.endswith(good) and days not in c_good.body
    assert c_days.body.endswith(days) and good not in c_days.body
    assert c_good.section_id != c_days.section_id
    for c in chunks:  # definitions never float alone, never twice
        if good in c.body:
            assert "[^good] " in c.body
    assert sum(good in c.body for c in chunks) == 1
    # an unreferenced definition is ordinary text of its section
    [c_lost] = [c for c in chunks if "[^lost]:" in c.body]
    assert c_lost.heading_path[-1] == "Прочее"
    assert c_good.token_count <= 100 and c_days.token_count <= 100


# --------------------------------------------------------------------------
# Recursive fallback: sentences, words
# --------------------------------------------------------------------------

SENTENCES = [
    "Договор подписан в г. Москва представителями обеих сторон.",
    "Оплата вносится ежемесячно, т. е. не позднее пятого числа.",
    "Документы, акты, счета и т. д. хранятся в архиве пять лет.",
    "Срок действия договора составляет три года с момента подписания!",
    "Можно ли продлить договор досрочно по соглашению сторон?",
    "Да, если стороны подпишут дополнительное соглашение…",
]


def test_chunk_text_splits_at_sentences_russian_aware() -> None:
    doc = Document("p", " ".join(SENTENCES[:3]) + "\n\n" + " ".join(SENTENCES[3:]))
    longest = max(count(s) for s in SENTENCES)
    chunks = chunk_text(doc, cfg(longest))  # one sentence fits, two do not
    assert all(count(a) + count(b) > longest for a, b in zip(SENTENCES, SENTENCES[1:]))
    assert [c.body for c in chunks] == SENTENCES
    for c in chunks:
        assert span(doc, c) == c.body
        assert c.section_id == "p#root" and c.heading_path == ()
        assert c.kind == "text"


@pytest.mark.parametrize(
    "sentence",
    [
        "Договор подписан в г. Москва представителями обеих сторон.",
        "Оплата вносится ежемесячно, т. е. Не позднее пятого числа.",
        "Акты, счета и т. д. Хранятся в архиве пять лет.",
        "Подписал Иванов А. С. Лично в присутствии нотариуса.",
        "Работы были приостановлены... затем возобновлены подрядчиком.",
        "Стоимость 500 руб. Включает доставку до склада.",
    ],
)
def test_no_sentence_break_after_abbreviations(sentence: str) -> None:
    # "Итак." + the part before the abbreviation would fit, so a false break
    # would show up as a different packing
    doc = Document("a", f"Итак. {sentence}")
    chunks = chunk_text(doc, cfg(count(sentence)))
    assert [c.body for c in chunks] == ["Итак.", sentence]


def test_chunk_text_packs_paragraphs_and_uses_title_breadcrumb() -> None:
    doc = Document("p", " ".join(SENTENCES[:3]) + "\n\n" + " ".join(SENTENCES[3:]), title="Договор")
    chunks = chunk_text(doc, cfg(350))
    assert len(chunks) == 1
    assert chunks[0].text.startswith("Договор\n\n")
    assert chunks[0].heading_path == ("Договор",)
    assert chunks[0].body == doc.text


def test_prose_is_never_cut_inside_a_word() -> None:
    words = [f"слово{i}" for i in range(400)]
    doc = Document("w", " ".join(words))  # no sentence punctuation at all
    config = cfg(30, overlap=0.1)
    for chunks in (chunk_text(doc, config), chunk_markdown(doc, config)):
        assert len(chunks) > 10
        vocabulary = set(words)
        for c in chunks:
            assert all(w in vocabulary for w in c.body.split())
            assert c.token_count <= config.max_tokens
        assert chunks[-1].body.endswith("слово399")


def test_word_longer_than_limit_is_kept_whole() -> None:
    monster = "-".join(["сверхдлинноеслово"] * 60)  # 119 tokens, one word
    doc = Document("m", f"# Раздел\n\nКороткое начало абзаца. {monster} и обычный хвост предложения.")
    config = cfg(40)
    for chunks in (chunk_markdown(doc, config), chunk_text(doc, config)):
        holders = [c for c in chunks if monster in c.body]
        assert len(holders) == 1
        [big] = holders
        assert big.token_count > config.max_tokens  # the documented exception
        assert span(doc, big).strip() == monster
        for c in chunks:
            if c is not big:
                assert c.token_count <= config.max_tokens
                assert "сверхдлинноеслово" not in c.body
        assert any("обычный хвост" in c.body for c in chunks)


# --------------------------------------------------------------------------
# Overlap
# --------------------------------------------------------------------------

PROSE = " ".join(f"Условие {i} обязывает подрядчика уведомить заказчика о задержке." for i in range(24))


def overlap_prefix(doc: Document, c: Chunk) -> str:
    new = span(doc, c)
    assert c.body.endswith(new)
    return c.body[: len(c.body) - len(new)]


def test_overlap_between_prose_chunks_present_and_bounded() -> None:
    doc = Document("o", f"# Обязанности\n\n{PROSE}\n")
    config = cfg(60, overlap=0.15)  # 9 tokens
    chunks = chunk_markdown(doc, config)
    assert len(chunks) >= 4
    assert overlap_prefix(doc, chunks[0]) == ""
    for prev, c in zip(chunks, chunks[1:]):
        prefix = overlap_prefix(doc, c)
        tail = prefix.rstrip()
        assert tail, "overlap missing"
        assert 0 < count(tail) <= config.overlap_tokens
        assert prev.body.endswith(tail)
        cut = len(prev.body) - len(tail)
        assert prev.body[cut - 1].isspace()  # starts at a word boundary
        assert c.start >= prev.end  # span covers only new material
        assert not doc.text[c.start].isspace() and not doc.text[c.end - 1].isspace()
        assert c.token_count <= config.max_tokens


def test_overlap_prefers_sentence_boundary() -> None:
    sentences = [f"Срок {i} истекает." for i in range(40)]  # 4 tokens each
    doc = Document("o", " ".join(sentences))
    config = cfg(40, overlap=0.25)  # 10 tokens
    chunks = chunk_text(doc, config)
    for c in chunks[1:]:
        prefix = overlap_prefix(doc, c).strip()
        assert prefix.startswith("Срок ") and prefix.endswith("истекает.")


def test_overlap_disabled_and_not_across_sections() -> None:
    doc = Document("o", f"# Первый\n\n{PROSE}\n\n# Второй\n\n{PROSE}\n")
    for c in chunk_markdown(doc, cfg(60, overlap=0.0)):
        assert c.body == span(doc, c)
    chunks = chunk_markdown(doc, cfg(60, overlap=0.15))
    first_of_second = next(c for c in chunks if c.heading_path == ("Второй",))
    assert first_of_second.body == span(doc, first_of_second)
    assert first_of_second.body.startswith("Условие 0 ")


def test_no_overlap_after_table_or_list() -> None:
    md = "# Р\n\nВводный абзац про сроки.\n\n" + "\n".join([TABLE_HEADER, TABLE_SEP, *TABLE_ROWS[:4]])
    md += "\n\n" + PROSE
    doc = Document("o", md)
    chunks = chunk_markdown(doc, cfg(60, overlap=0.15))
    for prev, c in zip(chunks, chunks[1:]):
        if TABLE_SEP in prev.body and TABLE_SEP not in c.body:
            assert overlap_prefix(doc, c) == ""


# --------------------------------------------------------------------------
# Minimum size
# --------------------------------------------------------------------------

TINY_MD = f"""# Договор

## Определения

См. ниже.

### Термины

{" ".join(SENTENCES[:3])}

## Оплата

{" ".join(SENTENCES[3:])}
"""


def test_tiny_section_merges_into_next_child_keeping_first_breadcrumb() -> None:
    doc = Document("t", TINY_MD)
    chunks = chunk_markdown(doc, cfg(150, min_tokens=20))
    merged = next(c for c in chunks if "См. ниже." in c.body)
    assert merged.heading_path == ("Договор", "Определения")
    assert merged.text.startswith("Договор > Определения\n\nСм. ниже.")
    assert "### Термины" in merged.body and SENTENCES[0] in merged.body
    assert merged.section_id == "t#1"
    assert span(doc, merged).startswith("См. ниже.") and span(doc, merged).endswith(SENTENCES[2])
    assert not any(c.heading_path[-1] == "Термины" for c in chunks)
    # without a minimum the tiny section stays on its own
    alone = chunk_markdown(doc, cfg(150, min_tokens=0))
    assert next(c for c in alone if "См. ниже." in c.body).body == "См. ниже."


def test_tiny_section_does_not_merge_when_result_too_big_or_into_uncle() -> None:
    para = " ".join(f"условие{i}" for i in range(30)) + "."
    md = f"# А\n\n## Б\n\nМало.\n\n### В\n\n{para}\n"
    limit = count("А > Б > В\n\n" + para)  # the child alone fills the chunk
    chunks = chunk_markdown(Document("t", md), cfg(limit, min_tokens=20))
    assert [c.body for c in chunks] == ["Мало.", para]
    # one token more of room and the tiny section is absorbed
    roomy = chunk_markdown(Document("t", md), cfg(limit + 10, min_tokens=20))
    assert [c.body for c in roomy] == [f"Мало.\n\n### В\n\n{para}"]

    uncle = Document("u", "# А\n\n## Б\n\n### В\n\nМало.\n\n## Г\n\nДругой раздел с текстом про оплату.\n")
    chunks = chunk_markdown(uncle, cfg(150, min_tokens=20))
    small = next(c for c in chunks if "Мало." in c.body)
    assert small.body == "Мало."  # "## Г" is not a sibling or child of "### В"
    sibling = Document("s", "# А\n\n## Б\n\nМало.\n\n## Г\n\nСоседний раздел с текстом про оплату.\n")
    [c] = chunk_markdown(sibling, cfg(150, min_tokens=20))
    assert c.body == "Мало.\n\n## Г\n\nСоседний раздел с текстом про оплату."
    assert c.heading_path == ("А", "Б")
    assert c.section_id == "s#1" and c.parent_section_id == "s#0"


def test_small_chunks_only_where_no_neighbour_can_take_them() -> None:
    doc = Document("r", REGLAMENT)
    for max_tokens in (40, 60, 120):
        config = cfg(max_tokens, min_tokens=25, overlap=0.12)
        chunks = chunk_markdown(doc, config)
        for i, c in enumerate(chunks):
            if c.token_count >= config.min_tokens:
                continue
            for j in (i - 1, i + 1):
                if 0 <= j < len(chunks) and chunks[j].section_id == c.section_id:
                    joined = c.text + "\n\n" + chunks[j].body
                    assert count(joined) > config.max_tokens


# --------------------------------------------------------------------------
# Global invariants on a realistic document
# --------------------------------------------------------------------------

MONSTER = "-".join(["неделимоеслово"] * 30)
WITH_MONSTER = REGLAMENT + f"\n\n# Приложение\n\nКод изделия {MONSTER} указан на шильдике.\n"


@pytest.mark.parametrize("max_tokens", [60, 80, 150, 350])
@pytest.mark.parametrize("overlap", [0.0, 0.12])
def test_max_tokens_never_exceeded_except_overlong_word(max_tokens: int, overlap: float) -> None:
    doc = Document("r", WITH_MONSTER)
    config = cfg(max_tokens, min_tokens=10, overlap=overlap)
    chunks = chunk_markdown(doc, config)
    assert [c.ordinal for c in chunks] == list(range(len(chunks)))
    for c in chunks:
        assert c.body.strip()
        assert c.token_count == count(c.text)
        assert c.chunk_id == f"r:{c.ordinal}"
        if MONSTER not in c.body:
            assert c.token_count <= max_tokens, c.text
    assert sum(MONSTER in c.body for c in chunks) == 1


@pytest.mark.parametrize("max_tokens", [20, 30, 45])
def test_tiny_limits_exceed_only_by_single_row_line_or_word(max_tokens: int) -> None:
    """When even breadcrumb + table header + one row (or fence + one code
    line) cannot fit, that single row/line is emitted over the limit."""
    doc = Document("r", WITH_MONSTER)
    config = cfg(max_tokens, min_tokens=5, overlap=0.12)
    chunks = chunk_markdown(doc, config)
    over = [c for c in chunks if c.token_count > max_tokens]
    assert over  # the limits above are really too small for this document
    for c in over:
        new = span(doc, c)
        if c.kind == "table":
            rows = [line for line in c.body.splitlines() if line.startswith("|")]
            assert len(rows) == 3, c.body  # header, separator, one row
        elif c.kind == "code":
            assert len(code_lines(c)) <= 2, c.body  # carried signature + one line
        else:
            assert MONSTER in c.body or "\n" not in new.strip(), c.body
    for c in chunks:  # prose is still cut only between words
        if c.kind == "text":
            assert all(w in doc.text for w in c.body.split())


@pytest.mark.parametrize("max_tokens", [40, 80, 350])
def test_spans_point_at_new_material_and_cover_the_document(max_tokens: int) -> None:
    doc = Document("r", REGLAMENT)
    chunks = chunk_markdown(doc, cfg(max_tokens, min_tokens=0, overlap=0.0))
    covered = [False] * len(doc.text)
    prev_end = 0
    for c in chunks:
        assert 0 <= c.start < c.end <= len(doc.text)
        assert c.start >= prev_end  # spans are ordered and disjoint
        prev_end = c.end
        lines = [line.strip() for line in span(doc, c).splitlines() if line.strip()]
        assert lines[0] in c.body and lines[-1] in c.body
        for k in range(c.start, c.end):
            covered[k] = True
    # everything but headings and moved footnote definitions is covered
    for line_start, line in _lines_with_offsets(doc.text):
        if not line.strip() or line.startswith("#") or line.startswith("[^"):
            continue
        first = line_start + len(line) - len(line.lstrip())
        assert covered[first], line


def _lines_with_offsets(text: str) -> list[tuple[int, str]]:
    out, pos = [], 0
    for line in text.split("\n"):
        out.append((pos, line))
        pos += len(line) + 1
    return out


def test_chunks_carry_section_and_parent_ids() -> None:
    doc = Document("r", REGLAMENT)
    secs = {s.section_id: s for s in parse_sections(doc)}
    for c in chunk_markdown(doc, cfg(80)):
        sec = secs[c.section_id]
        assert sec.start <= c.start < sec.end or c.section_id.endswith("#root")
        assert c.parent_section_id == sec.parent_id
        assert c.heading_path == tuple(p for p in sec.heading_path if p)


def test_kinds_reported() -> None:
    assert {c.kind for c in chunk_markdown(Document("t", TABLE_MD), cfg(90))} >= {"table"}
    assert {c.kind for c in chunk_markdown(Document("l", LIST_MD), cfg(60))} >= {"list"}
    assert {c.kind for c in chunk_markdown(Document("c", CODE_MD), cfg(70))} >= {"code"}
    assert {c.kind for c in chunk_markdown(Document("o", PROSE), cfg(60))} == {"text"}
    whole = chunk_markdown(Document("r", REGLAMENT), cfg(350, min_tokens=0))
    assert "mixed" in {c.kind for c in whole}
    for c in whole:
        assert c.kind in {"text", "table", "code", "list", "mixed"}


def test_output_is_deterministic() -> None:
    doc = Document("r", REGLAMENT, title="Регламент")
    for strategy in ("markdown", "text", "fixed"):
        assert chunk_document(doc, strategy) == chunk_document(doc, strategy)


# --------------------------------------------------------------------------
# Fixed-size baseline
# --------------------------------------------------------------------------


def test_fixed_windows() -> None:
    doc = Document("r", REGLAMENT)
    chunks = chunk_fixed(doc, size_chars=300, overlap_chars=50)
    secs = parse_sections(doc)
    assert len(chunks) >= len(doc.text) // 250
    for i, c in enumerate(chunks):
        assert c.ordinal == i
        assert c.body == c.text == span(doc, c)
        assert len(c.body) <= 300
        assert 250 * i <= c.start < 250 * i + 300
        assert c.heading_path == () and c.kind == "text"
        containing = [s for s in secs if s.start <= c.start < s.end]
        deepest = max(containing, key=lambda s: s.level)
        assert c.section_id == deepest.section_id
        assert c.parent_section_id == deepest.parent_id
        assert c.token_count == count(c.text)
    for a, b in zip(chunks, chunks[1:]):  # neighbours share ~overlap_chars
        assert b.start < a.end
    assert chunks[-1].end == len(doc.text.rstrip())


def test_fixed_validation() -> None:
    doc = Document("r", "текст")
    with pytest.raises(ValueError):
        chunk_fixed(doc, size_chars=0)
    with pytest.raises(ValueError):
        chunk_fixed(doc, size_chars=100, overlap_chars=100)
    [c] = chunk_fixed(doc)
    assert c.body == "текст" and c.section_id == "r#root"


# ------------------------------------------------------------------ pathological sizes (issue 29)
def test_the_tokenizer_never_reads_a_giant_word_whole() -> None:
    """A 2.5M-character word used to be handed to the tokenizer ~50 times whole (~116 s with navec);
    now the packer decides by the character bound and the emitted chunk is counted piecewise."""
    from osrag.chunking.model import COUNT_PIECE_CHARS, simple_token_count

    seen: list[int] = []

    def counter(text: str) -> int:
        seen.append(len(text))
        return simple_token_count(text)

    word = "ж" * 300_000
    cfg = ChunkingConfig(max_tokens=350, min_tokens=40)
    chunks = chunk_document(Document(doc_id="d", text=f"# Слово\n\n{word}\n"), "markdown", cfg, counter)
    assert max(seen) <= max(COUNT_PIECE_CHARS, (cfg.max_tokens + cfg.overlap_tokens) * 20)
    assert word in "".join(c.text for c in chunks)
    assert sum(c.token_count for c in chunks) >= len(word) // 10  # still charged what it costs


def test_piecewise_count_is_the_sum_of_bounded_pieces() -> None:
    from osrag.chunking.model import piecewise_token_count, simple_token_count

    text = "Слово и дело. " * 2000
    assert piecewise_token_count(simple_token_count, text) == simple_token_count(text)
    charged = piecewise_token_count(lambda t: 1, "ж" * 100_000)
    assert 10_000 <= charged <= 10_000 + 25  # never below the bound (each of 25 pieces rounds up)
