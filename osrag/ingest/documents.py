"""Documents: the files an ingest reads, as ``Document``s (the first stage of documents → chunks → index).

The roots are walked by ``osrag.ingest.walking`` (which files are inputs); this module reads each file
within a size limit, front matter merged over the rules file's metadata, sidecar titles,
converting the non-Markdown formats, and the document's id and provenance
(``{collection}/{path relative to the root}``: no absolute local path reaches the index).
Pure apart from reading the files; every problem is a ``DocumentError`` naming the file, and
a file that is left out by design (no text, a FIFO) a ``DocumentSkipped`` with its reason.
"""

from __future__ import annotations

import dataclasses
import logging
import os
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from osrag.chunking import Chunk, Document, markdown_title, read_markdown
from osrag.errors import DocumentError, DocumentSkipped
from osrag.ingest.convert import TEXT_FORMATS, Converted, convert, source_format, unsupported_reason
from osrag.ingest.frontmatter import FrontMatter, FrontMatterError, read_front_matter
from osrag.ingest.includes import FileIncludes
from osrag.ingest.rules import Rules, rules_at
from osrag.ingest.titles import MAX_HEADING_CHARS, capped, first_heading, headings_only, sidecar_title
from osrag.ingest.walking import collection_of, display_path, not_regular, utf8_problem, walk

log = logging.getLogger(__name__)

#: Default per-file size limit (OSRAG_MAX_FILE_BYTES): far above any page a docs team writes.
DEFAULT_MAX_FILE_BYTES = 50_000_000
#: The metadata fields a document carries from front matter or the rules file.
_DOC_FIELDS = ("category", "tenant", "acl", "updated_at")


# ---------------------------------------------------------------- options and report
@dataclass(frozen=True)
class ReadOptions:
    """How a tree is read (the ``osrag ingest`` options that concern reading)."""

    max_bytes: int = DEFAULT_MAX_FILE_BYTES
    collection: str | None = None
    follow_symlinks: bool = False
    #: ``--rules FILE`` for every root; None: each root's own ``osrag.yaml``, if any.
    rules: Rules | None = None
    #: ``--var NAME=VALUE``: over the rules file's ``vars``.
    variables: Mapping[str, str] = field(default_factory=dict)
    #: ``--base-url``: each passage gets ``url = base + page path + '#anchor'``.
    base_url: str | None = None


@dataclass
class ReadReport:
    """What reading noticed besides documents, counted once per ingest for its summary."""

    #: exclusion glob -> files and folders it left out
    excluded: dict[str, int] = field(default_factory=dict)
    #: rule name -> files it set metadata on
    rules: dict[str, int] = field(default_factory=dict)
    #: front-matter key osrag does not read -> files carrying it (kept as ``meta.KEY``)
    meta_keys: dict[str, int] = field(default_factory=dict)
    #: such keys whose value was too long to store -> files
    meta_too_long: dict[str, int] = field(default_factory=dict)
    #: the rules files used
    rules_files: list[str] = field(default_factory=list)

    def as_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


def _count(into: dict[str, int], key: str) -> None:
    into[key] = into.get(key, 0) + 1


# ---------------------------------------------------------------- the tree
class _RootRules:
    """The rules file of each root, read once per tree, and the report of what they did."""

    def __init__(self, options: ReadOptions, report: ReadReport) -> None:
        self.options = options
        self.report = report
        self._cache: dict[Path, Rules | None] = {}

    def rules_for(self, root: Path) -> Rules | None:
        if root not in self._cache:
            opts = self.options
            got = opts.rules if opts.rules is not None else rules_at(root)
            if got is not None and opts.variables:
                got = got.with_variables(opts.variables)
            if got is not None and got.source not in self.report.rules_files:
                self.report.rules_files.append(got.source)
            self._cache[root] = got
        return self._cache[root]

    def excluded(self, glob: str) -> None:
        _count(self.report.excluded, glob)


class _Recorded:
    """An include loader that remembers the files it read (a document's ``includes``)."""

    def __init__(self, root: Path, max_bytes: int) -> None:
        self._root, self._max_bytes = root, max_bytes
        self._files: FileIncludes | None = None  # made on the first include (most files have none)
        self.read: list[str] = []

    def __call__(self, target: str, including: str) -> tuple[str, str] | None:
        if self._files is None:
            self._files = FileIncludes(self._root, self._max_bytes)
        got = self._files(target, including)
        if got is not None:
            self.read.append(got[0])
        return got


