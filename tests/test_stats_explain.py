"""`docsctl stats` and `docsctl explain` on the ChimeraX corpus, indexed once per backend."""

from __future__ import annotations

import json
from collections import defaultdict

import pytest
from typer.testing import CliRunner

from docsctl.cli.app import app
from docsctl.errors import NotFoundError
from docsctl.indexer.pipeline import SKIPPED_REMEMBERED
from docsctl.server.explain import explain
from docsctl.server.search import Searcher, collapse_by_document

runner = CliRunner()
QUERY = "color protein by chain"


def invoke(corpus, *args: str):
    result = runner.invoke(app, list(args), env=corpus.env())
    assert "Traceback" not in result.output
    return result


@pytest.fixture(scope="module")
def searchers(embedder):
    made = {}

    def searcher_for(corpus) -> Searcher:
        if corpus.backend not in made:
            made[corpus.backend] = Searcher(corpus.store, embedder)
        return made[corpus.backend]

    return searcher_for


# -- stats --------------------------------------------------------------------------------------------


def test_category_counts_agree_with_the_chunks_themselves(chimerax_index):
    documents, chunks = defaultdict(set), defaultdict(int)
    for chunk in chimerax_index.store.iter_chunks(with_embedding=False):
        documents[chunk.source, chunk.category].add(chunk.doc_id)
        chunks[chunk.source, chunk.category] += 1
    expected = [
        {"source": source, "category": category, "documents": len(documents[source, category]), "chunks": count}
        for (source, category), count in sorted(chunks.items())
    ]
    assert chimerax_index.store.category_counts() == expected
    assert len(expected) > 3


def test_stats_reports_counts_size_build_and_last_reindex(chimerax_index):
    result = invoke(chimerax_index, "stats", "--json")
    assert result.exit_code == 0, result.output
    stats = json.loads(result.stdout)
    store, summary = chimerax_index.store, chimerax_index.summary
    (info,) = store.list_sources()
    assert stats["backend"] == chimerax_index.backend
    assert (stats["documents"], stats["chunks"]) == (info.documents, info.chunks)
    assert stats["size_bytes"] == store.describe()["size_bytes"] > 100_000
    assert stats["mapping_version"] == store.schema_version
    assert (stats["model"], stats["dimension"]) == ("all-MiniLM-L6-v2", 384)
    (source,) = stats["sources"]
    assert source["source"] == "chimerax"
    assert [(c["category"], c["documents"], c["chunks"]) for c in source["categories"]] == [
        (row["category"], row["documents"], row["chunks"]) for row in store.category_counts()
    ]
    assert sum(c["documents"] for c in source["categories"]) == info.documents
    assert sum(c["chunks"] for c in source["categories"]) == info.chunks
    last = source["last_reindex"]
    assert last["origin"] == str(chimerax_index.root)
    assert last["last_indexed"] and last["versions"][""]["last_indexed"] == last["last_indexed"]
    assert (last["files"], last["skipped"]) == (summary.files_seen, len(summary.skipped))
    remembered = [(entry["path"], entry["reason"]) for entry in last["versions"][""]["skipped_files"]]
    assert remembered == summary.skipped[:SKIPPED_REMEMBERED]  # which files were skipped, and why


def test_stats_prints_a_table_per_source_and_category(chimerax_index):
    result = invoke(chimerax_index, "stats")
    assert result.exit_code == 0, result.output
    assert "mapping v" in result.stdout and "all-MiniLM-L6-v2 (384 dimensions)" in result.stdout
    for category in ("commands", "tools", "devel"):
        assert category in result.stdout
    assert "last reindex" in result.stdout


def test_stats_without_an_index_is_one_line_and_exit_1(tmp_path):
    env = {"DOCSCTL_DATA_DIR": str(tmp_path), "DOCSCTL_BACKEND": "sqlite", "DOCSCTL_OPENSEARCH_URL": ""}
    result = runner.invoke(app, ["stats"], env=env)
    assert result.exit_code == 1
    (line,) = result.stderr.strip().splitlines()
    assert line.startswith("error: no index") and "docsctl reindex" in line


# -- explain_bm25 -------------------------------------------------------------------------------------


@pytest.mark.parametrize("text", [QUERY, "cartoon", "surface style", "transparency"])
def test_explain_bm25_gives_the_score_bm25_gives(chimerax_index, text):
    store = chimerax_index.store
    hits = store.bm25(text, 5)
    assert hits
    for hit in hits:
        explained = store.explain_bm25(text, hit.chunk.chunk_id)
        assert explained["score"] == pytest.approx(hit.score, rel=1e-5)
        assert explained["matched"] and explained["fields"]


def test_explain_bm25_names_the_matching_fields(chimerax_index):
    store = chimerax_index.store
    (chunk,) = [c for c in store.get_document("user/commands/cartoon.html") if c.chunk_index == 0]
    fields = store.explain_bm25("cartoon", chunk.chunk_id)["fields"]
    assert {"title", "content", "name"} <= set(fields)  # a page titled and named "cartoon"
    assert fields["name"] == ["cartoon"]
    nothing = store.explain_bm25("xylophone quartz", chunk.chunk_id)
    assert nothing == {"chunk_id": chunk.chunk_id, "score": 0.0, "matched": False, "fields": {}}


