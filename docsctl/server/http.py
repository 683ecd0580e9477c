"""The HTTP face of `docsctl serve --transport http`: the optional bearer token every route is behind.

The token check is an ASGI middleware around the whole application rather than the MCP SDK's auth
(mcp.server.auth), which is an OAuth resource server: it needs an issuer URL and token introspection,
and guards only the MCP route. A shared secret is what a local or team server needs, and wrapping the
outermost app covers every route mounted on it, present or future (a web page included).
"""

from __future__ import annotations

import hmac
import json
from urllib.parse import parse_qsl, urlencode

from starlette.types import ASGIApp, Receive, Scope, Send

HTTP_PATH = "/mcp"
LOCAL_HOSTS = ("127.0.0.1", "localhost", "::1")


TOKEN_COOKIE = "docsctl_token"


def _cookie(headers: dict[bytes, bytes], name: str) -> bytes:
    for part in headers.get(b"cookie", b"").split(b";"):
        key, _, value = part.strip().partition(b"=")
        if key == name.encode():
            return value
    return b""


class BearerTokenMiddleware:
    """Answer 401 to any HTTP request that does not carry the token; pass the rest through.

    Programs send `Authorization: Bearer <token>`. A browser cannot add that header to a page load, so a
    person opens `/?token=<token>` once: the answer sets an HttpOnly, SameSite=Strict cookie holding it and
    redirects to the same address without the token (kept out of history and logs); the cookie then counts
    as the header."""

    def __init__(self, app: ASGIApp, token: str) -> None:
        self.app = app
        self._token = token.encode()

    def _matches(self, given: bytes) -> bool:
        return hmac.compare_digest(given, self._token)  # the same time whatever the guess

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        headers = dict(scope.get("headers") or [])
        bearer = headers.get(b"authorization", b"")
        if (bearer.startswith(b"Bearer ") and self._matches(bearer[7:])) or self._matches(
            _cookie(headers, TOKEN_COOKIE)
        ):
            await self.app(scope, receive, send)
            return
        query = parse_qsl(scope.get("query_string", b"").decode("latin-1"), keep_blank_values=True)
        offered = [value for key, value in query if key == "token"]
        if scope.get("method") == "GET" and offered and self._matches(offered[-1].encode()):
            rest = urlencode([(key, value) for key, value in query if key != "token"])
            location = scope.get("root_path", "") + scope["path"] + (f"?{rest}" if rest else "")
            cookie = f"{TOKEN_COOKIE}={offered[-1]}; Path=/; HttpOnly; SameSite=Strict"
            await _respond(send, 303, b"", [(b"location", location.encode()), (b"set-cookie", cookie.encode())])
            return
        body = json.dumps({"error": "unauthorized", "error_description": "a bearer token is required"})
        headers_out = [(b"content-type", b"application/json"), (b"www-authenticate", b'Bearer realm="docsctl"')]
        await _respond(send, 401, body.encode(), headers_out)


async def _respond(send: Send, status: int, body: bytes, headers: list[tuple[bytes, bytes]]) -> None:
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": body})
