"""The web pages in process (Starlette's TestClient): routes, parameters, errors, escaping.

The index holds the sample docs and pages written to attack the pages (web_fixtures.py), on SQLite; the
same pages over both backends in a real browser are in test_web_browser.py.
"""

from __future__ import annotations

import re
from html.parser import HTMLParser
from pathlib import Path

import pytest
from corpus_fixtures import index_folder
from markupsafe import escape as markup_escape
from starlette.testclient import TestClient
from typer.testing import CliRunner
from web_fixtures import HOSTILE_WORDS, IMG_TAG, SCRIPT_TITLE, write_hostile_pages

from docsctl.cli.app import app as cli
from docsctl.config import load_settings
from docsctl.models import Chunk, Hit
from docsctl.server.search import Searcher
from docsctl.server.web import create_app, views
from docsctl.store import open_store

PAGED = views.PAGE_SIZE + 4
SAMPLES = Path(__file__).resolve().parent.parent / "samples" / "docs"


@pytest.fixture(scope="module")
def searcher(embedder, embedding_cache_dir, tmp_path_factory) -> Searcher:
    data = tmp_path_factory.mktemp("web")
    settings = load_settings(backend="sqlite", index_alias="web", data_dir=data, cache_dir=embedding_cache_dir)
    index_folder(settings, embedder, SAMPLES, "samples")
    index_folder(settings, embedder, write_hostile_pages(data / "hostile"), "hostile")
    many = data / "many"
    many.mkdir()
    for number in range(PAGED):  # enough documents for two pages of results
        (many / f"page{number:02d}.md").write_text(f"# Paging {number}\n\nPage {number} of a paging test.\n")
    index_folder(settings, embedder, many, "many")
    return Searcher(open_store(settings), embedder)


@pytest.fixture(scope="module")
def client(searcher) -> TestClient:
    return TestClient(create_app(searcher), base_url="http://127.0.0.1:8766")


def escape(text: str) -> str:
    return str(markup_escape(text))


class Elements(HTMLParser):
    """Every start tag of a page, with its attributes: what a browser would build elements from."""

    def __init__(self, html: str) -> None:
        super().__init__()
        self.tags: list[tuple[str, dict[str, str | None]]] = []
        self.feed(html)

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.tags.append((tag, dict(attrs)))


def assert_no_injected_markup(html: str) -> None:
    """Only our own script, no image, no svg but the explain chart, no event handler, no javascript: link."""
    tags = Elements(html).tags
    assert [attrs.get("src") for tag, attrs in tags if tag == "script"] == ["/static/search.js"]
    assert not [tag for tag, _ in tags if tag in ("img", "iframe", "object", "embed", "b", "em")]
    for tag, attrs in tags:
        assert not [name for name in attrs if name.startswith("on")], (tag, attrs)
        for name in ("href", "src", "action"):
            assert not (attrs.get(name) or "").lower().startswith(("javascript:", "data:text")), (tag, attrs)


# -- search -----------------------------------------------------------------------------------------


def test_the_search_page_shows_results_as_docsctl_query_does(client, searcher):
    response = client.get("/", params={"q": "rebuild the index without downtime"})
    assert response.status_code == 200
    assert response.headers["content-type"].startswith("text/html")
    html = response.text
    expected = searcher.search("rebuild the index without downtime", limit=views.PAGE_SIZE)
    titles = re.findall(r'class="result-link" href="[^"]*">([^<]*)</a>', html)
    assert titles == [escape(hit.chunk.title) for hit in expected.hits]
    assert re.search(r'class="took">\d+ ms<', html)
    assert "<mark>" in html
    assert 'href="file://' in html  # the original page, at its anchor
    assert 'class="explain-link" href="/explain?q=rebuild+the+index+without+downtime&amp;path=' in html


def test_facets_count_documents_and_a_facet_link_filters(client, searcher):
    html = client.get("/", params={"q": "index"}).text
    counts = searcher.store.facet_counts()
    for source, documents in counts["source"].items():
        assert re.search(rf'<span class="facet-value">{source}</span> <span class="count">{documents}<', html)
    link = re.search(r'<a href="(/\?q=index&amp;source=hostile)"', html)
    assert link, "a link that keeps the query and filters by source"
    filtered = client.get(link.group(1).replace("&amp;", "&")).text
    assert 'aria-current="true"' in filtered
    assert set(re.findall(r"· (\w+):[\w/.-]+", filtered)) == {"hostile"}
    assert '<input type="hidden" name="source" value="hostile">' in filtered  # the next search keeps it


def test_paging_links_move_through_the_results(client):
    first = client.get("/", params={"q": "paging test", "mode": "bm25", "source": "many"}).text
    assert '<ol class="hits" start="1">' in first and f"{PAGED} documents" in first
    assert "Page 1 of 2" in first and 'rel="prev"' not in first
    next_link = re.search(r'rel="next" href="([^"]+)"', first).group(1).replace("&amp;", "&")
    assert "page=2" in next_link and "mode=bm25" in next_link
    second = client.get(next_link).text
    assert f'<ol class="hits" start="{views.PAGE_SIZE + 1}">' in second
    assert 'rel="prev"' in second and 'rel="next"' not in second
    assert second.count('class="hit"') == PAGED - views.PAGE_SIZE


