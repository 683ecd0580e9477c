"""`docsctl serve --transport http`: bound to localhost, Origin and Host checked, an optional bearer token
on every route, and a warning when it listens on a public address."""

from __future__ import annotations

import asyncio
import json

import httpx
import httpx2
import pytest
from conftest import free_port, http_server
from mcp import Client
from mcp.client.streamable_http import streamable_http_client

INITIALIZE = {
    "jsonrpc": "2.0",
    "id": 1,
    "method": "initialize",
    "params": {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}},
}
MCP_HEADERS = {"Accept": "application/json, text/event-stream", "Content-Type": "application/json"}


@pytest.fixture
def settings(sample_indexes):
    return sample_indexes("sqlite")  # the HTTP layer is the same over either backend


def _listening_addresses(port: int) -> set[str]:
    """Local addresses of the TCP sockets listening on `port` (from /proc/net/tcp and tcp6)."""
    found = set()
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        with open(table) as rows:
            for row in list(rows)[1:]:
                local, state = row.split()[1], row.split()[3]
                address, hex_port = local.rsplit(":", 1)
                if state == "0A" and int(hex_port, 16) == port:
                    found.add(address)
    return found


def _tools(url: str, headers: dict[str, str] | None = None) -> set[str]:
    async def listing() -> set[str]:
        async with (
            httpx2.AsyncClient(headers=headers or {}, timeout=60) as http,
            Client(streamable_http_client(url, http_client=http)) as client,
        ):
            return {tool.name for tool in (await client.list_tools()).tools}

    return asyncio.run(listing())


def test_binds_localhost_and_refuses_foreign_origins_and_hosts(settings, tmp_path):
    port = free_port()
    with http_server(settings, tmp_path / "serve.log", port=port) as (url, _):
        assert _listening_addresses(port) == {"0100007F"}  # 127.0.0.1 only
        assert "search_docs" in _tools(url)
        foreign_origin = httpx.post(url, json=INITIALIZE, headers={**MCP_HEADERS, "Origin": "http://evil.example"})
        assert foreign_origin.status_code == 403
        foreign_host = httpx.post(url, json=INITIALIZE, headers={**MCP_HEADERS, "Host": "evil.example"})
        assert foreign_host.status_code == 421
        garbage = httpx.post(url, content=b"{not json", headers=MCP_HEADERS)
        assert garbage.status_code == 400 and json.loads(garbage.text)["error"]["code"] == -32700
    assert "Traceback" not in (tmp_path / "serve.log").read_text()


def test_a_token_guards_every_route(settings, tmp_path):
    with http_server(settings, tmp_path / "serve.log", DOCSCTL_TOKEN="s3cret-token") as (url, _):
        root = url.rsplit("/", 1)[0]
        for target in (url, root + "/", root + "/anything"):
            for headers in ({}, {"Authorization": "Bearer wrong"}, {"Authorization": "s3cret-token"}):
                answer = httpx.post(target, json=INITIALIZE, headers={**MCP_HEADERS, **headers})
                assert answer.status_code == 401, (target, headers)
                assert answer.headers["www-authenticate"].startswith("Bearer")
                assert "s3cret" not in answer.text
        assert "search_docs" in _tools(url, {"Authorization": "Bearer s3cret-token"})
    log = (tmp_path / "serve.log").read_text()
    assert "s3cret" not in log and "Traceback" not in log


def test_the_token_flag_works_too(settings, tmp_path):
    with http_server(settings, tmp_path / "serve.log", "--token", "flag-token") as (url, _):
        assert httpx.post(url, json=INITIALIZE, headers=MCP_HEADERS).status_code == 401
        assert "lookup" in _tools(url, {"Authorization": "Bearer flag-token"})


def test_a_public_address_is_warned_about(settings, tmp_path):
    log = tmp_path / "serve.log"
    with http_server(settings, log, "--host", "0.0.0.0") as (url, _):
        assert "search_docs" in _tools(url)
    text = log.read_text()
    assert "reachable from the network" in text and "--token or DOCSCTL_TOKEN" in text, text


def test_a_browser_gives_the_token_once_and_keeps_it_in_a_cookie(settings, tmp_path):
    """A page load cannot carry an Authorization header: /?token=T sets an HttpOnly cookie and redirects to the
    same address without the token; the cookie then opens the web pages, and a wrong token opens nothing."""
    with http_server(settings, tmp_path / "serve.log", DOCSCTL_TOKEN="s3cret-token") as (url, _):
        root = url.rsplit("/", 1)[0]
        assert httpx.get(root + "/?q=color&token=wrong").status_code == 401
        given = httpx.get(root + "/?q=color&token=s3cret-token", follow_redirects=False)
        assert given.status_code == 303 and given.headers["location"] == "/?q=color"
        cookie = given.headers["set-cookie"]
        assert "HttpOnly" in cookie and "SameSite=Strict" in cookie
        with httpx.Client(base_url=root, cookies=given.cookies) as browser:
            page = browser.get("/?q=color")
            assert page.status_code == 200 and "color" in page.text
        assert httpx.get(root + "/?q=color", cookies={"docsctl_token": "wrong"}).status_code == 401
