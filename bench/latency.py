"""Query latency (p50/p95/p99) over the 40 dev queries, per backend, four ways, measured in one run. Every
query filters on its corpus (the `source` an assistant passes), as bench/peers.py's do.

    python bench/latency.py [--backend sqlite|opensearch|both] [--opensearch-url URL] [--passes N]
                            [--cli-queries N] [--profile] [--out FILE]

For each backend, indexes chimerax + holoviz whole into a new index (vectors from the default
embedding cache, so this takes seconds), then, after one unmeasured warm-up pass each:
  - in_process: Searcher.search (hybrid, limit 5, query embedding included), with the query-vector
    LRU cache disabled (every query is encoded: the honest figure) and enabled (repeat passes hit it),
    queries embedded by ONNX Runtime (the default) and by torch (query_runtime = "torch"); and the query
    embedding alone (Embedder.encode_query, cache disabled) with each runtime, to show its share;
  - cli: `docsctl query TEXT --json` as a process, the first --cli-queries queries, once each
    (model load dominates: a per-invocation figure, not a search figure);
  - mcp_stdio, mcp_http: search_docs through the official MCP client against `docsctl serve`
    (stdio; streamable HTTP), timed by the client, over --passes passes; the server keeps its own
    query cache, so passes after the warm-up are answered with cached query vectors (as in use, where
    an assistant repeats queries rarely: read the in_process pair to see the difference).
--profile saves a pyinstrument profile of one more in-process pass (hybrid, no query cache) per backend
under bench/results/latency_profile_<backend>.txt (not timed).
The HTTP server's resident memory (VmRSS, VmHWM) after the warm-up and the passes is recorded too.
Prints JSON (and writes it to --out, with a PNG chart beside it).
"""

from __future__ import annotations

import asyncio
import shutil
import subprocess
import tempfile
import time
from dataclasses import replace
from pathlib import Path
from typing import Any

from common import (
    RESULTS,
    backends_of,
    bench_parser,
    bench_settings,
    corpus_targets,
    dev_query_sources,
    distribution,
    docsctl_command,
    free_port,
    log,
    machine,
    mcp_passes,
    mcp_stdio,
    pyplot,
    rss_mb,
    settings_env,
    timed_passes,
    wait_for_port,
    write_result,
)

from docsctl.config import Settings
from docsctl.embedding import Embedder, EmbeddingCache, embedder_for
from docsctl.indexer.pipeline import reindex
from docsctl.models import Filters
from docsctl.server.search import Searcher
from docsctl.store import open_store

TARGETS_MS = {"mcp_p95_opensearch": 50.0, "in_process_p95": 25.0}


def build_index(settings: Settings, work: Path, embedder: Embedder) -> int:
    store = open_store(settings)
    cache = EmbeddingCache(settings.embedding_cache_path, settings.model)
    try:
        summary = reindex(store, embedder, corpus_targets(work), lock_path=settings.lock_path, cache=cache)
    finally:
        cache.close()
    return summary.chunks_written


def in_process(settings: Settings, sources: dict[str, str], passes: int) -> dict[str, Any]:
    """Hybrid search with queries embedded by ONNX Runtime (the default), by torch, and from the query
    cache; each embedding runtime alone; BM25 alone (no embedding). Every search filters on its query's source."""
    queries = list(sources)

    def filtered(text: str) -> Filters:
        return Filters(sources=(sources[text],))

    figures = {}
    runs = (("hybrid_uncached", "onnx", 0), ("hybrid_uncached_torch", "torch", 0), ("hybrid_query_cache", "onnx", 256))
    for name, runtime, cache_size in runs:
        embedder = embedder_for(replace(settings, query_runtime=runtime), query_cache_size=cache_size)
        searcher = Searcher(open_store(settings), embedder)
        search = searcher.search
        samples = timed_passes(lambda text, s=search: s(text, limit=5, filters=filtered(text)), queries, passes)
        figures[name] = distribution(samples)
        if cache_size == 0:
            embed = timed_passes(embedder.encode_query, queries, passes)
            figures["query_embedding_only" + name.removeprefix("hybrid_uncached")] = distribution(embed)
    searcher = Searcher(open_store(settings), embedder_for(settings))
    store_only = timed_passes(
        lambda text: searcher.search(text, limit=5, mode="bm25", filters=filtered(text)), queries, passes
    )
    figures["bm25_only"] = distribution(store_only)
    return figures


def profile_pass(settings: Settings, sources: dict[str, str], backend: str) -> None:
    from pyinstrument import Profiler

    searcher = Searcher(open_store(settings), embedder_for(settings, query_cache_size=0))
    searcher.search(next(iter(sources)))
    profiler = Profiler(interval=0.001)
    profiler.start()
    for text, source in sources.items():
        searcher.search(text, limit=5, filters=Filters(sources=(source,)))
    profiler.stop()
    (RESULTS / f"latency_profile_{backend}.txt").write_text(profiler.output_text(unicode=True, color=False))