@dataclass(frozen=True)
class ReadTask:
    """One file to read: ``read_document``'s arguments as a plain record, so that a worker process
    (``osrag.ingest.readpool``) can read it as well as the ingest's own thread."""

    shown: str
    path: Path
    root: Path
    max_bytes: int
    collection: str | None
    rules: Rules | None
    base_url: str | None

    def read(self, report: ReadReport) -> Document:
        """The file as a Document (a ``DocumentError`` naming it when it cannot be one)."""
        return read_document(
            self.path,
            self.root,
            self.max_bytes,
            self.collection,
            rules=self.rules,
            base_url=self.base_url,
            report=report,
        )


def plan_tree(
    paths: Sequence[str | Path],
    options: ReadOptions,
    report: ReadReport,
    before_read: Callable[[Path, Path, Rules | None], DocumentError | None] | None = None,
    on_found: Callable[[str, Path, Path], None] | None = None,
) -> Iterator[tuple[str, ReadTask | DocumentError]]:
    """(shown path, the file to read or the error that stands for it) for every input under
    ``paths``, as ``walk`` orders them; nothing is read here (``read_tree`` reads in turn).
    ``on_found(shown, path, root)``: told of every input, a left-out or failing one too."""
    roots = _RootRules(options, report)
    for found in walk(
        paths, follow_symlinks=options.follow_symlinks, rules_for=roots.rules_for, on_excluded=roots.excluded
    ):
        shown = display_path(found.path)
        if on_found is not None:
            on_found(shown, found.path, found.root)
        if found.skip is not None:
            yield shown, DocumentSkipped(shown, found.skip)
            continue
        if found.fail is not None:
            yield shown, DocumentError(shown, found.fail)
            continue
        # A file named on the command line gets --rules (its folder's osrag.yaml is for the folder).
        rules = roots.rules_for(found.root) if found.in_tree else options.rules
        if rules is None and options.variables:
            rules = Rules(variables=dict(options.variables))
        elif rules is not None and not found.in_tree and options.variables:
            rules = rules.with_variables(options.variables)
        early = before_read(found.path, found.root, rules) if before_read is not None else None
        if early is not None:
            yield shown, early
            continue
        yield (
            shown,
            ReadTask(
                shown, found.path, found.root, options.max_bytes, options.collection, rules, options.base_url
            ),
        )


def read_tree(
    paths: Sequence[str | Path],
    options: ReadOptions,
    report: ReadReport | None = None,
    before_read: Callable[[Path, Path, Rules | None], DocumentError | None] | None = None,
) -> Iterator[tuple[str, Document | DocumentError]]:
    """(shown path, Document or error) for every input under ``paths``, as ``walk`` orders them.

    ``before_read(path, root, rules)``: asked before a file is read; what it returns (e.g. the
    ingest's "unchanged since the last ingest", ``osrag.ingest.stamps``) is yielded instead of reading."""
    report = report if report is not None else ReadReport()
    for shown, got in plan_tree(paths, options, report, before_read):
        if isinstance(got, ReadTask):
            try:
                doc: Document | DocumentError = got.read(report)
            except DocumentError as exc:
                doc = exc
            yield shown, doc
            continue
        yield shown, got


