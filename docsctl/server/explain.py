"""The operator's view of an index: what it holds (`index_stats`) and why a document ranks where it
does for a query (`explain`).

`explain` runs what `docsctl query` runs, through the same Searcher: the store's bm25 and knn at the
searcher's candidate depth (and, for a question, the document ranking), fused as hybrid search fuses
them (same weights, same default version pins), so the fused rank it reports is the rank the document
gets on a first page of results. It also runs both retrievers deeper (`depth`, 200 by default) to
say where a document below the candidates stands, and asks the store which fields of the document's
best bm25 chunk matched.
A document missing from a list is reported with rank None ("not in top N").
"""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any

from docsctl.errors import IndexMissingError
from docsctl.models import Chunk, Filters, Hit
from docsctl.server.search import Searcher, collapse_by_document, is_keyword_query
from docsctl.store.base import Store

DEFAULT_DEPTH = 200
RETRIEVERS = ("bm25", "knn")
# The order fields are shown in: prose fields, their code twins, then path and documented names.
FIELD_ORDER = (
    "title", "section", "breadcrumb", "content",
    "title.code", "section.code", "breadcrumb.code", "content.code", "name",
)  # fmt: skip


# -- stats ------------------------------------------------------------------------------------------


def human_size(size: int) -> str:
    """Bytes as people read them: 512 B, 3.4 MB."""
    value = float(size)
    for unit in ("B", "KB", "MB", "GB"):
        if value < 1024 or unit == "GB":
            return f"{value:.0f} {unit}" if unit == "B" else f"{value:.1f} {unit}"
        value /= 1024
    return f"{size} B"


def last_reindex(state: dict[str, Any]) -> dict[str, Any] | None:
    """A source's last reindex from its recorded state: when, from where, and the files seen and skipped
    by that run (the versions indexed at that time), plus every version as recorded."""
    if not state:
        return None
    versions = {version: _shown(entry) for version, entry in (state.get("versions") or {}).items()}
    last = state.get("last_indexed")
    run = [entry for entry in versions.values() if entry.get("last_indexed") == last]
    return {
        "last_indexed": last,
        "origin": state.get("origin"),
        "commit": state.get("commit"),
        "files": sum(int(entry.get("files") or 0) for entry in run),
        "skipped": sum(int(entry.get("skipped") or 0) for entry in run),
        "versions": versions,
    }


def _shown(entry: dict[str, Any]) -> dict[str, Any]:
    """A version's recorded state as stats show it: a crawled site's per-URL state as a count of pages."""
    shown = {key: value for key, value in entry.items() if key != "pages"}
    if isinstance(entry.get("pages"), dict):
        shown["crawled_pages"] = sum(1 for page in entry["pages"].values() if "redirect" not in page)
    return shown


def index_stats(store: Store) -> dict[str, Any]:
    """What the index holds and how it was built: documents and chunks per source and category, size on
    disk, mapping version, model and dimension, and each source's last reindex. IndexMissingError
    when there is no index."""
    meta = store.index_meta()
    if meta is None:
        store.list_sources()  # raises the backend's IndexMissingError, with its advice
        raise IndexMissingError("there is no index yet: run docsctl reindex PATH")
    where = store.describe()
    infos = store.list_sources()
    counts = store.category_counts()
    states = store.source_states()
    sources = [
        {
            "source": info.source,
            "documents": info.documents,
            "chunks": info.chunks,
            "categories": [
                {key: row[key] for key in ("category", "documents", "chunks")}
                for row in counts
                if row["source"] == info.source
            ],
            "versions": info.versions,
            "last_reindex": last_reindex(states.get(info.source, {})),
        }
        for info in infos
    ]
    return {
        "backend": where["backend"],
        "location": where["location"],
        "index": where.get("index"),
        "size_bytes": int(where.get("size_bytes") or 0),
        "mapping_version": meta.mapping_version,
        "model": meta.model,
        "dimension": meta.dimension,
        "documents": sum(info.documents for info in infos),
        "chunks": sum(info.chunks for info in infos),
        "sources": sources,
    }


# -- explain ----------------------------------------------------------------------------------------


def chunk_summary(chunk: Chunk | None) -> dict[str, Any] | None:
    if chunk is None:
        return None
    return {
        "chunk_id": chunk.chunk_id,
        "chunk_index": chunk.chunk_index,
        "section": chunk.section,
        "trail": list(chunk.trail()),
        "anchor": chunk.anchor,
    }


@dataclass
class RetrieverRank:
    """Where one retriever puts a document in a list `depth` chunks deep; None: not in that list."""

    retriever: str
    depth: int
    rank: int | None = None  # among documents, each at its best chunk (what fusion ranks)
    chunk_rank: int | None = None  # the best chunk's place among chunks
    score: float | None = None  # the best chunk's score in this retriever
    chunk: Chunk | None = None  # the document's best chunk here

    def to_dict(self) -> dict[str, Any]:
        return {
            "retriever": self.retriever,
            "depth": self.depth,
            "rank": self.rank,
            "chunk_rank": self.chunk_rank,
            "score": self.score,
            "chunk": chunk_summary(self.chunk),
        }


def rank_in(retriever: str, hits: list[Hit], doc_id: str, depth: int) -> RetrieverRank:
    """The document's rank, best chunk and score in one retriever's chunk list (best first)."""
    found = RetrieverRank(retriever, depth)
    for position, hit in enumerate(collapse_by_document(hits), start=1):
        if hit.chunk.doc_id == doc_id:
            found.rank, found.score, found.chunk = position, hit.score, hit.chunk
            found.chunk_rank = next(i for i, h in enumerate(hits, start=1) if h.chunk.chunk_id == hit.chunk.chunk_id)
            break
    return found


