"""The Store contract (docsctl/store/base.py), run against every backend with the same assertions.

Only protocol methods are used; where a backend legitimately differs, its harness
(tests/contract_fixtures.py) answers the question, never a skip.
"""

from __future__ import annotations

import json
from uuid import uuid4

import numpy as np
import pytest
from contract_fixtures import DOCS, META, OpenSearchHarness, SqliteHarness, chunk_id, fresh

from docsctl.errors import IndexMissingError, NotFoundError
from docsctl.models import Chunk, Filters, IndexMeta

COLOR = "user/commands/color.html"
SAVE = "user/commands/save.html"
TABULATOR = "reference/widgets/Tabulator.md"
LOAD = "how_to/callbacks/load.md"


# -- fixtures -------------------------------------------------------------------------------------


@pytest.fixture(scope="session")
def sample_chunks(embedder) -> list[Chunk]:
    """Every sample chunk, embedded once per session with the real model."""
    chunks = [chunk for doc in DOCS for chunk in doc.chunks()]
    vectors = embedder.encode([chunk.embed_text() for chunk in chunks])
    for chunk, vector in zip(chunks, vectors, strict=True):
        chunk.embedding = vector.tolist()
    return chunks


@pytest.fixture
def chunks(sample_chunks) -> list[Chunk]:
    return fresh(sample_chunks)


@pytest.fixture(params=["sqlite", "opensearch"])
def backend(request, tmp_path):
    """(store, harness) for one backend; every test gets an empty index of its own."""
    if request.param == "sqlite":
        from docsctl.store.sqlite import SqliteStore

        path = tmp_path / "index.db"
        yield SqliteStore(path), SqliteHarness(path)
        return
    from docsctl.config import load_settings
    from docsctl.store.opensearch import OpenSearchStore

    settings = load_settings(opensearch_url=request.getfixturevalue("opensearch_url"))
    store = OpenSearchStore(settings, alias=f"test-{uuid4().hex}")
    try:
        yield store, OpenSearchHarness()
    finally:
        store.drop()


@pytest.fixture
def store(backend):
    return backend[0]


@pytest.fixture
def harness(backend):
    return backend[1]


@pytest.fixture
def filled(store, chunks):
    """A store holding every sample chunk, with per-source state recorded."""
    write(store, chunks, states=True)
    return store


def write(store, chunks: list[Chunk], *, rebuild: bool = True, states: bool = False):
    with store.writer(META, rebuild=rebuild) as writer:
        report = writer.write(chunks)
        if states:
            for source in sorted({chunk.source for chunk in chunks}):
                writer.record_source(source, {"origin": f"/docs/{source}", "last_indexed": "2025-06-02T08:00:00+00:00"})
    return report


def ids(hits) -> list[str]:
    return [hit.chunk.chunk_id for hit in hits]


def all_ids(store) -> set[str]:
    return {chunk.chunk_id for chunk in store.iter_chunks(with_embedding=False)}


def highlights(store, text: str, chunk_ids: list[str]) -> dict[str, list[str]]:
    return {chunk_id: hit.highlights for chunk_id, hit in store.page(text, chunk_ids).items()}


def by_id(chunks: list[Chunk], wanted: str) -> Chunk:
    return next(chunk for chunk in chunks if chunk.chunk_id == wanted)


def plain(text: str) -> str:
    return " ".join(text.replace("<em>", "").replace("</em>", "").split())


# -- writing and metadata -------------------------------------------------------------------------


def test_index_meta_is_none_before_the_first_write_and_what_was_written_after(store, chunks):
    assert store.index_meta() is None
    write(store, chunks)
    assert store.index_meta() == META


def test_write_reports_what_was_stored_and_what_failed(store, chunks):
    bad = fresh([chunks[0]])[0]
    bad.chunk_id, bad.embedding = "broken#0", [0.5] * 7
    report = write(store, [*chunks, bad])
    assert report.written == len(chunks)
    assert [chunk_id for chunk_id, _ in report.failed] == ["broken#0"]
    assert all_ids(store) == {chunk.chunk_id for chunk in chunks}


