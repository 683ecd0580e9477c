"""End to end: `docsctl serve` as a subprocess, driven by the official MCP client, answering from the real
index of ../shared/corpora/chimerax on both backends (one stdio server per backend for this module).
"""

from __future__ import annotations

import asyncio
import os
import socket
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
from mcp import Client
from mcp.client.stdio import StdioServerParameters, stdio_client
from mcp.types import CallToolResult
from processes import stop

from docsctl.server.results import document_pieces, join_chunks
from docsctl.store import open_store

TOOLS = {"search_docs", "lookup", "get_chunk", "get_document", "list_sources"}
COLOR_PAGE = "user/commands/color.html"
START_TIMEOUT_S = 180


def docsctl_command() -> list[str]:
    script = Path(sys.executable).with_name("docsctl")
    if script.exists():
        return [str(script)]
    return [sys.executable, "-c", "from docsctl.cli.app import main; main()"]


class McpSession:
    """One MCP client connection, held open on a background event loop so that sync tests can share it."""

    def __init__(self, transport: Any) -> None:
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, daemon=True)
        self._thread.start()
        self.client: Client = self._run(self._open(transport), START_TIMEOUT_S)

    def _run(self, coroutine: Any, timeout: float) -> Any:
        return asyncio.run_coroutine_threadsafe(coroutine, self._loop).result(timeout)

    async def _open(self, transport: Any) -> Client:
        connected: asyncio.Future[Client] = self._loop.create_future()
        self._stop = asyncio.Event()
        self._holder = asyncio.ensure_future(self._hold(transport, connected))
        return await connected

    async def _hold(self, transport: Any, connected: asyncio.Future[Client]) -> None:
        try:
            async with Client(transport, read_timeout_seconds=120) as client:
                connected.set_result(client)
                await self._stop.wait()
        except BaseException as exc:
            if not connected.done():
                connected.set_exception(exc)
            raise

    def call(self, tool: str, arguments: dict[str, Any] | None = None) -> CallToolResult:
        return self._run(self.client.call_tool(tool, arguments or {}), 120)

    def tools(self) -> dict[str, Any]:
        return {tool.name: tool for tool in self._run(self.client.list_tools(), 60).tools}

    def close(self) -> None:
        async def stop() -> None:
            self._stop.set()
            await asyncio.gather(self._holder, return_exceptions=True)

        try:
            self._run(stop(), 60)
        finally:
            self._loop.call_soon_threadsafe(self._loop.stop)
            self._thread.join(10)
            self._loop.close()


def stdio_session(env: dict[str, str], errlog: Path, *args: str) -> McpSession:
    command = docsctl_command()
    params = StdioServerParameters(command=command[0], args=[*command[1:], "serve", *args], env=env)
    with errlog.open("w") as log:  # the child keeps its own copy of the descriptor
        return McpSession(stdio_client(params, errlog=log))


def ok(result: CallToolResult) -> dict[str, Any]:
    """The structured content of a successful call, after checking the text twin is there."""
    assert not result.is_error, result.content[0].text if result.content else result
    assert result.content and result.content[0].type == "text" and result.content[0].text
    assert isinstance(result.structured_content, dict)
    return result.structured_content


def text_of(result: CallToolResult) -> str:
    return result.content[0].text


def error(result: CallToolResult) -> str:
    """The message of a tool error: isError, one readable message, no stack trace."""
    assert result.is_error, f"expected a tool error, got {text_of(result)[:300]}"
    message = text_of(result)
    assert "Traceback" not in message and 'File "' not in message
    return message


@pytest.fixture(scope="module")
def docs_server(chimerax_index, tmp_path_factory: pytest.TempPathFactory) -> Iterator[McpSession]:
    errlog = tmp_path_factory.mktemp(f"mcp-{chimerax_index.backend}") / "stderr.log"
    session = stdio_session(chimerax_index.env(), errlog)
    started = time.perf_counter()
    ok(session.call("search_docs", {"query": "open a structure from the PDB"}))
    session.first_call_seconds = time.perf_counter() - started
    session.errlog = errlog
    yield session
    session.close()


# -- the tools and their schemas -----------------------------------------------------------------------


