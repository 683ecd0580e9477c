"""The MCP server: documentation search tools for AI assistants, each a few lines over Searcher and Store.

    search_docs   hybrid search over every source, one result per document, paged, within a budget
    lookup        the reference page(s) of an exact command, component or API name
    get_chunk     one chunk by id
    get_document  a whole document rebuilt from its chunks, paged by chunk
    list_sources  what is indexed, how fresh it is, with which model

Each tool returns structured content (the models in results.py, which give it an outputSchema) and the
same answer as readable text. A DocsctlError becomes a tool error (isError) whose message says what to
do next, in one place (`_answer`); anything else is a bug, logged with its traceback on stderr while
the client sees only the tool name. Tools run in worker threads under a deadline, so a stuck backend
gives an error, never a hang. The model and the store client are loaded before the first request
(`warm_up`); no tool ever builds or changes an index.
"""

from __future__ import annotations

import contextlib
import logging
import sys
import threading
import time
from collections.abc import Callable
from typing import Annotated, Literal

import anyio
import anyio.to_thread
from mcp.server.mcpserver import MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from mcp.types import CallToolResult, TextContent, ToolAnnotations
from pydantic import BaseModel, Field
from starlette.routing import Mount
from starlette.types import ASGIApp

from docsctl import __version__
from docsctl.config import Settings
from docsctl.embedding import embedder_for
from docsctl.errors import (
    ConfigError,
    DocsctlError,
    IndexMissingError,
    LockedError,
    NotFoundError,
    StoreError,
)
from docsctl.models import Chunk, Filters
from docsctl.server import results
from docsctl.server.http import HTTP_PATH, LOCAL_HOSTS, BearerTokenMiddleware
from docsctl.server.results import (
    DEFAULT_MAX_CHARS,
    MAX_MAX_CHARS,
    MIN_MAX_CHARS,
    ChunkResponse,
    Document,
    LookupResponse,
    SearchResponse,
    SourcesResponse,
)
from docsctl.server.search import MAX_LIMIT, MAX_REWORDINGS, Searcher
from docsctl.store import open_store

log = logging.getLogger("docsctl.mcp")

TOOL_TIMEOUT_S = 30.0
TRANSPORTS = ("stdio", "http")
DEFAULT_PORT = 8765
READ_ONLY = ToolAnnotations(read_only_hint=True, destructive_hint=False, idempotent_hint=True, open_world_hint=False)

INSTRUCTIONS = """\
Search the documentation indexed by docsctl (see list_sources for what is indexed and how fresh it is).
- Question in plain words ("how do I color by chain?"): search_docs; pass rewordings in `queries` (the words
  the documentation would use) when the user's words may not be the documentation's.
- Exact command, class, component or function name ("color", "Tabulator"): lookup.
- Reading on from a result: get_chunk(chunk_id) for its section, get_document(path, source) for the page.
Answers are cut to max_chars; a cut ends with "[… truncated: call …]" naming the call for the rest."""

MaxChars = Annotated[
    int,
    Field(
        ge=MIN_MAX_CHARS,
        le=MAX_MAX_CHARS,
        description="Character budget for the whole answer; content past it is cut with a marker naming the "
        "call that returns the rest.",
    ),
]
SourceName = Annotated[
    str | None, Field(description="Only this documentation source (names: list_sources). Default: every source.")
]
VersionLabel = Annotated[str | None, Field(description="Only this version label (see list_sources).")]


# -- errors ---------------------------------------------------------------------------------------


def advice(exc: DocsctlError) -> str:
    """The message an assistant sees for an error: what happened and what to do next."""
    message = str(exc).rstrip(".")
    if isinstance(exc, IndexMissingError):
        return (
            f"{message}. Nothing is indexed yet: the user must build the index first, e.g. `docsctl reindex PATH` "
            "(a folder of documentation); this server uses it as soon as it exists, without a restart."
        )
    if isinstance(exc, LockedError):
        return f"{message}. Try again in a moment."
    if isinstance(exc, StoreError):
        return (
            f"{message}. The search backend is unavailable; other arguments will not help. Tell the user, and "
            "retry once they have fixed it."
        )
    if isinstance(exc, NotFoundError):
        return (
            f"{message}. Use search_docs or lookup to find documents: every result carries its path, source "
            "and chunk_id."
        )
    return message


async def _answer(work: Callable[[], tuple[BaseModel, str]]) -> CallToolResult:
    """Run a tool's work in a worker thread under a deadline; DocsctlError -> tool error with advice."""
    try:
        with anyio.fail_after(TOOL_TIMEOUT_S):
            response, text = await anyio.to_thread.run_sync(work, abandon_on_cancel=True)
    except TimeoutError:
        raise ToolError(
            f"no answer within {TOOL_TIMEOUT_S:.0f} s: the search backend is overloaded or unreachable. "
            "Tell the user; retrying right away will not help."
        ) from None
    except DocsctlError as exc:
        raise ToolError(advice(exc)) from None
    return CallToolResult(
        content=[TextContent(type="text", text=text)],
        structured_content=response.model_dump(mode="json"),
    )


