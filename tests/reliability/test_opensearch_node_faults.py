"""An OpenSearch node of its own (never the session's) killed under a reindex held mid-bulk and under
queries, then restarted: the reindex fails with one line and the alias stays on the old index; the
MCP server answers tool errors while the node is down and recovers without a restart; the next
reindex converges and cleans up."""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator

import pytest
from conftest import (
    docsctl,
    env_for,
    free_port,
    http_server,
    leftovers,
    make_settings,
    one_line_error,
    shared_cache_dir,
    snapshot,
    wait_for_line,
)
from mcp import Client

from docsctl import opensearch_node
from docsctl.config import Settings

BACKEND_DOWN = ("cannot reach OpenSearch", "unavailable", "no answer within")


@pytest.fixture(scope="module")
def node(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Settings]:
    """Settings of a node started for this module on a free port, with its own data dir."""
    settings = Settings(
        data_dir=tmp_path_factory.mktemp("own-node"),
        cache_dir=shared_cache_dir(),
        opensearch_port=free_port(),
        java_home=os.environ.get("DOCSCTL_JAVA_HOME") or None,
    )
    opensearch_node.up(settings, wait_seconds=300, fast_start=True)
    try:
        yield settings
    finally:
        opensearch_node.down(settings)


def _kill_node(node: Settings) -> None:
    pid = opensearch_node.status(node).pid
    assert pid, "the node has no pid"
    os.kill(pid, signal.SIGKILL)
    deadline = time.monotonic() + 60
    while opensearch_node.status(node).running and time.monotonic() < deadline:
        time.sleep(0.2)


def _reindex_losing_the_node(settings: Settings, node: Settings, root, tmp_path, *flags: str) -> str:
    """Run a reindex, held after its first bulk write; kill the node there; let it go on. Its error line."""
    resume = tmp_path / f"resume-{time.monotonic_ns()}"
    command = [sys.executable, "-m", "docsctl.cli", "reindex", str(root), "--source", "docs", *flags]
    env = env_for(settings, DOCSCTL_PAUSE_AT="write", DOCSCTL_RESUME_FILE=str(resume))
    proc = subprocess.Popen(command, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    wait_for_line(proc, "paused at write", 240)
    _kill_node(node)
    resume.touch()
    out, err = proc.communicate(timeout=300)
    return one_line_error(subprocess.CompletedProcess(command, proc.returncode, out.decode(), err.decode()))


def test_node_killed_mid_bulk_and_mid_query(request, node, corpus_versions, tmp_path):
    v1, v2 = corpus_versions
    url = opensearch_node.node_url(node)
    settings = make_settings(request, "opensearch", tmp_path / "data", opensearch_url=url)
    built = docsctl(settings, "reindex", str(v1), "--source", "docs")
    assert built.returncode == 0, built.stderr
    before = snapshot(settings)

    with http_server(settings, tmp_path / "serve.log") as (mcp_url, server):
        with _clients_in_background(mcp_url) as answers:
            error = _reindex_losing_the_node(settings, node, v2, tmp_path, "--full")
            assert "cannot reach OpenSearch" in error, error
            down = asyncio.run(_call(mcp_url, "search_docs", {"query": "cartoon"}))
            assert down.is_error and "cannot reach OpenSearch" in down.content[0].text
            opensearch_node.up(node, wait_seconds=300, fast_start=True)
            assert _recovers(mcp_url), "the server did not answer again after the node came back"
        assert server.poll() is None  # never restarted
    assert answers, "no query ran"
    failures = [text for ok, text in answers if not ok and not any(word in text for word in BACKEND_DOWN)]
    assert failures == [], failures[:5]
    assert any(not ok for ok, _ in answers) and any(ok for ok, _ in answers)  # some failed over, some answered
    assert snapshot(settings) == before  # the alias stayed on the old index

    rebuilt = docsctl(settings, "reindex", str(v2), "--source", "docs", "--full")
    assert rebuilt.returncode == 0, rebuilt.stderr
    after_full = snapshot(settings)
    assert leftovers(settings) == []

    # Incremental: its writes are live, so the node dying half-way leaves a mix that the next run repairs.
    error = _reindex_losing_the_node(settings, node, v1, tmp_path)
    assert "cannot reach OpenSearch" in error, error
    opensearch_node.up(node, wait_seconds=300, fast_start=True)
    assert docsctl(settings, "reindex", str(v1), "--source", "docs").returncode == 0
    assert snapshot(settings) == before
    assert docsctl(settings, "reindex", str(v2), "--source", "docs").returncode == 0
    assert snapshot(settings) == after_full
    assert leftovers(settings) == []


async def _call(url: str, tool: str, arguments: dict):
    async with Client(url, read_timeout_seconds=90) as client:
        return await client.call_tool(tool, arguments)


def _recovers(url: str, seconds: float = 120) -> bool:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        result = asyncio.run(_call(url, "search_docs", {"query": "cartoon"}))
        if not result.is_error:
            return True
        time.sleep(1)
    return False


@contextlib.contextmanager
def _clients_in_background(url: str, clients: int = 4) -> Iterator[list[tuple[bool, str]]]:
    """Clients calling search_docs in a loop until the block ends: (answered, error text) of each call."""
    answers: list[tuple[bool, str]] = []
    stop = threading.Event()

    async def client() -> None:
        async with Client(url, read_timeout_seconds=90) as session:
            while not stop.is_set() and len(answers) < 5000:
                result = await session.call_tool("search_docs", {"query": "color by chain", "content": "none"})
                answers.append((not result.is_error, result.content[0].text[:300] if result.is_error else ""))
                await asyncio.sleep(0.05)

    async def all_clients() -> None:
        await asyncio.gather(*(client() for _ in range(clients)))

    thread = threading.Thread(target=lambda: asyncio.run(all_clients()), daemon=True)
    thread.start()
    try:
        yield answers
    finally:
        stop.set()
        thread.join(120)
        assert not thread.is_alive()
