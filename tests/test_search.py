"""Search over the real ChimeraX corpus, indexed once per backend by the real pipeline and model."""

from __future__ import annotations

import re

import pytest

from docsctl.errors import ConfigError
from docsctl.models import Filters
from docsctl.server.search import Searcher


@pytest.fixture(scope="module")
def searcher(chimerax_index, embedder) -> Searcher:
    return Searcher(chimerax_index.store, embedder)


def paths(result) -> list[str]:
    return [hit.chunk.path for hit in result.hits]


def test_the_corpus_was_indexed(chimerax_index):
    summary = chimerax_index.summary
    indexable = [p for p in chimerax_index.root.rglob("*") if p.suffix in {".html", ".rst", ".md"}]
    assert summary.files_seen == len(indexable)
    assert summary.added + len(summary.skipped) == summary.files_seen
    assert summary.added > 300
    assert summary.chunks_written > 2000
    assert not summary.write_failures


def test_color_protein_by_chain_finds_the_color_command(searcher):
    result = searcher.search("how to color protein by chain", limit=5)
    assert "user/commands/color.html" in paths(result)[:3]


@pytest.mark.parametrize("mode", ["bm25", "knn", "hybrid"])
def test_each_mode_returns_one_hit_per_document(searcher, mode):
    result = searcher.search("measure the angle formed by three atoms", limit=10, mode=mode)
    assert len(result.hits) == 10
    assert len(set(paths(result))) == 10
    scores = [hit.score for hit in result.hits]
    assert scores == sorted(scores, reverse=True)


def test_a_question_also_ranks_documents_by_their_vector_and_a_lookup_does_not(searcher, chimerax_index):
    question = searcher.search("how can I make a molecular surface see-through", limit=5)
    assert any("document" in hit.ranks for hit in question.hits)
    vector = searcher.embedder.encode_query("how can I make a molecular surface see-through")
    best_page = chimerax_index.store.knn_documents(vector, k=1)[0][0]
    assert any(hit.chunk.doc_id == best_page and hit.ranks["document"] == 1 for hit in question.hits)
    lookup = searcher.search("transparency", limit=5)
    assert lookup.hits and all("document" not in hit.ranks for hit in lookup.hits)


def test_all_chunks_mode_may_repeat_a_document(searcher):
    result = searcher.search("color", limit=20, mode="bm25", per_document=False)
    assert len(set(paths(result))) < len(result.hits)


@pytest.mark.parametrize("mode", ["bm25", "knn", "hybrid"])
def test_category_filter_returns_only_that_category(searcher, mode):
    result = searcher.search("coloring surfaces", limit=10, mode=mode, filters=Filters(categories=("tools",)))
    assert len(result.hits) == 10
    assert {hit.chunk.category for hit in result.hits} == {"tools"}
    assert all(path.startswith("user/tools/") for path in paths(result))


def test_filter_applies_inside_knn_not_after(searcher):
    # devel pages are a small minority; post-filtering the top candidates would find few or none.
    result = searcher.search("color protein by chain", limit=10, mode="knn", filters=Filters(categories=("devel",)))
    assert len(result.hits) == 10
    assert all(hit.chunk.path.startswith("devel/") for hit in result.hits)


def test_unknown_category_is_an_error_listing_the_known_ones(searcher):
    with pytest.raises(ConfigError, match="unknown category nonsense.*commands"):
        searcher.search("color", filters=Filters(categories=("nonsense",)))


def test_source_filter(searcher):
    assert searcher.search("color", filters=Filters(sources=("chimerax",))).hits


@pytest.mark.parametrize("mode", ["bm25", "hybrid"])
def test_highlights_contain_the_query_terms(searcher, mode):
    result = searcher.search("transparency of surfaces", limit=5, mode=mode)
    for hit in result.hits:
        marked = [m.lower() for fragment in hit.highlights for m in re.findall(r"<em>(.*?)</em>", fragment)]
        assert any("transparen" in m or "surface" in m for m in marked), (hit.chunk.path, hit.highlights)


def test_knn_only_hits_still_get_a_fragment(searcher):
    result = searcher.search("make things see-through", limit=5, mode="knn")
    assert all(hit.highlights and hit.highlights[0].strip() for hit in result.hits)


@pytest.mark.parametrize(
    "text",
    ['"unbalanced', "a:b", "/usr/bin/", "[x", "(oops", "AND OR NOT", "color:red^2 ~", "-- --", "*", "x" * 10_000],
)
def test_hostile_queries_never_fail(searcher, text):
    result = searcher.search(text, limit=3)
    assert result.total >= 0


def test_identifier_parts_match(searcher):
    # "HtmlToolInstance" is a class in the developer tutorials; its parts match too.
    whole = searcher.search("HtmlToolInstance", mode="bm25")
    assert whole.hits and whole.hits[0].chunk.path.startswith("devel/")
    parts = searcher.search("html tool instance", mode="bm25", limit=10)
    assert any(hit.chunk.path == whole.hits[0].chunk.path for hit in parts.hits)


def test_rewordings_in_the_documentations_words_are_fused_with_the_question(searcher):
    question = "turn a lysine in my structure into an alanine"  # the page says "swap amino acid", "rotamers"
    alone = searcher.search(question, limit=10)
    reworded = searcher.search(question, limit=10, rewordings=["swap amino acid residue", "mutate residue rotamers"])
    assert "user/commands/swapaa.html" in paths(reworded)[:3]
    assert paths(reworded)[:3] != paths(alone)[:3]
    assert reworded.query == question and all(hit.highlights for hit in reworded.hits)
    with pytest.raises(ConfigError, match="at most 4 rewordings"):
        searcher.search(question, rewordings=["a", "b", "c", "d", "e"])


def test_lookup_finds_commands_by_every_name_they_document(chimerax_index):
    for name in ("color", "Rainbow", "COLOR"):
        chunks = chimerax_index.store.lookup(name)
        assert {chunk.path for chunk in chunks} >= {"user/commands/color.html"}, name
    chunks = [c for c in chimerax_index.store.lookup("color") if c.path == "user/commands/color.html"]
    assert [c.chunk_index for c in chunks] == list(range(len(chunks)))
    sections = {chunk.section for chunk in chunks}
    assert {"Simple Coloring", "Sequential Coloring (Rainbow)"} <= sections


def test_document_reassembles_in_order(chimerax_index):
    chunks = chimerax_index.store.get_document("user/commands/color.html")
    assert [c.chunk_index for c in chunks] == list(range(len(chunks)))
    assert chimerax_index.store.get_chunk(chunks[1].chunk_id).content == chunks[1].content


def test_list_sources_counts(chimerax_index):
    (info,) = chimerax_index.store.list_sources()
    assert info.source == "chimerax"
    assert info.documents == chimerax_index.summary.added
    assert info.chunks == chimerax_index.summary.chunks_written
    assert set(info.categories) >= {"commands", "tools", "concepts", "devel"}


def test_unknown_source_or_version_is_an_error_not_an_empty_answer(searcher):
    with pytest.raises(ConfigError, match="unknown source nosuch; sources in the index: chimerax"):
        searcher.search("color", filters=Filters(sources=("nosuch",)))
    with pytest.raises(ConfigError, match="unknown version 9.9"):
        searcher.search("color", filters=Filters(versions=("9.9",)))