def test_explain_bm25_names_only_fields_that_score(chimerax_index):
    """The path is matched by neither backend's BM25 (SQLite keeps it in the code table at weight 0)."""
    store = chimerax_index.store
    (chunk,) = [c for c in store.get_document("user/commands/cartoon.html") if c.chunk_index == 0]
    explained = store.explain_bm25("user/commands/cartoon.html", chunk.chunk_id)
    assert explained["fields"] and "path.text" not in explained["fields"]


def test_explain_bm25_of_an_unknown_chunk_is_not_found(chimerax_index):
    with pytest.raises(NotFoundError):
        chimerax_index.store.explain_bm25("color", "no-such-chunk")


# -- explain --------------------------------------------------------------------------------------------


@pytest.mark.parametrize("text", [QUERY, "cartoon", "how do I measure the distance between two atoms"])
def test_explain_agrees_with_the_search_it_explains(chimerax_index, searchers, text):
    searcher = searchers(chimerax_index)
    result = searcher.search(text, limit=5)
    for position, hit in enumerate(result.hits, start=1):
        why = explain(searcher, text, hit.chunk.path, hit.chunk.source)
        assert why.rank == position
        assert why.score == pytest.approx(hit.score)
        assert why.shown.chunk_id == hit.chunk.chunk_id
        assert why.list_ranks == hit.ranks
        assert sum(why.contributions.values()) == pytest.approx(why.score)  # the fused score, term by term
        bm25 = why.retrievers["bm25"]
        if "bm25" in hit.ranks:
            assert bm25.rank == hit.ranks["bm25"]
            assert bm25.chunk.doc_id == hit.chunk.doc_id and bm25.chunk_rank >= bm25.rank
            assert why.matched_chunk.chunk_id == bm25.chunk.chunk_id
            assert why.matched["score"] == pytest.approx(bm25.score, rel=1e-5)
    top = explain(searcher, text, result.hits[0].chunk.path)
    assert top.retrievers["knn"].rank == top.list_ranks.get("knn")


def test_a_document_outside_the_candidates_is_said_to_be_so(chimerax_index, searchers):
    searcher = searchers(chimerax_index)
    text = "xylophone quartz"  # in no document: bm25 finds nothing
    near = {hit.chunk.doc_id for hit in chimerax_index.store.knn(searcher.embedder.encode_query(text), 150)}
    far = next(c for c in chimerax_index.store.iter_chunks(with_embedding=False) if c.doc_id not in near)
    why = explain(searcher, text, far.path, depth=150)  # deeper than search's own candidates
    assert why.rank is None and why.score is None and why.shown is None
    assert why.retrievers["bm25"].rank is None and why.retrievers["knn"].rank is None
    assert why.retrievers["knn"].depth == 150
    assert why.matched["fields"] == {}
    result = invoke(chimerax_index, "explain", text, "--path", far.path, "--depth", "150")
    assert result.exit_code == 0, result.output
    assert "not among the" in result.stdout
    assert result.stdout.count("not in top 150") == 2


def test_explain_command_prints_ranks_scores_and_matched_fields(chimerax_index):
    path = "user/commands/color.html"
    result = invoke(chimerax_index, "explain", QUERY, "--path", path, "--json")
    assert result.exit_code == 0, result.output
    why = json.loads(result.stdout)
    assert why["document"]["path"] == path and why["document"]["source"] == "chimerax"
    assert why["rank"] is not None and why["rank"] <= 5
    assert set(why["retrievers"]) == {"bm25", "knn"}
    assert why["retrievers"]["bm25"]["rank"] is not None
    assert {"title", "content"} <= set(why["matched"]["fields"])
    assert "color" in why["matched"]["fields"]["title"]
    text = invoke(chimerax_index, "explain", QUERY, "--path", path)
    assert text.exit_code == 0, text.output
    for words in (f"chimerax:{path}", "hybrid   rank", "bm25     rank", "knn      rank", "matched  title (color"):
        assert words in text.stdout


def test_explain_of_an_unknown_document_is_one_line_and_exit_1(chimerax_index):
    result = invoke(chimerax_index, "explain", QUERY, "--path", "no/such/page.html")
    assert result.exit_code == 1
    (line,) = result.stderr.strip().splitlines()
    assert line == "error: no document with path 'no/such/page.html'"


def test_explain_ranks_documents_as_fusion_does(chimerax_index, searchers):
    """A document's retriever rank is its best chunk's place once better documents' chunks are collapsed."""
    searcher = searchers(chimerax_index)
    hits = chimerax_index.store.bm25(QUERY, 200)
    documents = collapse_by_document(hits)
    third = documents[2].chunk
    why = explain(searcher, QUERY, third.path, third.source)
    assert why.retrievers["bm25"].rank == 3
    assert why.retrievers["bm25"].chunk_rank == 1 + [hit.chunk.chunk_id for hit in hits].index(third.chunk_id)
