"""The web pages: search, a document's chunks, why a document ranks where it does, and what is indexed.

Every page is a GET over the same Searcher, explain and results code the MCP tools and `docsctl query`
use; no page builds a query of its own and none writes anything. Endpoints are plain functions, which
Starlette runs in worker threads (the store and the encoder block). A DocsctlError becomes an HTML
page with a 4xx/5xx status and one sentence; anything else is a bug, logged with its traceback while
the page says only that something went wrong.
"""

from __future__ import annotations

import logging
import threading
import webbrowser
from collections.abc import Callable, Mapping
from typing import Any

from jinja2 import Environment, PackageLoader
from starlette.applications import Starlette
from starlette.exceptions import HTTPException
from starlette.middleware import Middleware
from starlette.middleware.trustedhost import TrustedHostMiddleware
from starlette.requests import Request
from starlette.responses import HTMLResponse, Response
from starlette.routing import BaseRoute, Mount, Route
from starlette.staticfiles import StaticFiles
from starlette.types import ASGIApp, Receive, Scope, Send

from docsctl import __version__
from docsctl.config import Settings
from docsctl.errors import ConfigError, DocsctlError, IndexMissingError, NotFoundError
from docsctl.models import Filters
from docsctl.server import explain as explaining
from docsctl.server.http import BearerTokenMiddleware
from docsctl.server.search import MODES, Searcher
from docsctl.server.web import views

log = logging.getLogger("docsctl.web")

DEFAULT_PORT = 8766
LOOPBACK = ("127.0.0.1", "localhost", "::1")
MAX_QUERY_CHARS = 1000
FACET_LABELS = {"source": "Source", "version": "Version", "category": "Category"}
# Nothing but this server's own files; inline SVG is markup, not script, and needs no exception.
SECURITY_HEADERS = {
    "content-security-policy": "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
    "connect-src 'self'; form-action 'self'; base-uri 'none'; frame-ancestors 'none'",
    "x-content-type-options": "nosniff",
    "referrer-policy": "no-referrer",
    "x-frame-options": "DENY",
}

_templates = Environment(
    loader=PackageLoader("docsctl.server.web", "templates"),
    autoescape=True,  # every template, whatever its name: documents are untrusted
    trim_blocks=True,
    lstrip_blocks=True,
)


class BadRequest(Exception):
    """A parameter a page cannot use; its message is shown with status 400."""


def _render(name: str, status: int = 200, **context: Any) -> HTMLResponse:
    html = _templates.get_template(name).render(version=__version__, **context)
    return HTMLResponse(html, status_code=status)


def _error_page(status: int, title: str, message: str) -> HTMLResponse:
    return _render("error.html", status, title=title, message=message, query="")


def _status_of(exc: DocsctlError) -> tuple[int, str]:
    if isinstance(exc, NotFoundError):
        return 404, "Not found"
    if isinstance(exc, IndexMissingError):
        return 503, "No index yet"
    if isinstance(exc, ConfigError):
        return 400, "Bad request"
    return 503, "The search backend is unavailable"


def _page(work: Callable[[Request], HTMLResponse]) -> Callable[[Request], HTMLResponse]:
    """An endpoint that turns bad parameters and DocsctlErrors into an error page with a status."""

    def endpoint(request: Request) -> HTMLResponse:
        try:
            return work(request)
        except BadRequest as exc:
            return _error_page(400, "Bad request", str(exc))
        except DocsctlError as exc:
            status, title = _status_of(exc)
            if isinstance(exc, IndexMissingError):
                return _error_page(status, title, f"{exc}. Build it with docsctl reindex PATH; no restart needed.")
            return _error_page(status, title, str(exc))

    endpoint.__name__ = work.__name__
    return endpoint


def _text(request: Request, name: str, limit: int = MAX_QUERY_CHARS) -> str:
    value = request.query_params.get(name, "").strip()
    if len(value) > limit:
        raise BadRequest(f"{name} is longer than {limit} characters")
    return value


def _page_number(request: Request) -> int:
    raw = request.query_params.get("page", "1").strip() or "1"
    if not raw.isdigit() or not 1 <= int(raw) <= views.MAX_PAGE:
        raise BadRequest(f"page must be a whole number from 1 to {views.MAX_PAGE}, not {raw[:20]!r}")
    return int(raw)


# -- pages ----------------------------------------------------------------------------------------


