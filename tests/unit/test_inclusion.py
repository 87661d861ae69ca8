"""Remembered reads of included files (osrag.chunking.inclusion) and the include-tag index
(osrag.chunking.render): the same readable text as reading afresh, with every file still recorded."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from osrag.chunking import inclusion, read_markdown
from osrag.chunking.render import _tagged_parts


class Tree:
    """An include loader over a dict of files that records every call, as ingest's loader does."""

    def __init__(self, files: dict[str, str]) -> None:
        self.files = files
        self.read: list[str] = []

    def __call__(self, target: str, including: str) -> tuple[str, str] | None:
        if target not in self.files:
            return None
        self.read.append(target)
        return target, self.files[target]


@pytest.fixture(autouse=True)
def _fresh() -> Iterator[None]:
    inclusion.forget()
    yield
    inclusion.forget()


def read(text: str, tree: Tree, key: str = "page.md", variables: dict[str, str] | None = None) -> str:
    return read_markdown(text, variables=variables or {}, include=tree, key=key).text


def fresh_read(text: str, tree: Tree, key: str = "page.md") -> str:
    inclusion.forget()
    return read(text, tree, key)


PAGE = "Начало.\n\n{include(snippet.md)}\n\nКонец.\n"
FILES = {
    "snippet.md": "{note:info}\nЛимит {var(cloud)}.\n{/note}\n\n{include(inner.md)}\n",
    "inner.md": "Вложенный текст.\n",
}


def test_a_snippet_read_again_is_the_same_text_and_its_files_are_still_recorded(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    reads: list[str] = []
    real = inclusion._read_and_remember

    def spy(*args: object) -> str:
        reads.append(str(args[3]))
        return real(*args)  # type: ignore[arg-type]

    monkeypatch.setattr(inclusion, "_read_and_remember", spy)
    first, second = Tree(FILES), Tree(FILES)
    a = read_markdown(PAGE, variables={}, include=first, key="a.md")
    b = read_markdown(PAGE, variables={}, include=second, key="b.md")
    assert a.text == b.text and "Вложенный текст." in a.text and "Примечание:" in a.text
    assert reads == ["snippet.md", "inner.md"]  # the second page read nothing again
    assert second.read == first.read == ["snippet.md", "inner.md"]  # ...yet recorded both files
    assert b.notes == a.notes and any("cloud" in n for n in b.notes)  # the unknown variable, again


def test_a_nested_file_that_changed_is_read_afresh() -> None:
    tree = Tree(dict(FILES))
    before = read(PAGE, tree)
    tree.files["inner.md"] = "Новый вложенный текст.\n"
    after = read(PAGE, tree)
    assert "Новый вложенный текст." in after and after != before
    assert after == fresh_read(PAGE, tree)


def test_other_variables_are_another_read() -> None:
    tree = Tree(FILES)
    assert "Лимит VK Cloud." in read(PAGE, tree, variables={"cloud": "VK Cloud"})
    assert "Лимит Облако." in read(PAGE, tree, variables={"cloud": "Облако"})


def test_a_read_that_counts_is_not_remembered() -> None:
    tree = Tree({"fig.md": "Рисунок {counter(fig)[id=a]}.\n"})
    page = "{counter(fig)[id=x]}\n\n{include(fig.md)}\n"
    assert "Рисунок 2." in read(page, tree)
    assert "Рисунок 2." in read(page, tree)  # counted in each page, not replayed from the first
    assert not inclusion._MEMO


def test_a_snippet_is_not_reused_where_it_would_include_a_file_on_the_stack() -> None:
    tree = Tree({"b.md": "Из b.\n\n{include(x.md)}\n", "x.md": "Из x.\n"})
    page = "{include(b.md)}\n"
    elsewhere = read_markdown(page, variables={}, include=tree, key="a.md")  # b -> x: no cycle
    assert "Из x." in elsewhere.text and "b.md" in {k[0] for k in inclusion._MEMO}
    here = read_markdown(page, variables={}, include=tree, key="x.md")  # x -> b -> x: a cycle
    inclusion.forget()
    fresh = read_markdown(page, variables={}, include=tree, key="x.md")
    assert (here.text, here.notes) == (fresh.text, fresh.notes)
    assert "Из b." in here.text and "Из x." not in here.text
    assert any("include cycle x.md -> b.md -> x.md" in n for n in here.notes)


TAGGED = "\n".join(
    [
        "вне всего",
        "{includetag(a)}",
        "строка a",
        "{includetag(b)}строка a и b{/includetag} хвост a",
        "{/includetag}",
        "{/includetag} лишний закрывающий",
        "{includetag(b)}",
        "строка b",
        "{/includetag}",
    ]
)


def _reference(text: str, tags: frozenset[str]) -> str:
    """The selection written the plain way, line by line, to check the index against."""
    import re

    mark = re.compile(r"\{includetag\(([^)]*)\)\}|\{/includetag\}")
    out, open_ = [], []
    for line in text.split("\n"):
        keep, pieces, pos = any(t in tags for t in open_), [], 0
        for m in mark.finditer(line):
            if any(t in tags for t in open_):
                pieces.append(line[pos : m.start()])
            if m.group(1) is not None:
                open_.append(m.group(1).strip())
            elif open_:
                open_.pop()
            pos = m.end()
        if any(t in tags for t in open_):
            pieces.append(line[pos:])
        if pos == 0:
            if keep:
                out.append(line)
        elif "".join(pieces).strip():
            out.append("".join(pieces))
    return "\n".join(out)


@pytest.mark.parametrize("tags", [{"a"}, {"b"}, {"a", "b"}, {"c"}, set()])
def test_tagged_parts_select_the_regions_asked_for(tags: set[str]) -> None:
    got = _tagged_parts(TAGGED, frozenset(tags))
    assert got == _reference(TAGGED, frozenset(tags))
    assert "вне всего" not in got and "лишний" not in got
    if tags == {"b"}:
        assert got == "строка a и b\nстрока b"


def test_remembered_reads_stay_within_their_character_budget(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(inclusion, "MAX_TOTAL_CHARS", 200)
    files = {f"s{i}.md": f"Сниппет номер {i}. " * 4 + "\n" for i in range(6)}
    tree = Tree(files)
    for i in range(6):
        read(f"{{include(s{i}.md)}}\n", tree)
    held = sum(len(k[1]) + len(e.text) for k, e in inclusion._MEMO.items())
    assert 0 < held <= 200 and len(inclusion._MEMO) < 6
    assert "s5.md" in {k[0] for k in inclusion._MEMO}  # the latest kept, the oldest gone
    assert held == inclusion._chars
