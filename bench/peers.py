"""Latency beside the embedded stores a user would pick instead (issue 21), measured in one run.

    python bench/peers.py [--opensearch-url URL] [--passes 5] [--factors 1,10] [--out bench/results/peers.json]

The dev corpora are indexed into SQLite as `docsctl eval` indexes them (chimerax and holoviz, one source
each, vectors from the embedding cache); the 6,640 chunks and their vectors are read back and loaded into
LanceDB (one table: the chunk's title, breadcrumb, section and content as one text column with LanceDB's
native full-text index, the vector, the source), ChromaDB (HNSW, cosine) and numpy (one matrix per
corpus). The 40 dev queries are embedded once; every system is given those vectors where it takes one, and
every call filters on the query's corpus (source). Rows:

  docsctl SQLite hybrid      Searcher.search(limit 10), query embedded (ONNX, no query cache): BM25 + k-NN +
                             document ranking + fusion, 100 candidates per retriever, then Store.page (the 10
                             hits' chunks whole, highlights) and relabel (the section shown)
  docsctl SQLite hybrid, FTS5 BM25   the same, with BM25 ranked by FTS5 as before this change (same ranking)
  docsctl SQLite bm25        Store.bm25(k 50, brief): what hybrid search asks; and FTS5-ranked as before
  docsctl SQLite knn         Store.knn(vector, k 50, brief)
  highlights / best section  Store.page(text, the 10 hits) and relabel() of the 10 hits, timed apart from
                             the retrieval (Searcher.rank) that precedes them
  docsctl OpenSearch hybrid  Searcher.search(limit 10), query embedded, on the node at --opensearch-url
  LanceDB hybrid             vector + full-text, prefilter on source, RRF (k 60), 50 per leg, 10 rows kept
  LanceDB full-text          its BM25, prefilter on source, 50 rows
  ChromaDB                   dense HNSW, `where` source, 10 ids
  numpy                      exact dot product + argpartition on the corpus's matrix, 10 ids: the floor

Each system gets one unmeasured warm-up pass over the 40 queries, then --passes passes, taken in turns
(pass 1 of every system, then pass 2, ...), so that other tenants' load falls on all rows alike. The first
pass of BM25 on a newly opened store (its postings not yet read) is recorded apart. With --factors 1,10 the
same runs at 10x the corpus (bench/scale.py's replicas; SQLite and LanceDB only). Prints JSON with
p50/p95 per row and the docsctl/peer ratios (and writes it to --out, with a PNG chart beside it).
"""

from __future__ import annotations

import shutil
import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager, suppress
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np
from common import (
    RESULTS,
    bench_parser,
    bench_settings,
    dev_corpora_index,
    distribution,
    log,
    machine,
    pyplot,
    write_result,
)
from scale import replicas, settle, whole_documents

from docsctl.embedding import embedder_for
from docsctl.models import Chunk, Filters
from docsctl.server.search import Searcher
from docsctl.server.sections import relabel
from docsctl.store import open_store
from docsctl.store.base import Store