def cli(settings: Settings, sources: dict[str, str]) -> dict[str, Any]:
    env = settings_env(settings)
    run = [*docsctl_command(), "query"]
    first = next(iter(sources))
    subprocess.run([*run, first, "--json"], env=env, check=True, capture_output=True)  # warm the page cache
    samples = []
    for text, source in sources.items():
        started = time.perf_counter()
        subprocess.run([*run, text, "--source", source, "--json"], env=env, check=True, capture_output=True)
        samples.append((time.perf_counter() - started) * 1000)
    return distribution(samples)


def mcp(settings: Settings, sources: dict[str, str], passes: int, work: Path) -> dict[str, Any]:
    env = settings_env(settings)
    command = docsctl_command()
    queries = list(sources)
    stdio = asyncio.run(mcp_passes(mcp_stdio(settings), queries, passes, sources))
    figures: dict[str, Any] = {"mcp_stdio": distribution(stdio)}
    port = free_port()
    with (work / "serve-http.log").open("w") as errlog:
        process = subprocess.Popen(
            [*command, "serve", "--transport", "http", "--port", str(port)],
            env=env,
            stdout=subprocess.DEVNULL,
            stderr=errlog,
        )
    try:
        wait_for_port(port, process)
        samples = asyncio.run(mcp_passes(f"http://127.0.0.1:{port}/mcp", queries, passes, sources))
        figures["mcp_http"] = distribution(samples)
        figures["serve_memory_http"] = rss_mb(process.pid)
    finally:
        process.terminate()
        process.wait(30)
    return figures


def run_backend(
    backend: str, url: str | None, passes: int, cli_queries: int, embedder: Embedder, profile: bool
) -> dict[str, Any]:
    work = Path(tempfile.mkdtemp(prefix=f"docsctl-bench-latency-{backend}-"))
    settings = bench_settings(backend, url, work)
    sources = dev_query_sources()
    try:
        chunks = build_index(settings, work, embedder)
        log(f"{backend}: indexed {chunks} chunks")
        figures: dict[str, Any] = {"chunks": chunks, "queries": len(sources), "passes": passes, "filtered": "source"}
        figures["in_process"] = in_process(settings, sources, passes)
        log(f"{backend}: in process {figures['in_process']['hybrid_uncached']}")
        if profile:
            profile_pass(settings, sources, backend)
        figures.update(mcp(settings, sources, passes, work))
        log(f"{backend}: mcp stdio {figures['mcp_stdio']} http {figures['mcp_http']}")
        figures["cli_process"] = cli(settings, dict(list(sources.items())[:cli_queries]))
        log(f"{backend}: cli {figures['cli_process']}")
        return figures
    finally:
        open_store(settings).drop()
        shutil.rmtree(work, ignore_errors=True)


def chart(results: dict, path: Path) -> None:
    plt = pyplot()
    methods = [
        ("in_process", "hybrid_uncached", "in-process\n(no query cache)"),
        ("in_process", "hybrid_query_cache", "in-process\n(query cache)"),
        ("mcp_stdio", None, "MCP stdio"),
        ("mcp_http", None, "MCP HTTP"),
    ]
    backends = list(results["backends"])
    fig, axes = plt.subplots(1, len(backends), figsize=(5.5 * len(backends), 4.2), squeeze=False)
    for axis, backend in zip(axes[0], backends, strict=True):
        figures = results["backends"][backend]
        for i, (key, sub, _label) in enumerate(methods):
            dist = figures[key][sub] if sub else figures[key]
            for offset, (p, color) in enumerate((("p50", "C0"), ("p95", "C1"), ("p99", "C3"))):
                axis.bar(i + (offset - 1) * 0.25, dist[p], 0.25, color=color, label=p if i == 0 else None)
        axis.axhline(TARGETS_MS["in_process_p95"], color="gray", ls=":", lw=1)
        axis.axhline(TARGETS_MS["mcp_p95_opensearch"], color="gray", ls="--", lw=1)
        axis.set_xticks(range(len(methods)), [label for *_, label in methods], fontsize=8)
        axis.set_ylabel("ms")
        cli_p50 = figures["cli_process"]["p50"]
        axis.set_title(f"{backend} ({figures['chunks']} chunks); docsctl query p50 {cli_p50 / 1000:.1f} s", fontsize=9)
        axis.legend(fontsize=8)
    fig.suptitle("Query latency, 40 dev queries (targets: 25 ms dotted, 50 ms dashed)", fontsize=10)
    fig.tight_layout()
    fig.savefig(path, dpi=110)


def main() -> None:
    parser = bench_parser(__doc__, every=False)
    parser.add_argument("--passes", type=int, default=5, help="measured passes over the 40 queries")
    parser.add_argument("--cli-queries", type=int, default=8, help="queries run as `docsctl query` processes")
    parser.add_argument("--profile", action="store_true", help="save a pyinstrument profile of one pass")
    args = parser.parse_args()
    backends = backends_of(args)
    embedder = Embedder()
    results: dict[str, Any] = {"benchmark": "latency", "machine": machine(), "targets_ms": TARGETS_MS, "backends": {}}
    for backend in backends:
        figures = run_backend(backend, args.opensearch_url, args.passes, args.cli_queries, embedder, args.profile)
        results["backends"][backend] = figures
    png = write_result(results, args.out)
    if png:
        chart(results, png)


if __name__ == "__main__":
    main()