def test_writing_a_chunk_id_again_replaces_the_chunk(filled, chunks):
    changed = fresh([chunks[0]])[0]
    changed.content = "Usage: color spec colorname. Rewritten with the word kaleidoscope."
    with filled.writer(META, rebuild=False) as writer:
        assert writer.write([changed]).written == 1
    assert filled.get_chunk(changed.chunk_id).content == changed.content
    assert ids(filled.bm25("kaleidoscope", k=5)) == [changed.chunk_id]
    assert len(list(filled.iter_chunks(with_embedding=False))) == len(chunks)


def test_reads_on_a_store_without_index_raise_index_missing(store, embedder):
    vector = embedder.encode_query("color")
    reads = [
        lambda: store.bm25("color", k=3),
        lambda: store.knn(vector, k=3),
        lambda: store.page("color", [chunk_id("chimerax", COLOR, 0)]),
        lambda: store.lookup("color"),
        lambda: store.get_chunk(chunk_id("chimerax", COLOR, 0)),
        lambda: store.get_document(COLOR),
        lambda: store.doc_hashes("chimerax"),
        lambda: store.list_sources(),
        lambda: store.source_states(),
        lambda: store.facet_counts(),
        lambda: list(store.iter_chunks()),
    ]
    for read in reads:
        with pytest.raises(IndexMissingError):
            read()


def test_drop_removes_the_index(filled):
    filled.drop()
    assert filled.index_meta() is None
    with pytest.raises(IndexMissingError):
        filled.bm25("color", k=3)


# -- bm25 -----------------------------------------------------------------------------------------


def test_bm25_finds_prose_and_ranks_best_first(filled):
    hits = filled.bm25("color protein by chain", k=5)
    assert hits[0].chunk.chunk_id == chunk_id("chimerax", COLOR, 1)
    scores = [hit.score for hit in hits]
    assert scores == sorted(scores, reverse=True)


def test_bm25_matches_stemmed_words(filled):
    # "colors" finds "Coloring by chain/element" (and "color"): English stemming, like the prose analyzer.
    found = ids(filled.bm25("colors", k=10))
    assert chunk_id("chimerax", COLOR, 1) in found
    assert chunk_id("chimerax", COLOR, 2) in found


@pytest.mark.parametrize(
    ("query", "expected", "k"),
    [
        ("SelectEditor", chunk_id("panel", TABULATOR, 0, "1.5"), 1),
        ("select editor", chunk_id("panel", TABULATOR, 0, "1.5"), 3),
        ("selecteditor", chunk_id("panel", TABULATOR, 0, "1.5"), 1),
        ("add_filter", chunk_id("panel", TABULATOR, 1, "1.5"), 1),
        ("filter", chunk_id("panel", TABULATOR, 1, "1.5"), 3),
        ("pn.state.onload", chunk_id("panel", LOAD, 0, "1.5"), 1),
        ("onload", chunk_id("panel", LOAD, 0, "1.5"), 3),
        ("--transparency", chunk_id("chimerax", SAVE, 0), 3),
        ("transparency", chunk_id("chimerax", SAVE, 0), 5),
        ("BundleAPI", chunk_id("chimerax", "devel/writing_bundles.rst", 1), 3),
    ],
)
def test_bm25_matches_identifiers_whole_and_by_parts(filled, query, expected, k):
    assert expected in ids(filled.bm25(query, k=k))


@pytest.mark.parametrize(
    "query",
    [
        '"',
        'say "hello',
        "a:b",
        "title:color",
        "/path/",
        "[x",
        "(unbalanced",
        "unbalanced)",
        "AND OR NOT",
        "color AND",
        "NEAR(color chain)",
        "*",
        "col*",
        "^color",
        "color^3",
        "{title}: color",
        "- -- ---",
        "\\",
        "%_'",
        "0\x000",  # a NUL inside a token once ended FTS5's query string early
        "color\x00chain \x00",
        "color " * 1700,  # about 10 kB
        "SelectEditor " + "x" * 10_000,
    ],
)
def test_user_text_is_never_parsed_as_syntax(filled, query):
    hits = filled.bm25(query, k=5)
    assert isinstance(hits, list)
    assert len(hits) <= 5
    wanted = chunk_id("chimerax", COLOR, 0)
    assert set(filled.page(query, [wanted])) == {wanted}


@pytest.mark.parametrize("query", ["", "   ", "*", "?!", "()", "the", "Is it in the"])
def test_bm25_without_usable_terms_finds_nothing(filled, query):
    """Nor do stop words alone: no backend matches them, in prose or in the code-aware fields."""
    assert filled.bm25(query, k=5) == []