LIMIT = 10  # results a hybrid call returns (docsctl shows them with highlights; LanceDB returns rows)
# Per retriever alone (Store.bm25, Store.knn, LanceDB full-text) and per LanceDB hybrid leg, as issue 21 set
# them; docsctl's hybrid search asks each retriever for Searcher.candidates (100 since 86061f9).
CANDIDATES = 50
# What each row's call does, kept in the table.
WHAT = {
    "sqlite_hybrid": "embed + BM25 + k-NN (100 each) + document ranking + fusion + best section per page + highlights",
    "sqlite_hybrid_fts5": "the same, BM25 ranked by FTS5 (before: same ranking)",
    "sqlite_hybrid_vector_given": "the same with the query's vector given (query cache warm): no embedding",
    "sqlite_embedding": "the query embedding alone (ONNX Runtime, one thread, no cache)",
    "sqlite_bm25": "BM25 top 50 from the postings (brief chunks)",
    "sqlite_bm25_fts5": "BM25 top 50 ranked by FTS5 (before)",
    "sqlite_bm25_cold": "as sqlite_bm25, first pass on a newly opened store (postings read from the file)",
    "sqlite_knn": "exact k-NN top 50, vector given (brief chunks)",
    "sqlite_retrieval": "Searcher.rank: hybrid retrieval and fusion, query embedded, no highlights",
    "sqlite_highlights": "Store.page for the 10 hits: chunks whole + highlights",
    "sqlite_best_section": "relabel of the 10 hits: the section their highlights are in",
    "opensearch_hybrid": "embed + BM25 + k-NN (100 each) + document ranking + fusion + best section + highlights",
    "lancedb_hybrid": "vector given + full-text, RRF, 50 per leg: 10 raw chunks, no highlights",
    "lancedb_fts": "LanceDB BM25 top 50 (rows with chunk_id)",
    "chromadb": "dense HNSW with a `where` filter: 10 ids",
    "numpy": "exact dot product + argpartition per corpus: 10 ids (the floor)",
}
LABELS = {
    "sqlite_hybrid": "docsctl SQLite, hybrid, query embedded",
    "sqlite_hybrid_fts5": "docsctl SQLite, hybrid, FTS5-ranked BM25 (before)",
    "sqlite_hybrid_vector_given": "docsctl SQLite, hybrid, vector given",
    "sqlite_embedding": "docsctl query embedding alone",
    "sqlite_bm25": "docsctl SQLite, bm25 only",
    "sqlite_bm25_fts5": "docsctl SQLite, bm25 only, FTS5-ranked (before)",
    "sqlite_bm25_cold": "docsctl SQLite, bm25 only, first pass (cold)",
    "sqlite_knn": "docsctl SQLite, knn only (vector given)",
    "sqlite_retrieval": "docsctl SQLite, hybrid retrieval only (Searcher.rank)",
    "sqlite_highlights": "docsctl SQLite, highlights (Store.page, 10 hits)",
    "sqlite_best_section": "docsctl SQLite, best section (relabel, 10 hits)",
    "opensearch_hybrid": "docsctl OpenSearch, hybrid, query embedded",
    "lancedb_hybrid": "LanceDB hybrid (vector + full-text, RRF)",
    "lancedb_fts": "LanceDB full-text (BM25) only",
    "chromadb": "ChromaDB dense HNSW, `where` filter",
    "numpy": "numpy exact dot product + argpartition",
}
# (docsctl row, peer row, target ratio of p95 or None): the ratios reported.
RATIOS = [
    ("sqlite_hybrid", "lancedb_hybrid", 1.0),
    ("sqlite_bm25", "lancedb_fts", 1.5),
    ("sqlite_hybrid_fts5", "lancedb_hybrid", None),
    ("sqlite_hybrid_vector_given", "lancedb_hybrid", None),
    ("sqlite_bm25_fts5", "lancedb_fts", None),
    ("opensearch_hybrid", "lancedb_hybrid", None),
    ("sqlite_knn", "chromadb", None),
    ("sqlite_knn", "numpy", None),
]

Call = Callable[[int], Any]


def chunk_text(chunk: Chunk) -> str:
    """What docsctl's BM25 searches in one chunk (title, breadcrumb, section, content), as one text."""
    return "\n".join([chunk.title, " > ".join(chunk.breadcrumb), chunk.section, chunk.content])


def in_turns(systems: dict[str, Call], count: int, passes: int) -> dict[str, list[float]]:
    """Milliseconds per call: a warm-up pass of each system, then `passes` passes taken in turns."""
    for call in systems.values():
        for i in range(count):
            call(i)
    samples: dict[str, list[float]] = {name: [] for name in systems}
    for number in range(passes):
        for name, call in systems.items():
            for i in range(count):
                started = time.perf_counter()
                call(i)
                samples[name].append((time.perf_counter() - started) * 1000)
        log(f"  pass {number + 1}/{passes}: " + ", ".join(f"{n} {np.median(s):.1f}" for n, s in samples.items()))
    return samples


def first_pass(call: Call, count: int) -> list[float]:
    samples = []
    for i in range(count):
        started = time.perf_counter()
        call(i)
        samples.append((time.perf_counter() - started) * 1000)
    return samples


