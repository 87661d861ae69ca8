"""The MCP server (``pip install 'osrag[mcp]'``, ``osrag mcp``): osrag as tools for an agent.

Two tools over the one query path, on the official ``mcp`` SDK (``MCPServer``):

* ``search`` (question, budget_tokens, filters) -> the envelope as structured content (its
  JSON schema is the tool's output schema) and ``render_text`` as the readable text, sources
  and the budget line included;
* ``section`` (section_id, filters) -> a whole section in document order.

Who is asking is the server's configuration (``osrag mcp --group/--tenant/--public-only``),
never a tool argument: the model can narrow a search with filters but cannot widen what the
principal sees. Tool functions are sync; the SDK runs them in worker threads.
"""

# No ``from __future__ import annotations``: the SDK reads the tools' annotations at run time, and
# they name this module's locals (the budget limit).
import logging
from typing import Annotated, Any

from mcp.server.mcpserver import MCPServer
from mcp.server.mcpserver.exceptions import ToolError, UnexpectedToolError
from mcp.types import CallToolResult, TextContent, ToolAnnotations
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from osrag import __version__
from osrag.access import Principal, require_principal
from osrag.envelope import Envelope, Passage, cite, render_text
from osrag.errors import ClusterError, ClusterUnavailable, ModelError, OsragError
from osrag.search.client import SearchClient
from osrag.search.query import MAX_QUESTION_CHARS

__all__ = ["Filters", "Section", "build_server", "one_line_refusal"]

log = logging.getLogger(__name__)

INSTRUCTIONS = (
    "База знаний на русском языке. Вызывайте `search` с вопросом (лучше по-русски); ответ -- минимальный "
    "набор фрагментов, достаточный для ответа в пределах бюджета токенов, со ссылками на источники, или "
    "явное «ничего релевантного не найдено» (status nothing_relevant): тогда не выдумывайте ответ. "
    "Больше контекста вокруг фрагмента даёт `section` с его parent_section_id.\n"
    "A Russian-language knowledge base. Call `search` with the question (Russian works best); it returns the "
    "minimal passages sufficient to answer within a token budget, with their sources, or says plainly that "
    "nothing relevant was found (status nothing_relevant): then do not make an answer up. For more context "
    "around a passage, call `section` with its parent_section_id."
)

SEARCH_DESCRIPTION = (
    "Поиск по базе знаний (гибридный BM25 + векторный поиск с русской морфологией). Возвращает фрагменты "
    "документов с источниками (doc_id, путь заголовков, файл или URL), которые вместе умещаются в "
    "budget_tokens, и конверт: status complete (всё релевантное), budgeted (часть не уместилась, см. "
    "left_out) или nothing_relevant. Фильтры только сужают поиск.\n"
    "Search the knowledge base (hybrid BM25 + vector search with Russian morphology). Returns document "
    "passages with their sources (doc_id, heading path, file or URL) that fit together in budget_tokens, "
    "and the envelope: status complete (everything relevant), budgeted (some did not fit, see left_out) or "
    "nothing_relevant. Filters only narrow the search."
)

SECTION_DESCRIPTION = (
    "Весь раздел документа (фрагменты раздела и его подразделов по порядку) по section_id или "
    "parent_section_id из результата search: когда одного фрагмента мало для ответа.\n"
    "A whole document section (the chunks of the section and its subsections, in order) by a section_id "
    "or parent_section_id from a search result: when one passage is not enough to answer."
)


class Filters(BaseModel):
    """Сужение поиска (доступ задан сервером) / narrowing the search (access is fixed by the server)."""

    # Strict: "true" is not a boolean and "800" not a number, whatever pydantic would coerce.
    model_config = ConfigDict(extra="forbid", strict=True)

    category: str | list[str] | None = Field(None, description="Категория / document category")
    doc_id: str | list[str] | None = Field(None, description="Документ(ы) / document id(s)")
    kind: str | list[str] | None = Field(None, description="Вид фрагмента / chunk kind: text, code, table")
    tenant: str | list[str] | None = Field(None, description="Арендатор / tenant (narrows only)")
    updated_after: str | None = Field(None, description="ISO date, e.g. 2026-01-31")
    updated_before: str | None = Field(None, description="ISO date, e.g. 2026-12-31")
    include_archived: bool | None = Field(None, description="Включая архив / include archived documents")
    meta: dict[str, str | list[str]] | None = Field(
        None, description="Другие ключи front matter / other front-matter keys, e.g. {'tags': 'intro'}"
    )

    def to_query(self) -> dict[str, Any]:
        """The filters ``SearchClient`` takes (``meta`` -> ``meta.KEY``); it validates the values."""
        out: dict[str, Any] = self.model_dump(exclude_none=True, exclude={"meta"})
        out.update({f"meta.{k}": v for k, v in (self.meta or {}).items()})
        return out


