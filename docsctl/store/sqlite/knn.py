"""k-NN: an exact dot product over the vectors a search's filters allow, kept in memory per index generation."""

from __future__ import annotations

import sqlite3
from dataclasses import dataclass
from functools import cache

import numpy as np
from threadpoolctl import ThreadpoolController

from docsctl.models import Chunk, Filters
from docsctl.store.doc_vectors import group_centroids
from docsctl.store.sqlite.filters import _codes, _filter_mask

# With a filter, the product is computed over the blocks of BLOCK_ROWS rows that hold allowed rows, not over
# all (k-NN at 66,400 chunks, one source of two: 7.5 -> 3.5 ms; bench/README.md, "Peers"). OpenBLAS's
# matrix-vector kernel takes rows in groups of 4 from the first, and the last len % 4 apart: a slice that
# starts on a multiple of 4 and ends on one, or at the matrix's end, gives every row the arithmetic it gets
# in the whole product, so the same scores to the last bit (tests/test_sqlite_store.py checks it); 64
# leaves room for kernels with wider groups.
BLOCK_ROWS = 64
# One more product costs about what this many rows of product do: more slices than that saves are not cut.
ROWS_PER_PRODUCT = 100


@cache
def _blas() -> ThreadpoolController:
    return ThreadpoolController()


def _cosines(matrix: np.ndarray, query: np.ndarray, mask: np.ndarray | None = None) -> np.ndarray:
    """matrix @ query on one BLAS thread; with a `mask`, read only the rows it allows (others may be 0).
    OpenBLAS's helper threads spin for a while after each product, on the core that a search's BM25
    thread and query embedding need: with one thread, in-process hybrid p95 fell from 32-44 to 22-33 ms
    (bench/README.md, session 5); the product takes 0.1 ms more at 6,640 rows."""
    slices = None if mask is None else _blocks(mask)
    with _blas().limit(limits=1, user_api="blas"):
        if slices is None:
            return matrix @ query
        cosines = np.zeros(len(matrix), dtype=np.float32)
        for start, end in slices:
            cosines[start:end] = matrix[start:end] @ query
        return cosines


def _blocks(mask: np.ndarray) -> list[tuple[int, int]] | None:
    """The row ranges to compute for `mask`: runs of whole BLOCK_ROWS blocks holding an allowed row (the last
    may end at the matrix's end); None when computing every row costs less."""
    padded = np.zeros(-(-len(mask) // BLOCK_ROWS) * BLOCK_ROWS, dtype=bool)
    padded[: len(mask)] = mask
    wanted = np.concatenate(([False], padded.reshape(-1, BLOCK_ROWS).any(axis=1), [False]))
    edges = np.flatnonzero(wanted[1:] != wanted[:-1]) * BLOCK_ROWS  # run starts and ends, alternating
    starts, ends = edges[0::2], np.minimum(edges[1::2], len(mask))
    skipped = len(mask) - int((ends - starts).sum())
    if skipped <= len(starts) * ROWS_PER_PRODUCT:
        return None
    return list(zip(starts.tolist(), ends.tolist(), strict=True))


def _top_rows(cosines: np.ndarray, mask: np.ndarray | None, k: int) -> list[tuple[int, float]]:
    """The k best rows allowed by `mask`, best first, each with its score reported like OpenSearch's
    cosinesimil space: (1 + cosine) / 2, in [0, 1]."""
    candidates = np.flatnonzero(mask) if mask is not None else np.arange(len(cosines))
    if not len(candidates):
        return []
    scores = cosines[candidates]
    top = min(k, len(candidates))
    best = np.argpartition(-scores, top - 1)[:top]
    best = best[np.argsort(-scores[best], kind="stable")]
    return [(int(candidates[i]), (1.0 + float(scores[i])) / 2.0) for i in best]


@dataclass
class _VectorCache:
    """Every vector of one index generation, with the filter fields as small integer codes, and the
    documents' centroids (docsctl.store.doc_vectors), computed on first use."""

    key: tuple[str, str]
    ids: np.ndarray  # chunk rowids, one per matrix row
    matrix: np.ndarray  # (n, dimension) float32, rows normalized
    codes: dict[str, np.ndarray]
    values: dict[str, dict[str, int]]
    doc_of_row: np.ndarray  # per matrix row: the position of its document in doc_ids
    doc_ids: list[str]
    # Per matrix row, what Chunk.brief needs besides the document: k-NN's brief hits come from here, not from
    # a query (reading 100 rows back was a third of k-NN's time at 6,640 chunks).
    chunk_ids: list[str]
    _documents: tuple[np.ndarray, dict[str, np.ndarray]] | None = None

    @classmethod
    def load(cls, conn: sqlite3.Connection, key: tuple[str, str], dimension: int) -> _VectorCache:
        rows = conn.execute(
            "SELECT v.chunk, v.vector, c.category, c.source, c.version, c.doc_id, c.chunk_id "
            "FROM vectors v JOIN chunks c ON c.id = v.chunk ORDER BY v.chunk"
        ).fetchall()
        ids = np.fromiter((row[0] for row in rows), dtype=np.int64, count=len(rows))
        blob = b"".join(row[1] for row in rows)
        matrix = np.frombuffer(blob, dtype="<f4").reshape(len(rows), dimension).astype(np.float32)
        codes: dict[str, np.ndarray] = {}
        values: dict[str, dict[str, int]] = {}
        for position, field in enumerate(("category", "source", "version", "doc_id"), start=2):
            codes[field], values[field] = _codes((row[position] for row in rows), len(rows))
        doc_of_row, doc_ids = codes.pop("doc_id"), list(values.pop("doc_id"))
        return cls(key, ids, matrix, codes, values, doc_of_row, doc_ids, [row[6] for row in rows])

    def brief(self, row: int) -> Chunk:
        """The Chunk.brief stand-in of one matrix row."""
        return Chunk.brief(self.chunk_ids[row], self.doc_ids[self.doc_of_row[row]])

    def documents(self) -> tuple[np.ndarray, dict[str, np.ndarray]]:
        """Centroid per document (rows in doc_ids order) and each document's filter codes."""
        if self._documents is None:
            centroids = group_centroids(self.doc_of_row, self.matrix, len(self.doc_ids))
            # The chunks of a document share its category, source and version: any one row tells them.
            some_row = np.zeros(len(self.doc_ids), dtype=np.int64)
            some_row[self.doc_of_row] = np.arange(len(self.doc_of_row))
            self._documents = centroids, {field: codes[some_row] for field, codes in self.codes.items()}
        return self._documents

    def mask(self, filters: Filters | None, codes: dict[str, np.ndarray] | None = None) -> np.ndarray | None:
        """Rows (chunks, or documents with their `codes`) that match the filters; None: all do."""
        return _filter_mask(filters, self.codes if codes is None else codes, self.values)