class Lance:
    """One LanceDB table of the chunks: text (native full-text index), vector, source."""

    def __init__(self, folder: Path) -> None:
        import lancedb

        self.db = lancedb.connect(str(folder))
        self.table = None

    def load(self, ids: list[str], texts: list[str], sources: list[str], vectors: np.ndarray) -> None:
        import pyarrow as pa

        data = pa.table(
            {
                "chunk_id": ids,
                "text": texts,
                "source": sources,
                "vector": pa.FixedSizeListArray.from_arrays(
                    pa.array(vectors.astype(np.float32).ravel()), vectors.shape[1]
                ),
            }
        )
        self.table = self.db.create_table("chunks", data, mode="overwrite")
        self.table.create_fts_index("text", replace=True)
        self.table.create_scalar_index("source")

    def hybrid(self, text: str, vector: np.ndarray, source: str) -> list[str]:
        from lancedb.rerankers import RRFReranker

        query = (
            self.table.search(query_type="hybrid")
            .vector(vector)
            .text(text)
            .distance_type("cosine")
            .where(f"source = '{source}'", prefilter=True)
            .select(["chunk_id"])
            .limit(CANDIDATES)
            .rerank(RRFReranker(K=60))
        )
        return query.to_arrow()["chunk_id"].to_pylist()[:LIMIT]

    def fts(self, text: str, source: str) -> list[str]:
        query = (
            self.table.search(text, query_type="fts")
            .where(f"source = '{source}'", prefilter=True)
            .select(["chunk_id", "_score"])
            .limit(CANDIDATES)
        )
        return query.to_arrow()["chunk_id"].to_pylist()


def chroma_collection(folder: Path, ids: list[str], sources: list[str], vectors: np.ndarray) -> Any:
    import chromadb

    client = chromadb.PersistentClient(path=str(folder))
    collection = client.create_collection("chunks", metadata={"hnsw:space": "cosine"})
    for start in range(0, len(ids), 4000):
        end = start + 4000
        collection.add(
            ids=ids[start:end],
            embeddings=vectors[start:end],
            metadatas=[{"source": source} for source in sources[start:end]],
        )
    return collection


def sqlite_systems(
    store: Store, settings_work: Path, queries: list[Any], vectors: np.ndarray
) -> tuple[dict[str, Call], Callable[[], Store]]:
    """docsctl's rows on one SQLite store; and how to open a fresh store on the same file (cold figure)."""
    settings = bench_settings("sqlite", None, settings_work)
    embedder = embedder_for(settings, query_cache_size=0)
    searcher_given = Searcher(store, embedder_for(settings, query_cache_size=256))  # warm-up fills the cache
    before = type(store)(store.path)
    before.bm25_from_postings = False
    searcher, searcher_before = Searcher(store, embedder), Searcher(before, embedder)
    filters = [Filters(sources=(query.corpus,)) for query in queries]
    texts = [query.query for query in queries]
    ranked: dict[int, list] = {}
    pages: dict[int, dict] = {}

    def retrieval(i: int) -> None:
        depth = max(searcher.candidates, LIMIT * 4)  # what Searcher.search asks each retriever for at limit 10
        ranked[i] = searcher.rank(texts[i], "hybrid", depth, searcher.effective_filters(filters[i]))[:LIMIT]

    def highlights(i: int) -> None:
        pages[i] = store.page(texts[i], [hit.chunk.chunk_id for hit in ranked[i]])

    def best_section(i: int) -> None:
        for hit in ranked[i]:
            if (found := pages[i].get(hit.chunk.chunk_id)) is not None:
                relabel(found.chunk, found.highlights)

    systems = {
        "sqlite_hybrid": lambda i: searcher.search(texts[i], limit=LIMIT, filters=filters[i]),
        "sqlite_hybrid_fts5": lambda i: searcher_before.search(texts[i], limit=LIMIT, filters=filters[i]),
        "sqlite_hybrid_vector_given": lambda i: searcher_given.search(texts[i], limit=LIMIT, filters=filters[i]),
        "sqlite_embedding": lambda i: embedder.encode_query(texts[i]),
        "sqlite_bm25": lambda i: store.bm25(texts[i], CANDIDATES, filters[i], brief=True),
        "sqlite_bm25_fts5": lambda i: before.bm25(texts[i], CANDIDATES, filters[i], brief=True),
        "sqlite_knn": lambda i: store.knn(vectors[i], CANDIDATES, filters[i], brief=True),
        "sqlite_retrieval": retrieval,
        "sqlite_highlights": highlights,
        "sqlite_best_section": best_section,
    }
    return systems, lambda: type(store)(store.path)


class Exported:
    """The chunks as the peers get them: ids, texts, sources, and the vectors as one matrix."""

    def __init__(self) -> None:
        self.ids: list[str] = []
        self.texts: list[str] = []
        self.sources: list[str] = []
        self._vectors: list[np.ndarray] = []

    def add(self, chunks: list[Chunk]) -> None:
        self.ids += [chunk.chunk_id for chunk in chunks]
        self.texts += [chunk_text(chunk) for chunk in chunks]
        self.sources += [chunk.source for chunk in chunks]
        self._vectors.append(np.asarray([chunk.embedding for chunk in chunks], dtype=np.float32))

    def matrix(self) -> np.ndarray:
        return np.concatenate(self._vectors)


