"""The HTTP face of `docsctl serve --transport http`: the MCP app, behind an optional bearer token.

The token check is an ASGI middleware around the whole application rather than the MCP SDK's auth
(mcp.server.auth), which is an OAuth resource server: it needs an issuer URL and token introspection,
and guards only the MCP route. A shared secret is what a local or team server needs, and wrapping the
outermost app covers every route mounted on it, present or future (a web page included).
"""

from __future__ import annotations

import hmac
import json

import anyio
from mcp.server.mcpserver import MCPServer
from starlette.types import ASGIApp, Receive, Scope, Send

HTTP_PATH = "/mcp"
LOCAL_HOSTS = ("127.0.0.1", "localhost", "::1")


class BearerTokenMiddleware:
    """Answer 401 to any HTTP request without `Authorization: Bearer <token>`; pass the rest through."""

    def __init__(self, app: ASGIApp, token: str) -> None:
        self.app = app
        self._expected = f"Bearer {token}".encode()

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http":
            given = dict(scope.get("headers") or []).get(b"authorization", b"")
            if not hmac.compare_digest(given, self._expected):  # the same time whatever the guess
                body = json.dumps({"error": "unauthorized", "error_description": "a bearer token is required"})
                await send(
                    {
                        "type": "http.response.start",
                        "status": 401,
                        "headers": [
                            (b"content-type", b"application/json"),
                            (b"www-authenticate", b'Bearer realm="docsctl"'),
                        ],
                    }
                )
                await send({"type": "http.response.body", "body": body.encode()})
                return
        await self.app(scope, receive, send)


def http_app(server: MCPServer, *, host: str, token: str | None) -> ASGIApp:
    """The ASGI app to serve: MCP at HTTP_PATH (Host and Origin checked when bound to a local address),
    wrapped in the token check when a token is set. Routes added to `server` are covered as well."""
    app: ASGIApp = server.streamable_http_app(streamable_http_path=HTTP_PATH, host=host)
    return BearerTokenMiddleware(app, token) if token else app


def run_http(server: MCPServer, *, host: str, port: int, token: str | None) -> None:
    """Serve `server` over streamable HTTP until interrupted (what MCPServer.run does, plus the token)."""
    import uvicorn

    config = uvicorn.Config(
        http_app(server, host=host, token=token), host=host, port=port, log_level=server.settings.log_level.lower()
    )
    anyio.run(uvicorn.Server(config).serve)
