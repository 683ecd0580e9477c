"""The HTTP face of `docsctl serve --transport http`: the optional bearer token every route is behind.

The token check is an ASGI middleware around the whole application rather than the MCP SDK's auth
(mcp.server.auth), which is an OAuth resource server: it needs an issuer URL and token introspection,
and guards only the MCP route. A shared secret is what a local or team server needs, and wrapping the
outermost app covers every route mounted on it, present or future (a web page included).
"""

from __future__ import annotations

import hmac
import json

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
