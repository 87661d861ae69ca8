"""The Markdown reader (osrag.chunking.dialects) and the chunks each dialect construct must give.

One fixture per construct under tests/unit/fixtures/dialects/; each test reads it as ingest does
(includes below the fixture folder, ``cloud`` known unless said otherwise), chunks it, and checks
the readable text the chunks carry, their headings and anchors, and that no markup is left.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from osrag.chunking import (
    Chunk,
    ChunkingConfig,
    Document,
    Reading,
    chunk_markdown,
    markdown_title,
    parse_sections,
    read_markdown,
)
from osrag.chunking.checks import markup_left, starts_mid_sentence
from osrag.ingest.documents import read_document
from osrag.ingest.includes import FileIncludes
from osrag.ingest.rules import Rules

FIX = Path(__file__).parent / "fixtures" / "dialects"
VARS = {"cloud": "VK Cloud"}


def read(name: str, variables: dict[str, str] | None = None) -> Reading:
    text = (FIX / name).read_text(encoding="utf-8")
    return read_markdown(
        text, variables=VARS if variables is None else variables, include=FileIncludes(FIX), key=name
    )


def chunks(name: str, variables: dict[str, str] | None = None, max_tokens: int = 120) -> list[Chunk]:
    r = read(name, variables)
    doc = Document(name, r.text, title=markdown_title(r.text) or Path(name).stem)
    out = chunk_markdown(doc, ChunkingConfig(max_tokens=max_tokens, min_tokens=0))
    for c in out:
        assert markup_left(c.text) == [], (c.chunk_id, c.text)
    return out


def bodies(cs: list[Chunk]) -> str:
    return "\n\n".join(c.body for c in cs)


# ---------------------------------------------------------------- brace directives (the dev set's)


def test_brace_notes_become_labelled_sentences_and_the_heading_keeps_its_id() -> None:
    cs = chunks("brace_note.md")
    text = bodies(cs)
    assert "Примечание: Общими сетями можно управлять только из проекта-владельца." in text
    assert "Внимание: Удаление сети необратимо." in text
    assert "Важно: Без подсети ВМ не получит адрес." in text
    assert {c.heading_path for c in cs} == {("Сети и подсети",)}
    assert {c.anchor for c in cs} == {"vnet-net"}


def test_brace_tabs_keep_their_titles_as_lead_ins_and_code_stays_verbatim() -> None:
    text = bodies(chunks("brace_tabs.md"))
    assert "Личный кабинет:\n\n1. Перейдите в раздел **Виртуальные сети**." in text
    assert "OpenStack CLI:\n\n1. Выполните команду:" in text
    assert "openstack network create <ИМЯ_СЕТИ>" in text


def test_brace_cut_caption_counter_const_and_params() -> None:
    text = bodies(chunks("brace_cut_caption.md"))
    assert "Пример вывода команды:\n\nКоманда выводит список сетей" in text
    assert "Таблица 1 — Типы сетей" in text
    assert "| vxlan | Оверлейная сеть |" in text
    assert "См. таблицу 1. Изображение: ![Схема](./assets/x.png)" in text


def test_ifdef_undecided_keeps_both_blocks_and_one_variant_inside_a_sentence() -> None:
    text = bodies(chunks("brace_ifdef_var_link.md"))
    assert "1. [Перейдите](https://msk.cloud.vk.ru/app/) в личный кабинет VK Cloud." in text
    assert "Подробнее — в разделе Типы сетей." in text
    assert "Публичное облако доступно всем." in text and "Частное облако разворачивается у заказчика." in text


@pytest.mark.parametrize(
    ("public", "shown", "hidden"), [("1", "Публичное", "Частное"), ("false", "Частное", "Публичное")]
)
def test_ifdef_decided_by_a_known_variable(public: str, shown: str, hidden: str) -> None:
    text = bodies(chunks("brace_ifdef_var_link.md", {**VARS, "public": public}))
    assert shown in text and hidden not in text
    if public == "false":  # the other variant of the sentence: the internal link's text
        assert "1. Перейдите в личный кабинет VK Cloud." in text


def test_unknown_variable_leaves_its_name_and_a_note() -> None:
    r = read("brace_ifdef_var_link.md", {})
    assert "в личный кабинет cloud." in r.text and "{var" not in r.text
    assert any("'cloud'" in n and "--var cloud=VALUE" in n for n in r.notes)


def test_include_is_read_in_place_relative_to_the_file_with_tags_and_a_note_when_missing() -> None:
    r = read("brace_include.md")
    assert "Квоты проекта:\n\nКвота — это ограничение на ресурсы проекта в VK Cloud." in r.text
    assert "Не более 50 сетей в проекте." in r.text
    assert "дисков" not in r.text  # only the part tagged "nets"
    assert r.notes == ("brace_include.md: include _includes/_missing.md not found",)
    assert "{include" not in bodies(chunks("brace_include.md"))


def test_include_cycle_is_read_once_and_noted() -> None:
    r = read("cycle_a.md")
    assert r.text.count("Текст страницы А.") == 1 and r.text.count("Текст файла Б.") == 1
    assert any("include cycle cycle_a.md -> _includes/_cycle_b.md -> cycle_a.md" in n for n in r.notes)


# ---------------------------------------------------------------- other dialects


def test_yfm_note_cut_tabs_and_include() -> None:
    cs = chunks("yfm.md")
    text = bodies(cs)
    assert "Важно: Диск нельзя уменьшить после создания." in text  # the note's own title
    assert "Примечание: Снимки хранятся отдельно." in text
    assert "Как посчитать размер:\n\nРазмер считается в гибибайтах." in text
    assert "- Консоль управления" in text and "- CLI" in text
    assert "Квота — это ограничение на ресурсы проекта в VK Cloud." in text
    assert {c.anchor for c in cs} == {"disks"}


def test_heading_ids_and_slugs_numbered_on_repeats() -> None:
    cs = chunks("heading_ids.md")
    assert [(c.heading_path[-1], c.anchor) for c in cs] == [
        ("Руководство", "guide"),
        ("Установка", "установка"),
        ("Установка", "установка-1"),
        ("Настройка config.yaml", "setup"),
    ]
    secs = parse_sections(Document("h", read("heading_ids.md").text))
    assert [s.anchor for s in secs] == ["guide", "установка", "установка-1", "setup"]


def test_docusaurus_admonitions() -> None:
    text = bodies(chunks("docusaurus.md"))
    assert "Примечание: Сервис запускается автоматически." in text
    assert "Осторожно: Остановка удаляет временные данные." in text
    assert "Совет дня: Используйте теги." in text


def test_mkdocs_admonitions_gitbook_hints_and_tabs_myst_directives() -> None:
    text = bodies(chunks("mkdocs_gitbook.md"))
    assert "Осторожно: Восстановление перезаписывает данные." in text
    assert "```bash\nbackup restore --all\n```" in text  # the admonition's code, no longer indented
    assert "Примечание: Копии хранятся 30 дней." in text
    assert "Примечание: Копирование запускается каждую ночь." in text
    assert "Linux:\n\nУстановите агент из пакета." in text
    assert "Данные удаляются: Удаленную копию нельзя вернуть." in text  # MyST ```{warning}, prose
    assert ":class:" not in text and '```{code-block} python\nprint("это код")\n```' in text


def test_mdx_imports_components_and_html_tags_go_placeholders_stay() -> None:
    r = read("mdx.md")
    assert "import" not in r.text
    text = bodies(chunks("mdx.md"))
    assert "Linux:\n\nСкачайте архив и распакуйте его." in text
    assert "macOS:\n\nУстановите через Homebrew." in text
    assert "Внимание: Нужны права администратора." in text
    assert "вместо <ID_СЕТИ> и нажмите Enter." in text  # a placeholder is text, <kbd> is markup
    assert "<" + "br>" not in text and "TabItem" not in text


def test_bbcode_lines_and_a_libs_block() -> None:
    r = read("bbcode.md")
    assert not r.text.lstrip().startswith("libs") and "d3" not in r.text
    assert "<script" not in r.text  # [head] holds page markup, not text
    cs = chunks("bbcode.md")
    assert markdown_title(r.text) == "Замыкания"
    text = bodies(cs)
    assert "Лексическое окружение: У каждой функции есть скрытое свойство" in text
    assert "Дальше — подробности реализации." in text
    assert "Подробнее — в главе closure." in text  # <info:closure>, a link to another article


def test_html_comments_and_hugo_shortcodes_but_code_is_untouched() -> None:
    r = read("comments_hugo.md")
    assert "TODO" not in r.text and "Черновик" not in r.text
    text = bodies(chunks("comments_hugo.md"))
    assert "Примечание: Версия должна быть не ниже 2.0." in text
    assert "Windows:\n\nЗапустите установщик." in text
    assert "Внимание: Не прерывайте обновление." in text
    assert "<!-- комментарий в коде остается -->\n{note:info} тоже остается" in text
    assert "Синтаксис заметки: `{note:info}`." in text


def test_asciidoc_table_becomes_a_pipe_table() -> None:
    [c] = chunks("adoc_table.md")
    assert c.kind == "table"
    assert c.body == (
        "| Тип | Описание |\n|---|---|\n| HDD | Сетевой диск на жестких дисках |\n"
        "| SSD | Сетевой диск на твердотельных накопителях |"
    )


# ---------------------------------------------------------------- fences, titles


def test_fence_with_backticks_in_its_info_string_and_a_fence_that_never_closes() -> None:
    r = read("fences.md")
    assert r.notes == ("fences.md: code fence opened at line 14 never closes; closed at the end",)
    assert r.text.endswith("const y = 2;\n```\n")
    cs = chunks("fences.md")
    assert [c.heading_path for c in cs] == [("Переменные",), ("Переменные", "Константы")]
    assert '```js run header="`let` и `const`"\n# не заголовок\nlet x = 1;\n```' in cs[0].body
    assert cs[1].body.endswith("```js\n// незакрытый блок\nconst y = 2;\n```")


def test_title_is_the_first_h1_outside_code_else_the_shallowest_heading() -> None:
    assert markdown_title(read("code_title.md").text) == "Подробности"
    assert markdown_title("```\n# не заголовок\n```\n\nТекст.") is None
    assert markdown_title("## Раздел\n\n# Главный\n") == "Главный"
    assert markdown_title("### ---\n\n### Раздел `x`\n") == "Раздел x"


def test_plain_markdown_reads_back_unchanged() -> None:
    for f in sorted((Path(__file__).parents[2] / "golden" / "corpus").glob("*.md"))[:20]:
        text = f.read_text(encoding="utf-8")
        assert read_markdown(text) == Reading(text), f.name


def test_read_document_reads_the_dialect_with_the_rules_variables(tmp_path: Path) -> None:
    (tmp_path / "_includes").mkdir()
    (tmp_path / "_includes" / "_quotas.md").write_text("Квоты в {var(cloud)}.\n", encoding="utf-8")
    page = tmp_path / "page.md"
    page.write_text(
        "# {heading(Сети)[id=nets]}\n\n{note:info}\nТекст.\n{/note}\n\n{include(_includes/_quotas.md)}\n"
    )
    doc = read_document(page, tmp_path, rules=Rules(variables={"cloud": "VK Cloud"}))
    assert doc.title == "Сети"
    assert doc.text == "# Сети {#nets}\n\nПримечание: Текст.\n\nКвоты в VK Cloud.\n"
    [c] = chunk_markdown(doc)
    assert (c.body, c.anchor) == ("Примечание: Текст.\n\nКвоты в VK Cloud.", "nets")


# ---------------------------------------------------------------- the checks themselves


def test_markup_check_finds_directives_outside_code_only() -> None:
    assert markup_left("Текст {note:info} и {/note}") == ["{note:", "{/note}"]
    assert markup_left("::: tip\nx") == [":::"]
    assert markup_left("```\n{note:info}\n```\nи `{var(x)}`") == []


def test_mid_sentence_check() -> None:
    text = "Первое предложение. Второе предложение\nпродолжается здесь.\n\nНовый абзац."

    def at(s: str) -> Chunk:
        start = text.index(s)
        return Chunk("d", 0, s, s, (), "d#root", None, "text", start, start + len(s), 1)

    assert not starts_mid_sentence(text, at("Второе"))
    assert not starts_mid_sentence(text, at("Новый"))
    assert starts_mid_sentence(text, at("продолжается"))
    assert starts_mid_sentence(text, at("предложение\n"))
