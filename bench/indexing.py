"""Indexing throughput end to end against the model's own limit, measured in the same run, per backend.

    python bench/indexing.py [--backend sqlite|opensearch|both] [--opensearch-url URL] [--every N]
                             [--profile] [--out FILE]

For each backend: a fresh, empty embedding cache (so the model really runs), the model loaded before
the clock starts, then
  1. end to end: reindex() of a fixed sample of both corpora (every 6th file of each by path, about
     1,100 chunks: the model runs at 10-15 chunks/s on this noisy box; --every 1 for all) into a new
     index: documents/s, chunks/s, and the time split into extract, chunk (producer thread, overlapping
     the rest), embed and write (main thread);
  2. the limit: the same model encoding the embed_text() of the very chunks that run stored (read back
     with store.iter_chunks()) in one bare Embedder.encode call;
  3. efficiency = end-to-end chunks/s / raw chunks/s (target >= 0.70); and cpu_efficiency, the same
     ratio in CPU seconds of this process per chunk, which other jobs on a shared machine disturb less.
--profile then runs it once more under pyinstrument (not timed: the profiler slows the Python-heavy parts)
and saves the profile under bench/results/indexing_profile_<backend>.txt/.html.
Prints JSON (and writes it to --out, with a PNG chart beside it).
"""

from __future__ import annotations

import os
import shutil
import tempfile
import time
from pathlib import Path

from common import (
    RESULTS,
    backends_of,
    bench_parser,
    bench_settings,
    corpus_label,
    corpus_targets,
    log,
    machine,
    pyplot,
    write_result,
)

from docsctl.embedding import BATCH_SIZE, Embedder, EmbeddingCache
from docsctl.indexer import pipeline
from docsctl.store import open_store

TARGET = 0.70


def profile_run(backend: str, url: str | None, embedder: Embedder, every: int) -> None:
    from pyinstrument import Profiler

    work = Path(tempfile.mkdtemp(prefix=f"docsctl-bench-profile-{backend}-"))
    settings = bench_settings(backend, url, work, cache_dir=work / "cache")
    store = open_store(settings)
    cache = EmbeddingCache(settings.embedding_cache_path, settings.model)
    profiler = Profiler(interval=0.01)
    try:
        targets = corpus_targets(work, every)
        profiler.start()
        pipeline.reindex(store, embedder, targets, lock_path=settings.lock_path, cache=cache)
        profiler.stop()
        stem = RESULTS / f"indexing_profile_{backend}"
        stem.with_suffix(".txt").write_text(profiler.output_text(unicode=True, color=False))
        stem.with_suffix(".html").write_text(profiler.output_html())
    finally:
        cache.close()
        store.drop()
        shutil.rmtree(work, ignore_errors=True)


