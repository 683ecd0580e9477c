import pytest

from docsctl.errors import ConfigError
from docsctl.models import Chunk, Hit
from docsctl.server.fusion import min_max_fusion, reciprocal_rank_fusion
from docsctl.server.search import (
    Ranking,
    Searcher,
    collapse_by_document,
    fuse,
    fuse_documents,
    fuse_rewordings,
    is_keyword_query,
    validate,
)


@pytest.mark.parametrize(
    ("ranked", "expected_order"),
    [
        ({"a": ["x", "y", "z"], "b": ["y", "x", "w"]}, ["x", "y", "z", "w"]),  # x and y tie; first seen wins
        ({"a": ["x"], "b": ["y", "x"]}, ["x", "y"]),  # found by both beats found by one
        ({"a": [], "b": ["q", "r"]}, ["q", "r"]),
        ({"a": ["x", "x", "y"]}, ["x", "y"]),  # duplicates count once, at the best rank
    ],
)
def test_rrf_order(ranked, expected_order):
    assert [item.key for item in reciprocal_rank_fusion(ranked)] == expected_order


def test_rrf_scores_and_ranks_are_exact():
    fused = reciprocal_rank_fusion({"bm25": ["a", "b"], "knn": ["b"]}, k=60)
    by_key = {item.key: item for item in fused}
    assert by_key["b"].score == pytest.approx(1 / 62 + 1 / 61)
    assert by_key["a"].score == pytest.approx(1 / 61)
    assert by_key["b"].ranks == {"bm25": 2, "knn": 1}


def test_rrf_weights_shift_the_order():
    ranked = {"bm25": ["a", "b"], "knn": ["b", "a"]}
    assert reciprocal_rank_fusion(ranked, {"bm25": 2.0, "knn": 1.0})[0].key == "a"
    assert reciprocal_rank_fusion(ranked, {"bm25": 1.0, "knn": 2.0})[0].key == "b"


def test_rrf_does_not_alter_its_input():
    ranked = {"a": ["x", "y"]}
    reciprocal_rank_fusion(ranked)
    assert ranked == {"a": ["x", "y"]}


def test_min_max_fusion_normalizes_each_list():
    fused = min_max_fusion({"bm25": [("a", 10.0), ("b", 5.0)], "knn": [("b", 0.9), ("c", 0.1)]})
    scores = {item.key: item.score for item in fused}
    assert scores == pytest.approx({"a": 1.0, "b": 1.0, "c": 0.0})


def _hit(chunk_id: str, doc_id: str, highlights: list[str] | None = None) -> Hit:
    chunk = Chunk(
        chunk_id=chunk_id, doc_id=doc_id, source="s", path=f"{doc_id}.md", title="t", breadcrumb=[], section="",
        category="c", doc_type="markdown", chunk_index=0, content="text", content_hash="h",
    )  # fmt: skip
    return Hit(chunk=chunk, score=1.0, highlights=highlights or [])


def test_fuse_keeps_bm25_highlights_and_records_ranks():
    bm25 = [_hit("c1", "d1", ["<em>x</em>"]), _hit("c2", "d2")]
    knn = [_hit("c2", "d2"), _hit("c3", "d3")]
    fused = fuse(bm25, knn)
    assert [hit.chunk.chunk_id for hit in fused][:1] == ["c2"]
    by_id = {hit.chunk.chunk_id: hit for hit in fused}
    assert by_id["c1"].highlights == ["<em>x</em>"]
    assert by_id["c2"].ranks == {"bm25": 2, "knn": 1}
    assert bm25[1].ranks == {}  # inputs untouched


def test_collapse_keeps_the_best_chunk_of_each_document():
    hits = [_hit("c1", "d1"), _hit("c2", "d2"), _hit("c3", "d1"), _hit("c4", "d3")]
    assert [hit.chunk.chunk_id for hit in collapse_by_document(hits)] == ["c1", "c2", "c4"]


@pytest.mark.parametrize(
    ("mode", "limit", "offset"), [("fuzzy", 5, 0), ("hybrid", 0, 0), ("hybrid", 51, 0), ("bm25", 5, -1)]
)
def test_validate_rejects_out_of_range(mode, limit, offset):
    with pytest.raises(ConfigError):
        validate(mode, limit, offset)


def test_fuse_documents_fuses_document_ranks_and_shows_the_best_fused_chunk():
    # d1 is bm25's best document (c1) and knn's second (c4); d2 is knn's best (c3) and absent from bm25.
    bm25 = [_hit("c1", "d1", ["<em>x</em>"]), _hit("c2", "d1"), _hit("c5", "d3")]
    knn = [_hit("c3", "d2"), _hit("c4", "d1"), _hit("c2", "d1")]
    fused = fuse_documents(bm25, knn, {"bm25": 1.0, "knn": 1.0}, k=60)
    assert [hit.chunk.doc_id for hit in fused] == ["d1", "d2", "d3"]
    d1 = fused[0]
    assert d1.score == pytest.approx(1 / 61 + 1 / 62)  # document ranks: bm25 1, knn 2
    assert d1.ranks == {"bm25": 1, "knn": 2}
    assert d1.chunk.chunk_id == "c2"  # in both lists, so chunk-level fusion puts it first within d1
    assert fused[1].ranks == {"knn": 1}