# -- knn ------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("query", "expected"),
    [
        ("make the molecule see-through", chunk_id("chimerax", "user/commands/transparency.html", 0)),
        ("give every protein chain a different colour", chunk_id("chimerax", COLOR, 1)),
        ("run my function after the web page finished loading", chunk_id("panel", LOAD, 0, "1.5")),
        ("write a picture of the scene to a file", chunk_id("chimerax", SAVE, 0)),
    ],
)
def test_knn_finds_a_paraphrase(filled, embedder, query, expected):
    hits = filled.knn(embedder.encode_query(query), k=3)
    assert expected in ids(hits)
    scores = [hit.score for hit in hits]
    assert scores == sorted(scores, reverse=True)


def test_knn_returns_k_hits(filled, embedder):
    assert len(filled.knn(embedder.encode_query("protein structure"), k=7)) == 7


# -- filters --------------------------------------------------------------------------------------

FILTERS = [
    Filters(categories=("tutorial",)),
    Filters(sources=("panel",)),
    Filters(versions=("1.4",)),
    Filters(categories=("reference",), sources=("panel",)),
    Filters(categories=("reference", "api"), sources=("chimerax",)),
    Filters(categories=("reference",), sources=("panel",), versions=("1.5",)),
]


def matches(chunk: Chunk, filters: Filters) -> bool:
    return (
        (not filters.categories or chunk.category in filters.categories)
        and (not filters.sources or chunk.source in filters.sources)
        and (not filters.versions or chunk.version in filters.versions)
    )


@pytest.mark.parametrize("filters", FILTERS, ids=repr)
def test_filters_return_only_matching_hits_and_k_of_them(filled, chunks, embedder, filters):
    matching = [chunk for chunk in chunks if matches(chunk, filters)]
    k = min(2, len(matching))
    knn_hits = filled.knn(embedder.encode_query("how do I change the appearance"), k=k, filters=filters)
    assert len(knn_hits) == k
    assert all(matches(hit.chunk, filters) for hit in knn_hits)
    # Every sample chunk mentions one of these words.
    words = "the a of and to in on with is are set command commands page column"
    bm25_hits = filled.bm25(words, k=len(matching) + 5, filters=filters)
    assert all(matches(hit.chunk, filters) for hit in bm25_hits)
    assert {hit.chunk.chunk_id for hit in bm25_hits} <= {chunk.chunk_id for chunk in matching}


def test_a_filter_matching_nothing_finds_nothing(filled, embedder):
    nowhere = Filters(sources=("no-such-source",))
    assert filled.bm25("color", k=5, filters=nowhere) == []
    assert filled.knn(embedder.encode_query("color"), k=5, filters=nowhere) == []


def test_filters_apply_before_the_top_k(store, sample_chunks):
    """Many close non-matching chunks and one far matching one: k=1 with the filter finds it."""
    near, far = sample_chunks[0], by_id(sample_chunks, chunk_id("panel", TABULATOR, 2, "1.5"))
    rng = np.random.default_rng(7)
    crowd = []
    for index in range(300):
        vector = np.asarray(near.embedding) + rng.normal(0, 0.01, len(near.embedding))
        crowd.append(
            Chunk(
                chunk_id=f"crowd#{index}",
                doc_id=f"crowd-{index}",
                source="crowd",
                path=f"crowd/{index}.md",
                title="Ribbon",
                breadcrumb=[],
                section="Ribbon",
                category="common",
                doc_type="markdown",
                chunk_index=0,
                content="ribbon ribbon ribbon: the ribbon shows the backbone as a ribbon",
                content_hash="c",
                indexed_at="2025-06-01T12:00:00+00:00",
                embedding=(vector / np.linalg.norm(vector)).tolist(),
            )
        )
    rare = fresh([far])[0]
    rare.chunk_id, rare.doc_id, rare.source, rare.category = "rare#0", "rare", "crowd", "rare"
    rare.content = "Pagination for long tables. " * 10 + "A ribbon is mentioned once."
    write(store, [*crowd, rare])
    only_rare = Filters(categories=("rare",))
    assert ids(store.knn(near.embedding, k=1, filters=only_rare)) == ["rare#0"]
    assert ids(store.bm25("ribbon", k=1, filters=only_rare)) == ["rare#0"]
    assert ids(store.knn(near.embedding, k=3, filters=only_rare)) == ["rare#0"]


