"""The OpenSearch password never shows: in any command's output or --json, errors, the server's log, an
export, the index's metadata or the runs index. The session node has no security plugin and ignores
the credentials, which is enough to see whether docsctl repeats them anywhere."""

from __future__ import annotations

import asyncio
import json
import uuid
from dataclasses import replace
from urllib.parse import urlsplit

import pytest
from conftest import REPO, docsctl, drop, free_port, http_server, make_settings
from mcp import Client

from docsctl.config import redact_url

PASSWORD = f"Pw-{uuid.uuid4().hex[:12]}-secret"


def test_the_password_is_never_shown(request, tmp_path):
    settings = make_settings(request, "opensearch", tmp_path / "data", opensearch_user="docsctl")
    secret = {"DOCSCTL_OPENSEARCH_USER": "docsctl", "DOCSCTL_OPENSEARCH_PASSWORD": PASSWORD}
    seen: list[str] = []

    def run(*args: str, target=settings, expect_ok: bool = True) -> None:
        result = docsctl(target, *args, **secret)
        seen.extend([f"$ docsctl {' '.join(args)}", result.stdout, result.stderr])
        assert (result.returncode == 0) == expect_ok, result.stderr

    docs = str(REPO / "samples" / "docs")
    try:
        run("reindex", docs, "--source", "docs", "--json")
        run("reindex", docs, "--source", "docs", "--full")
        for as_json in ([], ["--json"]):
            run("query", "rebuild the index", *as_json)
            run("status", *as_json)
            run("sources", *as_json)
            run("stats", *as_json)
            run("explain", "reindex", "--path", "commands/reindex.md", *as_json)
        run("export", str(tmp_path / "export.jsonl"))
        seen.append((tmp_path / "export.jsonl").read_text())
        run("query", "nothing", "--source", "no-such-source", expect_ok=False)

        log = tmp_path / "serve.log"
        with http_server(settings, log, "--verbose", **secret) as (url, _):
            seen.append(json.dumps(asyncio.run(_call(url))))
        seen.append(log.read_text())

        # The cluster's side: the index metadata and the runs index.
        from docsctl.store import open_store

        store = open_store(settings)
        client = store.client
        seen.append(json.dumps(client.indices.get(index=f"{settings.index_alias}*")))
        seen.append(json.dumps(client.search(index=store.runs_index, body={"size": 100})))

        # Errors: a node that does not answer, with the password in the settings and in the URL.
        dead = f"http://127.0.0.1:{free_port()}"
        run("query", "anything", target=replace(settings, opensearch_url=dead), expect_ok=False)
        with_credentials = f"http://docsctl:{PASSWORD}@{urlsplit(dead).netloc}"
        run("query", "anything", target=replace(settings, opensearch_url=with_credentials), expect_ok=False)
        run("status", "--json", target=replace(settings, opensearch_url=with_credentials), expect_ok=False)
        run("reindex", docs, target=replace(settings, opensearch_url=with_credentials), expect_ok=False)
    finally:
        drop(settings)
    everything = "\n".join(seen)
    assert "Traceback" not in everything
    leaks = [line for line in everything.splitlines() if PASSWORD in line]
    assert leaks == []


async def _call(url: str) -> dict:
    async with Client(url) as client:
        sources = await client.call_tool("list_sources", {})
        search = await client.call_tool("search_docs", {"query": "rebuild"})
        return {"sources": sources.model_dump(mode="json"), "search": search.model_dump(mode="json")}


@pytest.mark.parametrize(
    ("url", "shown"),
    [
        ("http://127.0.0.1:9200", "http://127.0.0.1:9200"),
        ("https://user:pa:ss@host:9200/x", "https://user:********@host:9200/x"),
        ("https://user@host", "https://user@host"),
        ("https://a:b@c@host", "https://a:********@host"),
        ("not a url", "not a url"),
    ],
)
def test_redact_url(url, shown):
    assert redact_url(url) == shown
