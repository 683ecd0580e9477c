"""The pure shaping behind the MCP tools: documents rebuilt from chunks, answers cut to a budget."""

from __future__ import annotations

import pytest

from docsctl.models import Chunk, Hit, IndexMeta, SourceInfo
from docsctl.server import results
from docsctl.server.results import (
    cut_text,
    document_result,
    fit_document,
    join_chunks,
    lookup_result,
    rank_pages,
    search_response,
    sources_result,
    strip_overlap,
    with_anchor,
)
from docsctl.server.search import SearchResult

MARK = "[… truncated: call get_chunk(chunk_id='x')]"


def chunk(
    index: int,
    content: str,
    *,
    lines: tuple[int, int] | None = None,
    breadcrumb: tuple[str, ...] = (),
    path: str = "user/commands/color.html",
    title: str = "Command: color",
    names: tuple[str, ...] = (),
) -> Chunk:
    start, end = lines or (index * 10 + 1, index * 10 + 9)
    return Chunk(
        chunk_id=f"{path}-{index}",
        doc_id=f"docs:{path}",
        source="docs",
        path=path,
        title=title,
        breadcrumb=list(breadcrumb),
        section=breadcrumb[-1] if breadcrumb else title,
        category="commands",
        doc_type="html",
        chunk_index=index,
        content=content,
        content_hash="h",
        start_line=start,
        end_line=end,
        names=list(names),
        url=f"https://example.org/{path}",
        anchor="top",
    )


# -- strip_overlap ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("previous", "current", "expected"),
    [
        pytest.param("One.\n\nTwo.", "Three.\n\nFour.", "Three.\n\nFour.", id="no overlap"),
        pytest.param("One.\n\nTwo.", "Two.\n\nThree.", "Three.", id="one paragraph"),
        pytest.param("One.\n\nTwo.\n\nThree.", "Two.\n\nThree.\n\nFour.", "Four.", id="two paragraphs: the longest"),
        pytest.param("A long one; perform texture mapping", "perform texture mapping\n\nNext.", "Next.", id="words"),
        pytest.param("First. Second one\nends here.", "Second one ends here.\n\nNew.", "New.", id="whitespace"),
        pytest.param("He will reperform it", "perform it\n\nNew.", "perform it\n\nNew.", id="not mid-word"),
        pytest.param("Same.", "Same.\n\nNew.", "New.", id="all of previous"),
        pytest.param("Tail.", "Tail.", "Tail.", id="nothing after the repeat"),
        pytest.param("", "Tail.\n\nNew.", "Tail.\n\nNew.", id="empty previous"),
        pytest.param("x\n\nTail.", "Tail.\n\n\n\nNew.", "New.", id="several blank lines"),
    ],
)
def test_strip_overlap(previous: str, current: str, expected: str) -> None:
    assert strip_overlap(previous, current) == expected


# -- join_chunks -----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("chunks", "expected"),
    [
        pytest.param([chunk(0, "Intro.")], "Intro.", id="one chunk"),
        pytest.param(
            [chunk(0, "Intro.\n\nEnd of intro.", lines=(1, 9)), chunk(1, "End of intro.\n\nMore.", lines=(9, 15))],
            "Intro.\n\nEnd of intro.\n\nMore.",
            id="overlap dropped",
        ),
        pytest.param(
            [chunk(0, "Intro.", lines=(1, 9)), chunk(1, "Usage.", lines=(10, 15), breadcrumb=("Simple",))],
            "Intro.\n\n## Simple\n\nUsage.",
            id="a new section gets its heading",
        ),
        pytest.param(
            [
                chunk(0, "Usage.", lines=(1, 9), breadcrumb=("Simple", "Options")),
                chunk(1, "Usage.\n\nMore options.", lines=(9, 15), breadcrumb=("Simple", "Options")),
            ],
            "### Options\n\nUsage.\n\nMore options.",
            id="a continued section is not headed twice",
        ),
        pytest.param(
            [chunk(0, "Intro.", lines=(1, 9)), chunk(1, "## Merged\n\nText.", lines=(10, 15), breadcrumb=("Merged",))],
            "Intro.\n\n## Merged\n\nText.",
            id="content that opens with a heading keeps it",
        ),
        pytest.param(
            [chunk(0, "Same.\n\nRepeat.", lines=(1, 9)), chunk(1, "Repeat.\n\nNew.", lines=(20, 25))],
            "Same.\n\nRepeat.\n\nRepeat.\n\nNew.",
            id="a repeat that starts after the previous chunk is real text",
        ),
    ],
)
def test_join_chunks(chunks: list[Chunk], expected: str) -> None:
    assert join_chunks(chunks) == expected