# -- the page: whole chunks, highlighted; brief candidates -----------------------------------------


def test_page_gives_the_chunks_whole(filled, chunks):
    wanted = [chunk_id("chimerax", COLOR, 1), chunk_id("panel", TABULATOR, 1, "1.5")]
    page = filled.page("color", [*wanted, "no-such-chunk"])
    assert set(page) == set(wanted)  # unknown ids are left out
    for chunk_id_ in wanted:
        stored, expected = page[chunk_id_].chunk, by_id(chunks, chunk_id_)
        assert stored.to_dict() | {"indexed_at": ""} == expected.to_dict() | {"indexed_at": ""}
    assert filled.page("color", []) == {}


def test_brief_hits_rank_as_whole_ones_and_carry_what_fusion_needs(filled, embedder):
    vector = embedder.encode_query("color protein by chain")
    for whole, brief in (
        (filled.bm25("color protein by chain", k=8), filled.bm25("color protein by chain", k=8, brief=True)),
        (filled.knn(vector, k=8), filled.knn(vector, k=8, brief=True)),
    ):
        assert ids(brief) == ids(whole) and len(whole) >= 5
        for short, full in zip(brief, whole, strict=True):
            assert short.chunk.doc_id == full.chunk.doc_id
            assert short.score == pytest.approx(full.score)


# -- highlight ------------------------------------------------------------------------------------


def test_highlight_wraps_query_terms_in_em(filled):
    wanted = chunk_id("chimerax", "user/commands/transparency.html", 0)
    fragments = highlights(filled, "transparent surfaces", [wanted])[wanted]
    assert fragments
    joined = " ".join(fragments).lower()
    assert "<em>transparent</em>" in joined
    assert "<em>surfaces</em>" in joined


def test_highlight_marks_stemmed_matches(filled):
    wanted = chunk_id("chimerax", COLOR, 1)
    fragments = highlights(filled, "colors", [wanted])[wanted]
    assert "<em>coloring</em>" in " ".join(fragments).lower()


def test_highlight_without_a_match_shows_the_opening(filled, chunks):
    matched, unmatched = chunk_id("chimerax", COLOR, 1), chunk_id("panel", LOAD, 1, "1.5")
    result = highlights(filled, "bychain", [matched, unmatched])
    assert set(result) == {matched, unmatched}
    opening = result[unmatched]
    assert len(opening) >= 1
    assert "<em>" not in opening[0]
    content = " ".join(by_id(chunks, unmatched).content.split())
    assert content.startswith(plain(opening[0])[:40])
    assert 20 <= len(plain(opening[0])) <= 300
    assert any("<em>" in fragment for fragment in result[matched])


def test_highlight_fragments_are_text_of_the_chunk(filled, chunks):
    wanted = chunk_id("panel", TABULATOR, 1, "1.5")
    content = " ".join(by_id(chunks, wanted).content.split())
    for fragment in highlights(filled, "widget column rows", [wanted])[wanted]:
        assert plain(fragment) in content


# -- lookup and documents -------------------------------------------------------------------------


def test_lookup_is_case_insensitive_and_returns_whole_documents_in_order(filled, chunks):
    found = filled.lookup("TABULATOR")
    expected = sorted(
        (chunk for chunk in chunks if chunk.path == TABULATOR), key=lambda chunk: (chunk.doc_id, chunk.chunk_index)
    )
    assert [chunk.chunk_id for chunk in found] == [chunk.chunk_id for chunk in expected]
    assert [chunk.chunk_id for chunk in filled.lookup("pn.CONFIG")] == [
        chunk_id("panel", "api/config.md", 0, "1.5"),
        chunk_id("panel", "api/config.md", 1, "1.5"),
    ]


def test_lookup_respects_sources_and_unknown_names(filled):
    assert filled.lookup("color", sources=["panel"]) == []
    assert [chunk.path for chunk in filled.lookup("color", sources=["chimerax"])] == [COLOR] * 3
    assert filled.lookup("no-such-name") == []


def test_get_chunk_round_trips_every_field(filled, chunks):
    for chunk in chunks:
        assert filled.get_chunk(chunk.chunk_id).to_dict() == chunk.to_dict()
    with pytest.raises(NotFoundError):
        filled.get_chunk("no-such-chunk")


