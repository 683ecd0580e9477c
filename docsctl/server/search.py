"""Search: store.bm25 + store.knn -> fusion -> one hit per document -> highlights."""

from __future__ import annotations

import time
from collections.abc import Iterable
from dataclasses import dataclass, field, replace
from typing import Any

from docsctl.embedding import Embedder
from docsctl.errors import ConfigError
from docsctl.models import Filters, Hit
from docsctl.server.fusion import reciprocal_rank_fusion
from docsctl.store.base import Store

MODES = ("hybrid", "bm25", "knn")
MAX_LIMIT = 50
MIN_CANDIDATES = 50
# Weights per retriever in reciprocal rank fusion (see bench/README.md for how they were chosen).
FUSION_WEIGHTS = {"bm25": 1.0, "knn": 1.0}


@dataclass
class SearchResult:
    query: str
    mode: str
    hits: list[Hit]
    total: int  # distinct documents (or chunks, when not collapsing) among the candidates
    took_ms: float
    filters: Filters = field(default_factory=Filters)

    def to_dict(self) -> dict[str, Any]:
        return {
            "query": self.query,
            "mode": self.mode,
            "total": self.total,
            "took_ms": round(self.took_ms, 1),
            "hits": [hit.to_dict() for hit in self.hits],
        }


def validate(mode: str, limit: int, offset: int) -> None:
    if mode not in MODES:
        raise ConfigError(f"mode must be one of {', '.join(MODES)}, not {mode!r}")
    if not 1 <= limit <= MAX_LIMIT:
        raise ConfigError(f"limit must be between 1 and {MAX_LIMIT}, not {limit}")
    if offset < 0:
        raise ConfigError(f"offset must be 0 or more, not {offset}")


def collapse_by_document(hits: Iterable[Hit]) -> list[Hit]:
    """Keep each document's best chunk (the first seen, since hits come best first)."""
    seen: set[str] = set()
    best = []
    for hit in hits:
        if hit.chunk.doc_id not in seen:
            seen.add(hit.chunk.doc_id)
            best.append(hit)
    return best


def fuse(bm25_hits: list[Hit], knn_hits: list[Hit], weights: dict[str, float] | None = None) -> list[Hit]:
    """Reciprocal rank fusion of two chunk lists; bm25 highlights are kept."""
    by_id = {hit.chunk.chunk_id: hit for hit in knn_hits}
    by_id.update({hit.chunk.chunk_id: hit for hit in bm25_hits})
    fused = reciprocal_rank_fusion(
        {
            "bm25": [hit.chunk.chunk_id for hit in bm25_hits],
            "knn": [hit.chunk.chunk_id for hit in knn_hits],
        },
        weights or FUSION_WEIGHTS,
    )
    return [replace(by_id[item.key], score=item.score, ranks=item.ranks) for item in fused]


class Searcher:
    """Runs searches on one store with one embedder, both loaded once."""

    def __init__(self, store: Store, embedder: Embedder, candidates: int = MIN_CANDIDATES) -> None:
        self.store = store
        self.embedder = embedder
        self.candidates = candidates

    def search(
        self,
        text: str,
        *,
        limit: int = 5,
        offset: int = 0,
        mode: str = "hybrid",
        filters: Filters | None = None,
        per_document: bool = True,
    ) -> SearchResult:
        validate(mode, limit, offset)
        filters = filters or Filters()
        started = time.perf_counter()
        # Documents have several chunks: ask for enough that collapsing still fills the page.
        depth = max(self.candidates, (offset + limit) * (4 if per_document else 1))
        bm25_hits = self._ranked("bm25", text, depth, filters) if mode in ("bm25", "hybrid") else []
        knn_hits = self._ranked("knn", text, depth, filters) if mode in ("knn", "hybrid") else []
        hits = fuse(bm25_hits, knn_hits) if mode == "hybrid" else bm25_hits or knn_hits
        if per_document:
            hits = collapse_by_document(hits)
        page = hits[offset : offset + limit]
        self._add_highlights(text, page)
        if not hits and filters.categories:
            self._check_categories(filters)
        return SearchResult(text, mode, page, len(hits), (time.perf_counter() - started) * 1000, filters)

    def _ranked(self, retriever: str, text: str, depth: int, filters: Filters) -> list[Hit]:
        if retriever == "bm25":
            hits = self.store.bm25(text, depth, filters)
        else:
            hits = self.store.knn(self.embedder.encode_query(text), depth, filters)
        return [replace(hit, ranks={retriever: rank}) for rank, hit in enumerate(hits, start=1)]

    def _add_highlights(self, text: str, hits: list[Hit]) -> None:
        missing = [hit.chunk.chunk_id for hit in hits if not hit.highlights]
        if not missing:
            return
        fragments = self.store.highlight(text, missing)
        for hit in hits:
            if not hit.highlights:
                hit.highlights = fragments.get(hit.chunk.chunk_id, [])

    def _check_categories(self, filters: Filters) -> None:
        known = sorted({category for info in self.store.list_sources() for category in info.categories})
        unknown = [category for category in filters.categories if category not in known]
        if unknown:
            raise ConfigError(f"unknown category {', '.join(unknown)}; categories in the index: {', '.join(known)}")