def test_tools_declare_their_inputs_and_outputs(docs_server):
    tools = docs_server.tools()
    assert set(tools) == TOOLS
    for tool in tools.values():
        assert tool.description and len(tool.description) > 40
        assert tool.output_schema and tool.output_schema["type"] == "object", tool.name
        assert tool.annotations and tool.annotations.read_only_hint
    search = tools["search_docs"].input_schema
    props = search["properties"]
    assert search["required"] == ["query"]
    assert (props["limit"]["minimum"], props["limit"]["maximum"], props["limit"]["default"]) == (1, 50, 5)
    assert props["offset"]["minimum"] == 0
    assert props["mode"]["enum"] == ["hybrid", "bm25", "knn"] and props["mode"]["default"] == "hybrid"
    assert props["content"]["enum"] == ["chunk", "document", "none"] and props["content"]["default"] == "chunk"
    assert props["max_chars"]["default"] == 12000 and props["max_chars"]["minimum"] >= 500
    assert {"category", "source", "version", "queries"} <= set(props)
    assert props["queries"]["anyOf"][0]["maxItems"] == 4
    assert {"results", "total", "took_ms", "next_offset"} <= set(tools["search_docs"].output_schema["properties"])
    assert tools["lookup"].input_schema["required"] == ["name"]
    assert tools["get_chunk"].input_schema["required"] == ["chunk_id"]
    assert tools["get_document"].input_schema["required"] == ["path"]
    assert "max_chars" in tools["get_document"].input_schema["properties"]


def test_logs_go_to_stderr_and_the_first_call_is_warm(docs_server):
    # stdout carries the protocol: every answer in this module parsing proves nothing else went there.
    assert "serving MCP over stdio" in docs_server.errlog.read_text()
    assert docs_server.first_call_seconds < 2.0, "the model and the index are loaded before the first call"


# -- search_docs -------------------------------------------------------------------------------------


def test_search_answers_a_howto_with_everything_a_result_needs(docs_server):
    result = docs_server.call("search_docs", {"query": "how to color protein by chain"})
    answer = ok(result)
    paths = [hit["path"] for hit in answer["results"]]
    assert COLOR_PAGE in paths[:3]
    assert answer["returned"] == len(answer["results"]) == 5 and answer["total"] >= 5
    assert answer["took_ms"] >= 0 and answer["next_offset"] == 5
    for hit in answer["results"]:
        assert hit["source"] == "chimerax" and hit["title"] and hit["category"] and hit["chunk_id"]
        assert hit["content"] and hit["highlights"] and hit["score"] > 0
        assert 1 <= hit["start_line"] <= hit["end_line"]
        assert hit["url"].split("#")[0].endswith(hit["path"])
    best = next(hit for hit in answer["results"] if hit["path"] == COLOR_PAGE)
    assert "#" in best["url"], "the URL points at the section"
    assert COLOR_PAGE in text_of(result)


def test_search_fuses_the_assistants_rewordings(docs_server):
    arguments = {"query": "turn a lysine into an alanine", "queries": ["swap amino acid residue"], "content": "none"}
    answer = ok(docs_server.call("search_docs", arguments))
    assert "user/commands/swapaa.html" in [hit["path"] for hit in answer["results"]][:3]
    too_many = docs_server.call("search_docs", {"query": "x", "queries": ["a", "b", "c", "d", "e"]})
    assert too_many.is_error


def test_search_by_category_returns_only_that_category(docs_server):
    arguments = {"query": "color", "category": "commands", "limit": 10, "content": "none"}
    answer = ok(docs_server.call("search_docs", arguments))
    assert len(answer["results"]) == 10
    assert {hit["category"] for hit in answer["results"]} == {"commands"}


def test_search_pages_with_offset(docs_server):
    first = ok(docs_server.call("search_docs", {"query": "surface", "limit": 4, "content": "none"}))
    second = ok(docs_server.call("search_docs", {"query": "surface", "limit": 4, "offset": 4, "content": "none"}))
    assert [hit["rank"] for hit in second["results"]] == [5, 6, 7, 8]
    assert not {hit["path"] for hit in first["results"]} & {hit["path"] for hit in second["results"]}
    assert all(hit["content"] is None for hit in first["results"] + second["results"])


def test_search_can_return_whole_documents(docs_server):
    query = {"query": "hbonds command", "limit": 1, "content": "document", "max_chars": 200_000}
    hit = ok(docs_server.call("search_docs", query))["results"][0]
    document = ok(
        docs_server.call("get_document", {"path": hit["path"], "source": hit["source"], "max_chars": 200_000})
    )
    assert not hit["content_truncated"] and not document["truncated"]
    assert hit["content"] == document["content"]


@pytest.mark.parametrize("content", ["chunk", "document"])
def test_search_respects_the_budget_and_says_how_to_get_the_rest(docs_server, content):
    result = docs_server.call("search_docs", {"query": "color", "content": content, "max_chars": 1000})
    answer = ok(result)
    assert len(text_of(result)) <= 1000
    assert answer["truncated"]
    assert "[… truncated: call get_" in text_of(result)
    cut = [hit for hit in answer["results"] if hit["content_truncated"]]
    assert cut and all("[… truncated: call get_" in hit["content"] for hit in cut)


# -- lookup ------------------------------------------------------------------------------------------


