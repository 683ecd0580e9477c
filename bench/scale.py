"""Scale: the corpora's chunks replicated 10x and 100x, written through the store writer, per size.

    python bench/scale.py [--opensearch-url URL] [--factors 1,10,100] [--sqlite-factors 1,10]
                          [--passes N] [--keep] [--out FILE]

Indexes chimerax + holoviz once into a temporary SQLite file (vectors from the default embedding cache)
and reads the chunks back with their vectors. For each factor F, a new index receives F replicas of
every chunk: replica 0 is the original, replica r > 0 has distinct chunk and document ids, the word
`replica<r>` appended to its content, and the original vector plus Gaussian noise (sigma 0.01 per
dimension), renormalized; nothing is re-embedded. Measured per size, in the same run:
  - indexing rate: chunks / s of writer.write (batches of whole documents, as the indexing pipeline
    writes them), and of the whole build (write + the backend's finish: on OpenSearch restoring
    refresh and replicas, a refresh and a count check; on SQLite the swap-in);
  - size on disk: store.describe()["size_bytes"] once the merges the bulk load started have finished
    (the seconds waited are recorded) and after a flush (no force-merge: segments are left as a live
    index would have them; their count is recorded);
  - query latency over the 40 dev queries, --passes passes after a warm-up pass: hybrid Searcher.search
    with query vectors cached after the warm-up (the store's share; the embedding cost does not grow with
    the index, see bench/latency.py), and store.knn / store.bm25 alone (50 candidates).
Progress goes to stderr; the JSON is rewritten after every size, so a run stopped early keeps what
completed. Prints JSON (and writes it to --out, with a PNG chart of the curves beside it).
"""

from __future__ import annotations

import argparse
import json
import shutil
import tempfile
import time
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np
from common import bench_settings, corpus_targets, dev_queries, distribution, log, machine, pyplot, timed_passes

from docsctl.config import Settings
from docsctl.embedding import Embedder, EmbeddingCache, embedder_for
from docsctl.indexer.pipeline import reindex
from docsctl.models import Chunk, IndexMeta
from docsctl.server.search import Searcher
from docsctl.store import open_store
from docsctl.store.base import WriteReport

NOISE_SIGMA = 0.01
PROGRESS_EVERY = 50_000
CANDIDATES = 50
WRITE_BATCH = 512  # chunks per write, as docsctl.indexer.pipeline.EMBED_BATCH
MERGE_WAIT_SECONDS = 900


def base_chunks(work: Path, embedder: Embedder) -> tuple[list[Chunk], IndexMeta]:
    settings = bench_settings("sqlite", None, work / "base")
    store = open_store(settings)
    cache = EmbeddingCache(settings.embedding_cache_path, settings.model)
    try:
        reindex(store, embedder, corpus_targets(work), lock_path=settings.lock_path, cache=cache)
    finally:
        cache.close()
    meta = store.index_meta()
    chunks = list(store.iter_chunks(with_embedding=True))
    store.drop()
    return chunks, meta


def replicas(chunks: list[Chunk], factor: int, seed: int = 0) -> Iterator[Chunk]:
    """`factor` copies of every chunk; copies past the first perturbed in ids, text and vector."""
    rng = np.random.default_rng(seed)
    vectors = np.asarray([chunk.embedding for chunk in chunks], dtype=np.float32)
    done, started = 0, time.perf_counter()
    for r in range(factor):
        if r == 0:
            batch = vectors
        else:
            batch = vectors + rng.normal(0.0, NOISE_SIGMA, vectors.shape).astype(np.float32)
            batch /= np.linalg.norm(batch, axis=1, keepdims=True)
        for chunk, vector in zip(chunks, batch, strict=True):
            if r == 0:
                yield chunk
            else:
                yield replace(
                    chunk,
                    chunk_id=f"{chunk.chunk_id}-r{r}",
                    doc_id=f"{chunk.doc_id}#r{r}",
                    content=f"{chunk.content} replica{r}",
                    embedding=vector.tolist(),
                )
            done += 1
            if done % PROGRESS_EVERY == 0:
                rate = done / (time.perf_counter() - started)
                log(f"  {done:,} / {factor * len(chunks):,} chunks written ({rate:,.0f} chunks/s)")


def whole_documents(chunks: Iterator[Chunk], size: int = WRITE_BATCH) -> Iterator[list[Chunk]]:
    """Batches of about `size` chunks that never split a document, as the indexing pipeline writes them."""
    batch: list[Chunk] = []
    for chunk in chunks:
        if len(batch) >= size and chunk.doc_id != batch[-1].doc_id:
            yield batch
            batch = []
        batch.append(chunk)
    if batch:
        yield batch


def segments(store: Any) -> int | None:
    client = getattr(store, "client", None)
    if client is None:
        return None
    index = store.describe()["index"]
    client.indices.flush(index=index)
    stats = client.indices.stats(index=index, metric="segments")
    return int(stats["indices"][index]["primaries"]["segments"]["count"])


def settle(store: Any, timeout: float = MERGE_WAIT_SECONDS) -> float | None:
    """Wait until the node has no merge running on the new index (a bulk load leaves some behind, and they
    take the cores queries would use); returns the seconds waited. A settled index is what serves."""
    client = getattr(store, "client", None)
    if client is None:
        return None
    index = store.describe()["index"]
    started = time.perf_counter()
    while time.perf_counter() - started < timeout:
        stats = client.indices.stats(index=index, metric="merge")
        if not stats["indices"][index]["primaries"]["merges"]["current"]:
            break
        time.sleep(2)
    return round(time.perf_counter() - started, 1)


