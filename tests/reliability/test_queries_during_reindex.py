"""Queries through MCP (streamable HTTP, 4 clients) while `docsctl reindex` runs over and over, --full
and incremental, switching the index between two versions of a folder: no query fails, and every
answer comes from a whole index: one version or the other, never a half-built one."""

from __future__ import annotations

import asyncio
import subprocess
import sys
import threading
import time

from conftest import docsctl, env_for, http_server, snapshot
from mcp import Client

CLIENTS = 4
CALLS = 150  # per client
RUNS = [("v2", True), ("v1", False), ("v2", False), ("v1", True)]  # (version, --full), in a cycle
QUERIES = ["cartoon ribbon", "color by chain", "hydrogen bonds", "rebuild the index", "angle between atoms"]


def _counts(settings) -> tuple[int, int]:
    chunks = snapshot(settings)
    return len({doc for doc, _, _ in chunks.values()}), len(chunks)


def test_queries_during_full_and_incremental_reindexes_never_fail(settings, corpus_versions, tmp_path):
    roots = dict(zip(("v1", "v2"), corpus_versions, strict=True))
    counts = {}
    for name in ("v2", "v1"):  # ends on v1, and gives the embedding cache every text
        built = docsctl(settings, "reindex", str(roots[name]), "--source", "docs", "--full")
        assert built.returncode == 0, built.stderr
        counts[name] = _counts(settings)
    stop = threading.Event()
    runs: list[tuple[str, bool, float, float, int]] = []

    def reindex_loop() -> None:
        turn = 0
        while not stop.is_set():
            name, full = RUNS[turn % len(RUNS)]
            command = [sys.executable, "-m", "docsctl.cli", "reindex", str(roots[name]), "--source", "docs"]
            started = time.monotonic()
            done = subprocess.run(
                [*command, *(["--full"] if full else [])], env=env_for(settings), capture_output=True, timeout=300
            )
            runs.append((name, full, started, time.monotonic(), done.returncode))
            turn += 1

    with http_server(settings, tmp_path / "serve.log") as (url, _):
        worker = threading.Thread(target=reindex_loop, daemon=True)
        worker.start()
        try:
            answers = asyncio.run(_clients(url))
        finally:
            stop.set()
            worker.join(300)
    failures = [answer for answer in answers if answer[1] is not None]
    assert failures == [], failures[:5]
    assert all(code == 0 for *_, code in runs), runs
    first, last = min(a[0] for a in answers), max(a[0] for a in answers)
    overlapped = {full for _, full, start, end, _ in runs if start < last and end > first}
    assert overlapped == {True, False}, runs  # queries ran during both kinds of run
    whole = set(counts.values())
    if settings.backend_name == "opensearch":
        # Incremental writes on OpenSearch are live as they go (new chunks before old ones are deleted):
        # between the two versions, the page added may be there before the page deleted is gone.
        whole |= {(counts["v1"][0] + 1, n) for n in range(min(counts["v1"][1], counts["v2"][1]), 1000)}
        whole |= {(docs, n) for docs, _ in counts.values() for n in range(0, 1000)}
    seen = {answer[2] for answer in answers if answer[2] is not None}
    assert seen <= whole, (seen - whole, counts)


async def _clients(url: str) -> list[tuple[float, str | None, tuple[int, int] | None]]:
    """(time, error or None, (documents, chunks) from list_sources or None) of every call."""
    results: list[tuple[float, str | None, tuple[int, int] | None]] = []

    async def client(number: int) -> None:
        async with Client(url, read_timeout_seconds=60) as session:
            for call in range(CALLS):
                at = time.monotonic()
                if call % 4 == 3:
                    result = await session.call_tool("list_sources", {})
                else:
                    query = QUERIES[(number + call) % len(QUERIES)]
                    result = await session.call_tool("search_docs", {"query": query, "content": "none"})
                if result.is_error:
                    results.append((at, result.content[0].text[:300], None))
                    continue
                shape = None
                if call % 4 == 3:
                    sources = result.structured_content["sources"]
                    shape = (sum(s["documents"] for s in sources), sum(s["chunks"] for s in sources))
                elif not result.structured_content["results"]:
                    results.append((at, f"no results for {query!r}", None))
                    continue
                results.append((at, None, shape))

    await asyncio.gather(*(client(number) for number in range(CLIENTS)))
    return results