@pytest.mark.parametrize("name", ["color", "rainbow", "COLOR", " Color "])
def test_lookup_finds_the_reference_page_by_any_name_it_documents(docs_server, name):
    answer = ok(docs_server.call("lookup", {"name": name}))
    assert answer["found"] >= 1
    page = answer["documents"][0]
    assert page["path"] == COLOR_PAGE
    assert [ref["chunk_index"] for ref in page["chunks"]] == list(range(len(page["chunks"])))
    assert page["truncated"] and page["next_chunk"] is not None  # 40 chunks do not fit in 12000 characters
    assert f"from_chunk={page['next_chunk']}" in page["content"]


def test_lookup_returns_every_chunk_of_the_page_in_order(docs_server, chimerax_index):
    page = ok(docs_server.call("lookup", {"name": "color", "max_chars": 200_000}))["documents"][0]
    stored = chimerax_index.store.get_document(COLOR_PAGE)
    assert not page["truncated"]
    assert [ref["chunk_id"] for ref in page["chunks"]] == [chunk.chunk_id for chunk in stored]
    assert page["content"] == join_chunks(stored)


def test_lookup_puts_the_page_named_after_it_first(docs_server):
    answer = ok(docs_server.call("lookup", {"name": "hbonds", "max_chars": 3000}))
    assert [doc["path"] for doc in answer["documents"]] == ["user/commands/hbonds.html", "user/tools/hbonds.html"]


def test_lookup_of_an_unknown_name_is_an_answer_not_an_error(docs_server):
    result = docs_server.call("lookup", {"name": "frobnicate"})
    assert ok(result)["found"] == 0
    assert "search_docs" in text_of(result)


# -- get_chunk and get_document --------------------------------------------------------------------------


def test_get_chunk_returns_a_result_chunk(docs_server, chimerax_index):
    hit = ok(docs_server.call("search_docs", {"query": "hydrogen bonds", "limit": 1}))["results"][0]
    chunk = ok(docs_server.call("get_chunk", {"chunk_id": hit["chunk_id"]}))
    stored = chimerax_index.store.get_chunk(hit["chunk_id"])
    assert (chunk["path"], chunk["content"], chunk["chunk_index"]) == (stored.path, stored.content, stored.chunk_index)
    assert hit["content"] == chunk["content"]


def test_get_document_pages_through_a_long_document(docs_server, chimerax_index):
    stored = chimerax_index.store.get_document(COLOR_PAGE)
    seen: list[int] = []
    arguments: dict[str, Any] = {"path": "./" + COLOR_PAGE + "#simple", "max_chars": 5000}
    while True:
        result = docs_server.call("get_document", arguments)
        page = ok(result)
        assert len(text_of(result)) <= 5000
        seen += [ref["chunk_index"] for ref in page["chunks"]]
        if page["next_chunk"] is None:
            break
        assert f"from_chunk={page['next_chunk']}" in page["content"]
        arguments = {"path": COLOR_PAGE, "source": "chimerax", "from_chunk": page["next_chunk"], "max_chars": 5000}
    assert sorted(set(seen)) == [chunk.chunk_index for chunk in stored]
    assert page["chunk_count"] == len(stored) and page["title"] == stored[0].title


def test_rebuilt_documents_never_repeat_text_where_chunks_meet(chimerax_index):
    documents: dict[str, list] = {}
    for chunk in chimerax_index.store.iter_chunks(with_embedding=False):
        documents.setdefault(chunk.doc_id, []).append(chunk)
    dropped = 0
    for chunks in documents.values():
        chunks.sort(key=lambda chunk: chunk.chunk_index)
        pieces = document_pieces(chunks)
        for previous, current, piece in zip(chunks, chunks[1:], pieces[1:], strict=False):
            dropped += piece != current.content and not piece.startswith("#")
            opening = " ".join(piece.split("\n\n")[0].split())
            before = " ".join(previous.content.split())
            assert not (before == opening or before.endswith(" " + opening)), (current.path, current.chunk_index)
    assert dropped > 1000, "most chunks after the first of a section start with the tail of the previous one"


# -- list_sources ---------------------------------------------------------------------------------------


def test_list_sources_says_what_is_indexed_and_how_fresh(docs_server, chimerax_index):
    answer = ok(docs_server.call("list_sources"))
    assert answer["backend"] == chimerax_index.backend
    assert answer["model"] == answer["server_model"] == chimerax_index.settings.model
    assert answer["dimension"] > 0
    (source,) = answer["sources"]
    assert source["source"] == "chimerax"
    assert source["documents"] >= 300 and source["chunks"] > source["documents"]
    assert {"commands", "tools", "tutorials"} <= set(source["categories"])
    assert set(answer["categories"]) == set(source["categories"])
    assert source["last_indexed"] and source["origin"].endswith("corpora/chimerax")