def create_routes(searcher: Searcher) -> list[BaseRoute]:
    """The pages over `searcher` (and its store), and their static files."""
    store = searcher.store

    @_page
    def search_page(request: Request) -> HTMLResponse:
        query = _text(request, "q")
        params = {field: _text(request, field, 200) for field in views.FACET_FIELDS}
        mode = _text(request, "mode") or "hybrid"
        if mode not in MODES:
            raise BadRequest(f"mode must be one of {', '.join(MODES)}, not {mode[:20]!r}")
        page = _page_number(request)
        filters = Filters(
            categories=(params["category"],) if params["category"] else (),
            sources=(params["source"],) if params["source"] else (),
            versions=(params["version"],) if params["version"] else (),
        )
        counts = store.facet_counts(filters)
        state = {"q": query, **params, "mode": "" if mode == "hybrid" else mode}
        result = None
        if query:
            offset = (page - 1) * views.PAGE_SIZE
            result = searcher.search(query, limit=views.PAGE_SIZE, offset=offset, mode=mode, filters=filters)
        return _render(
            "search.html",
            query=query,
            mode=mode,
            modes=MODES,
            params=params,
            facets=views.facet_views(counts, state),
            facet_labels=FACET_LABELS,
            result=result,
            results=views.result_views(result.hits, query, (page - 1) * views.PAGE_SIZE) if result else [],
            pager=views.pager(state, page, result.total) if result else None,
        )

    @_page
    def document_page(request: Request) -> HTMLResponse:
        path = _text(request, "path")
        if not path:
            raise BadRequest("path is required: the document's path in its source, as search results show it")
        source, version = _text(request, "source", 200) or None, _text(request, "version", 200) or None
        chunks = store.get_document(path, source, version)
        first = chunks[0]
        return _render(
            "document.html",
            query="",
            first=first,
            original=views.safe_url(first.url),
            chunks=views.chunk_views(chunks),
            characters=sum(len(chunk.content) for chunk in chunks),
        )

    @_page
    def explain_page(request: Request) -> HTMLResponse:
        query, path, source = _text(request, "q"), _text(request, "path"), _text(request, "source", 200)
        form = {"q": query, "path": path, "source": source}
        if not query and not path:
            return _render("explain.html", query="", form=form, explanation=None)
        if not (query and path):
            raise BadRequest("explain needs both a query (q) and a document path (path)")
        explanation = explaining.explain(searcher, query, path, source or None).to_dict()
        bars = views.contribution_bars(explanation)
        document = explanation["document"]
        return _render(
            "explain.html",
            query=query,
            form=form,
            explanation=explanation,
            bars=bars,
            chart_height=views.chart_height(bars),
            chart_width=views.CHART_WIDTH,
            label_width=views.LABEL_WIDTH,
            bar_height=views.BAR_HEIGHT,
            document_link="/doc" + views.query_string({"path": document["path"], "source": document["source"]}),
        )

    @_page
    def sources_page(request: Request) -> HTMLResponse:
        stats = explaining.index_stats(store)
        return _render(
            "sources.html",
            query="",
            stats=stats,
            size=explaining.human_size(stats["size_bytes"]),
            server_model=searcher.embedder.model_name,
        )

    return [
        Route("/", search_page, name="search"),
        Route("/doc", document_page, name="document"),
        Route("/explain", explain_page, name="explain"),
        Route("/sources", sources_page, name="sources"),
        Mount("/static", StaticFiles(packages=[("docsctl.server.web", "static")]), name="static"),
    ]


class SecurityHeaders:
    """Adds SECURITY_HEADERS to every response, so a page could not run a script the index smuggled in
    even if escaping failed somewhere."""

    def __init__(self, app: ASGIApp, headers: Mapping[str, str] = SECURITY_HEADERS) -> None:
        self.app = app
        self.headers = [(key.encode(), value.encode()) for key, value in headers.items()]

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return

        async def send_with_headers(message: dict[str, Any]) -> None:
            if message["type"] == "http.response.start":
                message.setdefault("headers", [])
                message["headers"] = [*message["headers"], *self.headers]
            await send(message)

        await self.app(scope, receive, send_with_headers)


def _http_error(request: Request, exc: Exception) -> Response:
    assert isinstance(exc, HTTPException)
    if exc.status_code == 405:
        return _error_page(405, "Method not allowed", "these pages only read: use GET")
    if exc.status_code == 404:
        return _error_page(404, "Not found", f"there is no page at {request.url.path}")
    return _error_page(exc.status_code, "Error", str(exc.detail))


def _server_error(request: Request, exc: Exception) -> Response:
    log.error("error answering %s", request.url.path, exc_info=exc)
    return _error_page(500, "Something went wrong", "the server could not answer; its log has the details")


def create_app(searcher: Searcher, host: str = "127.0.0.1") -> Starlette:
    """The web pages as an ASGI app. Bound to a loopback address, it answers only requests addressed to
    one (a web page elsewhere cannot reach it through DNS rebinding)."""
    allowed = ["127.0.0.1", "localhost"] if host in ("127.0.0.1", "localhost") else ["*"]
    return Starlette(
        routes=create_routes(searcher),
        middleware=[Middleware(TrustedHostMiddleware, allowed_hosts=allowed), Middleware(SecurityHeaders)],
        exception_handlers={HTTPException: _http_error, Exception: _server_error},
    )


def serve(settings: Settings, *, host: str = "127.0.0.1", port: int = DEFAULT_PORT, open_browser: bool = False) -> None:
    """Load the model and open the index once, then serve the pages until Ctrl-C."""
    import uvicorn

    from docsctl.embedding import embedder_for
    from docsctl.server.mcp import warm_up
    from docsctl.store import open_store

    searcher = Searcher(open_store(settings), embedder_for(settings))
    warm_up(searcher)
    warn_if_public(host)
    url = f"http://{'[::1]' if host == '::1' else host}:{port}/"
    log.info("serving the web pages at %s", url)
    if open_browser:
        threading.Timer(1.0, webbrowser.open, args=(url,)).start()
    app: ASGIApp = create_app(searcher, host)
    if settings.token:
        app = BearerTokenMiddleware(app, settings.token)
    uvicorn.run(app, host=host, port=port, log_level="warning")


def warn_if_public(host: str) -> None:
    if host not in LOOPBACK:
        log.warning("listening on %s: anyone who can reach this address can search the index", host)
