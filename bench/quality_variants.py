"""Ranking variants measured against the shipped search and dropped (bench/README.md, "Search quality").

    python bench/quality_variants.py [--backend sqlite|opensearch] [--opensearch-url URL]
                                     [--queries FILE ...] [--out FILE]

Each corpus half (chimerax, holoviz) of each query file, hybrid and k-NN, MRR@10 / Recall@5:

- fusion: the shipped reciprocal rank fusion against a convex combination of min-max normalized scores
  (BM25, k-NN and the page centroid's similarity, each document at its best chunk), over a grid of the
  k-NN share `a` and the centroid's weight `d` (times `a`); the setting best on one half is judged on
  the other, as bench/quality.py does for the shipped knobs.
- embedded text: what the model embeds per chunk, title and breadcrumb before the text (shipped), the
  title only, or the text alone; k-NN and the shipped fusion with those vectors.
- whole chunks: all-MiniLM-L6-v2 reads 256 word pieces and a third of the holoviz chunks are longer; each
  such chunk is cut into windows the model reads whole, and ranked by the mean of their vectors or by its
  best window.

The vector variants embed every chunk again (cached in the embedding cache after the first run) and
search exactly with numpy, which is what the SQLite backend does.
"""

from __future__ import annotations

import itertools
import json
import shutil
import tempfile
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
from common import CORPORA, DEV_QUERIES, RESULTS, bench_parser, bench_settings, log, machine
from transformers import AutoTokenizer

from docsctl.config import DEFAULT_MODEL
from docsctl.embedding import EmbeddingCache, embed_with_cache, embedder_for, resolve_model_path
from docsctl.evaluation.run import EvalQuery, ModeReport, index_corpora, judge, load_queries
from docsctl.models import Chunk, Filters
from docsctl.server.fusion import min_max_fusion, reciprocal_rank_fusion
from docsctl.server.search import MIN_CANDIDATES, Ranking
from docsctl.store import open_store
from docsctl.store.doc_vectors import group_centroids

OWN_QUERIES = Path(__file__).parent / "queries" / "own.jsonl"
CORPUS_HALVES = ("chimerax", "holoviz")
MODEL_WORD_PIECES = 256  # all-MiniLM-L6-v2's max_seq_length
KNN_SHARES = (0.3, 0.4, 0.5, 0.6, 0.7, 0.8)
CENTROID_WEIGHTS = (0.0, 0.25, 0.5)

# One query's candidates as document rankings: path -> best score, best first.
Scored = dict[str, float]


def by_document(pairs: Sequence[tuple[str, float]]) -> Scored:
    best: Scored = {}
    for path, score in pairs:
        best.setdefault(path, score)
    return best


def min_max(lists: Mapping[str, Scored], weights: Mapping[str, float]) -> list[str]:
    """docsctl.server.fusion's min-max fusion of the lists that have a weight, as document paths."""
    scored = {name: list(by_path.items()) for name, by_path in lists.items() if weights.get(name)}
    return [item.key for item in min_max_fusion(scored, weights)]


def shipped_fusion(text: str, bm25: Scored, knn: Scored, centroid: Scored) -> list[str]:
    weights = Ranking().weights_for(text)
    lists = {"bm25": list(bm25), "knn": list(knn), "document": list(centroid)}
    shares = {"bm25": weights.get("bm25", 1.0), "knn": 1.0, "document": weights.get("document", 0.0)}
    return [item.key for item in reciprocal_rank_fusion(lists, shares)]


def figures(results: Sequence[Any]) -> dict[str, list[float]]:
    report = ModeReport("hybrid", list(results))
    halves = {corpus: summary for corpus, summary in report.by_corpus.items()}
    return {
        name: [round(summary.means["MRR@10"], 3), round(summary.means["Recall@5"], 3)]
        for name, summary in {**halves, "all": report.overall}.items()
    }


class Candidates:
    """Per query: BM25 and k-NN chunk candidates and the centroid ranking as scored document paths, fetched
    once from the store, and the chunks with their vectors (for the vector variants)."""

    def __init__(self, store: Any, embedder: Any, queries: Sequence[EvalQuery]) -> None:
        self.chunks: list[Chunk] = list(store.iter_chunks(with_embedding=True))
        self.vectors = np.asarray([chunk.embedding for chunk in self.chunks], dtype=np.float32)
        self.query_vectors = {q.id: np.asarray(embedder.encode_query(q.query), dtype=np.float32) for q in queries}
        self.bm25: dict[str, Scored] = {}
        self.knn: dict[str, Scored] = {}
        self.centroid: dict[str, Scored] = {}
        path_of = {chunk.doc_id: chunk.path for chunk in self.chunks}
        for q in queries:
            filters = Filters(sources=(q.corpus,))
            vector = self.query_vectors[q.id]
            self.bm25[q.id] = by_document(
                [(h.chunk.path, h.score) for h in store.bm25(q.query, MIN_CANDIDATES, filters)]
            )
            self.knn[q.id] = by_document([(h.chunk.path, h.score) for h in store.knn(vector, MIN_CANDIDATES, filters)])
            path_of = {chunk.doc_id: chunk.path for chunk in self.chunks}
            self.centroid[q.id] = {path_of[d]: s for d, s in store.knn_documents(vector, MIN_CANDIDATES, filters)}

    def shown(self, query_id: str) -> set[str]:
        return set(self.bm25[query_id]) | set(self.knn[query_id])