def peer_systems(work: Path, data: Exported, queries: list[Any], vectors: np.ndarray, chroma: bool) -> dict[str, Call]:
    ids, sources, matrix = data.ids, data.sources, data.matrix()
    texts, corpora = [query.query for query in queries], [query.corpus for query in queries]
    started = time.perf_counter()
    lance = Lance(work / "lancedb")
    lance.load(ids, data.texts, sources, matrix)
    log(f"  LanceDB loaded {len(ids):,} chunks and built its indexes in {time.perf_counter() - started:.1f} s")
    systems: dict[str, Call] = {
        "lancedb_hybrid": lambda i: lance.hybrid(texts[i], vectors[i], corpora[i]),
        "lancedb_fts": lambda i: lance.fts(texts[i], corpora[i]),
    }
    if chroma:
        started = time.perf_counter()
        collection = chroma_collection(work / "chroma", ids, sources, matrix)
        log(f"  ChromaDB loaded {len(ids):,} chunks in {time.perf_counter() - started:.1f} s")
        systems["chromadb"] = lambda i: collection.query(
            query_embeddings=[vectors[i]], n_results=LIMIT, where={"source": corpora[i]}, include=[]
        )
    per_corpus = {
        corpus: (matrix[rows], np.asarray(ids, dtype=object)[rows])
        for corpus in set(corpora)
        if len(rows := np.flatnonzero(np.asarray(sources) == corpus))
    }

    def exact(i: int) -> list[str]:
        corpus_matrix, corpus_ids = per_corpus[corpora[i]]
        scores = corpus_matrix @ vectors[i]
        best = np.argpartition(-scores, LIMIT - 1)[:LIMIT]
        return list(corpus_ids[best[np.argsort(-scores[best])]])

    systems["numpy"] = exact
    return systems


def figures_of(samples: dict[str, list[float]]) -> dict[str, Any]:
    return {
        name: {**distribution(values), "what": WHAT[name], "label": LABELS[name]} for name, values in samples.items()
    }


def ratios(rows: dict[str, Any]) -> list[dict[str, Any]]:
    out = []
    for ours, peer, target in RATIOS:
        if ours in rows and peer in rows:
            p95 = rows[ours]["p95"] / rows[peer]["p95"]
            entry = {
                "docsctl": ours,
                "peer": peer,
                "p50_ratio": round(rows[ours]["p50"] / rows[peer]["p50"], 2),
                "p95_ratio": round(p95, 2),
            }
            if target is not None:
                entry.update(target_p95_ratio=target, met=p95 <= target)
            out.append(entry)
    return out


def profile(systems: dict[str, Call], count: int, factor: int) -> None:
    """A pyinstrument profile of one pass of hybrid search (query embedded), not timed."""
    from pyinstrument import Profiler

    profiler = Profiler(interval=0.0005)
    profiler.start()
    for i in range(count):
        systems["sqlite_hybrid"](i)
    profiler.stop()
    out = RESULTS / f"peers_profile_sqlite_x{factor}.txt"
    out.write_text(profiler.output_text(unicode=True, color=False))
    log(f"  profile of one hybrid pass: {out}")


def run_factor(
    factor: int,
    base_store: Store,
    chunks: list[Chunk],
    queries: list[Any],
    vectors: np.ndarray,
    passes: int,
    opensearch: dict[str, Call],
    with_profile: bool = False,
) -> dict[str, Any]:
    work = Path(tempfile.mkdtemp(prefix=f"docsctl-bench-peers-x{factor}-"))
    try:
        data = Exported()
        if factor == 1:
            store = base_store
            data.add(chunks)
        else:
            store = open_store(bench_settings("sqlite", None, work))
            meta = base_store.index_meta()
            started = time.perf_counter()
            with store.writer(replace(meta, mapping_version=store.schema_version), rebuild=True) as writer:
                for batch in whole_documents(replicas(chunks, factor)):
                    writer.write(batch, whole_documents=True)
                    data.add(batch)
            log(f"x{factor}: SQLite wrote {len(data.ids):,} chunks in {time.perf_counter() - started:.1f} s")
        systems, fresh = sqlite_systems(store, work / "embedder", queries, vectors)
        peers = peer_systems(work, data, queries, vectors, chroma=factor == 1)
        cold_store = fresh()
        filters = [Filters(sources=(query.corpus,)) for query in queries]
        cold = first_pass(lambda i: cold_store.bm25(queries[i].query, CANDIDATES, filters[i], brief=True), len(queries))
        samples = in_turns({**systems, **(opensearch if factor == 1 else {}), **peers}, len(queries), passes)
        samples["sqlite_bm25_cold"] = cold
        if with_profile:
            profile(systems, len(queries), factor)
        rows = figures_of(samples)
        if factor != 1:
            store.drop()
        return {"factor": factor, "chunks": len(data.ids), "rows": rows, "ratios": ratios(rows)}
    finally:
        shutil.rmtree(work, ignore_errors=True)