def _clean_path(path: str) -> str:
    """A path as stored: no anchor, no leading ./ or /."""
    path = path.strip().split("#", 1)[0]
    while path.startswith(("./", "/")):
        path = path[2:] if path.startswith("./") else path[1:]
    return path


# -- the tools ------------------------------------------------------------------------------------


def create_server(searcher: Searcher) -> MCPServer:
    """The MCP server with the five documentation tools over `searcher` (and its store)."""
    app = MCPServer("docsctl", version=__version__, instructions=INSTRUCTIONS, log_level="WARNING")
    store = searcher.store

    @app.tool(annotations=READ_ONLY)
    async def search_docs(
        query: Annotated[str, Field(min_length=1, description="What to look for: a question, words or names.")],
        queries: Annotated[
            list[str] | None,
            Field(
                max_length=MAX_REWORDINGS,
                description="Optional: up to 4 rewordings of the same need in other words, e.g. the terms the "
                'documentation would likely use ("swap residue" for "turn a lysine into an alanine"), or '
                "a likely command or API name. Each is searched like `query` and the rankings are fused. Worth it "
                "for questions in plain words, especially when a first search missed; not needed for exact names.",
            ),
        ] = None,
        category: Annotated[
            str | None,
            Field(description="Only this category, e.g. commands, tools, tutorials (list_sources shows them)."),
        ] = None,
        source: SourceName = None,
        version: VersionLabel = None,
        mode: Annotated[
            Literal["hybrid", "bm25", "knn"],
            Field(description="hybrid (default): words and meaning; bm25: exact words; knn: meaning only."),
        ] = "hybrid",
        limit: Annotated[int, Field(ge=1, le=MAX_LIMIT, description="Results per page (1-50).")] = 5,
        offset: Annotated[int, Field(ge=0, description="Results to skip, for the next page.")] = 0,
        content: Annotated[
            Literal["chunk", "document", "none"],
            Field(description="Per result: chunk (best matching section), document (whole page) or none."),
        ] = "chunk",
        max_chars: MaxChars = DEFAULT_MAX_CHARS,
    ) -> Annotated[CallToolResult, SearchResponse]:
        """Search all indexed documentation (every source unless `source` is given) for a question or topic.

        Returns one result per document, best first: title, breadcrumb, section, category, source, path, URL,
        score, highlighted matches, the best matching section's text, chunk_id and source lines. Use
        content='document' to get whole pages, content='none' for a quick list. For an exact command or API
        name, lookup is more precise."""

        def work() -> tuple[SearchResponse, str]:
            filters = Filters(
                categories=(category,) if category else (),
                sources=(source,) if source else (),
                versions=(version,) if version else (),
            )
            result = searcher.search(
                query, limit=limit, offset=offset, mode=mode, filters=filters, rewordings=queries or ()
            )

            def document_text(chunk: Chunk) -> str:  # called only for results whose content is shown
                return results.join_chunks(store.get_document(chunk.path, chunk.source, chunk.version))

            return results.search_response(
                result, offset=offset, content=content, max_chars=max_chars, document_text=document_text
            )

        return await _answer(work)

    @app.tool(annotations=READ_ONLY)
    async def lookup(
        name: Annotated[
            str, Field(min_length=1, description="An exact command, class, component or function name, e.g. color.")
        ],
        source: SourceName = None,
        max_chars: MaxChars = DEFAULT_MAX_CHARS,
    ) -> Annotated[CallToolResult, LookupResponse]:
        """The reference page(s) for an exact name: a command, tool, class, component or API (case-insensitive).

        Finds pages by the names they document, including names besides their title (a page about a command
        also answers for its subcommands and aliases). Returns each page whole, rebuilt in order; for an API name
        that a page documents at an anchor (a Sphinx site's objects.inv), from that object's documentation on,
        with the URL of its anchor. Use search_docs instead for questions or partial names."""

        def work() -> tuple[LookupResponse, str]:
            chunks = store.lookup(name.strip(), [source] if source else [])
            if not chunks and source:
                searcher.check_filters(Filters(sources=(source,)))
            pages = results.rank_pages(name, results.split_documents(chunks))
            return results.lookup_result(name, pages, max_chars=max_chars)

        return await _answer(work)

    @app.tool(annotations=READ_ONLY)
    async def get_chunk(
        chunk_id: Annotated[
            str, Field(min_length=1, description="A chunk_id from search_docs, lookup or get_document.")
        ],
    ) -> Annotated[CallToolResult, ChunkResponse]:
        """One chunk (a section, or part of a long one) by its chunk_id, with where it sits in its document."""

        def work() -> tuple[ChunkResponse, str]:
            return results.chunk_result(store.get_chunk(chunk_id.strip()))

        return await _answer(work)

    @app.tool(annotations=READ_ONLY)
    async def get_document(
        path: Annotated[
            str, Field(min_length=1, description="Path of the document in its source, as results show it.")
        ],
        source: Annotated[
            str | None, Field(description="The source holding the path; needed when several sources have it.")
        ] = None,
        version: VersionLabel = None,
        from_chunk: Annotated[
            int, Field(ge=0, description="Start at this chunk (a cut answer names where to continue).")
        ] = 0,
        max_chars: Annotated[
            int | None,
            Field(
                ge=MIN_MAX_CHARS,
                le=MAX_MAX_CHARS,
                description=f"Character budget (default {DEFAULT_MAX_CHARS}); the rest is one call away.",
            ),
        ] = None,
    ) -> Annotated[CallToolResult, Document]:
        """A whole document, rebuilt in order from its chunks, with its sections and their chunk ids.

        Long documents are cut to max_chars; the cut names the call (with from_chunk) that continues."""

        def work() -> tuple[Document, str]:
            chunks = store.get_document(_clean_path(path), source or None, version)
            return results.document_result(chunks, from_chunk=from_chunk, max_chars=max_chars or DEFAULT_MAX_CHARS)

        return await _answer(work)

    @app.tool(annotations=READ_ONLY)
    async def list_sources() -> Annotated[CallToolResult, SourcesResponse]:
        """Every indexed documentation source: documents, chunks, categories and versions (with counts), when it
        was last indexed and from which folder or commit, and the embedding model. Use it to learn which
        categories and sources search_docs accepts and how fresh the documentation is."""

        def work() -> tuple[SourcesResponse, str]:
            infos = store.list_sources()
            return results.sources_result(
                infos, store.index_meta(), backend=store.backend, server_model=searcher.embedder.model_name
            )

        return await _answer(work)

    return app