def test_get_document_returns_chunks_in_order(filled, chunks):
    expected = [chunk.chunk_id for chunk in chunks if chunk.path == SAVE]
    assert [chunk.chunk_id for chunk in filled.get_document(SAVE)] == expected
    assert [chunk.chunk_id for chunk in filled.get_document(SAVE, source="chimerax")] == expected
    with pytest.raises(NotFoundError):
        filled.get_document("no/such/page.html")
    with pytest.raises(NotFoundError):
        filled.get_document(SAVE, source="panel")


def test_get_document_picks_a_version(filled):
    assert {chunk.version for chunk in filled.get_document(TABULATOR, version="1.4")} == {"1.4"}
    assert len(filled.get_document(TABULATOR, source="panel", version="1.4")) == 2
    assert {chunk.version for chunk in filled.get_document(TABULATOR)} == {"1.5"}  # the newest by default


def test_get_document_with_a_path_in_several_sources_names_them(filled):
    with pytest.raises(NotFoundError) as error:
        filled.get_document("index.md")
    assert "chimerax" in str(error.value)
    assert "panel" in str(error.value)
    assert [chunk.source for chunk in filled.get_document("index.md", source="panel")] == ["panel"]


def test_doc_hashes_per_source_and_version(filled, chunks):
    def expected(source, version):
        return {
            chunk.path: chunk.content_hash for chunk in chunks if (chunk.source, chunk.version) == (source, version)
        }

    assert filled.doc_hashes("chimerax") == expected("chimerax", "")
    assert filled.doc_hashes("panel", "1.5") == expected("panel", "1.5")
    assert filled.doc_hashes("panel", "1.4") == {TABULATOR: "h1"}
    assert filled.doc_hashes("panel") == {}


def test_list_sources_counts_documents_chunks_categories_and_versions(filled, chunks):
    infos = {info.source: info for info in filled.list_sources()}
    assert set(infos) == {"chimerax", "panel"}
    for source, info in infos.items():
        mine = [chunk for chunk in chunks if chunk.source == source]
        assert info.documents == len({chunk.doc_id for chunk in mine})
        assert info.chunks == len(mine)
        categories = {chunk.category for chunk in mine}
        assert info.categories == {c: sum(chunk.category == c for chunk in mine) for c in categories}
        versions = {chunk.version for chunk in mine}
        assert info.versions == {v: sum(chunk.version == v for chunk in mine) for v in versions}
        assert info.origin == f"/docs/{source}"
        assert info.last_indexed == "2025-06-02T08:00:00+00:00"


def _facets_by_hand(chunks: list[Chunk], keep) -> dict[str, dict[str, int]]:
    documents: dict[str, dict[str, set[str]]] = {"source": {}, "version": {}, "category": {}}
    for chunk in chunks:
        if keep(chunk):
            for field, values in documents.items():
                values.setdefault(getattr(chunk, field), set()).add(chunk.doc_id)
    return {field: {value: len(ids) for value, ids in values.items()} for field, values in documents.items()}


@pytest.mark.parametrize(
    ("filters", "keep"),
    [
        (None, lambda chunk: True),
        (Filters(sources=("panel",)), lambda chunk: chunk.source == "panel"),
        (Filters(categories=("reference",)), lambda chunk: chunk.category == "reference"),
        (Filters(pinned_versions=(("panel", "1.5"),)), lambda chunk: chunk.source != "panel" or chunk.version == "1.5"),
    ],
)
def test_facet_counts_count_documents_per_source_version_and_category(filled, chunks, filters, keep):
    counts = filled.facet_counts(filters)
    assert counts == _facets_by_hand(chunks, keep)
    for values in counts.values():  # largest first, then by value
        assert list(values.items()) == sorted(values.items(), key=lambda item: (-item[1], item[0]))


def test_source_states_keep_what_was_recorded(filled):
    assert filled.source_states()["panel"] == {"origin": "/docs/panel", "last_indexed": "2025-06-02T08:00:00+00:00"}
    with filled.writer(META, rebuild=False) as writer:
        writer.record_source("panel", {"origin": "git@example.org:panel", "commit": "abc123"})
    states = filled.source_states()
    assert states["panel"] == {"origin": "git@example.org:panel", "commit": "abc123"}
    assert states["chimerax"]["origin"] == "/docs/chimerax"