# -- cut_text --------------------------------------------------------------------------------------

LONG = "First paragraph is here.\n\n" + "word " * 60 + "\n\nLast."


@pytest.mark.parametrize(
    ("text", "limit", "expected"),
    [
        pytest.param("short", 100, "short", id="fits"),
        pytest.param(LONG, len(LONG), LONG, id="fits exactly"),
        pytest.param(
            "The first paragraph, which is long enough.\n\n" + "x" * 200,
            120,
            f"The first paragraph, which is long enough.\n{MARK}",
            id="cut at a paragraph",
        ),
        pytest.param(
            "A first line that is long enough here.\n" + "y" * 200,
            110,
            f"A first line that is long enough here.\n{MARK}",
            id="at a line",
        ),
        pytest.param("The start, then " + "z" * 200, 100, "The start, then " + "z" * 36 + f"\n{MARK}", id="hard cut"),
        pytest.param(LONG, 20, MARK, id="too small: the marker alone"),
    ],
)
def test_cut_text(text: str, limit: int, expected: str) -> None:
    assert cut_text(text, limit, MARK) == expected


@pytest.mark.parametrize("limit", [60, 100, 150, 200, 300])
def test_cut_text_never_exceeds_the_limit_and_always_says_so(limit: int) -> None:
    cut = cut_text(LONG, limit, MARK)
    assert len(cut) <= limit
    assert cut.endswith(MARK)


def test_cut_text_with_more_to_come_always_says_so() -> None:
    assert cut_text("Short.", 100, MARK, more=True) == f"Short.\n{MARK}"


def test_cut_text_closes_a_code_block_it_cuts_open() -> None:
    text = "Example:\n\n```\n" + "\n".join(f"line {n}" for n in range(100)) + "\n```"
    cut = cut_text(text, 200, MARK)
    assert cut.endswith(f"```\n{MARK}")
    assert cut.count("```") == 2
    assert len(cut) <= 200


# -- fit_document and document_result ---------------------------------------------------------------


def marker_for(index: int) -> str:
    return f"[… truncated: call get_document(path='p', from_chunk={index})]"


DOC = [chunk(i, f"Paragraph {i}. " + "text " * 40, lines=(i * 10 + 1, i * 10 + 9)) for i in range(6)]


@pytest.mark.parametrize(
    ("limit", "next_chunk", "whole"),
    [
        pytest.param(100_000, None, 6, id="everything fits"),
        pytest.param(len(join_chunks(DOC)), None, 6, id="fits exactly"),
        pytest.param(500, 2, 2, id="two chunks and part of the third"),
        pytest.param(150, 0, 0, id="part of the first"),
    ],
)
def test_fit_document(limit: int, next_chunk: int | None, whole: int) -> None:
    text, next_index, shown = fit_document(DOC, limit, marker_for)
    assert (next_index, shown) == (next_chunk, whole)
    assert len(text) <= limit
    if next_chunk is None:
        assert text == join_chunks(DOC)
    else:
        assert text.endswith(marker_for(next_chunk))


def test_document_pages_cover_the_whole_document() -> None:
    pages, start = [], 0
    while start is not None:
        document, _ = document_result(DOC, from_chunk=start, max_chars=1000)
        pages.append(document)
        assert len(document.content) <= 1000
        start = document.next_chunk
    assert len(pages) > 1
    seen = {ref.chunk_index for page in pages for ref in page.chunks}
    assert seen == set(range(len(DOC)))
    for number in range(len(DOC)):
        assert any(f"Paragraph {number}." in page.content for page in pages)


