"""Documents: the files an ingest reads, as ``Document``s (the first stage of documents → chunks → index).

Finding files by suffix, reading them within a size limit, front matter, converting the
non-Markdown formats, and the document id (``{collection}/{path relative to the root}``). Pure
apart from reading the files; every problem is a ``DocumentError`` naming the file.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

from osrag.chunking import Document
from osrag.convert import SUFFIXES, TEXT_FORMATS, Converted, convert, source_format, unsupported_reason
from osrag.errors import DocumentError
from osrag.frontmatter import KNOWN_KEYS as FRONT_KEYS
from osrag.frontmatter import FrontMatterError, parse_front_matter


def find_files(paths: Iterable[str | Path]) -> Iterator[tuple[Path, Path]]:
    """(file, root) pairs for the given files and directories, sorted for determinism."""
    for raw in paths:
        p = Path(raw)
        if p.is_dir():
            for f in sorted(p.rglob("*")):
                if f.is_file() and f.suffix.lower() in SUFFIXES:
                    yield f, p
        else:
            yield p, p.parent


def collection_of(root: Path) -> str:
    """The default collection of files found under ``root``: the root folder's own name.

    Chosen over "no collection" so that two roots holding the same relative names
    (``teamA/faq.md``, ``teamB/faq.md``) give different ids without any flag.
    """
    return root.resolve().name or "root"


def read_document(path: Path, root: Path, max_bytes: int, collection: str | None = None) -> Document:
    """One file as a Document, or a DocumentError naming what is wrong with it.

    Its ``doc_id`` is the front matter's, else ``{collection}/{path relative to root}``
    without the suffix, the collection being the root folder's name unless given.

    Only known suffixes are read, even for a file named explicitly: a ``.png`` or
    ``.exe`` is "unsupported format", not a guess. PDF, DOCX, HTML and PPTX are
    converted to Markdown (``osrag.convert``) and keep a map to pages/slides/anchors."""
    name = str(path)
    fmt = source_format(path)
    if fmt is None:
        raise DocumentError(name, unsupported_reason(path))
    try:
        size = path.stat().st_size
    except OSError as exc:
        raise DocumentError(name, f"cannot read ({exc.strerror or exc})") from exc
    if size > max_bytes:
        raise DocumentError(name, _too_large(size, max_bytes))
    try:
        raw = path.read_bytes()
    except OSError as exc:
        raise DocumentError(name, f"cannot read ({exc.strerror or exc})") from exc
    conv: Converted | None = None
    if fmt in TEXT_FORMATS:
        meta, body = _decode_text(name, raw)
    else:
        conv = convert(path, raw, fmt)
        meta, body = {}, conv.markdown
    try:
        rel = path.relative_to(root)
    except ValueError:
        rel = Path(path.name)
    doc_id = meta.get("doc_id") or f"{collection or collection_of(root)}/{rel.with_suffix('').as_posix()}"
    title = meta.get("title") or (conv and conv.title) or _first_heading(body) or path.stem
    metadata: dict[str, Any] = {k: meta[k] for k in FRONT_KEYS if k in meta}
    metadata["archived"] = bool(meta.get("archived", False))  # a real boolean (osrag.frontmatter)
    metadata["format"] = fmt
    if conv is not None and conv.locations is not None:
        metadata["locations"] = conv.locations
    return Document(
        doc_id=doc_id, text=body, source=meta.get("source") or str(path), title=title, metadata=metadata
    )


def _decode_text(name: str, raw: bytes) -> tuple[dict[str, str], str]:
    """UTF-8 text (BOM allowed) split into front matter and body; refuses binary and empty files."""
    if b"\x00" in raw[:8192]:
        raise DocumentError(name, "binary file (contains NUL bytes), not text")
    bom = 3 if raw.startswith(b"\xef\xbb\xbf") else 0
    try:
        text = raw[bom:].decode("utf-8")
    except UnicodeDecodeError as exc:
        at = exc.start + bom  # offset in the file, BOM included
        raise DocumentError(name, f"not UTF-8 (invalid byte 0x{raw[at]:02x} at offset {at})") from exc
    try:
        meta, body = parse_front_matter(text.replace("\r\n", "\n"))
    except FrontMatterError as exc:
        raise DocumentError(name, str(exc)) from exc
    if not body.strip():
        raise DocumentError(name, "empty document (no text after front matter)" if meta else "empty file")
    return meta, body


def _too_large(size: int, max_bytes: int) -> str:
    """The size and the limit in MB, readable for small limits too (0.05 MB, not "0 MB")."""
    have, limit = f"{size / 1e6:.3g}", f"{max_bytes / 1e6:.3g}"
    if have == limit:  # just over the limit: show bytes rather than "20 MB > limit 20 MB"
        have, limit = f"{size:,} bytes", f"{max_bytes:,} bytes"
    else:
        have, limit = f"{have} MB", f"{limit} MB"
    return f"file too large ({have} > limit {limit}; raise OSRAG_MAX_FILE_MB to allow it)"


def _first_heading(body: str) -> str | None:
    for line in body.split("\n"):
        if line.startswith("#"):
            return line.lstrip("#").strip() or None
    return None


# ---------------------------------------------------------------- report
