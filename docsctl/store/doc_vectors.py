"""Document vectors: a document's centroid, the normalized mean of its chunks' vectors.

A chunk's vector says what one section is about; the centroid, what the whole page is about. Hybrid search
ranks the candidate documents of a question by it as well (docsctl.server.search; measured in
bench/README.md, "Document vectors"). Nothing is embedded for it: it is derived from the chunk vectors, by
both backends in the same way (SQLite when it loads its vectors, OpenSearch when a writer finishes).
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass

import numpy as np


def normalized(rows: np.ndarray) -> np.ndarray:
    """Rows scaled to unit length; all-zero rows stay zero."""
    norms = np.linalg.norm(rows, axis=-1, keepdims=True)
    return np.divide(rows, norms, out=np.zeros_like(rows), where=norms > 0)


def group_centroids(groups: np.ndarray, matrix: np.ndarray, count: int) -> np.ndarray:
    """Centroid of each group: row g is the normalized mean of the `matrix` rows whose `groups` entry is g."""
    sums = np.zeros((count, matrix.shape[1]), dtype=np.float64)
    np.add.at(sums, groups, matrix)
    return normalized(sums).astype(np.float32)


@dataclass
class _Sum:
    vector: np.ndarray
    first_index: int
    first_chunk_id: str


class CentroidAccumulator:
    """Centroids of documents whose chunks arrive one by one, in any order and across several batches.
    A vector of another dimension is left out: the store rejects its chunk, and reports it."""

    def __init__(self, dimension: int) -> None:
        self.dimension = dimension
        self._sums: dict[str, _Sum] = {}

    def __len__(self) -> int:
        return len(self._sums)

    def add(self, doc_id: str, chunk_id: str, chunk_index: int, vector: Sequence[float] | np.ndarray) -> None:
        row = np.asarray(vector, dtype=np.float32)
        if row.shape != (self.dimension,):
            return
        found = self._sums.get(doc_id)
        if found is None:
            self._sums[doc_id] = _Sum(row.copy(), chunk_index, chunk_id)
            return
        found.vector += row
        if chunk_index < found.first_index:
            found.first_index, found.first_chunk_id = chunk_index, chunk_id

    def drain(self) -> Iterator[tuple[str, str, list[float]]]:
        """(doc_id, id of the document's first chunk, centroid) for every document seen; then forgets them."""
        sums, self._sums = self._sums, {}
        for doc_id, found in sums.items():
            yield doc_id, found.first_chunk_id, normalized(found.vector).astype(np.float32).tolist()