# ---------------------------------------------------------------- one file
def read_document(
    path: Path,
    root: Path,
    max_bytes: int = DEFAULT_MAX_FILE_BYTES,
    collection: str | None = None,
    *,
    rules: Rules | None = None,
    base_url: str | None = None,
    report: ReadReport | None = None,
) -> Document:
    """One file as a Document, or a DocumentError naming what is wrong with it.

    Its ``doc_id`` is the front matter's, else ``{collection}/{path relative to root}``
    without the suffix, the collection being the root folder's name unless given; its
    ``source`` is the front matter's, else ``{collection}/{path relative to root}``.

    Only known suffixes are read, even for a file named explicitly: a ``.png`` or
    ``.exe`` is "unsupported format", not a guess. Only regular files are opened (a FIFO
    or a device is a ``DocumentSkipped``), and never more than ``max_bytes`` is read. PDF,
    DOCX, HTML and PPTX are converted to Markdown (``osrag.ingest.convert``) and keep a map to
    pages/slides/anchors. ``rules`` set metadata by path; front matter wins over them."""
    name = display_path(path)
    problem = utf8_problem(path)
    if problem:
        raise DocumentError(name, problem)
    fmt = source_format(path)
    if fmt is None:
        if not os.path.lexists(path):  # a mistyped path is missing, not of an unknown format
            raise DocumentError(name, "no such file or folder")
        raise DocumentError(name, unsupported_reason(path))
    raw = _read_bytes(path, name, max_bytes)
    rel = _relative(path, root)
    coll = collection or collection_of(root)
    conv: Converted | None = None
    front = FrontMatter()
    variables = dict(rules.variables) if rules is not None else {}
    notes: tuple[str, ...] = ()
    if fmt in TEXT_FORMATS:
        front, body = _decode_text(name, raw)
    else:
        conv = convert(path, raw, fmt)
        body = conv.markdown
    files = _Recorded(
        root, max_bytes
    )  # the files its include directives read (osrag.ingest.stamps watches them)
    if fmt == "markdown":  # the team's dialect -> readable Markdown (osrag.chunking.dialects)
        try:
            reading = read_markdown(body, variables=variables, include=files, key=rel.as_posix())
        except Exception as exc:  # a reader bug fails this file, not the ingest
            raise DocumentError(name, f"cannot read its Markdown: {type(exc).__name__}: {exc}") from exc
        body, notes = reading.text, reading.notes
    rule_fields, applied = rules.fields_for(rel.as_posix()) if rules is not None else ({}, ())
    meta = {**rule_fields, **front.fields}  # front matter wins over a rule
    if not body.strip():
        raise DocumentSkipped(
            name, "no text after front matter" if front.fields or front.meta else "empty file"
        )
    if headings_only(body):
        raise DocumentSkipped(name, "no text: headings only")
    if report is not None:
        for rule in applied:
            _count(report.rules, rule)
        for key in front.meta:
            _count(report.meta_keys, key)
        for key in front.meta_too_long:
            _count(report.meta_too_long, key)
    page = rel.with_suffix("").as_posix()
    doc_id = meta.get("doc_id") or f"{coll}/{page}"
    title = (
        meta.get("title")
        or sidecar_title(path)
        or (conv and conv.title)
        or (markdown_title(body) if fmt == "markdown" else first_heading(body))
        or path.stem
    )
    title = capped(title)
    metadata: dict[str, Any] = {k: meta[k] for k in _DOC_FIELDS if k in meta}
    metadata["archived"] = bool(meta.get("archived", False))  # a real boolean (osrag.ingest.frontmatter)
    metadata["format"] = fmt
    if files.read:
        metadata["includes"] = sorted(set(files.read))
    if front.meta:
        metadata["meta"] = front.meta
    if base_url:
        metadata["url"] = page_url(base_url, page)
    if conv is not None and conv.locations is not None:
        metadata["locations"] = conv.locations
    return Document(
        doc_id=doc_id,
        text=body,
        source=meta.get("source") or f"{coll}/{rel.as_posix()}",
        title=title,
        metadata=metadata,
        notes=notes,
        variables=variables,
    )


def page_url(base_url: str, page: str) -> str:
    """``base_url`` joined with a page path (``guide/intro``) by exactly one slash."""
    return base_url.rstrip("/") + "/" + page.lstrip("/")


def _relative(path: Path, root: Path) -> Path:
    try:
        return path.relative_to(root)
    except ValueError:
        return Path(path.name)


def _read_bytes(path: Path, name: str, max_bytes: int) -> bytes:
    """At most ``max_bytes`` of a regular file: opened without blocking (a FIFO never hangs),
    checked on the open descriptor (no swap between check and read), refused when larger."""
    try:
        before = os.stat(path)
    except OSError as exc:
        raise DocumentError(name, f"cannot read ({exc.strerror or exc})") from exc
    problem = not_regular(before.st_mode)
    if problem:  # a FIFO or a device is never opened
        raise DocumentSkipped(name, problem)
    if before.st_size > max_bytes:
        raise DocumentError(name, _too_large(before.st_size, max_bytes))
    flags = os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_CLOEXEC", 0)
    try:
        fd = os.open(path, flags)
    except OSError as exc:
        raise DocumentError(name, f"cannot read ({exc.strerror or exc})") from exc
    try:
        st = os.fstat(fd)
        problem = not_regular(st.st_mode)
        if problem:
            raise DocumentSkipped(name, problem)
        if st.st_size > max_bytes:
            raise DocumentError(name, _too_large(st.st_size, max_bytes))
        with os.fdopen(os.dup(fd), "rb") as f:
            data = f.read(max_bytes + 1)
    except OSError as exc:
        raise DocumentError(name, f"cannot read ({exc.strerror or exc})") from exc
    finally:
        os.close(fd)
    if len(data) > max_bytes:  # grew after the check
        raise DocumentError(name, _too_large(len(data), max_bytes))
    return data


