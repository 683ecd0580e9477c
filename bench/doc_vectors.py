"""Document vectors in hybrid ranking: the weight of the centroid ranking, measured on the dev set.

    python bench/doc_vectors.py [--backend sqlite|opensearch|both] [--opensearch-url URL]
                                [--weights 0.2,0.35,0.5,0.75,1.0] [--out FILE]

Indexes the corpora as `docsctl eval` does (one source per corpus; vectors from the embedding cache) into
a throw-away index. For every dev query, hybrid search's own candidates (50 chunks from each retriever)
and the store's document ranking (knn_documents: documents by the similarity of their centroid, the
normalized mean of their chunk vectors) are fused as `docsctl query` fuses them, with the document ranking
at each weight (0: hybrid without it), applied to questions only (as shipped) and to every query.
Prints JSON (and writes it to --out): metrics per setting, overall and per kind, as in `docsctl eval`.
"""

from __future__ import annotations

import tempfile
from collections import defaultdict
from pathlib import Path
from typing import Any

from common import CORPORA, DEV_QUERIES, backends_of, bench_parser, bench_settings, log, machine, write_result

from docsctl.embedding import Embedder, EmbeddingCache
from docsctl.evaluation.metrics import mean_metrics, query_metrics
from docsctl.evaluation.run import EvalQuery, corpora_of, index_corpora, load_queries
from docsctl.models import Filters, Hit
from docsctl.server.search import Searcher, fuse_documents, is_keyword_query, mentioned_names
from docsctl.store import open_store

CANDIDATES = 50
DEPTH = 10


def summarize(results: list[tuple[EvalQuery, dict[str, float]]]) -> dict[str, Any]:
    by_kind: dict[str, list[dict[str, float]]] = defaultdict(list)
    for query, metrics in results:
        by_kind[query.kind].append(metrics)
    return {
        "overall": mean_metrics(metrics for _, metrics in results).means,
        "by_kind": {kind: mean_metrics(rows).means for kind, rows in sorted(by_kind.items())},
    }


def measure(backend: str, opensearch_url: str | None, weights: list[float]) -> list[dict[str, Any]]:
    work = Path(tempfile.mkdtemp(prefix="docsctl-docvec-"))
    settings = bench_settings(backend, opensearch_url, work)
    store = open_store(settings)
    embedder = Embedder(settings.model)
    queries = load_queries(DEV_QUERIES)
    cache = EmbeddingCache(settings.embedding_cache_path, settings.model)
    try:
        log(f"indexing the corpora into {backend}")
        index_corpora(store, embedder, CORPORA, corpora_of(queries, CORPORA), lock_path=settings.lock_path, cache=cache)
        searcher = Searcher(store, embedder)
        candidates: dict[str, tuple[list[Hit], list[Hit], list[str]]] = {}
        for query in queries:
            filters = searcher.effective_filters(Filters(sources=(query.corpus,)))
            vector = embedder.encode_query(query.query)
            candidates[query.id] = (
                searcher.retrieve("bm25", query.query, CANDIDATES, filters),
                searcher.retrieve("knn", query.query, CANDIDATES, filters, vector),
                searcher.document_ranking(vector, CANDIDATES, filters),
            )

        def ranking(query: EvalQuery, weight: float, questions_only: bool) -> list[str]:
            bm25, knn, documents = candidates[query.id]
            fusion_weights = dict(searcher.ranking.weights_for(query.query))
            use = weight > 0 and not (questions_only and is_keyword_query(query.query))
            fusion_weights["document"] = weight if use else 0.0
            hits = fuse_documents(
                bm25,
                knn,
                fusion_weights,
                mentioned=mentioned_names(query.query),
                doc_rankings={"document": documents} if use else None,
            )
            return list(dict.fromkeys(hit.chunk.path for hit in hits))[:DEPTH]

        settings_run: list[dict[str, Any]] = []
        for questions_only in (True, False):
            for weight in [0.0, *weights]:
                if weight == 0.0 and not questions_only:
                    continue
                results = [(q, query_metrics(ranking(q, weight, questions_only), set(q.relevant))) for q in queries]
                summary = summarize(results)
                applies = "questions" if questions_only else "all queries"
                label = "without document ranking" if weight == 0.0 else f"document weight {weight} ({applies})"
                settings_run.append({"setting": label, "weight": weight, "applies_to": applies, **summary})
                overall = summary["overall"]
                log(f"{backend} {label:45} MRR@10 {overall['MRR@10']:.3f} Recall@5 {overall['Recall@5']:.3f}")
    finally:
        cache.close()
        store.drop()
    return settings_run


def main() -> None:
    parser = bench_parser(__doc__, every=False)
    parser.add_argument("--weights", default="0.2,0.35,0.5,0.75,1.0", help="weights of the document ranking")
    args = parser.parse_args()
    weights = [float(w) for w in args.weights.split(",")]
    runs = {backend: measure(backend, args.opensearch_url, weights) for backend in backends_of(args)}
    write_result({"benchmark": "doc_vectors", "machine": machine(), "backends": runs}, args.out)


if __name__ == "__main__":
    main()