def fusion_study(queries: Sequence[EvalQuery], found: Candidates) -> dict[str, Any]:
    def judged(fuse: Callable[[EvalQuery, Scored, Scored, Scored], list[str]]) -> dict[str, list[float]]:
        results = []
        for q in queries:
            shown = found.shown(q.id)
            centroid = {path: s for path, s in found.centroid[q.id].items() if path in shown}
            results.append(judge(q, fuse(q, found.bm25[q.id], found.knn[q.id], centroid)[:10]))
        return figures(results)

    rows = {"shipped (RRF)": judged(lambda q, b, k, c: shipped_fusion(q.query, b, k, c))}
    for share, centroid_weight in itertools.product(KNN_SHARES, CENTROID_WEIGHTS):
        weights = {"bm25": 1 - share, "knn": share, "document": centroid_weight * share}
        rows[f"min-max a={share} d={centroid_weight}"] = judged(
            lambda q, b, k, c, w=weights: min_max({"bm25": b, "knn": k, "document": c}, w)
        )
    cross = {}
    for judged_on, tuned_on in itertools.permutations(CORPUS_HALVES, 2):
        candidates = [name for name in rows if name.startswith("min-max")]
        best = max(candidates, key=lambda name: sum(rows[name][tuned_on]))
        cross[judged_on] = {"tuned_on": tuned_on, "setting": best, "figures": rows[best][judged_on]}
    return {"rows": rows, "min_max_cross_half": cross}


def exact_documents(found: Candidates, vectors: np.ndarray, owners: np.ndarray, q: EvalQuery) -> Scored:
    """The query's top MIN_CANDIDATES vectors in its corpus (vector i belongs to chunk owners[i]), exactly,
    as documents at their best vector: what the SQLite backend's k-NN does with the shipped vectors."""
    in_corpus = np.flatnonzero([found.chunks[owner].source == q.corpus for owner in owners])
    scores = vectors[in_corpus] @ found.query_vectors[q.id]
    top = np.argsort(-scores, kind="stable")[:MIN_CANDIDATES]
    return by_document([(found.chunks[owners[in_corpus[i]]].path, float(scores[i])) for i in top])


def page_centroids(found: Candidates, vectors: np.ndarray) -> dict[tuple[str, str], np.ndarray]:
    """Each page's centroid of `vectors`, by (source, path), as the stores derive it (docsctl.store.doc_vectors)."""
    pages = list(dict.fromkeys((chunk.source, chunk.path) for chunk in found.chunks))
    row = {page: i for i, page in enumerate(pages)}
    groups = np.asarray([row[(chunk.source, chunk.path)] for chunk in found.chunks])
    return dict(zip(pages, group_centroids(groups, vectors, len(pages)), strict=True))


def vector_study(
    queries: Sequence[EvalQuery], found: Candidates, embed: Callable[[list[str]], np.ndarray]
) -> dict[str, Any]:
    """k-NN (and the shipped hybrid) with each embedded-text variant; k-NN with chunks read whole."""
    chunks = found.chunks
    texts: dict[str, Callable[[Chunk], str]] = {
        "title and breadcrumb (shipped)": Chunk.embed_text,
        "title only": lambda c: f"{c.title}\n\n{c.content}" if c.title else c.content,
        "text alone": lambda c: c.content,
    }
    out: dict[str, Any] = {}
    for name, text_of in texts.items():
        vectors = embed([text_of(chunk) for chunk in chunks])
        out[f"embedded text: {name}"] = judge_vectors(queries, found, vectors, np.arange(len(chunks)), True)
    tokenizer = AutoTokenizer.from_pretrained(resolve_model_path(DEFAULT_MODEL))

    def count(text: str) -> int:
        return len(tokenizer(text)["input_ids"])

    windows, owners_list = [], []
    for owner, chunk in enumerate(chunks):
        for window in model_windows(chunk, count):
            windows.append(window)
            owners_list.append(owner)
    owners = np.asarray(owners_list)
    window_vectors = embed(windows)
    mean = group_centroids(owners, window_vectors, len(chunks))  # each chunk's windows, averaged
    log(f"{len(chunks)} chunks read whole in {len(windows)} windows")
    out["whole chunks: mean of windows"] = judge_vectors(queries, found, mean, np.arange(len(chunks)))
    out["whole chunks: best window"] = judge_vectors(queries, found, window_vectors, owners)
    return out