def test_a_crawled_sites_pages_survive_updates_and_rebuilds(filled):
    """A site's per-URL state (issue 19) round-trips, is replaced whole, and is carried through a rebuild.
    On OpenSearch it stays out of the index mapping's _meta (cluster state), in an index of its own."""
    pages = {f"https://docs.example.org/p{i}.html": {"etag": f'"{i}"', "file": f"{i}.html", "path": f"p{i}.html"}
             for i in range(300)}  # fmt: skip
    site = {"origin": "https://docs.example.org/", "versions": {"": {"last_indexed": "2025-06-03", "pages": pages}}}
    with filled.writer(META, rebuild=False) as writer:
        writer.record_source("site", site)
    assert filled.source_states()["site"] == site
    assert "site" not in {info.source for info in filled.list_sources()}  # a state alone: no chunks
    fewer = {
        "origin": site["origin"],
        "versions": {"": {"last_indexed": "2025-06-04", "pages": dict([*pages.items()][:2])}},
    }
    with filled.writer(META, rebuild=False) as writer:
        writer.record_source("site", fewer)
    assert filled.source_states()["site"] == fewer
    with filled.writer(META, rebuild=True) as writer:
        writer.copy_sources(exclude={("chimerax", None)})
    assert filled.source_states()["site"] == fewer
    if filled.backend == "opensearch":
        live = filled._live_index()
        assert "pages" not in json.dumps(filled._meta_of(live)["sources"]["site"])
        assert filled._crawl_indices() == [filled.crawl_index_of(live)]  # the old index's went with it
        filled.drop()
        assert filled._crawl_indices() == []


def test_iter_chunks_with_and_without_embeddings(filled, chunks):
    plain_chunks = list(filled.iter_chunks(with_embedding=False))
    assert sorted(chunk.chunk_id for chunk in plain_chunks) == sorted(chunk.chunk_id for chunk in chunks)
    assert all(chunk.embedding is None for chunk in plain_chunks)
    written = {chunk.chunk_id: chunk for chunk in chunks}
    for chunk in filled.iter_chunks(with_embedding=True):
        assert np.allclose(chunk.embedding, written[chunk.chunk_id].embedding, atol=1e-5)
        assert chunk.to_dict() == written[chunk.chunk_id].to_dict()


# -- incremental writes ---------------------------------------------------------------------------


def test_delete_documents_removes_every_trace(filled, chunks, embedder):
    doc_id = chunks[0].doc_id  # chimerax color.html, 3 chunks
    gone = {chunk.chunk_id for chunk in chunks if chunk.doc_id == doc_id}
    with filled.writer(META, rebuild=False) as writer:
        assert writer.delete_documents([doc_id]) == 3
        assert writer.delete_documents(["no-such-doc"]) == 0
    assert all_ids(filled) == {chunk.chunk_id for chunk in chunks} - gone
    for wanted in gone:
        with pytest.raises(NotFoundError):
            filled.get_chunk(wanted)
    assert not gone & set(ids(filled.bm25("color bychain byhetero", k=30)))
    assert not gone & set(ids(filled.knn(embedder.encode_query("color each chain"), k=30)))
    assert filled.lookup("color") == []
    assert COLOR not in filled.doc_hashes("chimerax")
    with pytest.raises(NotFoundError):
        filled.get_document(COLOR)


def test_delete_documents_keeping_one_content_hash(filled, chunks):
    doc = [chunk for chunk in chunks if chunk.doc_id == chunks[0].doc_id]
    newer = fresh(doc[:2])
    for chunk in newer:
        chunk.content_hash = "h2"
        chunk.content = chunk.content + " Updated."
    with filled.writer(META, rebuild=False) as writer:
        assert writer.write(newer).written == 2
        assert writer.delete_documents([doc[0].doc_id], keep_hash="h2") == 1
    document = filled.get_document(COLOR)
    assert [chunk.chunk_id for chunk in document] == [chunk.chunk_id for chunk in newer]
    assert {chunk.content_hash for chunk in document} == {"h2"}
    assert filled.doc_hashes("chimerax")[COLOR] == "h2"


def test_incremental_writer_adds_to_the_live_index(filled, chunks):
    extra = fresh([chunks[0]])[0]
    extra.chunk_id, extra.chunk_index, extra.content = f"{extra.doc_id}#9", 9, "Addendum about zircon."
    with filled.writer(META, rebuild=False) as writer:
        assert writer.write([extra]).written == 1
    assert ids(filled.bm25("zircon", k=3)) == [extra.chunk_id]
    assert filled.get_document(COLOR)[-1].chunk_id == extra.chunk_id
    assert len(all_ids(filled)) == len(chunks) + 1


