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

from typing import Any

from common import backends_of, bench_parser, dev_corpora_index, log, machine, write_result

from docsctl.evaluation.run import EvalQuery, ModeReport, judge
from docsctl.models import Filters, Hit
from docsctl.server.search import KEYWORD_WEIGHTS, QUESTION_WEIGHTS, Ranking, Searcher

CANDIDATES = 50
DEPTH = 10


def measure(backend: str, opensearch_url: str | None, weights: list[float]) -> list[dict[str, Any]]:
    with dev_corpora_index(backend, opensearch_url) as (store, embedder, queries):
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

        def ranking(query: EvalQuery) -> list[str]:
            bm25, knn, documents = candidates[query.id]
            hits = searcher.fuse_ranked(query.query, bm25, knn, True, documents)
            return list(dict.fromkeys(hit.chunk.path for hit in hits))[:DEPTH]

        settings_run: list[dict[str, Any]] = []
        for questions_only in (True, False):
            for weight in [0.0, *weights]:
                if weight == 0.0 and not questions_only:
                    continue
                searcher.ranking = Ranking(
                    weights={**QUESTION_WEIGHTS, "document": weight},
                    keyword_weights={**KEYWORD_WEIGHTS, "document": 0.0 if questions_only else weight},
                )
                results = [judge(query, ranking(query)) for query in queries]
                applies = "questions" if questions_only else "all queries"
                label = "without document ranking" if weight == 0.0 else f"document weight {weight} ({applies})"
                report = ModeReport(label, results).to_dict(with_rankings=False)
                settings_run.append({"setting": label, "weight": weight, "applies_to": applies, **report})
                overall = report["overall"]
                log(f"{backend} {label:45} MRR@10 {overall['MRR@10']:.3f} Recall@5 {overall['Recall@5']:.3f}")
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