def test_without_a_query_the_page_shows_the_box_and_the_facets(client):
    html = client.get("/").text
    assert 'id="q"' in html and "autofocus" in html
    assert 'aria-labelledby="facet-source"' in html
    assert 'id="summary"' not in html


@pytest.mark.parametrize(
    ("params", "message"),
    [
        ({"q": "x", "mode": "fuzzy"}, "mode must be one of hybrid, bm25, knn"),
        ({"q": "x", "page": "0"}, "page must be a whole number"),
        ({"q": "x", "page": "two"}, "page must be a whole number"),
        ({"q": "x", "page": "51"}, "page must be a whole number from 1 to 50"),
        ({"q": "x" * 1001}, "q is longer than 1000 characters"),
        ({"q": "zzzqqq", "source": "nosuch"}, "unknown source nosuch"),
    ],
)
def test_bad_parameters_give_a_400_page_with_one_sentence(client, params, message):
    response = client.get("/", params=params)
    assert response.status_code == 400
    assert message in response.text
    assert "Traceback" not in response.text


# -- hostile pages ------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "url",
    [
        f"/?q={HOSTILE_WORDS}",
        "/doc?path=script-title.txt&source=hostile",
        "/doc?path=entities.html&source=hostile",
        "/doc?path=script-title.md&source=hostile",
        f"/explain?q={HOSTILE_WORDS}&path=script-title.txt&source=hostile",
        "/sources",
    ],
)
def test_markup_in_documents_renders_as_text(client, url):
    response = client.get(url)
    assert response.status_code == 200
    html = response.text
    assert SCRIPT_TITLE not in html and IMG_TAG not in html
    assert_no_injected_markup(html)
    if "script-title.txt" in url or url.startswith("/?"):
        assert "&lt;script&gt;alert(1)&lt;/script&gt;" in html


def test_highlight_markers_in_a_document_are_text_not_markup(client):
    html = client.get("/", params={"q": "fake highlight", "source": "hostile"}).text
    assert "<em>" not in html.split('id="results"')[1]


@pytest.mark.parametrize(
    ("url", "expected"),
    [
        ("https://docs.example.org/a.html#x", "https://docs.example.org/a.html#x"),
        ("http://example.org", "http://example.org"),
        ("file:///srv/docs/a.html", "file:///srv/docs/a.html"),
        ("javascript:alert(1)", None),
        ("JavaScript:alert(1)", None),
        (" javascript:alert(1)", None),
        ("data:text/html,<script>alert(1)</script>", None),
        ("vbscript:x", None),
        ("//evil.example/x", None),
        ("http:///no-host", None),
        ("", None),
        (None, None),
    ],
)
def test_links_to_original_pages_only_for_http_and_file_urls(url, expected):
    assert views.safe_url(url) == expected


@pytest.mark.parametrize(
    ("fragment", "spans"),
    [
        ("plain text", [("plain text", False)]),
        ("a <em>match</em> here", [("a ", False), ("match", True), (" here", False)]),
        ("<em>x</em>\n\n  <em>y</em>", [("x", True), (" ", False), ("y", True)]),
        ("<script>alert(1)</script> <em>b</em>", [("<script>alert(1)</script> ", False), ("b", True)]),
        ("unclosed <em>mark", [("unclosed ", False), ("mark", True)]),
    ],
)
def test_highlight_spans_read_only_the_match_markers(fragment, spans):
    assert views.highlight_spans(fragment) == spans


def test_a_result_with_an_unsafe_url_has_no_original_link():
    chunk = Chunk("c", "d", "s", "p.md", "T", [], "", "docs", "markdown", 0, "text", "h", url="javascript:alert(1)")
    (view,) = views.result_views([Hit(chunk, 1.0, ["<em>text</em>"])], "text", 0)
    assert view.original is None
    assert view.highlights == [[("text", True)]]


# -- document, explain, sources -------------------------------------------------------------------------


def test_the_document_view_shows_every_chunk_and_its_embedded_text(client, searcher):
    chunks = searcher.store.get_document("commands/reindex.md", "samples")
    html = client.get("/doc", params={"path": "commands/reindex.md", "source": "samples"}).text
    for chunk in chunks:
        section = html.split(f'id="chunk-{chunk.chunk_index}"')[1].split("</section>")[0]
        assert f"{chunk.start_line}–{chunk.end_line}" in section
        assert f"{len(chunk.content)} characters" in section
        assert chunk.chunk_id in section
        embedded = section.split("<summary>")[1].split("</pre>")[0]
        assert embedded.endswith(escape(chunk.embed_text()))
    assert html.count('class="chunk"') == len(chunks)


