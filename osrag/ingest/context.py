"""Contextual retrieval: the document context each chunk is embedded and indexed with.

A chunk read alone loses what it is about ("this parameter is raised only on reprocessing" --
which parameter, of which service?). At ingest a ``Contextualizer`` gives every chunk a short
context from its whole document; the context is

* embedded with the chunk (``embedding_text``: ``"{context}\\n\\n{chunk text}"``), and
* stored in the chunk's own BM25 field ``context`` (Russian analyzer), which the BM25 head
  matches with a modest boost (``osrag.search.query.CONTEXT_BOOST``).

The chunk's ``text`` -- what readers and the token budget see -- is unchanged.

Two contextualizers are built in:

* ``outline`` (deterministic, free): the document title, the heading breadcrumb and the
  document's lead sentence, leaving out what the chunk's text already carries;
* ``chat``: an OpenAI-compatible ``/chat/completions`` endpoint writes one or two sentences
  per chunk (the recipe of Anthropic's "Contextual Retrieval"). Its answers are cached on disk
  by a hash of (endpoint model, prompt version, document, chunk), so a re-ingest asks nothing
  it asked before.

Each contextualizer has a ``recipe``: a string that goes into the document's version hash
(``osrag.ingest.indexing``), so switching contextualizer (or its model) re-embeds every document,
and ``none`` adds nothing (indices built before this module keep their versions).
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import re
import tempfile
import threading
import urllib.error
import urllib.request
from collections.abc import Sequence
from pathlib import Path
from typing import Protocol, runtime_checkable

from osrag.chunking import Chunk, Document
from osrag.errors import ConfigError, DocumentError
from osrag.settings import Settings

log = logging.getLogger(__name__)

#: The stored BM25 field (also added to an older index by ingest when a contextualizer is on).
CONTEXT_FIELD = "context"
CONTEXTUALIZERS = ("none", "outline", "chat")
#: The lead sentence is cut at this many characters (at a word boundary).
LEAD_MAX_CHARS = 240
#: Bumped when the chat prompt changes: part of the recipe and of the cache key.
CHAT_PROMPT_VERSION = "1"


@runtime_checkable
class Contextualizer(Protocol):
    """Gives each chunk of a document its context (``""`` for none)."""

    #: Identifies what the contexts are made by; part of the document's version hash.
    recipe: str

    def contexts(self, doc: Document, chunks: Sequence[Chunk]) -> list[str]:
        """One context per chunk, in order. Raises ``DocumentError`` when it cannot."""
        ...


# ------------------------------------------------------------------ none
class NoContext:
    """No context: chunks are embedded and indexed as they are (the recipe adds nothing)."""

    recipe = ""

    def contexts(self, doc: Document, chunks: Sequence[Chunk]) -> list[str]:
        return [""] * len(chunks)


# ------------------------------------------------------------------ outline
_HEADING = re.compile(r"^\s{0,3}(#{1,6}\s|=+\s*$|-+\s*$)")
_FENCE = re.compile(r"^\s{0,3}(```|~~~)")
_NOT_PROSE = re.compile(r"^\s*([|>:<!]|[-*+]\s|\d+[.)]\s|\{%|import\s|---)")
_SENTENCE_END = re.compile(r"(?<=[.!?…])\s+(?=[\"«(]?[A-ZА-ЯЁ0-9])")
_MARKUP = re.compile(r"[*_`]+|\[([^\]]*)\]\([^)]*\)")


def lead_sentence(text: str, limit: int = LEAD_MAX_CHARS) -> str:
    """The first sentence of the document's first prose paragraph (headings, fences, lists,
    tables and quotes passed over; links reduced to their text), cut at ``limit`` characters."""
    para: list[str] = []
    in_fence = False
    for line in text.splitlines():
        if _FENCE.match(line):
            in_fence = not in_fence
            continue
        if in_fence:
            continue
        if not line.strip():
            if para:
                break
            continue
        if _HEADING.match(line) or (not para and _NOT_PROSE.match(line)):
            if para:
                break
            continue
        para.append(line.strip())
    prose = " ".join(_MARKUP.sub(lambda m: m.group(1) or "", " ".join(para)).split())
    if not prose:
        return ""
    first = _SENTENCE_END.split(prose, maxsplit=1)[0]
    if len(first) > limit:
        first = first[:limit].rsplit(" ", 1)[0] + "…"
    return first


def _norm(s: str) -> str:
    return " ".join(s.casefold().replace("ё", "е").split())


class OutlineContext:
    """Title + heading breadcrumb + the document's lead sentence: deterministic and free.

    Parts the chunk's text already holds are left out (the chunker starts a chunk with its
    breadcrumb; the first chunk holds the lead sentence), so nothing is embedded twice."""

    recipe = "outline-v1"

    def contexts(self, doc: Document, chunks: Sequence[Chunk]) -> list[str]:
        lead = lead_sentence(doc.text)
        out: list[str] = []
        for c in chunks:
            text = _norm(c.text)
            crumb = " > ".join(c.heading_path)
            parts: list[str] = []
            title = doc.title.strip()
            if title and not text.startswith(_norm(title)) and _norm(title) not in _norm(crumb):
                parts.append(title)
            if crumb and not text.startswith(_norm(crumb)):
                parts.append(crumb)
            if lead and _norm(lead).rstrip("…") not in text:
                parts.append(lead)
            out.append("\n".join(parts))
        return out


# ------------------------------------------------------------------ chat
_SYSTEM = (
    "You situate a chunk of a document within the whole document, to improve search retrieval of "
    "the chunk. Answer with one or two short sentences in the language of the document, and nothing else."
)
_USER = (
    "<document>\n{document}\n</document>\n"
    "Here is the chunk we want to situate within the whole document:\n"
    "<chunk>\n{chunk}\n</chunk>\n"
    "Give a short succinct context to situate this chunk within the overall document."
)


class ContextCache:
    """Answers on disk, one small file per key (``{dir}/{key[:2]}/{key}.txt``), written atomically."""

    def __init__(self, directory: Path) -> None:
        self.dir = directory

    def _path(self, key: str) -> Path:
        return self.dir / key[:2] / f"{key}.txt"

    def get(self, key: str) -> str | None:
        try:
            return self._path(key).read_text(encoding="utf-8")
        except FileNotFoundError:
            return None

    def put(self, key: str, value: str) -> None:
        path = self._path(key)
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=".tmp-")
        try:
            with os.fdopen(fd, "w", encoding="utf-8") as f:
                f.write(value)
            os.replace(tmp, path)
        except BaseException:
            Path(tmp).unlink(missing_ok=True)
            raise


class ChatContext:
    """Asks an OpenAI-compatible chat endpoint for each chunk's context; cached by chunk hash.

    The document is cut to ``max_doc_chars``. A failed call fails the document (a per-file error
    of the ingest): a context silently missing would store a version its recipe does not describe."""

    def __init__(
        self,
        url: str,
        model: str,
        cache: ContextCache,
        api_key: str | None = None,
        timeout_s: float = 60.0,
        max_doc_chars: int = 20_000,
    ) -> None:
        self.url = url.rstrip("/")
        if not self.url.endswith("/chat/completions"):
            self.url += "/chat/completions"
        self.model = model
        self.cache = cache
        self._api_key = api_key
        self.timeout_s = timeout_s
        self.max_doc_chars = max_doc_chars
        self.recipe = f"chat-v{CHAT_PROMPT_VERSION}:{model}:{max_doc_chars}"
        self.calls = 0  # endpoint calls made (cache misses), for reports and tests
        self._lock = threading.Lock()

    def key(self, doc: Document, chunk: Chunk) -> str:
        """The cache key: a hash of the recipe, the document text given and the chunk text."""
        h = hashlib.sha256()
        for part in (self.recipe, doc.title, doc.text[: self.max_doc_chars], chunk.text):
            h.update(part.encode("utf-8"))
            h.update(b"\x00")
        return h.hexdigest()

    def contexts(self, doc: Document, chunks: Sequence[Chunk]) -> list[str]:
        out: list[str] = []
        for c in chunks:
            key = self.key(doc, c)
            got = self.cache.get(key)
            if got is None:
                got = self._ask(doc, c)
                self.cache.put(key, got)
            out.append(got)
        return out

    def _ask(self, doc: Document, chunk: Chunk) -> str:
        document = (f"{doc.title}\n\n" if doc.title else "") + doc.text[: self.max_doc_chars]
        body = {
            "model": self.model,
            "temperature": 0,
            "messages": [
                {"role": "system", "content": _SYSTEM},
                {"role": "user", "content": _USER.format(document=document, chunk=chunk.text)},
            ],
        }
        headers = {"Content-Type": "application/json"}
        if self._api_key:
            headers["Authorization"] = f"Bearer {self._api_key}"
        req = urllib.request.Request(
            self.url, data=json.dumps(body).encode("utf-8"), headers=headers, method="POST"
        )
        with self._lock:
            self.calls += 1
        where = doc.source or doc.doc_id
        try:
            with urllib.request.urlopen(req, timeout=self.timeout_s) as resp:
                data = json.loads(resp.read().decode("utf-8"))
        except urllib.error.HTTPError as exc:
            raise DocumentError(where, f"context endpoint {self.url} answered {exc.code}") from exc
        except (urllib.error.URLError, TimeoutError, OSError) as exc:
            raise DocumentError(where, f"context endpoint {self.url} unreachable: {exc}") from exc
        except ValueError as exc:
            raise DocumentError(where, f"context endpoint {self.url} answered no JSON") from exc
        try:
            text = data["choices"][0]["message"]["content"]
        except (KeyError, IndexError, TypeError) as exc:
            raise DocumentError(where, f"context endpoint {self.url} answered no choices[0].message") from exc
        if not isinstance(text, str):
            raise DocumentError(where, f"context endpoint {self.url} answered a non-text message")
        return " ".join(text.split())


def contextualizer_for(s: Settings) -> Contextualizer:
    """The contextualizer the settings name (``OSRAG_CONTEXTUALIZER``)."""
    if s.contextualizer == "none":
        return NoContext()
    if s.contextualizer == "outline":
        return OutlineContext()
    if not s.context_url or not s.context_model:
        raise ConfigError(
            "OSRAG_CONTEXTUALIZER=chat needs OSRAG_CONTEXT_URL and OSRAG_CONTEXT_MODEL "
            "(an OpenAI-compatible endpoint and its model)"
        )
    directory = s.context_cache_dir or (s.cache_dir or s.dev_home) / "contexts"
    key = s.context_api_key.get_secret_value() if s.context_api_key is not None else None
    return ChatContext(
        s.context_url,
        s.context_model,
        ContextCache(directory),
        api_key=key,
        timeout_s=s.context_timeout_s,
        max_doc_chars=s.context_max_doc_chars,
    )


__all__ = [
    "CONTEXTUALIZERS",
    "CONTEXT_FIELD",
    "ChatContext",
    "ContextCache",
    "Contextualizer",
    "NoContext",
    "OutlineContext",
    "contextualizer_for",
    "lead_sentence",
]
