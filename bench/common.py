"""Helpers shared by the performance benchmarks (indexing, latency, scale, memory).

Nothing here measures anything by itself: paths, settings for a throw-away index, the corpora (with a
fixed sample of holoviz), the dev queries, percentiles, a `docsctl` subprocess, an MCP client, and
writing the JSON result beside its chart.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
# Measure this checkout, whatever docsctl the environment has installed (a shared venv may point elsewhere).
sys.path.insert(0, str(ROOT))

from docsctl.config import Settings, load_settings  # noqa: E402
from docsctl.embedding import Embedder, EmbeddingCache, embedder_for  # noqa: E402
from docsctl.evaluation.run import EvalQuery, corpora_of, index_corpora, load_queries  # noqa: E402
from docsctl.indexer.sources import SourceTarget  # noqa: E402
from docsctl.store import open_store  # noqa: E402
from docsctl.store.base import Store  # noqa: E402

CORPORA = ROOT.parent / "shared" / "corpora"
DEV_QUERIES = ROOT.parent / "shared" / "eval" / "dev.jsonl"
RESULTS = ROOT / "bench" / "results"
CORPUS_NAMES = ("chimerax", "holoviz")


def machine() -> dict[str, Any]:
    """Where and when: the figures only compare within one run, but say what ran them."""
    load = os.getloadavg()
    return {
        "date": datetime.now(UTC).isoformat(timespec="seconds"),
        "cpus": os.cpu_count(),
        "cpu_model": _cpu_model(),
        "memory_gb": round(os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 2**30, 1),
        "python": platform.python_version(),
        "load_average_at_start": [round(x, 2) for x in load],
    }


def _cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor()


def bench_settings(
    backend: str, opensearch_url: str | None, work: Path, *, cache_dir: Path | None = None, alias: str | None = None
) -> Settings:
    """Settings for a throw-away index under `work` (and, for OpenSearch, a unique alias)."""
    overrides: dict[str, Any] = {
        "backend": backend,
        "opensearch_url": opensearch_url if backend == "opensearch" else None,
        "data_dir": work / "data",
        "index_alias": alias or f"bench-{uuid.uuid4().hex[:8]}",
    }
    if cache_dir is not None:
        overrides["cache_dir"] = cache_dir
    return load_settings(**overrides)


def settings_env(settings: Settings) -> dict[str, str]:
    """The environment that makes a `docsctl` subprocess use the same index as `settings`."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("DOCSCTL_")}
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT), *filter(None, [os.environ.get("PYTHONPATH")])])
    env.update(
        DOCSCTL_BACKEND=settings.backend_name,
        DOCSCTL_DATA_DIR=str(settings.data_dir),
        DOCSCTL_CACHE_DIR=str(settings.cache_dir),
        DOCSCTL_INDEX_ALIAS=settings.index_alias,
    )
    if settings.backend_name == "opensearch" and settings.opensearch_url:
        env["DOCSCTL_OPENSEARCH_URL"] = settings.opensearch_url
    return env


def corpus_targets(work: Path, every: int = 1) -> list[SourceTarget]:
    """chimerax and holoviz: whole (`every` = 1) or a fixed sample, every `every`-th file of each sorted by
    path, copied under `work` (the shared corpora stay read-only and outside the repo)."""
    if every <= 1:
        return [SourceTarget(name=name, root=CORPORA / name) for name in CORPUS_NAMES]
    targets = []
    for name in CORPUS_NAMES:
        sample = work / f"{name}-sample"
        files = sorted(path for path in (CORPORA / name).rglob("*") if path.is_file())
        for path in files[::every]:
            dest = sample / path.relative_to(CORPORA / name)
            dest.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(path, dest)
        targets.append(SourceTarget(name=name, root=sample))
    return targets


def corpus_label(every: int) -> str:
    return "chimerax + holoviz, all files" if every <= 1 else f"chimerax + holoviz, every {every}th file by path"


@contextmanager
def dev_corpora_index(backend: str, opensearch_url: str | None) -> Iterator[tuple[Store, Embedder, list[EvalQuery]]]:
    """The dev corpora indexed as `docsctl eval` indexes them (one source per corpus, vectors from the
    embedding cache) into a throw-away index, dropped on exit; with the store, its embedder, the judged queries."""
    work = Path(tempfile.mkdtemp(prefix=f"docsctl-bench-dev-{backend}-"))
    settings = bench_settings(backend, opensearch_url, work)
    store = open_store(settings)
    embedder = embedder_for(settings)
    queries = load_queries(DEV_QUERIES)
    cache = EmbeddingCache(settings.embedding_cache_path, settings.model)
    try:
        log(f"indexing the dev corpora into {backend}")
        index_corpora(store, embedder, CORPORA, corpora_of(queries, CORPORA), lock_path=settings.lock_path, cache=cache)
        yield store, embedder, queries
    finally:
        cache.close()
        store.drop()
        shutil.rmtree(work, ignore_errors=True)


def dev_queries() -> list[str]:
    return list(dev_query_sources())