def measure(
    settings: Settings, chunks: list[Chunk], meta: IndexMeta, factor: int, passes: int, keep: bool = False
) -> dict[str, Any]:
    store = open_store(settings)
    meta = replace(meta, mapping_version=store.schema_version)  # `meta` was read from the SQLite base index
    started = time.perf_counter()
    with store.writer(meta, rebuild=True) as writer:
        report = WriteReport()
        for batch in whole_documents(replicas(chunks, factor)):
            report.add(writer.write(batch, whole_documents=True))
        write_seconds = time.perf_counter() - started
    build_seconds = time.perf_counter() - started
    if report.failed:
        raise RuntimeError(f"{len(report.failed)} chunks failed, first: {report.failed[0]}")
    merges_waited = settle(store)
    segment_count = segments(store)
    size = store.describe()["size_bytes"]
    log(f"{settings.backend_name} x{factor}: {report.written:,} chunks, {build_seconds:.1f} s, {size / 2**20:.0f} MiB")
    queries = dev_queries()
    embedder = embedder_for(settings)
    searcher = Searcher(store, embedder)
    hybrid = timed_passes(lambda text: searcher.search(text, limit=5), queries, passes)
    vectors = {text: embedder.encode_query(text) for text in queries}
    knn = timed_passes(lambda text: store.knn(vectors[text], CANDIDATES), queries, passes)
    bm25 = timed_passes(lambda text: store.bm25(text, CANDIDATES), queries, passes)
    figures = {
        "factor": factor,
        "chunks": report.written,
        "write_seconds": round(write_seconds, 1),
        "build_seconds": round(build_seconds, 1),
        "write_chunks_per_s": round(report.written / write_seconds, 1),
        "build_chunks_per_s": round(report.written / build_seconds, 1),
        "size_bytes": size,
        "size_mib": round(size / 2**20, 1),
        "bytes_per_chunk": round(size / report.written),
        "segments": segment_count,
        "merges_waited_seconds": merges_waited,
        "hybrid_query_vectors_cached_ms": distribution(hybrid),
        "knn_ms": distribution(knn),
        "bm25_ms": distribution(bm25),
    }
    log(f"  hybrid {figures['hybrid_query_vectors_cached_ms']}")
    if keep and settings.backend_name == "opensearch":
        log(f"  kept: index alias {settings.index_alias!r}")
    else:
        store.drop()
    return figures


def chart(results: dict, path: Path) -> None:
    plt = pyplot()
    fig, (rate, size, latency) = plt.subplots(1, 3, figsize=(14, 4.2))
    retrievers = (
        ("hybrid_query_vectors_cached_ms", "hybrid", "C0"),
        ("knn_ms", "knn", "C1"),
        ("bm25_ms", "bm25", "C2"),
    )
    for backend, style in (("opensearch", "-"), ("sqlite", "--")):
        runs = results["backends"].get(backend) or []
        if not runs:
            continue
        x = [run["chunks"] for run in runs]
        rate.plot(x, [run["build_chunks_per_s"] for run in runs], "o" + style, label=backend)
        size.plot(x, [run["size_mib"] for run in runs], "o" + style, label=backend)
        for key, label, color in retrievers:
            latency.plot(x, [run[key]["p95"] for run in runs], "o" + style, color=color, label=f"{backend} {label}")
    for axis, title, unit in (
        (rate, "indexing rate (whole build)", "chunks / s"),
        (size, "size on disk", "MiB"),
        (latency, "query latency p95 (40 dev queries)", "ms"),
    ):
        axis.set_xscale("log")
        axis.set_xlabel("chunks in the index")
        axis.set_ylabel(unit)
        axis.set_title(title, fontsize=10)
        axis.legend(fontsize=6)
    size.set_yscale("log")
    fig.tight_layout()
    fig.savefig(path, dpi=110)


def save(results: dict, out: Path | None) -> None:
    if out:
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_text(json.dumps(results, indent=2) + "\n")
        chart(results, out.with_suffix(".png"))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--opensearch-url", default=None)
    parser.add_argument("--factors", default="1,10,100", help="replication factors on OpenSearch")
    parser.add_argument("--sqlite-factors", default="1,10", help="replication factors on SQLite")
    parser.add_argument("--passes", type=int, default=3)
    parser.add_argument("--out", type=Path, default=None)
    parser.add_argument("--keep", action="store_true", help="keep the OpenSearch indices (for experiments on them)")
    args = parser.parse_args()
    plan = [("sqlite", int(f)) for f in args.sqlite_factors.split(",") if f]
    if args.opensearch_url:
        plan += [("opensearch", int(f)) for f in args.factors.split(",") if f]
    work = Path(tempfile.mkdtemp(prefix="docsctl-bench-scale-"))
    results: dict[str, Any] = {
        "benchmark": "scale",
        "machine": machine(),
        "noise_sigma": NOISE_SIGMA,
        "backends": {"sqlite": [], "opensearch": []},
    }
    try:
        embedder = Embedder()
        chunks, meta = base_chunks(work, embedder)
        results["base_chunks"] = len(chunks)
        log(f"{len(chunks):,} base chunks; plan {plan}")
        for backend, factor in plan:
            settings = bench_settings(backend, args.opensearch_url, work / f"{backend}-{factor}")
            results["backends"][backend].append(measure(settings, chunks, meta, factor, args.passes, args.keep))
            save(results, args.out)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    print(json.dumps(results, indent=2))


if __name__ == "__main__":
    main()