# -- rebuilds -------------------------------------------------------------------------------------


def _renamed(chunks: list[Chunk], word: str) -> list[Chunk]:
    out = fresh(chunks)
    for chunk in out:
        chunk.content = f"{chunk.content} {word}"
    return out


def test_rebuild_swaps_atomically_when_the_block_exits(store, chunks):
    write(store, _renamed(chunks[:10], "oldword"))
    with store.writer(META, rebuild=True) as writer:
        writer.write(_renamed(chunks[10:], "newword"))
        # Still the old index while the new one is being built.
        assert len(store.bm25("oldword", k=50)) == 10
        assert store.bm25("newword", k=50) == []
        assert all_ids(store) == {chunk.chunk_id for chunk in chunks[:10]}
    assert store.bm25("oldword", k=50) == []
    assert len(store.bm25("newword", k=50)) == len(chunks) - 10
    assert all_ids(store) == {chunk.chunk_id for chunk in chunks[10:]}


def test_a_failed_rebuild_leaves_the_old_index_serving(store, harness, chunks):
    write(store, chunks[:10])
    with pytest.raises(RuntimeError, match="boom"), store.writer(META, rebuild=True) as writer:
        writer.write(chunks[10:])
        raise RuntimeError("boom")
    assert all_ids(store) == {chunk.chunk_id for chunk in chunks[:10]}
    assert store.index_meta() == META
    assert harness.partial_indexes(store) == []


def test_a_failed_first_build_leaves_no_index(store, harness, chunks):
    with pytest.raises(RuntimeError, match="boom"), store.writer(META, rebuild=True) as writer:
        writer.write(chunks)
        raise RuntimeError("boom")
    assert store.index_meta() is None
    assert harness.partial_indexes(store) == []


def test_rebuild_with_another_meta_replaces_the_index(filled, chunks):
    other = IndexMeta(META.mapping_version + 1, META.model, META.dimension)
    with filled.writer(other, rebuild=True) as writer:
        writer.write(chunks[:3])
    assert filled.index_meta() == other
    assert all_ids(filled) == {chunk.chunk_id for chunk in chunks[:3]}


def test_copy_sources_keeps_other_sources_through_a_rebuild(filled, chunks, embedder):
    panel = [chunk for chunk in chunks if chunk.source == "panel"]
    replacement = fresh([chunk for chunk in chunks if chunk.source == "chimerax"][:2])
    with filled.writer(META, rebuild=True) as writer:
        assert writer.copy_sources(exclude={("chimerax", None)}) == len(panel)
        writer.write(replacement)
        writer.record_source("chimerax", {"origin": "/new/chimerax"})
    assert all_ids(filled) == {chunk.chunk_id for chunk in panel + replacement}
    # Copied chunks keep their vectors and text: both searches still find them.
    assert chunk_id("panel", LOAD, 0, "1.5") in ids(
        filled.knn(embedder.encode_query("run code after the page loads"), k=3)
    )
    assert ids(filled.bm25("pn.state.onload", k=1)) == [chunk_id("panel", LOAD, 0, "1.5")]
    assert filled.source_states()["chimerax"] == {"origin": "/new/chimerax"}


def test_copy_sources_keeps_the_other_versions_of_a_source_being_rebuilt(filled, chunks):
    kept = [chunk for chunk in chunks if (chunk.source, chunk.version) != ("panel", "1.5")]
    assert {chunk.version for chunk in kept if chunk.source == "panel"} == {"1.4"}  # the samples have both
    with filled.writer(META, rebuild=True) as writer:
        assert writer.copy_sources(exclude={("panel", "1.5"), ("chimerax", "9.9")}) == len(kept)
    assert all_ids(filled) == {chunk.chunk_id for chunk in kept}


def test_copy_sources_is_a_no_op_without_a_live_index(store, chunks):
    with store.writer(META, rebuild=True) as writer:
        assert writer.copy_sources(exclude=set()) == 0
        writer.write(chunks)
    assert len(all_ids(store)) == len(chunks)


# -- document vectors -----------------------------------------------------------------------------


