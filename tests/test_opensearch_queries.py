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
    for field in q.TEXT_FIELDS + q.CODE_FIELDS:
        top, _, sub = field.partition(".")
        assert top in properties, field
        if sub:
            assert sub in properties[top]["fields"], field


def test_mapping_uses_lucene_hnsw_cosine():
    method = load_index_definition()["mappings"]["properties"]["embedding"]["method"]
    assert (method["engine"], method["name"], method["space_type"]) == ("lucene", "hnsw", "cosinesimil")


def test_each_combined_fields_clause_searches_fields_of_one_analyzer():
    """combined_fields (BM25F) needs one search analyzer over its fields: prose for the text, code for identifiers."""
    analysis = load_index_definition()["mappings"]["properties"]
    for fields, analyzer in ((q.TEXT_FIELDS, "prose"), (q.CODE_FIELDS, "code_search")):
        for field in fields:
            top, _, sub = field.partition(".")
            spec = analysis[top]["fields"][sub] if sub else analysis[top]
            assert spec.get("search_analyzer", spec["analyzer"]) == analyzer, field


@pytest.mark.parametrize(
    ("text", "identifiers"),
    [
        ("how do I color the protein by chain?", None),  # plain words: the text fields only
        ("add_filter RangeSlider", "add_filter RangeSlider"),
        ("what does hv.dim do?", "hv.dim"),
        ("Tabulator", None),
    ],
)
def test_bm25_scores_the_chunk_text_as_one_field_and_identifiers_in_the_code_fields(text, identifiers):
    should = q.text_query(text)["bool"]["should"]
    clean = q.clean_query_text(text)
    assert should[0] == {"combined_fields": {"query": clean, "fields": q.TEXT_FIELDS}}
    code = [
        c["combined_fields"]["query"] for c in should if c.get("combined_fields", {}).get("fields") == q.CODE_FIELDS
    ]
    assert code == ([identifiers] if identifiers else [])
    assert should[-1] == {"term": {"name": {"value": clean.lower(), "boost": q.NAME_BOOST}}}


def test_bm25_is_one_request_with_the_filters_beside_the_query():
    body = q.bm25_body("How do I format Tabulator cells?", 50, Filters(sources=("holoviz",)))
    assert body["query"]["bool"]["must"] == [q.text_query("How do I format Tabulator cells?")]
    assert body["query"]["bool"]["filter"] == [{"terms": {"source": ["holoviz"]}}]
    assert body["size"] == 50 and "rescore" not in body


def test_document_knn_searches_the_document_vectors_with_the_filters_inside():
    filters = Filters(sources=("chimerax",), pinned_versions=(("panel", "1.5"),))
    body = q.knn_documents_body([0.1, 0.2], 9, filters)
    knn = body["query"]["knn"]["doc_embedding"]
    assert knn["k"] == body["size"] == 9
    assert knn["filter"]["bool"]["filter"] == q.filter_clauses(filters)
    assert body["stored_fields"] == "_none_" and body["docvalue_fields"] == ["doc_id"]  # ids and scores only
    assert "doc_embedding" in q.SOURCE_EXCLUDES["excludes"]  # and out of every chunk a search returns


def test_candidate_requests_skip_highlights_and_totals():
    for body in (q.bm25_body("color", 50), q.knn_body([0.1], 50), q.knn_documents_body([0.1], 50)):
        assert "highlight" not in body and body["track_total_hits"] is False
    assert "highlight" in q.page_body("color", ["a"])


def test_brief_candidates_read_doc_values_instead_of_the_stored_chunk():
    for body in (q.bm25_body("color", 50, brief=True), q.knn_body([0.1], 50, brief=True)):
        # not even _id: it is read from the stored-fields block that holds the _source
        assert body["stored_fields"] == "_none_" and "_source" not in body
        assert body["docvalue_fields"] == ["chunk_id", "doc_id"]
    for body in (q.bm25_body("color", 50), q.knn_body([0.1], 50)):
        assert body["_source"] == q.SOURCE_EXCLUDES and "docvalue_fields" not in body and "stored_fields" not in body


def test_the_page_fetches_its_chunks_by_id_and_gives_the_words_to_the_highlighter_only():
    body = q.page_body("How do I format Tabulator cells?", ["a", "b"])
    assert body["query"] == {"ids": {"values": ["a", "b"]}} and body["size"] == 2
    assert body["_source"] == q.SOURCE_EXCLUDES  # whole chunks, without their vectors
    assert body["highlight"]["highlight_query"]["multi_match"]["query"] == "How do I format Tabulator cells?"
    assert "highlight_query" not in q.page_body("   ", ["a"])["highlight"]  # nothing to mark: opening fragments
    assert "highlight_query" not in q.HIGHLIGHT  # the shared settings are not altered


def test_a_rebuild_copies_everything_but_the_replaced_versions():
    query = q.other_than({("panel", "1.5"), ("chimerax", None)})
    assert query == {
        "bool": {
            "must_not": [
                {"term": {"source": "chimerax"}},
                {"bool": {"filter": [{"term": {"source": "panel"}}, {"term": {"version": "1.5"}}]}},
            ]
        }
    }
    assert q.other_than(set()) == {"bool": {"must_not": []}}  # everything
