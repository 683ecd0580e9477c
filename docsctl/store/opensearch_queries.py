"""Request bodies for OpenSearch, built as plain data: unit-testable and easy to paste into a bug report.

User text is only ever placed in match/multi_match queries, which never parse query syntax.
"""

from __future__ import annotations

from collections.abc import Collection
from typing import Any

from docsctl.models import Filters, Vector
from docsctl.store.base import SourceVersion
from docsctl.text import STOP_WORDS

# Long inputs would only add clauses (and can exceed max_clause_count); the head carries the intent.
MAX_QUERY_CHARS = 512
_PUNCTUATION = ",;:()[]{}<>\"'`=|*+!?."  # what the code_tokens tokenizer splits on, and a full stop

PROSE_FIELDS = ["title^3", "section^2", "breadcrumb^1.5", "content"]
CODE_FIELDS = ["title.code^3", "section.code^2", "breadcrumb.code^1.5", "content.code", "path.text^0.5"]
NAME_BOOST = 4.0
# A chunk holding every term of the query (in any of its text fields) gets this much more: for
# "add_filter RangeSlider" the section using both beats a page titled with just one of them.
ALL_TERMS_FIELDS = ["title.code", "section.code", "breadcrumb.code", "content.code"]
ALL_TERMS_BOOST = 2.0
# BM25 runs in two phases: candidate_query picks the best RESCORE_WINDOW chunks per shard, then text_query
# scores just those. text_query takes the best field per query word plus a share of the others (dis_max
# with a tie breaker), which Lucene cannot prune: it scores every chunk holding any query word in any
# field. candidate_query sums the same fields' scores, which Lucene can prune, skipping chunks that cannot
# reach the window. At 664,000 chunks BM25 p95 fell from 115 to 69 ms; the dev queries' rankings are the
# same as text_query's alone (bench/README.md, "Scale"). Two fields holding copies of the nine would be
# faster still, but lose chunks whose title or section carries the match from the window.
RESCORE_WINDOW = 500
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
# What a brief hit carries (Store.bm25/knn with brief=True): fusion needs only the chunk's id, document
# and names, read from doc values; skipping the stored _source of 50 candidates per request saved 1-2 ms of
# the node's time per request and 2-4 ms of wall time at corpus size (bench/README.md, "Session 4").
BRIEF_FIELDS = ["chunk_id", "doc_id", "name"]
# No stored fields at all, not even _id (chunk_id is the same value, from doc values): Lucene keeps a
# document's stored fields in compressed blocks with its _source, so reading _id alone cost 1-1.5 ms a
# request of 50 hits (bench/README.md, "Session 6").
NO_STORED_FIELDS = {"stored_fields": "_none_"}


def _fetch(brief: bool) -> dict[str, Any]:
    """The fetch part of a candidates request: doc values only when `brief`, else the chunk without vectors."""
    return {**NO_STORED_FIELDS, "docvalue_fields": BRIEF_FIELDS} if brief else {"_source": SOURCE_EXCLUDES}


def clean_query_text(text: str) -> str:
    return " ".join(text.split())[:MAX_QUERY_CHARS]


def code_query_text(text: str) -> str:
    """`text` less its stop words, for the first phase's code fields. The prose analyzer drops stop words,
    the code fields' analyzer keeps them (one can be part of an identifier), and in a question they
    matched nearly every chunk through the code fields, the longest postings of the index, for next to
    nothing of the score: at 664,000 chunks BM25 p95 fell from 73 to 64 ms. text_query keeps them (its
    scores are the ranking: without them hybrid MRR@10 fell from 0.908 to 0.877; bench/README.md)."""
    return " ".join(word for word in text.split() if word.strip(_PUNCTUATION).lower() not in STOP_WORDS)


def _code_match(text: str, kind: str, **options: Any) -> list[dict[str, Any]]:
    """The multi_match of CODE_FIELDS for `text` (none when it is all stop words)."""
    code = code_query_text(text)
    return [{"multi_match": {"query": code, "fields": CODE_FIELDS, "type": kind, **options}}] if code else []


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
    """Prose (stemmed) and code-aware matching, plus boosts for an exact documented name and for a
    chunk that holds every term of the query."""
    text = clean_query_text(text)
    return {
        "bool": {
            "should": [
                {
                    "multi_match": {
                        "query": text,
                        "fields": PROSE_FIELDS,
                        "type": "best_fields",
                        "tie_breaker": 0.3,
                    }
                },
                {
                    "multi_match": {
                        "query": text,
                        "fields": CODE_FIELDS,
                        "type": "best_fields",
                        "tie_breaker": 0.3,
                    }
                },
                {"term": {"name": {"value": text.lower(), "boost": NAME_BOOST}}},
                {
                    "multi_match": {
                        "query": text,
                        "fields": ALL_TERMS_FIELDS,
                        "type": "cross_fields",
                        "operator": "and",
                        "boost": ALL_TERMS_BOOST,
                    }
                },
            ],
            "minimum_should_match": 1,
        }
    }


def candidate_query(text: str) -> dict[str, Any]:
    """The chunks text_query matches (the same words in the same fields), scored as a plain sum of field
    scores: a disjunction Lucene can prune, skipping chunks that cannot reach the top."""
    text = clean_query_text(text)
    return {
        "bool": {
            "should": [
                {"multi_match": {"query": text, "fields": PROSE_FIELDS, "type": "most_fields"}},
                *_code_match(text, "most_fields"),
                {"term": {"name": {"value": text.lower(), "boost": NAME_BOOST}}},
            ],
            "minimum_should_match": 1,
        }
    }


def bm25_body(
    text: str, k: int, filters: Filters | None = None, *, two_phase: bool = True, brief: bool = False
) -> dict[str, Any]:
    """Candidates only: the best of candidate_query re-scored by text_query (hits carry text_query's
    score), or, with `two_phase` off, text_query alone (bench/bm25_phases.py compares the two); no
    highlights (page_body marks the few hits shown; highlighting every candidate cost more than the
    query itself) and no total count, which lets Lucene skip blocks of documents that cannot reach the top."""
    first = candidate_query(text) if two_phase else text_query(text)
    body: dict[str, Any] = {
        "size": k,
        "query": {"bool": {"must": [first], "filter": filter_clauses(filters)}},
        "track_total_hits": False,
        **_fetch(brief),
    }
    if two_phase:
        body["rescore"] = {
            "window_size": max(RESCORE_WINDOW, k),
            "query": {"rescore_query": text_query(text), "query_weight": 0.0, "rescore_query_weight": 1.0},
        }
    return body


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
