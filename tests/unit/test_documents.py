"""The read side's paths and provenance (issues 29 and 23): special files, symlinks, names that are
not UTF-8, files reached twice, files without text, relative sources, URLs, titles, chunk caps."""

from __future__ import annotations

import os
import socket
import threading
from pathlib import Path

import pytest

from osrag.chunking import ChunkingConfig, chunk_document, simple_token_count
from osrag.errors import DocumentError, DocumentSkipped
from osrag.ingest.documents import (
    DEFAULT_MAX_FILE_BYTES,
    ReadOptions,
    ReadReport,
    guard_chunks,
    read_document,
    read_tree,
)
from osrag.ingest.titles import MAX_HEADING_CHARS, first_heading
from osrag.settings import Settings

TEXT = "# Заголовок\n\nНемного текста о доставке.\n"


def write(path: Path, text: str = TEXT) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
    return path


def outcomes(paths: list[Path], **kw: object) -> dict[str, str]:
    """name -> 'doc' | 'skip: reason' | 'fail: reason' for everything read_tree yields."""
    out: dict[str, str] = {}
    for shown, got in read_tree(paths, ReadOptions(**kw)):  # type: ignore[arg-type]
        name = shown.rsplit("/", 1)[-1]
        if isinstance(got, DocumentSkipped):
            out[name] = f"skip: {got.reason}"
        elif isinstance(got, DocumentError):
            out[name] = f"fail: {got.reason}"
        else:
            out[name] = "doc"
    return out


def _in_thread(fn: object, timeout: float = 10.0) -> object:
    """Run ``fn`` with a deadline: a FIFO that is opened would block forever."""
    box: dict[str, object] = {}

    def run() -> None:
        try:
            box["v"] = fn()  # type: ignore[operator]
        except BaseException as exc:  # re-raised in the test's thread
            box["e"] = exc

    t = threading.Thread(target=run, daemon=True)
    t.start()
    t.join(timeout)
    assert not t.is_alive(), "reading hung (a special file was opened)"
    if "e" in box:
        raise box["e"]  # type: ignore[misc]
    return box.get("v")


# ------------------------------------------------------------------ special files
def test_a_fifo_named_on_the_command_line_is_skipped_never_opened(tmp_path: Path) -> None:
    fifo = tmp_path / "fifo.md"
    os.mkfifo(fifo)
    got = _in_thread(lambda: outcomes([fifo]))
    assert got == {"fifo.md": "skip: not a regular file (a FIFO); only regular files are read"}
    with pytest.raises(DocumentSkipped, match="a FIFO"):
        _in_thread(lambda: read_document(fifo, tmp_path))


def test_special_files_in_a_tree_are_skipped_with_a_reason(tmp_path: Path) -> None:
    write(tmp_path / "ok.md")
    os.mkfifo(tmp_path / "pipe.md")
    sock = socket.socket(socket.AF_UNIX)
    sock.bind(str(tmp_path / "sock.md"))
    (tmp_path / "zero.md").symlink_to("/dev/zero")
    try:
        got = _in_thread(lambda: outcomes([tmp_path], follow_symlinks=True))
    finally:
        sock.close()
    assert got == {
        "ok.md": "doc",
        "pipe.md": "skip: not a regular file (a FIFO); only regular files are read",
        "sock.md": "skip: not a regular file (a socket); only regular files are read",
        "zero.md": "skip: not a regular file (a character device); only regular files are read",
    }


def test_a_symlink_to_dev_zero_is_never_read(tmp_path: Path) -> None:
    link = tmp_path / "zero.md"
    link.symlink_to("/dev/zero")
    with pytest.raises(DocumentSkipped, match="character device"):
        _in_thread(lambda: read_document(link, tmp_path))


# ------------------------------------------------------------------ symlinks
def test_symlinks_leaving_the_root_are_not_followed_unless_asked(tmp_path: Path) -> None:
    root, outside = tmp_path / "kb", tmp_path / "secret"
    write(root / "a.md")
    write(outside / "s.md")
    (root / "s.md").symlink_to(outside / "s.md")
    (root / "dir").symlink_to(outside, target_is_directory=True)
    got = outcomes([root])
    assert got["a.md"] == "doc"
    assert got["s.md"].startswith("skip: symlink leaves the ingest root")
    assert got["dir"].startswith("skip: symlink leaves the ingest root")
    followed = outcomes([root], follow_symlinks=True)
    assert followed == {"a.md": "doc", "s.md": "doc"}  # outside/s.md reached twice: read once