def chart(results: dict[str, Any], path: Path) -> None:
    plt = pyplot()
    runs = results["runs"]
    fig, axes = plt.subplots(1, len(runs), figsize=(7.5 * len(runs), 6.5), squeeze=False)
    for axis, run in zip(axes[0], runs, strict=True):
        names = [name for name in LABELS if name in run["rows"]]
        y = np.arange(len(names))
        for offset, (p, color) in enumerate((("p50", "C0"), ("p95", "C1"))):
            axis.barh(y + (offset - 0.5) * 0.4, [run["rows"][n][p] for n in names], 0.4, color=color, label=p)
        axis.set_yticks(y, [LABELS[n] for n in names], fontsize=7)
        axis.invert_yaxis()
        axis.set_xlabel("ms per call")
        met = "; ".join(
            f"{r['docsctl'].removeprefix('sqlite_')}/{r['peer']} p95 {r['p95_ratio']} (<= {r['target_p95_ratio']})"
            for r in run["ratios"]
            if "target_p95_ratio" in r
        )
        axis.set_title(f"{run['chunks']:,} chunks (x{run['factor']})\n{met}", fontsize=8)
        axis.legend(fontsize=8)
    fig.suptitle("40 dev queries, filter = the query's corpus, one run (bench/peers.py)", fontsize=10)
    fig.tight_layout()
    fig.savefig(path, dpi=110)


def versions() -> dict[str, str]:
    from importlib.metadata import PackageNotFoundError, version

    found = {}
    for package in ("lancedb", "pylance", "chromadb", "numpy", "onnxruntime"):
        with suppress(PackageNotFoundError):
            found[package] = version(package)
    return found


def main() -> None:
    parser = bench_parser(__doc__, every=False)
    parser.add_argument("--passes", type=int, default=5, help="measured passes over the 40 queries")
    parser.add_argument("--factors", default="1,10", help="corpus sizes, as multiples of the dev corpora")
    parser.add_argument("--profile", action="store_true", help="save a pyinstrument profile of one hybrid pass")
    args = parser.parse_args()
    factors = [int(f) for f in args.factors.split(",")]
    results: dict[str, Any] = {
        "benchmark": "peers",
        "machine": machine(),
        "versions": versions(),
        "passes": args.passes,
        "runs": [],
    }
    with dev_corpora_index("sqlite", None) as (store, embedder, queries):
        chunks = list(store.iter_chunks(with_embedding=True))
        vectors = np.asarray([embedder.encode_query(query.query) for query in queries], dtype=np.float32)
        log(f"exported {len(chunks):,} chunks and {len(vectors)} query vectors")
        with dev_opensearch(args.opensearch_url, queries) as opensearch:
            for factor in factors:
                run = run_factor(factor, store, chunks, queries, vectors, args.passes, opensearch, args.profile)
                results["runs"].append(run)
                for entry in run["ratios"]:
                    log(f"x{factor}: {entry}")
    png = write_result(results, args.out)
    if png:
        chart(results, png)


@contextmanager
def dev_opensearch(url: str | None, queries: list[Any]) -> Iterator[dict[str, Call]]:
    """docsctl's OpenSearch hybrid row on the dev corpora (an index of its own, dropped on exit); no row
    without --opensearch-url."""
    if not url:
        yield {}
        return
    with dev_corpora_index("opensearch", url) as (store, _, _):
        log(f"  OpenSearch merges settled after {settle(store)} s")
        work = Path(tempfile.mkdtemp(prefix="docsctl-bench-peers-os-"))
        embedder = embedder_for(bench_settings("opensearch", url, work), query_cache_size=0)
        searcher = Searcher(store, embedder)
        texts = [query.query for query in queries]
        filters = [Filters(sources=(query.corpus,)) for query in queries]
        yield {"opensearch_hybrid": lambda i: searcher.search(texts[i], limit=LIMIT, filters=filters[i])}
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
