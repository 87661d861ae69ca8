"""Each Markdown file is parsed once where one parse serves the reader and the chunker (issue 23)."""

from __future__ import annotations

from typing import Any

import pytest

from osrag.chunking import Document, chunk_markdown, markdown_title, read_markdown
from osrag.chunking import parser as parser_module


@pytest.fixture
def parses(monkeypatch: pytest.MonkeyPatch) -> list[tuple[str, bool]]:
    """Every markdown-it parse made, as (text, containers); the parse cache starts empty."""
    made: list[tuple[str, bool]] = []
    real = parser_module._parser

    class Spy:
        def __init__(self, containers: bool) -> None:
            self.containers = containers

        def parse(self, text: str) -> Any:
            made.append((text, self.containers))
            return real(self.containers).parse(text)

    monkeypatch.setattr(parser_module, "_parser", Spy)
    monkeypatch.setattr(parser_module, "_RECENT", type(parser_module._RECENT)())
    return made


def test_text_read_back_unchanged_is_parsed_once(parses: list[tuple[str, bool]]) -> None:
    text = "# Заголовок\n\nАбзац.\n\n```python\nx = 1\n```\n\n    отступ\n"
    reading = read_markdown(text)
    assert reading.text == text
    assert markdown_title(reading.text) == "Заголовок"
    chunks = chunk_markdown(Document("d", reading.text, title="Заголовок"))
    assert chunks
    assert parses == [(text, True)]


def test_text_without_code_or_containers_is_not_parsed_by_the_reader(parses: list[tuple[str, bool]]) -> None:
    text = "# Раздел\n\n{note:info}\nВажный текст.\n{/note}\n"
    reading = read_markdown(text)
    assert reading.text != text  # the note became a label
    assert parses == []
    markdown_title(reading.text)
    chunk_markdown(Document("d", reading.text))
    assert parses == [(reading.text, False)]


def test_a_container_parse_is_not_taken_for_the_plain_parser(parses: list[tuple[str, bool]]) -> None:
    text = "Текст.\n\n```\n:::note\n```\n"  # ::: inside code: read back unchanged, no container token
    assert read_markdown(text).text == text
    assert parses == [(text, True)]
    tokens = parser_module.block_tokens("::: note\nв контейнере\n:::\n", containers=True)
    assert not parser_module.share_tokens("::: note\nв контейнере\n:::\n", tokens)
