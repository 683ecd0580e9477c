"""Peak memory of `docsctl reindex` and of `docsctl serve`, as processes, per backend.

    python bench/memory.py [--backend sqlite|opensearch|both] [--opensearch-url URL] [--every N] [--out FILE]

For each backend, in a temporary data dir:
  - `docsctl reindex` of chimerax and of holoviz (every 6th file of each by path; --every 1: all),
    one process per corpus, with a fresh, empty embedding cache so the model really runs: peak RSS
    of each process from os.wait4 (its ru_maxrss, the same figure as getrusage(RUSAGE_CHILDREN));
  - `docsctl serve --transport http` on that index: RSS and peak RSS (VmRSS, VmHWM from /proc) after
    start-up (model loaded, warm-up query done) and after one pass of the 40 dev queries through MCP.
Target: serve RSS <= 1 GB. Prints JSON (and writes it to --out, with a PNG chart beside it).
"""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import subprocess
import tempfile
import time
from pathlib import Path
from typing import Any

from common import (
    backends_of,
    bench_parser,
    bench_settings,
    corpus_label,
    corpus_targets,
    dev_queries,
    docsctl_command,
    free_port,
    log,
    machine,
    pyplot,
    rss_mb,
    settings_env,
    wait_for_port,
    write_result,
)
from mcp import Client

from docsctl.store import open_store

SERVE_TARGET_MB = 1024


def reindex_process(env: dict[str, str], root: Path, source: str, work: Path) -> dict[str, Any]:
    """One `docsctl reindex` process; its own peak RSS from os.wait4 (ru_maxrss of that child alone)."""
    out = work / f"reindex-{source}.json"
    started = time.perf_counter()
    with out.open("w") as stdout:
        process = subprocess.Popen(
            [*docsctl_command(), "reindex", str(root), "--source", source, "--json"],
            env=env,
            stdout=stdout,
            stderr=subprocess.DEVNULL,
        )
        _, status, usage = os.wait4(process.pid, 0)
        process.returncode = os.waitstatus_to_exitcode(status)
    seconds = time.perf_counter() - started
    if process.returncode:
        raise RuntimeError(f"docsctl reindex {source} exited with {process.returncode}")
    summary = json.loads(out.read_text())
    return {
        "source": source,
        "chunks": summary["chunks_written"],
        "chunks_embedded": summary["chunks_embedded"],
        "seconds": round(seconds, 1),
        "peak_rss_mb": round(usage.ru_maxrss / 1024, 1),  # Linux: kilobytes
    }


async def query_pass(url: str, queries: list[str]) -> None:
    async with Client(url, read_timeout_seconds=120) as client:
        for text in queries:
            await client.call_tool("search_docs", {"query": text})


def serve_memory(env: dict[str, str], work: Path) -> dict[str, Any]:
    port = free_port()
    with (work / "serve.log").open("w") as errlog:
        process = subprocess.Popen(
            [*docsctl_command(), "serve", "--transport", "http", "--port", str(port)],
            env=env,
            stdout=subprocess.DEVNULL,
            stderr=errlog,
        )
    try:
        wait_for_port(port, process)  # listens after warm_up(): model loaded, one search done
        after_start = rss_mb(process.pid)
        asyncio.run(query_pass(f"http://127.0.0.1:{port}/mcp", dev_queries()))
        after_queries = rss_mb(process.pid)
    finally:
        process.terminate()
        process.wait(30)
    return {
        "after_start": after_start,
        "after_40_queries": after_queries,
        "target_mb": SERVE_TARGET_MB,
        "target_met": after_queries["peak_rss_mb"] <= SERVE_TARGET_MB,
    }


def run_backend(backend: str, url: str | None, every: int) -> dict[str, Any]:
    work = Path(tempfile.mkdtemp(prefix=f"docsctl-bench-memory-{backend}-"))
    settings = bench_settings(backend, url, work, cache_dir=work / "cache")
    env = settings_env(settings)
    try:
        runs = [reindex_process(env, target.root, target.name, work) for target in corpus_targets(work, every)]
        log(f"{backend}: reindex {runs}")
        served = serve_memory(env, work)
        log(f"{backend}: serve {served}")
        return {
            "reindex": runs,
            "reindex_peak_rss_mb": max(run["peak_rss_mb"] for run in runs),
            "serve": served,
        }
    finally:
        open_store(settings).drop()
        shutil.rmtree(work, ignore_errors=True)


def chart(results: dict, path: Path) -> None:
    plt = pyplot()
    backends = list(results["backends"])
    fig, axis = plt.subplots(figsize=(7, 4))
    labels = ["reindex peak", "serve after start", "serve after queries (peak)"]
    for i, backend in enumerate(backends):
        figures = results["backends"][backend]
        values = [
            figures["reindex_peak_rss_mb"],
            figures["serve"]["after_start"]["rss_mb"],
            figures["serve"]["after_40_queries"]["peak_rss_mb"],
        ]
        for j, value in enumerate(values):
            axis.bar(i + (j - 1) * 0.25, value, 0.25, color=f"C{j}", label=labels[j] if i == 0 else None)
    axis.axhline(SERVE_TARGET_MB, color="gray", ls="--", lw=1, label="serve target 1 GB")
    axis.set_xticks(range(len(backends)), backends)
    axis.set_ylabel("resident memory, MB")
    axis.legend(fontsize=8)
    axis.set_title(f"Memory ({results['corpus']})", fontsize=10)
    fig.tight_layout()
    fig.savefig(path, dpi=110)


def main() -> None:
    parser = bench_parser(__doc__, every=True)
    args = parser.parse_args()
    backends = backends_of(args)
    results: dict[str, Any] = {
        "benchmark": "memory",
        "machine": machine(),
        "corpus": corpus_label(args.every),
        "backends": {},
    }
    for backend in backends:
        results["backends"][backend] = run_backend(backend, args.opensearch_url, args.every)
    png = write_result(results, args.out)
    if png:
        chart(results, png)


if __name__ == "__main__":
    main()