def test_document_from_a_chunk_past_the_end() -> None:
    document, text = document_result(DOC, from_chunk=99, max_chars=5000)
    assert document.content.startswith("(the document has 6 chunks")
    assert document.next_chunk is None
    assert document.chunks == []


# -- search_response -----------------------------------------------------------------------------------


def _result(count: int, total: int | None = None) -> SearchResult:
    hits = [
        Hit(
            chunk=chunk(0, f"Section of document {n}. " + "text " * 200, path=f"doc{n}.html", title=f"Doc {n}"),
            score=1.0 / (n + 1),
            highlights=[f"the <em>match</em> {n}"],
        )
        for n in range(count)
    ]
    return SearchResult("query", "hybrid", hits, total if total is not None else count, 12.0)


@pytest.mark.parametrize("content", ["chunk", "document", "none"])
@pytest.mark.parametrize("max_chars", [1000, 3000, 12000])
def test_search_response_stays_within_the_budget(content: str, max_chars: int) -> None:
    fetched: list[str] = []

    def document_text(c: Chunk) -> str:
        fetched.append(c.path)
        return "Whole document. " * 300

    response, text = search_response(
        _result(10, total=40), offset=0, content=content, max_chars=max_chars, document_text=document_text
    )
    assert len(text) <= max_chars
    assert response.results, "the best result is always shown"
    assert [hit.rank for hit in response.results] == list(range(1, response.returned + 1))
    assert response.next_offset == response.returned
    assert f"offset={response.returned}" in text
    assert len(fetched) <= response.returned, "documents are fetched only for results shown"
    if content == "none":
        assert all(hit.content is None for hit in response.results)
    if response.truncated and content != "none":
        assert "[… truncated: call get_" in text
    if response.omitted:
        assert f"{response.omitted} left out to respect max_chars" in text


def test_search_response_cut_content_names_the_call_for_the_rest() -> None:
    response, text = search_response(_result(1), offset=0, content="chunk", max_chars=1000, document_text=lambda c: "")
    hit = response.results[0]
    assert hit.content_truncated
    assert hit.content.endswith(
        "[… truncated: call get_chunk(chunk_id='doc0.html-0') or get_document(path='doc0.html', source='docs')]"
    )
    assert response.next_offset is None
    assert "More results" not in text


def test_search_response_pages_continue_the_ranks() -> None:
    response, text = search_response(
        _result(3, total=8), offset=5, content="none", max_chars=12000, document_text=lambda c: ""
    )
    assert [hit.rank for hit in response.results] == [6, 7, 8]
    assert response.next_offset is None
    assert "results 6-8" in text


def test_search_response_without_results_says_what_to_try() -> None:
    response, text = search_response(_result(0), offset=0, content="chunk", max_chars=12000, document_text=lambda c: "")
    assert response.results == [] and response.next_offset is None
    assert "No results" in text


def test_search_response_past_the_last_page_says_so() -> None:
    _, text = search_response(_result(0, total=8), offset=10, content="chunk", max_chars=12000, document_text=str)
    assert "offset=10 is past the last of 8" in text


# -- lookup ------------------------------------------------------------------------------------------


def test_lookup_of_an_unknown_name_suggests_a_search() -> None:
    response, text = lookup_result("nosuchname", [], max_chars=12000)
    assert response.found == 0
    assert "search_docs(query='nosuchname')" in text


def test_pages_named_after_the_name_come_first() -> None:
    tool = [chunk(0, "x", path="user/tools/hbonds.html", title="Tool: H-Bonds", names=("hbonds", "h-bonds"))]
    command = [chunk(0, "x", path="user/commands/hbonds.html", title="Command: hbonds", names=("hbonds",))]
    other = [chunk(0, "x", path="user/commands/a.html", title="Command: a, b", names=("a", "b", "hbonds"))]
    ranked = rank_pages("HBonds", [other, tool, command])
    assert [page[0].path for page in ranked] == [
        "user/commands/hbonds.html",  # named in its title
        "user/tools/hbonds.html",  # then the most specific: fewest names
        "user/commands/a.html",
    ]


