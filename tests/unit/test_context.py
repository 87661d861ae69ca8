"""Contextual retrieval (osrag.ingest.context): the outline contextualizer, the chat one against a real
local HTTP server, its on-disk cache, and the hooks that carry a context into the index."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from unittest.mock import Mock

import pytest

from osrag.chunking import Chunk, ChunkingConfig, Document, chunk_document
from osrag.connection import Cluster
from osrag.errors import ConfigError, DocumentError
from osrag.ingest.context import (
    CONTEXT_FIELD,
    ChatContext,
    ContextCache,
    Contextualizer,
    NoContext,
    OutlineContext,
    contextualizer_for,
    lead_sentence,
)
from osrag.ingest.indexing import Ingester
from osrag.ingest.prepared import chunk_source
from osrag.records import embedding_text
from osrag.search import query
from osrag.settings import Settings
from osrag.store.alias import AliasStore

DOC = Document(
    doc_id="vm/resize",
    title="Изменение размера ВМ",
    text=(
        "# Изменение размера ВМ\n\n"
        "Размер виртуальной машины меняют в личном кабинете. Остановите ВМ заранее.\n\n"
        "## Ограничения\n\n"
        "Этот параметр увеличивают только при повторной обработке диска.\n"
    ),
    source="docs/vm/resize.md",
)


def _chunks(doc: Document = DOC) -> list[Any]:
    return chunk_document(
        doc, "markdown", ChunkingConfig(max_tokens=30, min_tokens=2), lambda t: len(t.split())
    )


# ------------------------------------------------------------------ a real chat endpoint on 127.0.0.1
class ChatServer:
    """An OpenAI-compatible ``/v1/chat/completions`` on an ephemeral port, in a thread: answers
    ``reply`` (formatted with the call number) or ``status``; records every request."""

    def __init__(self, reply: str = "Контекст {n}: раздел о дисках.", status: int = 200) -> None:
        self.reply, self.status = reply, status
        self.requests: list[dict[str, Any]] = []
        outer = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                outer.requests.append({"path": self.path, "auth": self.headers.get("Authorization"), **body})
                payload = {"choices": [{"message": {"role": "assistant", "content": ""}}]}
                payload["choices"][0]["message"]["content"] = outer.reply.format(n=len(outer.requests))
                data = json.dumps(payload).encode() if outer.status == 200 else b'{"error": "boom"}'
                self.send_response(outer.status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def log_message(self, *args: Any) -> None:
                pass

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.httpd.server_address[1]}/v1"

    def __enter__(self) -> ChatServer:
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()
        self.thread.join(timeout=5)


@pytest.fixture
def chat_server() -> Iterator[ChatServer]:
    with ChatServer() as server:
        yield server


# ------------------------------------------------------------------ outline
def test_lead_sentence_skips_headings_fences_and_lists() -> None:
    text = (
        "# Заголовок\n\n```bash\nls -la\n```\n\n- пункт списка\n\n"
        "Сервис хранит [резервные копии](backup.md) **неделю**. Потом удаляет.\n"
    )
    assert lead_sentence(text) == "Сервис хранит резервные копии неделю."


def test_lead_sentence_is_cut_at_a_word_and_empty_without_prose() -> None:
    got = lead_sentence("слово " * 100, limit=30)
    assert got.endswith("…") and len(got) <= 31 and "  " not in got
    assert lead_sentence("# Только заголовок\n\n| a | b |\n") == ""


def test_outline_gives_title_breadcrumb_and_lead_without_repeating_the_chunk() -> None:
    chunks = _chunks()
    assert len(chunks) == 2
    first, second = OutlineContext().contexts(DOC, chunks)
    # The first chunk starts with its breadcrumb (the title) and holds the lead sentence.
    assert first == ""
    # The second repeats neither its breadcrumb (its text starts with it) nor the title inside it.
    assert second == "Размер виртуальной машины меняют в личном кабинете."


def test_outline_names_a_title_the_chunk_lacks() -> None:
    doc = Document(
        doc_id="d", title="Справочник API", text="Первое предложение. Второе.\n\n## Лимиты\n\nЧисло запросов."
    )
    # The Markdown chunker starts every chunk with a breadcrumb rooted at the title: only the lead is new.
    assert OutlineContext().contexts(doc, _chunks(doc))[-1] == "Первое предложение."
    # A chunk without a breadcrumb line (fixed-size chunking) gets the title and the lead.
    bare = Chunk("d", 1, "Число запросов.", "Число запросов.", (), "s1", None, "text", 50, 65, 2)
    assert OutlineContext().contexts(doc, [bare]) == ["Справочник API\nПервое предложение."]


def test_embedding_text_puts_the_context_first() -> None:
    assert embedding_text("", "текст") == "текст"
    assert embedding_text("контекст", "текст") == "контекст\n\nтекст"


def test_builtins_satisfy_the_protocol_and_none_adds_no_recipe() -> None:
    for c in (NoContext(), OutlineContext()):
        assert isinstance(c, Contextualizer)
    assert NoContext().recipe == "" and NoContext().contexts(DOC, _chunks()) == ["", ""]
    assert OutlineContext().recipe


# ------------------------------------------------------------------ chat, against a real local server
def test_chat_context_asks_the_endpoint_once_per_chunk_and_caches_on_disk(
    chat_server: ChatServer, tmp_path: Path
) -> None:
    chat = ChatContext(chat_server.url, "tiny-llm", ContextCache(tmp_path), api_key="sk-test")
    chunks = _chunks()
    got = chat.contexts(DOC, chunks)
    assert got == ["Контекст 1: раздел о дисках.", "Контекст 2: раздел о дисках."]
    assert chat.calls == 2 and len(chat_server.requests) == 2
    req = chat_server.requests[1]
    assert req["path"] == "/v1/chat/completions" and req["model"] == "tiny-llm"
    assert req["auth"] == "Bearer sk-test"
    user = req["messages"][-1]["content"]
    assert chunks[1].text in user and "Размер виртуальной машины" in user  # chunk and whole document
    # Again, and from a new instance on the same cache directory: no call.
    assert chat.contexts(DOC, chunks) == got
    again = ChatContext(chat_server.url, "tiny-llm", ContextCache(tmp_path))
    assert again.contexts(DOC, chunks) == got
    assert again.calls == 0 and len(chat_server.requests) == 2
    # Another model is another recipe: asked again.
    other = ChatContext(chat_server.url, "other-llm", ContextCache(tmp_path))
    other.contexts(DOC, chunks[:1])
    assert other.calls == 1 and other.recipe != chat.recipe


def test_chat_context_failure_is_a_document_error_without_the_key(tmp_path: Path) -> None:
    with ChatServer(status=500) as server:
        chat = ChatContext(server.url, "m", ContextCache(tmp_path), api_key="sk-secret")
        with pytest.raises(DocumentError) as err:
            chat.contexts(DOC, _chunks())
    assert "500" in str(err.value) and "docs/vm/resize.md" in str(err.value)
    assert "sk-secret" not in str(err.value)
    assert not list(tmp_path.rglob("*.txt"))  # a failure is not cached


def test_chat_context_unreachable_endpoint_is_a_document_error(tmp_path: Path) -> None:
    with ChatServer() as server:
        url = server.url
    chat = ChatContext(url, "m", ContextCache(tmp_path), timeout_s=2)
    with pytest.raises(DocumentError, match="unreachable"):
        chat.contexts(DOC, _chunks())


def test_contextualizer_for_reads_settings_and_hides_the_key(tmp_path: Path) -> None:
    assert isinstance(contextualizer_for(Settings(_env_file=None)), NoContext)
    assert isinstance(contextualizer_for(Settings(contextualizer="outline", _env_file=None)), OutlineContext)
    with pytest.raises(ConfigError, match="OSRAG_CONTEXT_URL"):
        contextualizer_for(Settings(contextualizer="chat", _env_file=None))
    s = Settings(
        contextualizer="chat",
        context_url="http://127.0.0.1:9/v1",
        context_model="m",
        context_api_key="sk-hidden",
        context_cache_dir=tmp_path,
        _env_file=None,
    )
    chat = contextualizer_for(s)
    assert isinstance(chat, ChatContext) and chat.cache.dir == tmp_path
    assert "sk-hidden" not in repr(s) and "sk-hidden" not in str(s)


# ------------------------------------------------------------------ the hooks
def test_chunk_source_stores_the_context_only_when_there_is_one() -> None:
    c = _chunks()[1]
    with_ctx = chunk_source(DOC, c, "vm/resize@v1", [0.0], "2026-12-01T00:00:00+00:00", context="Контекст.")
    assert with_ctx[CONTEXT_FIELD] == "Контекст." and with_ctx["text"] == c.text
    assert CONTEXT_FIELD not in chunk_source(DOC, c, "vm/resize@v1", [0.0], "2026-12-01T00:00:00+00:00")


def _ingester(cluster: Cluster, **kw: Any) -> Ingester:
    admin = Mock(spec=AliasStore)
    admin.cluster = cluster
    return Ingester(Settings(_env_file=None, **kw), admin=admin)


def test_the_contextualizer_recipe_is_part_of_the_version_and_none_changes_nothing(
    fake_cluster: Cluster,
) -> None:
    plain, outline = _ingester(fake_cluster), _ingester(fake_cluster, contextualizer="outline")
    assert plain._version(DOC, "m") != outline._version(DOC, "m")
    assert plain.recipe_key("m", "c") != outline.recipe_key("m", "c")
    # "none" hashes exactly what an ingester with no contextualizer at all did (old indices keep their versions).
    explicit_none = _ingester(fake_cluster)
    explicit_none.contextualizer = NoContext()
    assert explicit_none._version(DOC, "m") == plain._version(DOC, "m")


def test_bm25_head_matches_the_context_field_with_a_modest_boost() -> None:
    should = query.bm25_head("размер диска", [])["bool"]["should"]
    ctx = [c["match"][CONTEXT_FIELD] for c in should if CONTEXT_FIELD in c.get("match", {})]
    assert ctx == [{"query": "размер диска", "boost": query.CONTEXT_BOOST}]
    assert 0 < query.CONTEXT_BOOST < query.TITLE_BOOST
    assert not any(
        CONTEXT_FIELD in c.get("match", {}) for c in query.bm25_head("x", [], "text-only")["bool"]["should"]
    )


def test_template_maps_context_as_russian_text() -> None:
    path = Path(__file__).parents[2] / "osrag" / "index_templates" / "osrag-chunks.json"
    props = json.loads(path.read_text(encoding="utf-8"))["template"]["mappings"]["properties"]
    assert props[CONTEXT_FIELD]["type"] == "text" and props[CONTEXT_FIELD]["analyzer"] == "ru_index"
