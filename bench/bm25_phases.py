"""Two-phase BM25 on OpenSearch: the same rankings as the one-phase query, and what it saves, on an index you keep.

    python bench/bm25_phases.py --opensearch-url URL --alias ALIAS [--passes N] [--mcp] [--out FILE]

ALIAS is an existing docsctl index of mapping version 4 or later: the eval index (`DOCSCTL_INDEX_ALIAS=eval-dev
docsctl eval ...`) for the corpus size, or one that `bench/scale.py --keep` left behind for 10x or 100x.
Nothing is written.
Over the 40 dev queries (each filtered to its corpus's source, as `docsctl eval` runs them), alternating
the two request bodies pass by pass so that both see the same machine:
  - one phase: the BM25 query alone (`text_query`: best field per term plus a tie-broken share of the
    others, which Lucene must score for every chunk holding any query word), as before this change;
  - two phases (shipped, `opensearch_queries.bm25_body`): `candidate_query` (a plain sum over the same
    fields, which Lucene prunes) picks the top RESCORE_WINDOW, and `text_query` re-scores them;
  - two phases, whole: the same, but its 50 candidates fetched whole rather than brief (doc values);
measured: whether the top 10 and top 50 chunk ids are identical, the BM25 request's latency (store.bm25,
50 brief candidates) and hybrid search's (Searcher.search, limit 5, query vectors cached, as bench/scale.py).
--mcp adds `search_docs` over MCP stdio against `docsctl serve` on ALIAS (two phases; warm, client-timed).
Prints JSON (and writes it to --out).
"""

from __future__ import annotations

import asyncio
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from common import (
    DEV_QUERIES,
    bench_parser,
    bench_settings,
    distribution,
    log,
    machine,
    mcp_passes,
    mcp_stdio,
    write_result,
)

from docsctl.embedding import embedder_for
from docsctl.evaluation.run import load_queries
from docsctl.models import Filters
from docsctl.server.search import Searcher
from docsctl.store import open_store
from docsctl.store import opensearch_queries as queries_module

CANDIDATES = 50
shipped_body = queries_module.bm25_body


def body_of(two_phase: bool, whole: bool = False) -> Callable[..., dict[str, Any]]:
    """bm25_body with its phases fixed, whatever the store asks for; `whole`: candidates carry their
    whole chunk even where the caller asks for brief ones (as before brief candidates)."""

    def body(text: str, k: int, filters: Filters | None = None, *, brief: bool = False, **_: Any) -> dict[str, Any]:
        body = shipped_body(text, k, filters, two_phase=two_phase, brief=brief and not whole)
        if brief and whole:  # the stored chunk is fetched too, and ignored: its cost is what is measured
            body["docvalue_fields"] = queries_module.BRIEF_FIELDS
        return body

    return body


# "two_phases_whole" is the shipped BM25 request with whole chunks fetched for all 50 candidates (k-NN's
# candidates stay brief): what brief candidates save on the BM25 side, the slower half at scale.
BODIES = {"one_phase": body_of(False), "two_phases": body_of(True), "two_phases_whole": body_of(True, whole=True)}


def main() -> None:
    parser = bench_parser(__doc__, every=False)
    parser.add_argument("--alias", required=True, help="an existing docsctl index alias on the node")
    parser.add_argument("--passes", type=int, default=3, help="measured passes per body (alternating)")
    parser.add_argument("--mcp", action="store_true", help="also time search_docs over MCP stdio")
    args = parser.parse_args()
    if not args.opensearch_url:
        parser.error("--opensearch-url is required")
    settings = bench_settings("opensearch", args.opensearch_url, Path(tempfile.mkdtemp()), alias=args.alias)
    store = open_store(settings)
    embedder = embedder_for(settings)
    searcher = Searcher(store, embedder)
    judged = load_queries(DEV_QUERIES)
    filters = {query.id: searcher.effective_filters(Filters(sources=(query.corpus,))) for query in judged}
    for query in judged:
        embedder.encode_query(query.query)  # vectors cached: the store's share only

    def top_ids(body_name: str) -> dict[str, list[str]]:
        queries_module.bm25_body = BODIES[body_name]
        return {q.id: [hit.chunk.chunk_id for hit in store.bm25(q.query, CANDIDATES, filters[q.id])] for q in judged}

    rankings = {name: top_ids(name) for name in BODIES}
    assert rankings["two_phases"] == rankings["two_phases_whole"]  # same request but for what is fetched
    same_10 = sum(rankings["one_phase"][q.id][:10] == rankings["two_phases"][q.id][:10] for q in judged)
    same_50 = sum(rankings["one_phase"][q.id] == rankings["two_phases"][q.id] for q in judged)
    log(f"identical top 10: {same_10}/{len(judged)}, top 50: {same_50}/{len(judged)}")

    def q_filters(query: Any) -> Filters:
        return Filters(sources=(query.corpus,))

    samples: dict[str, dict[str, list[float]]] = {name: {"bm25": [], "hybrid": []} for name in BODIES}
    for number in range(args.passes + 1):  # pass 0 warms both up
        for name, body in BODIES.items():
            queries_module.bm25_body = body
            for query in judged:
                bm25_ms = _timed(lambda q=query: store.bm25(q.query, CANDIDATES, filters[q.id], brief=True))
                hybrid_ms = _timed(lambda q=query: searcher.search(q.query, limit=5, filters=q_filters(q)))
                if number:
                    samples[name]["bm25"].append(bm25_ms)
                    samples[name]["hybrid"].append(hybrid_ms)
    queries_module.bm25_body = shipped_body
    results: dict[str, Any] = {
        "benchmark": "bm25_phases",
        "machine": machine(),
        "alias": args.alias,
        "chunks": sum(info.chunks for info in store.list_sources()),
        "rescore_window": queries_module.RESCORE_WINDOW,
        "identical_top10": same_10,
        "identical_top50": same_50,
        "queries": len(judged),
        "passes": args.passes,
    }
    for name, figures in samples.items():
        results[name] = {"bm25_ms": distribution(figures["bm25"]), "hybrid_ms": distribution(figures["hybrid"])}
        log(f"{name}: bm25 {results[name]['bm25_ms']}, hybrid {results[name]['hybrid_ms']}")
    if args.mcp:
        texts = [query.query for query in judged]
        results["two_phases"]["search_docs_mcp_stdio_ms"] = distribution(
            asyncio.run(mcp_passes(mcp_stdio(settings), texts, args.passes))
        )
        log(f"search_docs over MCP stdio: {results['two_phases']['search_docs_mcp_stdio_ms']}")
    write_result(results, args.out)


def _timed(call: Callable[[], Any]) -> float:
    started = time.perf_counter()
    call()
    return (time.perf_counter() - started) * 1000


if __name__ == "__main__":
    main()
