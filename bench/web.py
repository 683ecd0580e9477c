"""Server time of each web page (docsctl/server/web) at corpus size: p50/p95 over N requests per page.

    python bench/web.py [--backend sqlite|opensearch|both] [--opensearch-url URL] [--requests N]
                        [--every N] [--out FILE]

For each backend, indexes chimerax + holoviz (whole by default; vectors from the default embedding
cache, so this takes seconds once they are there) into a new index, then requests each page in
process through the ASGI app (Starlette's TestClient: routing, the page's searches, rendering and
middleware; no socket), with the query-vector cache disabled so that every search embeds its query:
  - search          /?q=Q                       a dev query per request (hybrid, first page of 10)
  - search_filtered /?q=Q&source=S&page=2       the same with a source filter and the second page
  - document        /doc?path=P&source=S        the documents the dev queries find first
  - explain         /explain?q=Q&path=P&source=S  that document for that query (retrievers 200 deep)
  - sources         /sources
  - home            /                           the empty search page (facet counts only)
Each page gets a few unmeasured requests first. Target: p95 under 100 ms per page (explain runs
several searches and is reported, not held to it).
Prints JSON (and writes it to --out).
"""

from __future__ import annotations

import itertools
import shutil
import tempfile
import time
from pathlib import Path
from typing import Any
from urllib.parse import urlencode

from common import (
    RESULTS,
    backends_of,
    bench_parser,
    bench_settings,
    corpus_label,
    corpus_targets,
    dev_queries,
    distribution,
    log,
    machine,
    write_result,
)
from starlette.testclient import TestClient

from docsctl.embedding import EmbeddingCache, embedder_for
from docsctl.indexer.pipeline import reindex
from docsctl.server.search import Searcher
from docsctl.server.web import create_app
from docsctl.store import open_store

TARGET_P95_MS = 100.0
WARMUP = 3


def page_urls(searcher: Searcher, queries: list[str], count: int) -> dict[str, list[str]]:
    """`count` URLs per page, built from the dev queries and the documents they find first."""
    found = []
    for text in queries:
        hits = searcher.search(text, limit=1).hits
        if hits:
            found.append((text, hits[0].chunk))
    cycle = list(itertools.islice(itertools.cycle(found), count))

    def url(route: str, /, **params: Any) -> str:
        return route + "?" + urlencode(params)

    return {
        "home": ["/"] * count,
        "search": [url("/", q=text) for text, _ in cycle],
        "search_filtered": [url("/", q=text, source=chunk.source, page=2) for text, chunk in cycle],
        "document": [url("/doc", path=chunk.path, source=chunk.source) for _, chunk in cycle],
        "explain": [url("/explain", q=text, path=chunk.path, source=chunk.source) for text, chunk in cycle],
        "sources": ["/sources"] * count,
    }


def measure(client: TestClient, urls: list[str]) -> dict[str, Any]:
    for address in urls[:WARMUP]:
        client.get(address)
    samples = []
    for address in urls:
        started = time.perf_counter()
        response = client.get(address)
        samples.append((time.perf_counter() - started) * 1000)
        if response.status_code != 200:
            raise RuntimeError(f"{address} answered {response.status_code}: {response.text[:300]}")
    return distribution(samples)


def run_backend(backend: str, opensearch_url: str | None, requests: int, every: int) -> dict[str, Any]:
    work = Path(tempfile.mkdtemp(prefix=f"docsctl-bench-web-{backend}-"))
    settings = bench_settings(backend, opensearch_url, work)
    store = open_store(settings)
    try:
        log(f"indexing into {backend}")
        indexing = embedder_for(settings)
        cache = EmbeddingCache(settings.embedding_cache_path, settings.model)
        try:
            summary = reindex(store, indexing, corpus_targets(work, every), lock_path=settings.lock_path, cache=cache)
        finally:
            cache.close()
        searcher = Searcher(store, embedder_for(settings, query_cache_size=0))  # every search embeds its query
        client = TestClient(create_app(searcher), base_url="http://127.0.0.1:8766")
        urls = page_urls(searcher, dev_queries(), requests)
        pages = {}
        for page, addresses in urls.items():
            log(f"{backend}: {page}")
            pages[page] = measure(client, addresses)
        return {
            "chunks": summary.chunks_written,
            "documents": sum(info.documents for info in store.list_sources()),
            "pages": pages,
            "under_target": {page: figures["p95"] < TARGET_P95_MS for page, figures in pages.items()},
        }
    finally:
        store.drop()
        shutil.rmtree(work, ignore_errors=True)


def main() -> None:
    parser = bench_parser(__doc__)
    parser.set_defaults(every=1, out=RESULTS / "web.json")
    parser.add_argument("--requests", type=int, default=50, help="measured requests per page")
    args = parser.parse_args()
    result: dict[str, Any] = {
        "benchmark": "web pages, server time in process (ms)",
        "machine": machine(),
        "corpus": corpus_label(args.every),
        "requests_per_page": args.requests,
        "target_p95_ms": TARGET_P95_MS,
        "backends": {},
    }
    for backend in backends_of(args):
        result["backends"][backend] = run_backend(backend, args.opensearch_url, args.requests, args.every)
    write_result(result, args.out)


if __name__ == "__main__":
    main()
