import pytest

from docsctl.errors import ConfigError
from docsctl.models import Chunk, Hit
from docsctl.server.fusion import min_max_fusion, reciprocal_rank_fusion
from docsctl.server.search import collapse_by_document, fuse, validate


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