def _decode_text(name: str, raw: bytes) -> tuple[FrontMatter, str]:
    """UTF-8 text (BOM allowed) split into front matter and body; refuses binary files."""
    if b"\x00" in raw[:8192]:
        raise DocumentError(name, "binary file (contains NUL bytes), not text")
    bom = 3 if raw.startswith(b"\xef\xbb\xbf") else 0
    try:
        text = raw[bom:].decode("utf-8")
    except UnicodeDecodeError as exc:
        at = exc.start + bom  # offset in the file, BOM included
        raise DocumentError(name, f"not UTF-8 (invalid byte 0x{raw[at]:02x} at offset {at})") from exc
    try:
        return read_front_matter(text)  # line ends normalised (CRLF and CR-only)
    except FrontMatterError as exc:
        raise DocumentError(name, str(exc)) from exc


def _too_large(size: int, max_bytes: int) -> str:
    """The size and the limit in MB, readable for small limits too (0.05 MB, not "0 MB")."""
    have, limit = f"{size / 1e6:.3g}", f"{max_bytes / 1e6:.3g}"
    if have == limit:  # just over the limit: show bytes rather than "20 MB > limit 20 MB"
        have, limit = f"{size:,} bytes", f"{max_bytes:,} bytes"
    else:
        have, limit = f"{have} MB", f"{limit} MB"
    return f"file too large ({have} > limit {limit}; raise OSRAG_MAX_FILE_BYTES to allow it)"


# ---------------------------------------------------------------- chunk guard
def guard_chunks(
    chunks: Sequence[Chunk], max_chars: int, count: Callable[[str], int] | None = None
) -> list[Chunk]:
    """The chunker's output within hard limits, whatever the input: a chunk longer than
    ``max_chars`` (a 2.5-million-character word stays whole in every splitter) is cut into
    pieces of at most ``max_chars``, at the last space where there is one; headings longer
    than ``MAX_HEADING_CHARS`` are shortened in the heading path and the anchor (keyword fields).
    Ordinals are renumbered so chunk ids stay dense and ordered."""
    out: list[Chunk] = []
    changed = False
    for c in chunks:
        path = tuple(capped(h) for h in c.heading_path)
        if path != c.heading_path:
            prefix = c.text[: len(c.text) - len(c.body)] if c.body and c.text.endswith(c.body) else ""
            new_prefix = " > ".join(path) + "\n\n" if prefix else ""
            c = dataclasses.replace(c, heading_path=path, text=new_prefix + c.text[len(prefix) :])
            changed = True
        if len(c.anchor) > MAX_HEADING_CHARS:  # the slug of a giant heading: a keyword, too
            c = dataclasses.replace(c, anchor=c.anchor[:MAX_HEADING_CHARS])
            changed = True
        if len(c.text) <= max_chars:
            out.append(c)
            continue
        changed = True
        out.extend(_cut(c, max_chars, count))
    if not changed:
        return list(chunks)
    return [dataclasses.replace(c, ordinal=i) for i, c in enumerate(out)]


def _cut(c: Chunk, max_chars: int, count: Callable[[str], int] | None) -> list[Chunk]:
    body = c.body or c.text
    prefix = c.text[: len(c.text) - len(body)] if c.text.endswith(body) else ""
    room = max(max_chars - len(prefix), max_chars // 2, 1)
    exact = c.end - c.start == len(body)  # the body is the document's text[start:end]
    pieces: list[Chunk] = []
    pos = 0
    while pos < len(body):
        end = min(pos + room, len(body))
        if end < len(body):
            space = body.rfind(" ", pos + room // 2, end)
            if space > pos:
                end = space + 1
        piece = body[pos:end]
        text = prefix + piece
        start, stop = (c.start + pos, c.start + end) if exact else (c.start, c.end)
        tokens = count(text) if count is not None else max(1, len(text) // 10)
        pieces.append(
            dataclasses.replace(c, text=text, body=piece, start=start, end=stop, token_count=tokens)
        )
        pos = end
    return pieces


__all__ = [
    "DEFAULT_MAX_FILE_BYTES",
    "ReadOptions",
    "ReadReport",
    "ReadTask",
    "guard_chunks",
    "page_url",
    "plan_tree",
    "read_document",
    "read_tree",
]