def test_fuse_documents_adds_weighted_document_rankings_of_candidates_only():
    bm25 = [_hit("c1", "d1"), _hit("c2", "d2")]
    knn = [_hit("c3", "d1"), _hit("c4", "d2")]
    weights = {"bm25": 1.0, "knn": 1.0, "extra": 3.0}
    fused = fuse_documents(bm25, knn, weights, k=60, doc_rankings={"extra": ["unknown", "d2", "d1"]})
    assert [hit.chunk.doc_id for hit in fused] == ["d2", "d1"]  # "unknown" is not a candidate: not ranked
    assert fused[0].ranks == {"bm25": 2, "knn": 2, "extra": 1}
    assert fused[0].score == pytest.approx(2 / 62 + 3 / 61)
    unweighted = fuse_documents(bm25, knn, {"bm25": 1.0, "knn": 1.0, "extra": 0.0}, doc_rankings={"extra": ["d2"]})
    assert [hit.chunk.doc_id for hit in unweighted] == ["d1", "d2"]


def test_fuse_ranked_gives_the_document_ranking_only_the_share_the_query_weights_give_it():
    ranking = Ranking(weights={"bm25": 0.1, "knn": 1.0, "document": 0.2}, keyword_weights={"bm25": 1.5, "knn": 1.0})
    searcher = Searcher(None, None, ranking=ranking)  # fusion reads neither the store nor the embedder
    bm25 = [_hit("c1", "d1"), _hit("c2", "d2")]
    knn = [_hit("c3", "d1"), _hit("c4", "d2")]

    def order(text: str, documents: list[str]) -> list[str]:
        return [hit.chunk.doc_id for hit in searcher.fuse_ranked(text, bm25, knn, True, documents)]

    # A keyword query's weights name no document ranking: given one, it must not count (at RRF's default 1).
    assert order("Tabulator", ["d2"]) == order("Tabulator", []) == ["d1", "d2"]
    # A question's do: 0.2 / 61 lifts d2 over d1's lead of 1.1 / 61 - 1.1 / 62.
    assert order("how do I show a table of data", ["d2"]) == ["d2", "d1"]


def test_fuse_documents_returns_one_hit_per_document_in_score_order():
    bm25 = [_hit(f"b{i}", f"d{i % 3}") for i in range(9)]
    knn = [_hit(f"k{i}", f"d{(i + 1) % 4}") for i in range(8)]
    fused = fuse_documents(bm25, knn, method="minmax")
    doc_ids = [hit.chunk.doc_id for hit in fused]
    assert len(doc_ids) == len(set(doc_ids)) == 4
    assert [hit.score for hit in fused] == sorted((hit.score for hit in fused), reverse=True)


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("dssp", True),
        ("Terminal widget", True),
        ("movie encode framerate", True),
        ("pn.state.schedule_task", True),
        ("how do I use add_filter with a slider", True),  # a code-like token
        ("what does hv.dim do and how are those expressions applied", True),
        ("How do I format Tabulator cells?", False),
        ("measure the angle formed by three atoms.", False),  # a full stop is not code
        ("smooth out a noisy cryo-EM density map", False),
    ],
)
def test_is_keyword_query(text, expected):
    assert is_keyword_query(text) is expected


def test_ranking_weighs_retrievers_by_kind_of_query():
    ranking = Ranking(weights={"bm25": 0.1, "knn": 1.0}, keyword_weights={"bm25": 2.0, "knn": 1.0})
    assert ranking.weights_for("param.Action")["bm25"] == 2.0
    assert ranking.weights_for("keep widget values in the URL query string")["bm25"] == 0.1


def test_the_shipped_ranking_fuses_lookups_plainly_and_adds_page_meaning_for_questions():
    ranking = Ranking()
    assert ranking.weights_for("pn.state.onload") == {"bm25": 1.0, "knn": 1.0}
    assert ranking.weights_for("how do I color the protein by chain") == {"bm25": 0.5, "knn": 1.0, "document": 0.5}


def test_rewordings_fuse_by_document_and_keep_each_documents_best_hit():
    first = [_hit("a1", "a"), _hit("b1", "b")]
    second = [_hit("b2", "b"), _hit("c2", "c")]
    fused = fuse_rewordings([first, second])
    assert [hit.chunk.doc_id for hit in fused] == ["b", "a", "c"]  # b is found by both phrasings
    assert fused[0].chunk.chunk_id == "b2"  # shown by the phrasing that ranked it higher
    assert fused[0].score == pytest.approx(1 / 62 + 1 / 61)


def test_rewordings_fuse_by_chunk_when_not_collapsing():
    fused = fuse_rewordings([[_hit("x", "d"), _hit("y", "d")], [_hit("y", "d")]], per_document=False)
    assert [hit.chunk.chunk_id for hit in fused] == ["y", "x"]