def test_the_explain_page_says_what_docsctl_explain_says(client, searcher):
    from docsctl.server.explain import explain

    expected = explain(searcher, "rebuild the index", "commands/reindex.md", "samples")
    html = client.get("/explain", params={"q": "rebuild the index", "path": "commands/reindex.md"}).text
    assert f"rank {expected.rank} of {expected.fused_total}" in html
    assert f"{expected.score:.5f}" in html
    assert "<svg" in html and html.count('class="chart-bar ') == len(expected.contributions)
    for name in ("BM25 (words)", "k-NN (meaning)", "Fused (hybrid)"):
        assert f'<th scope="row">{name}</th>' in html


def test_the_explain_page_without_parameters_is_a_form(client):
    response = client.get("/explain")
    assert response.status_code == 200
    assert '<form class="explain-form"' in response.text and "<table" not in response.text


@pytest.mark.parametrize(
    ("url", "status", "message"),
    [
        ("/explain?q=color", 400, "explain needs both a query (q) and a document path (path)"),
        ("/explain?q=color&path=nosuch.md", 404, "no document with path"),
        ("/doc", 400, "path is required"),
        ("/doc?path=nosuch.md", 404, "no document with path"),
        ("/nowhere", 404, "there is no page at /nowhere"),
    ],
)
def test_unknown_documents_and_pages_give_a_clear_4xx_page(client, url, status, message):
    response = client.get(url)
    assert response.status_code == status
    assert message in response.text
    assert "Traceback" not in response.text


def test_the_sources_page_says_what_stats_says(client, searcher):
    from docsctl.server.explain import index_stats

    stats = index_stats(searcher.store)
    html = client.get("/sources").text
    assert f"<dd>{stats['documents']}</dd>" in html and f"<dd>{stats['chunks']}</dd>" in html
    assert f"<dd>{stats['mapping_version']}</dd>" in html and stats["model"] in html
    for source in stats["sources"]:
        assert f'href="/?source={source["source"]}">{source["source"]}</a>' in html
    assert "latin1.md" in html and "not UTF-8" in html  # files skipped, and why


# -- the server ---------------------------------------------------------------------------------------


def test_nothing_but_get(client):
    for method in ("post", "put", "delete", "patch"):
        response = client.request(method.upper(), "/", data={"q": "x"})
        assert response.status_code == 405, method
    assert client.post("/sources").status_code == 405


def test_every_response_forbids_foreign_scripts_and_framing(client):
    for url in ("/", "/nowhere", "/static/style.css"):
        headers = client.get(url).headers
        assert "script-src 'self'" in headers["content-security-policy"]
        assert "frame-ancestors 'none'" in headers["content-security-policy"]
        assert headers["x-content-type-options"] == "nosniff"


def test_a_loopback_server_answers_only_requests_addressed_to_it(searcher):
    local = TestClient(create_app(searcher, "127.0.0.1"), base_url="http://evil.example:8766")
    assert local.get("/").status_code == 400
    public = TestClient(create_app(searcher, "0.0.0.0"), base_url="http://docs.example.org")
    assert public.get("/sources").status_code == 200


def test_without_an_index_every_page_says_how_to_build_one(embedder, tmp_path):
    settings = load_settings(backend="sqlite", index_alias="none", data_dir=tmp_path, cache_dir=tmp_path)
    empty = TestClient(create_app(Searcher(open_store(settings), embedder)), base_url="http://127.0.0.1")
    for url in ("/", "/?q=color", "/sources", "/doc?path=a.md", "/explain?q=color&path=a.md"):
        response = empty.get(url)
        assert response.status_code == 503, url
        assert "docsctl reindex PATH" in response.text


def test_static_files_are_shipped(client):
    assert "prefers-color-scheme: dark" in client.get("/static/style.css").text
    assert "replaceState" in client.get("/static/search.js").text
    assert client.get("/static/nosuch.css").status_code == 404


def test_serve_over_http_puts_the_pages_beside_the_mcp_endpoint(searcher):
    from docsctl.server.mcp import HTTP_PATH, create_server, http_app

    with TestClient(http_app(create_server(searcher), searcher), base_url="http://127.0.0.1:8765") as both:
        assert 'id="q"' in both.get("/").text
        assert both.get("/sources").status_code == 200
        mcp = both.post(
            HTTP_PATH,
            json={"jsonrpc": "2.0", "id": 1, "method": "ping"},
            headers={"accept": "application/json, text/event-stream"},
        )
        assert mcp.status_code != 404


def test_ui_has_help_with_an_example_and_rejects_a_bad_port():
    runner = CliRunner()
    help_text = runner.invoke(cli, ["ui", "--help"]).output
    assert "Example: docsctl ui" in help_text and "--open" in help_text
    result = runner.invoke(cli, ["ui", "--port", "70000"])
    assert result.exit_code == 1
    assert "port must be between 1 and 65535" in result.output