def test_a_directory_symlink_loop_reads_each_file_once(tmp_path: Path) -> None:
    root = tmp_path / "kb"
    write(root / "sub" / "a.md")
    (root / "sub" / "loop").symlink_to(root, target_is_directory=True)
    (root / "again").symlink_to(root / "sub", target_is_directory=True)
    for follow in (False, True):
        docs = [got for _, got in read_tree([root], ReadOptions(follow_symlinks=follow))]
        assert [d.doc_id for d in docs if not isinstance(d, DocumentError)] == ["kb/sub/a"]


def test_a_file_reached_twice_is_indexed_once_under_its_own_path(tmp_path: Path) -> None:
    root = tmp_path / "kb"
    write(root / "real.md")
    (root / "alias.md").symlink_to(root / "real.md")
    hard = root / "hard.md"
    os.link(root / "real.md", hard)
    docs = [got for _, got in read_tree([root, root / "real.md"], ReadOptions())]
    assert [d.doc_id for d in docs if not isinstance(d, DocumentError)] == ["kb/hard"]  # first in order


# ------------------------------------------------------------------ names
def test_a_non_utf8_file_name_is_a_per_file_error_and_the_rest_is_read(tmp_path: Path) -> None:
    root = tmp_path / "kb"
    write(root / "good.md")
    bad = os.path.join(os.fsencode(root), b"caf\xe9.md")
    with open(bad, "wb") as f:
        f.write(TEXT.encode("utf-8"))
    got = dict(read_tree([root], ReadOptions()))
    assert set(got) == {f"{root}/caf\\xe9.md", f"{root}/good.md"}
    err = got[f"{root}/caf\\xe9.md"]
    assert isinstance(err, DocumentError) and "file name is not valid UTF-8" in err.reason
    str(err).encode("utf-8")  # printable and storable: no lone surrogates
    assert not isinstance(got[f"{root}/good.md"], DocumentError)


# ------------------------------------------------------------------ size
def test_the_size_limit_is_one_setting_of_50_mb() -> None:
    assert DEFAULT_MAX_FILE_BYTES == Settings(_env_file=None).max_file_bytes == 50_000_000
    assert "max_file_mb" not in Settings.model_fields  # one setting, not two


# ------------------------------------------------------------------ files without text
@pytest.mark.parametrize(
    ("text", "reason"),
    [
        ("", "empty file"),
        ("  \n\t\n", "empty file"),
        ("---\ntitle: Пусто\n---\n\n", "no text after front matter"),
        ("# {heading(Обзор)[id=overview]}\n\n## Разделы\n", "no text: headings only"),
    ],
)
def test_files_without_text_are_skipped_not_failed(tmp_path: Path, text: str, reason: str) -> None:
    p = write(tmp_path / "landing.md", text)
    with pytest.raises(DocumentSkipped) as err:
        read_document(p, tmp_path)
    assert err.value.reason == reason


# ------------------------------------------------------------------ provenance
def test_source_is_relative_to_the_root_within_its_collection(tmp_path: Path) -> None:
    root = tmp_path / "docs"
    p = write(root / "guide" / "intro.md")
    doc = read_document(p, root)
    assert doc.source == "docs/guide/intro.md" and doc.doc_id == "docs/guide/intro"
    assert str(tmp_path) not in doc.source
    assert read_document(p, root, collection="kb").source == "kb/guide/intro.md"


def test_base_url_gives_the_page_url(tmp_path: Path) -> None:
    root = tmp_path / "docs"
    p = write(root / "guide" / "intro.md")
    doc = next(d for _, d in read_tree([root], ReadOptions(base_url="https://docs.example.com/ru/")))
    assert not isinstance(doc, DocumentError)
    assert doc.metadata["url"] == "https://docs.example.com/ru/guide/intro"
    assert "url" not in read_document(p, root).metadata