# -- errors ----------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("tool", "arguments", "hint"),
    [
        pytest.param("get_chunk", {"chunk_id": "no-such-chunk"}, "search_docs", id="unknown chunk id"),
        pytest.param("get_document", {"path": "no/such/page.html"}, "search_docs", id="unknown path"),
        pytest.param("search_docs", {"query": "color", "limit": 0}, "greater than or equal to 1", id="limit=0"),
        pytest.param("search_docs", {"query": "color", "limit": 51}, "less than or equal to 50", id="limit=51"),
        pytest.param("search_docs", {"query": "color", "offset": -1}, "greater than or equal to 0", id="offset<0"),
        pytest.param("search_docs", {"query": "color", "mode": "fuzzy"}, "hybrid", id="unknown mode"),
        pytest.param("search_docs", {"query": "color", "category": "nope"}, "commands", id="unknown category"),
        pytest.param("search_docs", {"query": "color", "source": "nope"}, "chimerax", id="unknown source"),
        pytest.param("lookup", {"name": "color", "source": "nope"}, "chimerax", id="lookup in an unknown source"),
        pytest.param("get_document", {"path": COLOR_PAGE, "max_chars": 10}, "max_chars", id="budget too small"),
    ],
)
def test_mistakes_are_tool_errors_that_say_what_to_do(docs_server, tool, arguments, hint):
    assert hint in error(docs_server.call(tool, arguments))


def test_no_index_yet_is_a_tool_error_naming_the_command_that_builds_it(chimerax_index, tmp_path):
    env = chimerax_index.env()
    alias = f"missing-{uuid.uuid4().hex[:8]}"
    env.update(DOCSCTL_DATA_DIR=str(tmp_path / "empty"), DOCSCTL_INDEX_ALIAS=alias)
    session = stdio_session(env, tmp_path / "stderr.log")
    try:
        calls = [
            ("search_docs", {"query": "color"}),
            ("lookup", {"name": "color"}),
            ("get_chunk", {"chunk_id": "abc"}),
            ("get_document", {"path": COLOR_PAGE}),
            ("list_sources", {}),
        ]
        for tool, arguments in calls:
            assert "docsctl reindex" in error(session.call(tool, arguments)), tool
    finally:
        session.close()
    settings = replace(chimerax_index.settings, data_dir=tmp_path / "empty", index_alias=alias)
    assert open_store(settings).index_meta() is None, "the server never builds an index by itself"


def test_opensearch_down_is_a_prompt_tool_error(tmp_path):
    env = {k: v for k, v in os.environ.items() if not k.startswith("DOCSCTL_")}
    env.update(
        DOCSCTL_BACKEND="opensearch",
        DOCSCTL_OPENSEARCH_URL="http://127.0.0.1:1",
        DOCSCTL_DATA_DIR=str(tmp_path / "data"),
        DOCSCTL_CACHE_DIR=str(tmp_path / "cache"),
    )
    session = stdio_session(env, tmp_path / "stderr.log")
    try:
        for tool, arguments in [("search_docs", {"query": "color"}), ("list_sources", {})]:
            started = time.perf_counter()
            message = error(session.call(tool, arguments))
            assert "cannot reach OpenSearch at http://127.0.0.1:1" in message
            assert time.perf_counter() - started < 20
    finally:
        session.close()


# -- streamable HTTP --------------------------------------------------------------------------------------


def _wait_for_port(port: int, process: subprocess.Popen, errlog: Path) -> None:
    deadline = time.monotonic() + START_TIMEOUT_S
    while time.monotonic() < deadline:
        if process.poll() is not None:
            pytest.fail(f"docsctl serve exited with {process.returncode}: {errlog.read_text()[-2000:]}")
        with socket.socket() as probe:
            if probe.connect_ex(("127.0.0.1", port)) == 0:
                return
        time.sleep(0.2)
    pytest.fail(f"docsctl serve --transport http did not listen on {port}: {errlog.read_text()[-2000:]}")


def test_streamable_http_serves_the_same_tools(chimerax_index, tmp_path, unused_tcp_port):
    errlog = tmp_path / "stderr.log"
    command = [*docsctl_command(), "serve", "--transport", "http", "--port", str(unused_tcp_port)]
    with errlog.open("w") as log:
        process = subprocess.Popen(command, env=chimerax_index.env(), stdout=subprocess.PIPE, stderr=log)
    try:
        _wait_for_port(unused_tcp_port, process, errlog)
        session = McpSession(f"http://127.0.0.1:{unused_tcp_port}/mcp")
        try:
            assert set(session.tools()) == TOOLS
            answer = ok(session.call("lookup", {"name": "rainbow"}))
            assert answer["documents"][0]["path"] == COLOR_PAGE
        finally:
            session.close()
    finally:
        stop(process)
    assert process.stdout is not None and process.stdout.read() == b"", "logs go to stderr"
    process.stdout.close()
