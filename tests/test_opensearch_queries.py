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
        assert body["docvalue_fields"] == ["chunk_id", "doc_id", "name"]
    for body in (q.bm25_body("color", 50), q.knn_body([0.1], 50)):
        assert body["_source"] == q.SOURCE_EXCLUDES and "docvalue_fields" not in body and "stored_fields" not in body


def test_bm25_candidates_are_rescored_by_the_full_query():
    body = q.bm25_body("How do I format Tabulator cells?", 50, Filters(sources=("holoviz",)))
    assert body["query"]["bool"]["must"] == [q.candidate_query("How do I format Tabulator cells?")]
    assert body["query"]["bool"]["filter"] == [{"terms": {"source": ["holoviz"]}}]
    rescore = body["rescore"]["query"]
    assert rescore["rescore_query"] == q.text_query("How do I format Tabulator cells?")
    assert (rescore["query_weight"], rescore["rescore_query_weight"]) == (0.0, 1.0)  # hits carry its score


def test_bm25_without_candidate_fields_is_the_full_query_alone():
    body = q.bm25_body("color", 50, two_phase=False)
    assert body["query"]["bool"]["must"] == [q.text_query("color")] and "rescore" not in body


def _queried_fields(query: object) -> set[str]:
    """Every field a query body searches, boosts stripped."""
    if isinstance(query, list):
        return set().union(*map(_queried_fields, query)) if query else set()
    if not isinstance(query, dict):
        return set()
    found: set[str] = set()
    for key, value in query.items():
        if key == "multi_match":
            found.update(spec.split("^")[0] for spec in value["fields"])
        elif key in ("term", "match"):
            found.update(value)
        else:
            found |= _queried_fields(value)
    return found


def test_the_first_phase_searches_the_same_fields_as_a_prunable_sum():
    """It must match every chunk the full query matches (the same fields, nothing less), and be a plain sum,
    which Lucene can prune (best_fields' tie breaker cannot be)."""
    candidate = q.candidate_query("add_filter RangeSlider")
    expected = {spec.split("^")[0] for spec in q.PROSE_FIELDS + q.CODE_FIELDS} | {"name"}
    assert _queried_fields(candidate) == _queried_fields(q.text_query("add_filter RangeSlider")) == expected
    kinds = [clause["multi_match"]["type"] for clause in candidate["bool"]["should"] if "multi_match" in clause]
    assert kinds == ["most_fields", "most_fields"]
    assert {"term": {"name": {"value": "add_filter rangeslider", "boost": q.NAME_BOOST}}} in candidate["bool"]["should"]


@pytest.mark.parametrize("k", [5, 50, q.RESCORE_WINDOW, 4 * q.RESCORE_WINDOW])
def test_the_rescore_window_holds_every_hit_asked_for(k):
    assert q.bm25_body("color", k)["rescore"]["window_size"] == max(k, q.RESCORE_WINDOW) >= k


def test_the_page_fetches_its_chunks_by_id_and_gives_the_words_to_the_highlighter_only():
    body = q.page_body("How do I format Tabulator cells?", ["a", "b"])
    assert body["query"] == {"ids": {"values": ["a", "b"]}} and body["size"] == 2
    assert body["_source"] == q.SOURCE_EXCLUDES  # whole chunks, without their vectors
    assert body["highlight"]["highlight_query"]["multi_match"]["query"] == "How do I format Tabulator cells?"
    assert "highlight_query" not in q.page_body("   ", ["a"])["highlight"]  # nothing to mark: opening fragments
    assert "highlight_query" not in q.HIGHLIGHT  # the shared settings are not altered


@pytest.mark.parametrize(
    ("text", "code"),
    [
        ("how do I color the protein by chain?", "how do I color protein chain?"),
        ("To be, or not", ""),
        ("is_visible in the Panel", "is_visible Panel"),
        ("pn.state.onload", "pn.state.onload"),
    ],
)
def test_candidates_are_found_in_the_code_fields_without_stop_words(text, code):
    """The first phase searches the code fields without stop words; the rescoring query with the whole text."""
    assert q.code_query_text(text) == code
    for query, expected in ((q.candidate_query(text), [code] if code else []), (q.text_query(text), [text])):
        should = query["bool"]["should"]
        code_clauses = [c for c in should if c.get("multi_match", {}).get("fields") == q.CODE_FIELDS]
        assert [c["multi_match"]["query"] for c in code_clauses] == expected
        prose_clauses = [c for c in should if c.get("multi_match", {}).get("fields") == q.PROSE_FIELDS]
        assert [c["multi_match"]["query"] for c in prose_clauses] == [text]  # the prose analyzer drops them


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