def centroids_of(chunks: list[Chunk]) -> dict[str, np.ndarray]:
    """What knn_documents must rank by: each document's normalized mean chunk vector, computed here."""
    groups: dict[str, list[list[float]]] = {}
    for chunk in chunks:
        groups.setdefault(chunk.doc_id, []).append(chunk.embedding)
    means = {doc_id: np.mean(vectors, axis=0) for doc_id, vectors in groups.items()}
    return {doc_id: mean / np.linalg.norm(mean) for doc_id, mean in means.items()}


def expected_documents(chunks: list[Chunk], vector: list[float], k: int) -> list[tuple[str, float]]:
    cosines = {doc_id: float(centroid @ np.asarray(vector)) for doc_id, centroid in centroids_of(chunks).items()}
    best = sorted(cosines, key=lambda doc_id: -cosines[doc_id])[:k]
    return [(doc_id, (1 + cosines[doc_id]) / 2) for doc_id in best]


def assert_same_documents(found: list[tuple[str, float]], expected: list[tuple[str, float]]) -> None:
    assert [doc_id for doc_id, _ in found] == [doc_id for doc_id, _ in expected]
    assert [score for _, score in found] == pytest.approx([score for _, score in expected], abs=1e-4)


@pytest.mark.parametrize("query", ["give every protein chain a different colour", "editable table cells"])
def test_knn_documents_ranks_documents_by_their_centroid(filled, chunks, embedder, query):
    vector = embedder.encode_query(query)
    assert len({chunk.doc_id for chunk in chunks}) > 4
    assert_same_documents(filled.knn_documents(vector, k=4), expected_documents(chunks, vector, 4))


@pytest.mark.parametrize("filters", FILTERS, ids=repr)
def test_knn_documents_apply_the_filters(filled, chunks, embedder, filters):
    matching = [chunk for chunk in chunks if matches(chunk, filters)]
    vector = embedder.encode_query("how do I change the appearance")
    found = filled.knn_documents(vector, k=50, filters=filters)
    assert_same_documents(found, expected_documents(matching, vector, 50))
    assert filled.knn_documents(vector, k=5, filters=Filters(sources=("no-such-source",))) == []


def test_document_vectors_follow_incremental_writes_and_deletes(filled, chunks, embedder):
    color = [chunk for chunk in chunks if chunk.doc_id == chunks[0].doc_id]
    newer = fresh(color[:1])
    newer[0].content_hash = "h2"
    newer[0].embedding = embedder.encode(["Zircon crystals and their lattice."])[0].tolist()
    load_doc = next(chunk.doc_id for chunk in chunks if chunk.path == LOAD and chunk.version == "1.5")
    with filled.writer(META, rebuild=False) as writer:
        writer.write(newer)
        writer.delete_documents([color[0].doc_id], keep_hash="h2")
        writer.delete_documents([load_doc])
    now = newer + [chunk for chunk in chunks if chunk.doc_id not in {color[0].doc_id, load_doc}]
    vector = embedder.encode_query("zircon crystal lattice")
    found = filled.knn_documents(vector, k=50)
    assert found[0][0] == color[0].doc_id
    assert load_doc not in {doc_id for doc_id, _ in found}
    assert_same_documents(found, expected_documents(now, vector, 50))


def test_document_vectors_survive_copy_sources(filled, chunks, embedder):
    panel = [chunk for chunk in chunks if chunk.source == "panel"]
    with filled.writer(META, rebuild=True) as writer:
        writer.copy_sources(exclude={("chimerax", None)})
    vector = embedder.encode_query("run code after the page loads")
    assert_same_documents(filled.knn_documents(vector, k=50), expected_documents(panel, vector, 50))


def test_document_vectors_are_the_same_written_whole_or_in_parts(store, chunks, embedder):
    half = len(chunks) // 2
    with store.writer(META, rebuild=True) as writer:
        writer.write(chunks[half:])  # a document split across the two calls: derived when the block exits
        writer.write(chunks[:half])
    vector = embedder.encode_query("table of data with editors")
    in_parts = store.knn_documents(vector, k=50)
    with store.writer(META, rebuild=True) as writer:
        writer.write(chunks, whole_documents=True)
    assert_same_documents(store.knn_documents(vector, k=50), in_parts)
    assert_same_documents(in_parts, expected_documents(chunks, vector, 50))