# -- running --------------------------------------------------------------------------------------


def warm_up(searcher: Searcher, wait_s: float = 10.0) -> None:
    """Load the model and open the store before the first request, so the first call is as fast as the tenth.

    A bad model is fatal (ConfigError). A missing index or an unreachable backend is only logged: tools
    report it until it is fixed. A backend that does not answer within `wait_s` does not delay start-up."""
    started = time.perf_counter()
    searcher.embedder.encode_query("warm up")
    log.info("embedding model %s loaded in %.1f s", searcher.embedder.model_name, time.perf_counter() - started)
    store = threading.Thread(target=_warm_store, args=(searcher,), name="warm-store", daemon=True)
    store.start()
    store.join(wait_s)
    if store.is_alive():
        log.warning("the search backend has not answered within %.0f s; serving anyway", wait_s)


def _warm_store(searcher: Searcher) -> None:
    started = time.perf_counter()
    try:
        meta = searcher.store.index_meta()
        if meta is None:
            log.warning("no index yet: tools will say so until one is built (docsctl reindex PATH)")
            return
        if meta.model != searcher.embedder.model_name:
            log.warning(
                "the index was built with %s but queries are encoded with %s: rebuild the index or set model",
                meta.model,
                searcher.embedder.model_name,
            )
        searcher.search("warm up", limit=1)
    except DocsctlError as exc:
        log.warning("index not usable yet: %s", exc)
        return
    log.info("%s index ready in %.1f s", searcher.store.backend, time.perf_counter() - started)


def serve(settings: Settings, *, transport: str = "stdio", host: str = "127.0.0.1", port: int = DEFAULT_PORT) -> None:
    """Load everything once, then answer MCP requests until the client goes away (stdio) or Ctrl-C (http)."""
    if transport not in TRANSPORTS:
        raise ConfigError(f"transport must be one of {', '.join(TRANSPORTS)}, not {transport!r}")
    searcher = Searcher(open_store(settings), embedder_for(settings))
    with contextlib.redirect_stdout(sys.stderr):  # stdout carries the protocol: keep library chatter off it
        warm_up(searcher)
    app = create_server(searcher)
    if transport == "stdio":
        log.info("serving MCP over stdio")
        app.run("stdio")
        return
    import uvicorn

    if host not in LOCAL_HOSTS:
        log.warning(
            "listening on %s: the server is reachable from the network, and anyone who can reach it can query "
            "the index%s",
            host,
            "" if settings.token else " (set a token: --token or DOCSCTL_TOKEN)",
        )
    log.info("serving MCP over streamable HTTP at http://%s:%d%s, the web pages at /", host, port, HTTP_PATH)
    uvicorn.run(http_app(app, searcher, host, token=settings.token), host=host, port=port, log_level="warning")


def http_app(app: MCPServer, searcher: Searcher, host: str = "127.0.0.1", *, token: str | None = None) -> ASGIApp:
    """The MCP endpoint at HTTP_PATH and, at every other path, the web pages (docsctl.server.web); with a
    token, all of it behind the bearer token check (docsctl.server.http)."""
    from docsctl.server import web

    starlette_app = app.streamable_http_app(streamable_http_path=HTTP_PATH, host=host)
    starlette_app.router.routes.append(Mount("/", app=web.create_app(searcher, host)))
    return BearerTokenMiddleware(starlette_app, token) if token else starlette_app
