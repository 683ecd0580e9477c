"""Request bodies for OpenSearch, built as plain data: unit-testable and easy to paste into a bug report.

User text is only ever placed in match/multi_match queries, which never parse query syntax.
"""

from __future__ import annotations

from collections.abc import Collection
from typing import Any

from docsctl.models import Filters, Vector
from docsctl.store.base import SourceVersion
from docsctl.text import identifier_tokens

# Long inputs would only add clauses (and can exceed max_clause_count); the head carries the intent.
MAX_QUERY_CHARS = 512

# BM25 scores a chunk as one text: its title, breadcrumb, section heading and content together (BM25F:
# `combined_fields` sums each term's frequency over the fields and normalizes by their joint length), as a
# reader sees the chunk. Weighted fields with the best field per query (dis_max) ranked questions in plain
# words far worse: one common word in a boosted title outscored a section using every word of the question
# (bench/README.md, "Search quality").
TEXT_FIELDS = ["title", "breadcrumb", "section", "content"]
# The identifiers of a query (`add_filter`, `pn.state.onload`, `SelectEditor`) also match whole and by their
# parts in the code-aware fields; the plain words of a question do not, or they would count twice.
CODE_FIELDS = ["title.code", "breadcrumb.code", "section.code", "content.code"]
NAME_BOOST = 4.0
HIGHLIGHT_CHARS = 160

HIGHLIGHT = {
    "pre_tags": ["<em>"],
    "post_tags": ["</em>"],
    "fields": {
        "content": {
            "type": "fvh",
            "matched_fields": ["content", "content.code"],
            "fragment_size": HIGHLIGHT_CHARS,
            "number_of_fragments": 2,
            "no_match_size": HIGHLIGHT_CHARS,
        }
    },
}
SOURCE_EXCLUDES = {"excludes": ["embedding", "doc_embedding"]}
# What a brief hit carries (Store.bm25/knn with brief=True): fusion needs only the chunk's id and document,
# read from doc values; skipping the stored _source of 50 candidates per request saved 1-2 ms of
# the node's time per request and 2-4 ms of wall time at corpus size (bench/README.md, "Session 4").
BRIEF_FIELDS = ["chunk_id", "doc_id"]
# No stored fields at all, not even _id (chunk_id is the same value, from doc values): Lucene keeps a
# document's stored fields in compressed blocks with its _source, so reading _id alone cost 1-1.5 ms a
# request of 50 hits (bench/README.md, "Session 6").
NO_STORED_FIELDS = {"stored_fields": "_none_"}


def _fetch(brief: bool) -> dict[str, Any]:
    """The fetch part of a candidates request: doc values only when `brief`, else the chunk without vectors."""
    return {**NO_STORED_FIELDS, "docvalue_fields": BRIEF_FIELDS} if brief else {"_source": SOURCE_EXCLUDES}


def clean_query_text(text: str) -> str:
    return " ".join(text.split())[:MAX_QUERY_CHARS]


def filter_clauses(filters: Filters | None) -> list[dict[str, Any]]:
    if filters is None:
        return []
    clauses = []
    for field, values in (
        ("category", filters.categories),
        ("source", filters.sources),
        ("version", filters.versions),
    ):
        if values:
            clauses.append({"terms": {field: list(values)}})
    if filters.pinned_versions:
        pinned = [source for source, _ in filters.pinned_versions]
        should: list[dict[str, Any]] = [{"bool": {"must_not": [{"terms": {"source": pinned}}]}}]
        should += [
            {"bool": {"filter": [{"term": {"source": source}}, {"term": {"version": version}}]}}
            for source, version in filters.pinned_versions
        ]
        clauses.append({"bool": {"should": should, "minimum_should_match": 1}})
    return clauses


def text_query(text: str) -> dict[str, Any]:
    """BM25F over the chunk's text fields (prose: stemmed, stop words dropped), plus the query's identifiers
    in the code-aware fields and a boost for a chunk of the page documenting the query as a name."""
    text = clean_query_text(text)
    should: list[dict[str, Any]] = [{"combined_fields": {"query": text, "fields": TEXT_FIELDS}}]
    identifiers = " ".join(identifier_tokens(text))
    if identifiers:
        should.append({"combined_fields": {"query": identifiers, "fields": CODE_FIELDS}})
    should.append({"term": {"name": {"value": text.lower(), "boost": NAME_BOOST}}})
    return {"bool": {"should": should, "minimum_should_match": 1}}


def fields_query(text: str) -> dict[str, Any]:
    """text_query's terms field by field (a sum over each field, no BM25F): its `_explain` names the field each
    term matched in, which combined_fields' explanation does not (explain_bm25 takes the score from text_query)."""
    should = [
        {"multi_match": {"query": clause["combined_fields"]["query"], "fields": clause["combined_fields"]["fields"]}}
        if "combined_fields" in clause
        else clause
        for clause in text_query(text)["bool"]["should"]
    ]
    return {"bool": {"should": should, "minimum_should_match": 1}}