@dataclass
class Explanation:
    """Why one document ranks where it does for one query in hybrid search."""

    query: str
    doc_id: str
    source: str
    path: str
    title: str
    query_kind: str  # keyword | question: which fusion weights apply (see Ranking)
    method: str
    weights: dict[str, float]
    rrf_k: int
    candidates: int  # chunks per retriever that fusion sees
    rank: int | None  # in the fused, one-per-document results; None when in neither candidate list
    score: float | None
    fused_total: int  # documents among the fused results
    list_ranks: dict[str, int]  # the document's rank in each fused list (bm25, knn, and "document" if used)
    contributions: dict[str, float]  # rrf: weight / (k + rank) per list; they add up to `score`
    shown: Chunk | None  # the chunk a search shows for this document
    retrievers: dict[str, RetrieverRank] = field(default_factory=dict)  # the deep lists
    matched_chunk: Chunk | None = None
    matched: dict[str, Any] = field(default_factory=dict)  # store.explain_bm25 of matched_chunk

    def to_dict(self) -> dict[str, Any]:
        return {
            "query": self.query,
            "document": {"doc_id": self.doc_id, "source": self.source, "path": self.path, "title": self.title},
            "query_kind": self.query_kind,
            "fusion": {
                "method": self.method,
                "weights": self.weights,
                "rrf_k": self.rrf_k,
                "candidates": self.candidates,
            },
            "rank": self.rank,
            "score": self.score,
            "fused_total": self.fused_total,
            "list_ranks": self.list_ranks,
            "contributions": self.contributions,
            "shown": chunk_summary(self.shown),
            "retrievers": {name: view.to_dict() for name, view in self.retrievers.items()},
            "matched": {
                "chunk": chunk_summary(self.matched_chunk),
                "score": self.matched.get("score"),
                "fields": self.matched.get("fields", {}),
            },
        }


def ordered_fields(fields: dict[str, list[str]]) -> dict[str, list[str]]:
    """Matched fields in FIELD_ORDER, any other after them by name."""
    rank = {name: position for position, name in enumerate(FIELD_ORDER)}
    return {name: fields[name] for name in sorted(fields, key=lambda name: (rank.get(name, len(rank)), name))}


def explain(
    searcher: Searcher, text: str, path: str, source: str | None = None, *, depth: int = DEFAULT_DEPTH
) -> Explanation:
    """Explain the hybrid-search rank of the document at `path` (in `source`, needed when several
    sources have that path) for `text`. NotFoundError for an unknown document."""
    store = searcher.store
    document = store.get_document(path, source)
    doc_id = document[0].doc_id
    filters = searcher.effective_filters(Filters())
    candidates = searcher.candidates
    depth = max(depth, candidates)
    vector = searcher.embedder.encode_query(text)

    def retrieve(retriever: str, k: int) -> list[Hit]:  # stand-ins, as search() fuses them; whole ones below
        return searcher.retrieve(retriever, text, k, filters, vector, brief=True)

    # What a first page of `docsctl query` fuses (each retriever's top `candidates` chunks), and each
    # retriever `depth` deep. The retrievals are independent and each waits on the store: run side by side.
    with ThreadPoolExecutor(max_workers=5, thread_name_prefix="docsctl-explain") as pool:
        pending_top = {retriever: pool.submit(retrieve, retriever, candidates) for retriever in RETRIEVERS}
        pending_deep = {retriever: pool.submit(retrieve, retriever, depth) for retriever in RETRIEVERS}
        pending_documents = (
            pool.submit(searcher.document_ranking, vector, candidates, filters)
            if searcher.uses_document_ranking(text)
            else None
        )
        top = {retriever: future.result() for retriever, future in pending_top.items()}
        deep = {retriever: future.result() for retriever, future in pending_deep.items()}
        documents = pending_documents.result() if pending_documents else []
    ranking = searcher.ranking
    weights = dict(ranking.weights_for(text))
    fused = collapse_by_document(searcher.fuse_ranked(text, top["bm25"], top["knn"], True, documents))
    position = next((i for i, hit in enumerate(fused) if hit.chunk.doc_id == doc_id), None)
    hit = fused[position] if position is not None else None
    contributions = {}
    if hit is not None and ranking.method == "rrf":
        contributions = {name: weights.get(name, 1.0) / (ranking.rrf_k + rank) for name, rank in hit.ranks.items()}

    retrievers = {retriever: rank_in(retriever, deep[retriever], doc_id, depth) for retriever in RETRIEVERS}
    # The few chunks the explanation names, fetched whole (each is one of the document's own).
    whole = {chunk.chunk_id: chunk for chunk in document}
    for view in retrievers.values():
        view.chunk = whole.get(view.chunk.chunk_id, view.chunk) if view.chunk else None
    shown = whole.get(hit.chunk.chunk_id, hit.chunk) if hit else None
    matched_chunk = retrievers["bm25"].chunk or shown or document[0]
    matched = store.explain_bm25(text, matched_chunk.chunk_id)
    matched["fields"] = ordered_fields(matched.get("fields", {}))
    return Explanation(
        query=text,
        doc_id=doc_id,
        source=document[0].source,
        path=document[0].path,
        title=document[0].title,
        query_kind="keyword" if is_keyword_query(text) else "question",
        method=ranking.method,
        weights=weights,
        rrf_k=ranking.rrf_k,
        candidates=candidates,
        rank=None if position is None else position + 1,
        score=hit.score if hit else None,
        fused_total=len(fused),
        list_ranks=dict(hit.ranks) if hit else {},
        contributions=contributions,
        shown=shown,
        retrievers=retrievers,
        matched_chunk=matched_chunk,
        matched=matched,
    )