def dev_query_sources() -> dict[str, str]:
    """Each dev query's text and the source (corpus) it is about: the filter an assistant passes."""
    with DEV_QUERIES.open(encoding="utf-8") as lines:
        records = [json.loads(line) for line in lines if line.strip()]
    return {record["query"]: record["corpus"] for record in records}


def distribution(samples_ms: Sequence[float]) -> dict[str, float]:
    """p50/p95/p99 (nearest rank on the sorted samples), mean, min, max, n; milliseconds."""
    ordered = sorted(samples_ms)
    if not ordered:
        return {"n": 0}

    def rank(p: float) -> float:
        return ordered[min(len(ordered) - 1, max(0, round(p / 100 * len(ordered) + 0.5) - 1))]

    return {
        "n": len(ordered),
        "p50": round(rank(50), 2),
        "p95": round(rank(95), 2),
        "p99": round(rank(99), 2),
        "mean": round(statistics.fmean(ordered), 2),
        "min": round(ordered[0], 2),
        "max": round(ordered[-1], 2),
    }


def timed_passes(call: Callable[[str], Any], queries: Iterable[str], passes: int, warmup: int = 1) -> list[float]:
    """Milliseconds of each call over `passes` passes, after `warmup` unmeasured passes."""
    queries = list(queries)
    for _ in range(warmup):
        for text in queries:
            call(text)
    samples = []
    for _ in range(passes):
        for text in queries:
            started = time.perf_counter()
            call(text)
            samples.append((time.perf_counter() - started) * 1000)
    return samples


def docsctl_command() -> list[str]:
    """`docsctl` of this checkout (with settings_env's PYTHONPATH), not the installed console script."""
    return [sys.executable, "-m", "docsctl.cli"]


def mcp_stdio(settings: Settings) -> Any:
    """Parameters that start `docsctl serve` (stdio) of this checkout on the index of `settings`."""
    from mcp.client.stdio import StdioServerParameters

    command = docsctl_command()
    return StdioServerParameters(command=command[0], args=[*command[1:], "serve"], env=settings_env(settings))


async def mcp_passes(
    server: Any, queries: list[str], passes: int, sources: Mapping[str, str] | None = None
) -> list[float]:
    """Milliseconds of each `search_docs` call, timed by the official MCP client, over `passes` passes after
    a warm-up pass; `server` is stdio parameters (mcp_stdio) or a streamable HTTP URL; `sources`: each
    query's `source` argument."""
    from mcp import Client

    def arguments(text: str) -> dict[str, str]:
        return {"query": text, "source": sources[text]} if sources else {"query": text}

    async with Client(server, read_timeout_seconds=120) as client:
        for text in queries:  # warm-up pass
            await client.call_tool("search_docs", arguments(text))
        samples = []
        for _ in range(passes):
            for text in queries:
                started = time.perf_counter()
                result = await client.call_tool("search_docs", arguments(text))
                samples.append((time.perf_counter() - started) * 1000)
                if result.is_error:
                    raise RuntimeError(f"search_docs failed: {result.content[0].text}")
        return samples


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def wait_for_port(port: int, process: subprocess.Popen, timeout: float = 180) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise RuntimeError(f"the server exited with {process.returncode} before listening on {port}")
        with socket.socket() as sock:
            if sock.connect_ex(("127.0.0.1", port)) == 0:
                return
        time.sleep(0.2)
    raise RuntimeError(f"nothing listens on {port} after {timeout:.0f} s")


def rss_mb(pid: int) -> dict[str, float]:
    """Current (VmRSS) and peak (VmHWM) resident memory of a process, in MB, from /proc."""
    fields = {}
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        key, _, value = line.partition(":")
        if key in ("VmRSS", "VmHWM"):
            fields[key] = round(int(value.split()[0]) / 1024, 1)
    return {"rss_mb": fields.get("VmRSS", 0.0), "peak_rss_mb": fields.get("VmHWM", 0.0)}


def write_result(data: dict[str, Any], out: Path | None) -> Path | None:
    """Print the JSON and write it to `out` (creating bench/results/ if needed); returns the PNG path beside it."""
    text = json.dumps(data, indent=2)
    print(text)
    if out is None:
        return None
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(text + "\n")
    return out.with_suffix(".png")


def pyplot():  # noqa: ANN201 - matplotlib is imported lazily, headless
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def log(message: str) -> None:
    print(f"[{datetime.now():%H:%M:%S}] {message}", file=sys.stderr, flush=True)


def bench_parser(doc: str | None, *, every: bool = True) -> argparse.ArgumentParser:
    """The options every benchmark shares: which backends, the OpenSearch URL, the corpus sample, the output."""
    parser = argparse.ArgumentParser(description=doc, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--backend", default="both", choices=["sqlite", "opensearch", "both"])
    parser.add_argument("--opensearch-url", default=None)
    if every:
        parser.add_argument("--every", type=int, default=6, help="index every Nth file of each corpus (1: all)")
    parser.add_argument("--out", type=Path, default=None)
    return parser


def backends_of(args: argparse.Namespace) -> list[str]:
    return ["sqlite", "opensearch"] if args.backend == "both" else [args.backend]