def judge_vectors(
    queries: Sequence[EvalQuery], found: Candidates, vectors: np.ndarray, owners: np.ndarray, with_hybrid: bool = False
) -> dict[str, Any]:
    """k-NN with `vectors` and, `with_hybrid`, the shipped fusion of it with BM25 and its page centroids."""
    knn_results, hybrid_results = [], []
    centroids = page_centroids(found, vectors) if with_hybrid else {}
    for q in queries:
        knn = exact_documents(found, vectors, owners, q)
        knn_results.append(judge(q, list(knn)[:10]))
        if with_hybrid:
            shown = set(knn) | set(found.bm25[q.id])
            pages = [
                (path, float(v @ found.query_vectors[q.id]))
                for (source, path), v in centroids.items()
                if source == q.corpus
            ]
            pages.sort(key=lambda page: -page[1])
            centroid = {path: score for path, score in pages[:MIN_CANDIDATES] if path in shown}
            hybrid_results.append(judge(q, shipped_fusion(q.query, found.bm25[q.id], knn, centroid)[:10]))
    result = {"knn": figures(knn_results)}
    if with_hybrid:
        result["hybrid"] = figures(hybrid_results)
    return result


def model_windows(chunk: Chunk, count: Callable[[str], int], limit: int = MODEL_WORD_PIECES - 6) -> list[str]:
    """The chunk's embedded text as is when the model reads it whole (`count`: its word pieces), else its
    lines packed into windows the model reads whole, each after the chunk's title and breadcrumb."""
    text = chunk.embed_text()
    if count(text) <= limit:
        return [text]
    context = " > ".join(chunk.trail())
    budget = limit - count(context) - 2
    windows: list[str] = []
    lines: list[str] = []
    for line in chunk.content.split("\n"):
        if lines and count("\n".join([*lines, line])) > budget:
            windows.append("\n".join(lines))
            lines = []
        lines.append(line)
    windows.append("\n".join(lines))
    return [f"{context}\n\n{window}" if context else window for window in windows]


def table(title: str, rows: Mapping[str, Mapping[str, list[float]]]) -> None:
    print(f"\n{title}")
    for name, halves in rows.items():
        cells = "  ".join(f"{half} {halves[half][0]:.3f} / {halves[half][1]:.3f}" for half in (*CORPUS_HALVES, "all"))
        print(f"  {name:40} {cells}")


def main() -> None:
    parser = bench_parser(__doc__, every=False)
    parser.add_argument("--queries", type=Path, nargs="+", default=[DEV_QUERIES, OWN_QUERIES])
    args = parser.parse_args()
    backend = args.backend if args.backend != "both" else "sqlite"
    out_file = args.out or RESULTS / f"quality_variants_{backend}.json"
    queries_by_file = {path.name: load_queries(path) for path in args.queries}
    everything = [q for queries in queries_by_file.values() for q in queries]
    work = Path(tempfile.mkdtemp(prefix="docsctl-bench-variants-"))
    settings = bench_settings(backend, args.opensearch_url, work)
    store, embedder = open_store(settings), embedder_for(settings)
    cache = EmbeddingCache(settings.embedding_cache_path, settings.model)

    def embed(texts: list[str]) -> np.ndarray:
        vectors, computed = embed_with_cache(embedder, cache, texts)
        log(f"embedded {len(texts)} texts ({computed} not cached)")
        return np.asarray(vectors, dtype=np.float32)

    try:
        index_corpora(store, embedder, CORPORA, list(CORPUS_HALVES), lock_path=settings.lock_path, cache=cache)
        found = Candidates(store, embedder, everything)
        out: dict[str, Any] = {"machine": machine(), "backend": backend}
        for name, queries in queries_by_file.items():
            fusion = fusion_study(queries, found)
            vectors = vector_study(queries, found, embed)
            out[name] = {"fusion": fusion, "vectors": vectors}
            table(f"{backend} · {name} · hybrid by fusion (MRR@10 / Recall@5)", fusion["rows"])
            for judged_on, chosen in fusion["min_max_cross_half"].items():
                tuned = f"tuned on {chosen['tuned_on']}: {chosen['setting']}"
                print(f"  min-max judged on {judged_on}, {tuned}: {chosen['figures']}")
            for mode in ("knn", "hybrid"):
                rows = {variant: figures_[mode] for variant, figures_ in vectors.items() if mode in figures_}
                table(f"{backend} · {name} · {mode} by the vectors", rows)
        out_file.write_text(json.dumps(out, indent=1) + "\n")
    finally:
        cache.close()
        store.drop()
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
