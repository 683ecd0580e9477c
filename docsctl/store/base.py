"""The Store protocol: what every backend promises. Backends match it structurally.

Contract (checked by tests/test_contract.py against every backend):
- Scores compare only within one call; higher is better; hits come best first.
- Filters apply inside the query: `k` hits that match the filters come back whenever that many exist.
- `bm25` never parses user text as query syntax: quotes, colons, brackets, AND/OR are plain text.
- Reads go to the live index only; a writer opened with `rebuild=True` builds beside it and becomes
  live atomically when its block exits cleanly. If the block raises, the live index is untouched and
  the partial one is removed.
- Every read on a store with no index raises IndexMissingError.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Iterator
from contextlib import AbstractContextManager
from dataclasses import dataclass, field
from typing import Any, Protocol

from docsctl.models import Chunk, Filters, Hit, IndexMeta, SourceInfo, Vector

# Chunks of one version of a source ((source, version); version "" is an unversioned source), or of
# every version of it ((source, None)): what a rebuild replaces rather than copies.
SourceVersion = tuple[str, str | None]
# The fields a search can be narrowed by, as Store.facet_counts names them.
FACETS = ("source", "version", "category")


def is_replaced(replaced: Collection[SourceVersion], source: str, version: str) -> bool:
    """Whether a chunk of `source` at `version` is among `replaced`."""
    return (source, version) in replaced or (source, None) in replaced


@dataclass
class WriteReport:
    """The outcome of a write: how many chunks were stored and which failed, with reasons."""

    written: int = 0
    failed: list[tuple[str, str]] = field(default_factory=list)  # (chunk_id, reason)

    def add(self, other: WriteReport) -> None:
        self.written += other.written
        self.failed.extend(other.failed)


class StoreWriter(Protocol):
    """Changes to one index, live (incremental) or beside the live one (rebuild)."""

    def write(self, chunks: Iterable[Chunk], *, whole_documents: bool = False) -> WriteReport:
        """Store chunks (with embeddings), replacing any with the same chunk_id. `whole_documents`: every
        document with a chunk here has all its chunks here, so its vector (knn_documents) can be derived
        now; otherwise the writer derives it from everything written when its block exits."""
        ...

    def delete_documents(self, doc_ids: Iterable[str], keep_hash: str | None = None) -> int:
        """Remove the chunks of these documents; with keep_hash, keep chunks of that document version.
        Returns how many chunks were removed."""
        ...

    def copy_sources(self, exclude: Collection[SourceVersion]) -> int:
        """In a rebuild: copy from the live index every chunk whose source and version are not in
        `exclude` (other versions of a source being rebuilt are kept), vectors included, and the states
        of the sources not wholly excluded. A no-op (returning 0) when there is no live index or when not
        rebuilding."""
        ...

    def record_source(self, source: str, state: dict[str, Any]) -> None:
        """Remember per-source state (origin, commit, last indexed, summary) with the index."""
        ...


class Store(Protocol):
    """What every backend promises. Scores compare only within one call."""

    backend: str  # "sqlite" | "opensearch"
    schema_version: int  # bumped when the index layout changes; a mismatch forces a rebuild

    def index_meta(self) -> IndexMeta | None:
        """How the live index was built, or None when there is no index yet. Never raises for a
        missing index; raises StoreError when the backend cannot be reached or read."""
        ...

    def writer(self, meta: IndexMeta, *, rebuild: bool) -> AbstractContextManager[StoreWriter]:
        """Open a writer. rebuild=True (or no live index) builds a new index and swaps it in on exit."""
        ...

    def bm25(self, text: str, k: int, filters: Filters | None = None, *, brief: bool = False) -> list[Hit]:
        """The k chunks that best match the words of `text`. With `brief`, a backend may return stand-ins
        (Chunk.brief: id and document, what fusion needs), leaving the rest to `page`."""
        ...

    def knn(self, vector: Vector, k: int, filters: Filters | None = None, *, brief: bool = False) -> list[Hit]:
        """The k chunks whose vectors are nearest `vector`; `brief` as for bm25."""
        ...

    def knn_documents(self, vector: Vector, k: int, filters: Filters | None = None) -> list[tuple[str, float]]:
        """The k documents whose centroid (docsctl.store.doc_vectors: the normalized mean of their chunks'
        vectors) is most similar to `vector`, best first, as (doc_id, score); scores as knn's."""
        ...

    def page(self, text: str, chunk_ids: list[str]) -> dict[str, Hit]:
        """The chunks shown for a search, by id: each whole, with fragments of its content around the
        terms of `text`, matches wrapped in <em>…</em> (score 0). A chunk with no matching term gets its
        opening words, so every hit has something to show. Unknown ids are left out."""
        ...

    def lookup(self, name: str, sources: Iterable[str] = ()) -> list[Chunk]:
        """All chunks, in document order, of the documents that document `name` (case-insensitive)."""
        ...

    def get_chunk(self, chunk_id: str) -> Chunk:
        """One chunk, or NotFoundError."""
        ...

    def get_document(self, path: str, source: str | None = None, version: str | None = None) -> list[Chunk]:
        """All chunks of one document in order, or NotFoundError (also when `path` is ambiguous
        across sources and `source` is not given)."""
        ...

    def doc_hashes(self, source: str, version: str = "") -> dict[str, str]:
        """path -> content hash of every document indexed for this source and version."""
        ...

    def list_sources(self) -> list[SourceInfo]: ...

    def source_states(self) -> dict[str, dict[str, Any]]:
        """What record_source stored, per source."""
        ...

    def category_counts(self) -> list[dict[str, Any]]:
        """Documents and chunks per source and category: one {"source", "category", "documents", "chunks"}
        per pair, sorted by source then category."""
        ...

    def facet_counts(self, filters: Filters | None = None) -> dict[str, dict[str, int]]:
        """Documents per value of each facet among the chunks matching `filters` (version pins included):
        {"source": {...}, "version": {...}, "category": {...}}, each value with at least one document,
        largest first then by value. A document counts once per value its chunks carry."""
        ...

    def explain_bm25(self, text: str, chunk_id: str) -> dict[str, Any]:
        """How bm25(text) scores one chunk: {"chunk_id", "score" (what bm25 gives it; 0 when nothing
        matches), "matched", "fields": {field: [matched terms]}}. Fields carry OpenSearch's names (title,
        section, breadcrumb, content, their `.code` twins, path.text, name); terms are as the backend
        sees them (analyzed, or as written). NotFoundError for an unknown chunk id."""
        ...

    def iter_chunks(self, with_embedding: bool = True) -> Iterator[Chunk]:
        """Every chunk of the live index (for export and copying between backends)."""
        ...

    def describe(self) -> dict[str, Any]:
        """Where the index lives: backend, location (file or URL), physical index, size on disk in bytes.
        Raises StoreError when the backend cannot be reached; never IndexMissingError (index is None)."""
        ...

    def drop(self) -> None:
        """Delete the index and everything the store created."""
        ...