def api_page(chunks: int, anchored_at: int) -> list[Chunk]:
    """An API page of `chunks` chunks that documents pkg.Thing in chunk `anchored_at` (as objects.inv said)."""
    names = ("pkg", "pkg.thing")
    page = [
        chunk(i, f"Part {i}. " + "text " * 40, path="api/pkg.html", title="pkg", names=names) for i in range(chunks)
    ]
    page[anchored_at].content = "class pkg.Thing(size)\n\nA thing of a given size."
    page[anchored_at].name_anchors = [["pkg.thing", "pkg.Thing"]]
    return page


def test_a_name_placed_at_an_anchor_is_answered_from_its_chunk_with_the_anchors_url() -> None:
    page = api_page(40, anchored_at=25)
    response, text = lookup_result("PKG.Thing", [page], max_chars=3000)
    (document,) = response.documents
    assert document.url == "https://example.org/api/pkg.html#pkg.Thing"
    assert document.from_chunk == 25 and document.chunks[0].chunk_id == page[25].chunk_id
    assert document.content.startswith("class pkg.Thing(size)") and "Part 24." not in document.content
    assert "url: https://example.org/api/pkg.html#pkg.Thing" in text and "chunks 25-39 of 40" in text
    whole, _ = lookup_result("pkg", [page], max_chars=3000)  # a name of the page alone: from its top, as before
    assert whole.documents[0].from_chunk == 0 and whole.documents[0].url == "https://example.org/api/pkg.html"


def test_the_page_a_name_is_placed_on_comes_before_pages_that_only_name_it() -> None:
    titled = [chunk(0, "x", path="guide/thing.html", title="pkg.Thing", names=("pkg.thing",))]
    ranked = rank_pages("pkg.thing", [titled, api_page(3, anchored_at=1)])
    assert [page[0].path for page in ranked] == ["api/pkg.html", "guide/thing.html"]


def test_lookup_shares_the_budget_and_shows_every_page() -> None:
    other = [chunk(i, f"Other {i}. " + "text " * 40, path="other.html", title="Other") for i in range(6)]
    response, text = lookup_result("color", [DOC, other], max_chars=1000)
    assert response.found == 2 and response.truncated
    assert [doc.path for doc in response.documents] == ["user/commands/color.html", "other.html"]
    assert "get_document(path='user/commands/color.html', source='docs', from_chunk=" in text
    assert "# Other" in text, "a page past the budget still shows its heading"
    assert "get_document(path='other.html', source='docs'" in text, "and the call that returns it"


# -- get_chunk and list_sources ------------------------------------------------------------------------


def test_chunk_result_says_how_to_read_on() -> None:
    response, text = results.chunk_result(DOC[2])
    assert response.url == "https://example.org/user/commands/color.html#top"
    assert "from_chunk=3" in text and DOC[2].content in text


def test_sources_result_warns_when_the_models_differ() -> None:
    info = SourceInfo("docs", 3, 10, {"commands": 7, "tools": 3}, {"": 10}, "2026-01-01T00:00:00+00:00", "/docs")
    response, text = sources_result([info], IndexMeta(1, "model-a", 384), backend="sqlite", server_model="model-b")
    assert response.categories == ["commands", "tools"]
    assert response.sources[0].origin == "/docs"
    assert "Warning" in text and "model-b" in text
    _, same = sources_result([info], IndexMeta(1, "model-a", 384), backend="sqlite", server_model="model-a")
    assert "Warning" not in same


@pytest.mark.parametrize(
    ("anchor", "expected"),
    [
        ("panel.widgets.Select", "https://d.org/p.html#panel.widgets.Select"),
        ("module-chimerax.core", "https://d.org/p.html#module-chimerax.core"),
        ("a b", "https://d.org/p.html#a%20b"),  # an element id with a space, as HTML allows
        ("50%", "https://d.org/p.html#50%25"),  # raw ids: a % is itself, not an escape
        ("café", "https://d.org/p.html#caf%C3%A9"),
        ("", "https://d.org/p.html"),
    ],
)
def test_with_anchor_encodes_what_a_url_fragment_cannot_hold(anchor, expected):
    assert with_anchor("https://d.org/p.html", anchor) == expected
    assert with_anchor("https://d.org/p.html#top", anchor) == "https://d.org/p.html#top"
