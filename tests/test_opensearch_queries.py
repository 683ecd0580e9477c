import json

import pytest

from docsctl.models import Filters
from docsctl.store import opensearch_queries as q
from docsctl.store.opensearch import load_index_definition


@pytest.mark.parametrize(
    "text", ['"unbalanced', "a:b", "/path/to", "[x", "(oops", "AND OR NOT", "title:foo^3 ~2", "x" * 10_000]
)
def test_user_text_only_reaches_match_queries(text):
    body = json.dumps(q.bm25_body(text, 5))
    assert "query_string" not in body and "simple_query_string" not in body
    assert len(q.clean_query_text(text)) <= q.MAX_QUERY_CHARS


def test_filters_go_inside_both_queries():
    filters = Filters(categories=("commands",), sources=("chimerax",))
    bm25 = q.bm25_body("color", 5, filters)
    assert {"terms": {"category": ["commands"]}} in bm25["query"]["bool"]["filter"]
    knn = q.knn_body([0.1, 0.2], 7, filters)["query"]["knn"]["embedding"]
    assert knn["k"] == 7
    assert {"terms": {"source": ["chimerax"]}} in knn["filter"]["bool"]["filter"]


def test_knn_without_filters_has_no_filter_clause():
    assert "filter" not in q.knn_body([0.0], 3)["query"]["knn"]["embedding"]


def test_name_boost_uses_lowercase_text():
    should = q.text_query("Tabulator")["bool"]["should"]
    assert {"term": {"name": {"value": "tabulator", "boost": q.NAME_BOOST}}} in should


def test_every_queried_field_exists_in_the_mapping():
    properties = load_index_definition()["mappings"]["properties"]
    for spec in q.PROSE_FIELDS + q.CODE_FIELDS:
        field = spec.split("^")[0]
        top, _, sub = field.partition(".")
        assert top in properties, field
        if sub:
            assert sub in properties[top]["fields"], field


def test_mapping_uses_lucene_hnsw_cosine():
    method = load_index_definition()["mappings"]["properties"]["embedding"]["method"]
    assert (method["engine"], method["name"], method["space_type"]) == ("lucene", "hnsw", "cosinesimil")


def test_a_chunk_with_every_query_term_gets_a_boost():
    should = q.text_query("add_filter RangeSlider")["bool"]["should"]
    every = [c["multi_match"] for c in should if c.get("multi_match", {}).get("operator") == "and"]
    assert every == [
        {
            "query": "add_filter RangeSlider",
            "fields": q.ALL_TERMS_FIELDS,
            "type": "cross_fields",
            "operator": "and",
            "boost": q.ALL_TERMS_BOOST,
        }
    ]
    properties = load_index_definition()["mappings"]["properties"]
    for field in q.ALL_TERMS_FIELDS:  # cross_fields needs one analyzer: all code subfields
        top, _, sub = field.partition(".")
        assert properties[top]["fields"][sub]["search_analyzer"] == "code_search", field


def test_document_knn_searches_the_document_vectors_with_the_filters_inside():
    filters = Filters(sources=("chimerax",), pinned_versions=(("panel", "1.5"),))
    body = q.knn_documents_body([0.1, 0.2], 9, filters)
    knn = body["query"]["knn"]["doc_embedding"]
    assert knn["k"] == body["size"] == 9
    assert knn["filter"]["bool"]["filter"] == q.filter_clauses(filters)
    assert body["_source"] == ["doc_id"]  # ids and scores only: the vectors stay on the node
    assert "doc_embedding" in q.SOURCE_EXCLUDES["excludes"]  # and out of every chunk a search returns


def test_candidate_requests_skip_highlights_and_totals():
    for body in (q.bm25_body("color", 50), q.knn_body([0.1], 50), q.knn_documents_body([0.1], 50)):
        assert "highlight" not in body and body["track_total_hits"] is False
    assert "highlight" in q.highlight_body("color", ["a"])
