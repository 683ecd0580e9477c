"""k-NN: an exact dot product over every vector, kept in memory per index generation."""

from __future__ import annotations

import json
import sqlite3
from dataclasses import dataclass
from functools import cache

import numpy as np
from threadpoolctl import ThreadpoolController

from docsctl.models import Chunk, Filters
from docsctl.store.doc_vectors import group_centroids
from docsctl.store.sqlite.filters import _filter_mask


@cache
def _blas() -> ThreadpoolController:
    return ThreadpoolController()


def _cosines(matrix: np.ndarray, query: np.ndarray) -> np.ndarray:
    """matrix @ query on one BLAS thread. OpenBLAS's helper threads spin for a while after each product, on
    the core that a search's BM25 thread and query embedding need: with one thread, in-process hybrid p95
    fell from 32-44 to 22-33 ms (bench/README.md, session 5); the product takes 0.1 ms more at 6,640 rows."""
    with _blas().limit(limits=1, user_api="blas"):
        return matrix @ query


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
    names: list[str]  # as stored: JSON, decoded for the hits only
    _documents: tuple[np.ndarray, dict[str, np.ndarray]] | None = None

    @classmethod
    def load(cls, conn: sqlite3.Connection, key: tuple[str, str], dimension: int) -> _VectorCache:
        rows = conn.execute(
            "SELECT v.chunk, v.vector, c.category, c.source, c.version, c.doc_id, c.chunk_id, c.names "
            "FROM vectors v JOIN chunks c ON c.id = v.chunk ORDER BY v.chunk"
        ).fetchall()
        ids = np.fromiter((row[0] for row in rows), dtype=np.int64, count=len(rows))
        blob = b"".join(row[1] for row in rows)
        matrix = np.frombuffer(blob, dtype="<f4").reshape(len(rows), dimension).astype(np.float32)
        codes: dict[str, np.ndarray] = {}
        values: dict[str, dict[str, int]] = {}
        for position, field in enumerate(("category", "source", "version", "doc_id"), start=2):
            table: dict[str, int] = {}
            codes[field] = np.fromiter(
                (table.setdefault(row[position], len(table)) for row in rows), dtype=np.int32, count=len(rows)
            )
            values[field] = table
        doc_of_row, doc_ids = codes.pop("doc_id"), list(values.pop("doc_id"))
        chunk_ids, names = [row[6] for row in rows], [row[7] for row in rows]
        return cls(key, ids, matrix, codes, values, doc_of_row, doc_ids, chunk_ids, names)

    def brief(self, row: int) -> Chunk:
        """The Chunk.brief stand-in of one matrix row."""
        return Chunk.brief(self.chunk_ids[row], self.doc_ids[self.doc_of_row[row]], json.loads(self.names[row]))

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