def bm25_body(text: str, k: int, filters: Filters | None = None, *, brief: bool = False) -> dict[str, Any]:
    """Candidates only: no highlights (page_body marks the few hits shown; highlighting every candidate cost
    more than the query itself) and no total count, which lets Lucene skip blocks of documents that cannot
    reach the top (combined_fields and term queries are eligible for its dynamic pruning)."""
    return {
        "size": k,
        "query": {"bool": {"must": [text_query(text)], "filter": filter_clauses(filters)}},
        "track_total_hits": False,
        **_fetch(brief),
    }


def _knn_query(field: str, vector: Vector, k: int, filters: Filters | None) -> dict[str, Any]:
    """Lucene k-NN with the filter inside the query: efficient filtering, not post-filtering."""
    knn: dict[str, Any] = {"vector": list(vector), "k": k}
    clauses = filter_clauses(filters)
    if clauses:
        knn["filter"] = {"bool": {"filter": clauses}}
    return {"knn": {field: knn}}


def knn_body(vector: Vector, k: int, filters: Filters | None = None, *, brief: bool = False) -> dict[str, Any]:
    query = _knn_query("embedding", vector, k, filters)
    return {"size": k, "query": query, "track_total_hits": False, **_fetch(brief)}


def knn_documents_body(vector: Vector, k: int, filters: Filters | None = None) -> dict[str, Any]:
    """k-NN over document centroids: only each document's first chunk carries `doc_embedding`."""
    query = _knn_query("doc_embedding", vector, k, filters)
    return {"size": k, "query": query, "track_total_hits": False, **NO_STORED_FIELDS, "docvalue_fields": ["doc_id"]}


def page_body(text: str, chunk_ids: list[str]) -> dict[str, Any]:
    """The chosen chunks whole, with highlights; `no_match_size` gives an opening fragment where no term
    matches.

    The chunks are fetched by id alone and the query words go to the highlighter only: scoring them over
    the whole index, only to keep five chunks, cost 1-3 ms more at 664,000 chunks (same highlights)."""
    text = clean_query_text(text)
    highlight = dict(HIGHLIGHT)
    if text:
        highlight["highlight_query"] = {"multi_match": {"query": text, "fields": ["content", "content.code"]}}
    return {
        "size": len(chunk_ids),
        "query": {"ids": {"values": chunk_ids}},
        "highlight": highlight,
        "_source": SOURCE_EXCLUDES,
    }


def other_than(replaced: Collection[SourceVersion]) -> dict[str, Any]:
    """A query for every chunk not among `replaced` (StoreWriter.copy_sources)."""
    clauses: list[dict[str, Any]] = []
    for source, version in sorted(replaced, key=lambda item: (item[0], item[1] is None, item[1] or "")):
        if version is None:
            clauses.append({"term": {"source": source}})
        else:
            clauses.append({"bool": {"filter": [{"term": {"source": source}}, {"term": {"version": version}}]}})
    return {"bool": {"must_not": clauses}}


def document_body(path: str, source: str | None, version: str | None) -> dict[str, Any]:
    clauses: list[dict[str, Any]] = [{"term": {"path": path}}]
    if source:
        clauses.append({"term": {"source": source}})
    if version is not None:
        clauses.append({"term": {"version": version}})
    return {
        "size": 10_000,
        "query": {"bool": {"filter": clauses}},
        "sort": [{"source": "asc"}, {"version": "desc"}, {"chunk_index": "asc"}],
        "_source": SOURCE_EXCLUDES,
    }


def lookup_body(name: str, sources: list[str], max_docs: int = 5) -> dict[str, Any]:
    clauses: list[dict[str, Any]] = [{"term": {"name": name.strip().lower()}}]
    if sources:
        clauses.append({"terms": {"source": sources}})
    return {
        "size": 0,
        "query": {"bool": {"filter": clauses}},
        "aggs": {"docs": {"terms": {"field": "doc_id", "size": max_docs, "order": {"_key": "asc"}}}},
    }


def sources_body() -> dict[str, Any]:
    return {
        "size": 0,
        "aggs": {
            "sources": {
                "terms": {"field": "source", "size": 1000},
                "aggs": {
                    "documents": {"cardinality": {"field": "doc_id", "precision_threshold": 40000}},
                    "categories": {"terms": {"field": "category", "size": 200}},
                    "versions": {"terms": {"field": "version", "size": 200}},
                    "last_indexed": {"max": {"field": "indexed_at"}},
                },
            }
        },
    }