# ------------------------------------------------------------------ titles
def test_sidecar_titles_and_front_matter_wins(tmp_path: Path) -> None:
    write(tmp_path / "a.md", "Текст без заголовка.\n")
    (tmp_path / "a.meta.json").write_text('{"title": "Из meta.json"}', encoding="utf-8")
    write(tmp_path / "b.md", "# Заголовок файла\n\nТекст.\n")
    (tmp_path / "_meta.yml").write_text("b: Из _meta.yml\nc:\n  title: Вложенный\n", encoding="utf-8")
    write(tmp_path / "c.md", "Текст.\n")
    write(tmp_path / "d.md", "---\ntitle: Из front matter\n---\nТекст.\n")
    (tmp_path / "d.meta.json").write_text('{"title": "проигрывает"}', encoding="utf-8")
    titles = {p: read_document(tmp_path / p, tmp_path).title for p in ("a.md", "b.md", "c.md", "d.md")}
    assert titles == {
        "a.md": "Из meta.json",
        "b.md": "Из _meta.yml",
        "c.md": "Вложенный",
        "d.md": "Из front matter",
    }


def test_a_broken_sidecar_is_a_per_file_error(tmp_path: Path) -> None:
    write(tmp_path / "a.md")
    (tmp_path / "a.meta.json").write_text("{oops", encoding="utf-8")
    with pytest.raises(DocumentError, match="title sidecar a.meta.json cannot be read"):
        read_document(tmp_path / "a.md", tmp_path)


def test_a_comment_in_code_is_never_the_title() -> None:
    body = "Вступление.\n\n```bash\n# install it\npip install x\n```\n\n## Установка\n\nТекст.\n"
    assert first_heading(body) == "Установка"
    assert first_heading("## Второй\n\n# Первый\n") == "Первый"  # an H1 wins over an earlier H2


# ------------------------------------------------------------------ hard chunk caps
def test_a_giant_word_never_becomes_one_giant_chunk() -> None:
    from osrag.chunking import Document

    word = "ж" * 2_500_000
    doc = Document(doc_id="d", text=f"# Слово\n\n{word}\n")
    cfg = ChunkingConfig(max_tokens=350, min_tokens=40)
    limit = cfg.max_tokens * 10 * 2
    chunks = guard_chunks(chunk_document(doc, "markdown", cfg), limit, simple_token_count)
    assert max(len(c.text) for c in chunks) <= limit
    assert "".join(c.body for c in chunks) == word  # nothing lost, in order
    assert [c.ordinal for c in chunks] == list(range(len(chunks)))
    assert all(doc.text[c.start : c.end] == c.body for c in chunks)  # spans stay true


def test_a_giant_heading_is_shortened_in_the_heading_path() -> None:
    from osrag.chunking import Document

    heading = "Заголовок" * 12_000  # ~100K characters: an "immense term" in the keyword field
    doc = Document(doc_id="d", text=f"# {heading}\n\nТекст раздела.\n")
    chunks = guard_chunks(chunk_document(doc, "markdown", ChunkingConfig()), 7000, simple_token_count)
    assert chunks and all(len(h) <= MAX_HEADING_CHARS for c in chunks for h in c.heading_path)
    assert all(len(c.anchor) <= MAX_HEADING_CHARS for c in chunks)  # the heading's slug too
    assert all(len(c.text) <= 7000 for c in chunks)


def test_guard_leaves_ordinary_chunks_alone() -> None:
    from osrag.chunking import Document

    doc = Document(doc_id="d", text="# A\n\n" + "Обычный текст. " * 200)
    chunks = chunk_document(doc, "markdown", ChunkingConfig())
    assert guard_chunks(chunks, 7000, simple_token_count) == chunks


def test_read_report_counts_meta_keys_once_per_file(tmp_path: Path) -> None:
    for name in ("a", "b"):
        write(tmp_path / f"{name}.md", f"---\ndescription: {name}\nslug: /{name}\n---\n{TEXT}")
    report = ReadReport()
    list(read_tree([tmp_path], ReadOptions(), report))
    assert report.meta_keys == {"description": 2, "slug": 2}