class Section(BaseModel):
    section_id: str
    passages: list[Passage]


def _call(fn: Any, *args: Any, **kwargs: Any) -> Any:
    """An osrag error becomes the tool's one-line error for the model (the SDK names the tool); anything
    else is the SDK's crash: logged with its traceback, only "Error executing tool ..." for the model."""
    try:
        return fn(*args, **kwargs)
    except (ClusterUnavailable, ClusterError, ModelError) as exc:
        # The model (and whoever reads its output) is told no cluster address, user or local path.
        log.warning("tool call failed: %s %s", type(exc).__name__, " ".join(str(exc).split()))
        raise ToolError(
            f"the search backend failed ({type(exc).__name__}; details in the server log)"
        ) from exc
    except OsragError as exc:
        raise ToolError(" ".join(str(exc).split())) from exc


def _section_text(section_id: str, parts: list[Passage]) -> str:
    if not parts:
        return f"раздел {section_id} не найден или недоступен / section {section_id}: nothing visible"
    head = " > ".join(parts[0].heading_path) or parts[0].title
    return "\n\n".join([f"{head}  ({cite(parts[0])})", *(p.text.strip() for p in parts)])


def one_line_refusal(tool: str, exc: ValidationError) -> str:
    """A tool's refused arguments as one line naming each field at fault (pydantic's text is one
    line per error plus a documentation link per error), never the refused values' full text."""
    parts = []
    for err in exc.errors():
        where = ".".join(str(p) for p in err.get("loc", ())) or "arguments"
        parts.append(f"{where}: {err.get('msg', 'invalid')}")
    return f"tool {tool}: " + "; ".join(" ".join(p.split()) for p in parts)


class _OneLineErrors(MCPServer):
    """``MCPServer`` whose refusal of a tool's arguments is one line (``one_line_refusal``)."""

    async def call_tool(self, name: str, arguments: dict[str, Any], context: Any = None) -> Any:
        try:
            return await super().call_tool(name, arguments, context)
        except ToolError as exc:
            cause = exc.__cause__
            if isinstance(cause, ValidationError) and not isinstance(exc, UnexpectedToolError):
                raise ToolError(one_line_refusal(name, cause)) from cause
            raise


def build_server(client: SearchClient, principal: Principal, *, max_budget_tokens: int = 8000) -> MCPServer:
    """The MCP server answering for ``principal`` (required: there is no default reader)."""
    who = require_principal(principal, require_tenant=client.s.require_tenant)
    server: MCPServer = _OneLineErrors(
        "osrag", version=__version__, instructions=INSTRUCTIONS, log_level="WARNING"
    )
    read_only = ToolAnnotations(read_only_hint=True, open_world_hint=False)

    @server.tool(description=SEARCH_DESCRIPTION, annotations=read_only)
    def search(
        question: Annotated[
            str, Field(description="Вопрос / the question", min_length=1, max_length=MAX_QUESTION_CHARS)
        ],
        budget_tokens: Annotated[
            int | None,
            Field(description="Бюджет токенов / token budget", ge=1, le=max_budget_tokens, strict=True),
        ] = None,
        filters: Filters | None = None,
    ) -> Annotated[CallToolResult, Envelope]:
        flt = filters.to_query() if filters else None
        env = _call(client.search, question, principal=who, budget_tokens=budget_tokens, filters=flt)
        text = TextContent(type="text", text=render_text(env))
        return CallToolResult(content=[text], structured_content=env.model_dump(mode="json"))

    @server.tool(description=SECTION_DESCRIPTION, annotations=read_only)
    def section(
        section_id: Annotated[str, Field(description="section_id / parent_section_id", min_length=1)],
        filters: Filters | None = None,
    ) -> Annotated[CallToolResult, Section]:
        flt = filters.to_query() if filters else None
        parts = _call(client.section, section_id, principal=who, filters=flt)
        got = Section(section_id=section_id, passages=parts)
        text = TextContent(type="text", text=_section_text(section_id, parts))
        return CallToolResult(content=[text], structured_content=got.model_dump(mode="json"))

    log.info("MCP server ready for %s", who.describe())
    return server