def run_backend(backend: str, url: str | None, embedder: Embedder, every: int) -> dict:
    work = Path(tempfile.mkdtemp(prefix=f"docsctl-bench-indexing-{backend}-"))
    settings = bench_settings(backend, url, work, cache_dir=work / "cache")
    store = open_store(settings)
    cache = EmbeddingCache(settings.embedding_cache_path, settings.model)  # fresh: every chunk is embedded
    try:
        targets = corpus_targets(work, every)
        cpu_started = time.process_time()
        summary = pipeline.reindex(store, embedder, targets, lock_path=settings.lock_path, cache=cache)
        e2e_cpu = time.process_time() - cpu_started
        log(f"{backend}: end to end {summary.chunks_written} chunks in {summary.seconds:.1f} s")
        texts = [chunk.embed_text() for chunk in store.iter_chunks(with_embedding=False)]
        started, cpu_started = time.perf_counter(), time.process_time()
        embedder.encode(texts)
        raw_seconds, raw_cpu = time.perf_counter() - started, time.process_time() - cpu_started
        log(f"{backend}: raw encode of {len(texts)} texts in {raw_seconds:.1f} s")
        chunks, documents = summary.chunks_written, summary.indexed
        e2e_rate = chunks / summary.seconds
        raw_rate = len(texts) / raw_seconds
        return {
            "documents": documents,
            "chunks": chunks,
            "chunks_embedded": summary.chunks_embedded,
            "skipped": len(summary.skipped),
            "end_to_end": {
                "seconds": round(summary.seconds, 2),
                "documents_per_s": round(documents / summary.seconds, 2),
                "chunks_per_s": round(e2e_rate, 2),
                "timings_s": {phase: round(seconds, 2) for phase, seconds in summary.timings.items()},
                "cpu_seconds": round(e2e_cpu, 2),
            },
            "raw_model": {
                "texts": len(texts),
                "seconds": round(raw_seconds, 2),
                "chunks_per_s": round(raw_rate, 2),
                "cpu_seconds": round(raw_cpu, 2),
            },
            "efficiency": round(e2e_rate / raw_rate, 3),
            # CPU seconds per chunk, raw / end to end, of this process only (an OpenSearch node's work is
            # not in it): less sensitive than wall time to other jobs on a shared machine.
            "cpu_efficiency": round((raw_cpu / len(texts)) / (e2e_cpu / chunks), 3),
            "target_met": e2e_rate / raw_rate >= TARGET,
            "load_average_after": [round(x, 2) for x in os.getloadavg()],
        }
    finally:
        cache.close()
        store.drop()
        shutil.rmtree(work, ignore_errors=True)


def chart(results: dict, path: Path) -> None:
    plt = pyplot()
    backends = [name for name in ("sqlite", "opensearch") if name in results["backends"]]
    fig, (left, right) = plt.subplots(1, 2, figsize=(11, 4.2))
    for i, backend in enumerate(backends):
        figures = results["backends"][backend]
        left.bar(i - 0.2, figures["end_to_end"]["chunks_per_s"], 0.4, color="tab:blue")
        left.bar(i + 0.2, figures["raw_model"]["chunks_per_s"], 0.4, color="tab:gray")
        left.text(i - 0.2, figures["end_to_end"]["chunks_per_s"], f"{figures['efficiency']:.0%}", ha="center")
        bottom = 0.0
        for phase, color in zip(("extract", "chunk", "embed", "write"), ("C1", "C2", "C0", "C3"), strict=True):
            seconds = figures["end_to_end"]["timings_s"][phase]
            right.bar(i, seconds, 0.5, bottom=bottom, color=color, label=phase if i == 0 else None)
            bottom += seconds
        right.plot([i - 0.3, i + 0.3], [figures["end_to_end"]["seconds"]] * 2, "k-", label="wall" if i == 0 else None)
    for axis in (left, right):
        axis.set_xticks(range(len(backends)), backends)
    left.set_ylabel("chunks / s")
    left.set_title("end to end (blue) vs raw model (gray)")
    right.set_ylabel("seconds")
    right.set_title("time per phase (extract+chunk overlap embed+write)")
    right.legend(fontsize=8)
    fig.suptitle(f"Indexing, {results['corpus']}", fontsize=10)
    fig.tight_layout()
    fig.savefig(path, dpi=110)


def main() -> None:
    parser = bench_parser(__doc__, every=True)
    parser.add_argument("--profile", action="store_true", help="also save a pyinstrument profile of a run")
    args = parser.parse_args()
    backends = backends_of(args)
    embedder = Embedder()
    embedder.encode(["load the model before the clock starts"])
    import torch

    results: dict = {
        "benchmark": "indexing",
        "machine": machine(),
        "corpus": corpus_label(args.every),
        "embed_batch": pipeline.EMBED_BATCH,
        "encode_batch_size": BATCH_SIZE,
        "torch_threads": torch.get_num_threads(),
        "backends": {},
    }
    for backend in backends:
        results["backends"][backend] = run_backend(backend, args.opensearch_url, embedder, args.every)
        if args.profile:
            profile_run(backend, args.opensearch_url, embedder, args.every)
    png = write_result(results, args.out)
    if png:
        chart(results, png)


if __name__ == "__main__":
    main()
