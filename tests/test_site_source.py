"""Website sources, crawled over real HTTP from a server of the test's own (tests/site_server.py).

One scenario per backend, so the site is embedded once per backend: a first crawl (politeness, the
misbehaving pages, search), an unchanged re-crawl (conditional requests, nothing embedded), then a
changed, a deleted and a failing page. The one-off `docsctl reindex URL` runs through the CLI.
"""

from __future__ import annotations

import asyncio
import io
import json
import statistics
import uuid
from pathlib import Path

import pytest
from corpus_fixtures import BACKENDS, backend_settings, settings_env
from rich.console import Console
from rich.progress import MofNCompleteColumn, Progress, TextColumn
from site_server import (
    DISALLOWED,
    EXTRAS,
    INVENTORY,
    LLMS_ONLY,
    MISBEHAVING,
    MISC,
    NEGOTIATED,
    SiteServer,
    serve_site,
)
from typer.testing import CliRunner

from docsctl.cli.app import app
from docsctl.cli.common import ProgressBars
from docsctl.config import SiteSettings, load_settings
from docsctl.embedding import EmbeddingCache
from docsctl.indexer.git import checkout
from docsctl.indexer.pipeline import ReindexSummary, reindex
from docsctl.indexer.site import CrawlProgress, CrawlStats
from docsctl.indexer.site.crawl import CrawlResult, SiteJob, crawl
from docsctl.indexer.site.urls import Scope, scope_of
from docsctl.indexer.sources import resolve_sources
from docsctl.models import SourceDoc
from docsctl.server.results import LookupResponse, lookup_result, rank_pages, split_documents
from docsctl.server.search import Searcher
from docsctl.store import open_store

CONCURRENCY = 3
TIMEOUT = 1.0
CRAWL_DELAY = 0.1  # robots.txt's, slower than the configured 50 requests per second: it wins
SITE_TOML = """
[[source]]
name = "site"
kind = "site"
url = "{url}/user/commands/"
include = {include}
requests_per_second = 50
concurrency = {concurrency}
timeout_seconds = {timeout}
retries = 2
backoff_seconds = 0.1
"""


@pytest.fixture
def site(shared_dir: Path):
    corpus = shared_dir / "corpora" / "chimerax" / "user"
    pages = {file.name for file in (corpus / "commands").glob("c*.html")}
    with serve_site(corpus, pages, crawl_delay=CRAWL_DELAY) as server:
        yield server


class Crawler:
    """Runs the real pipeline (and model) on the configured site source of one backend."""

    def __init__(self, settings, embedder, config: Path, mirror: Path) -> None:
        self.settings, self.embedder, self.mirror = settings, embedder, mirror
        self.sources = load_settings(config).sources
        self.store = open_store(settings)

    def run(self, full: bool = False, crawl_progress: CrawlProgress | None = None) -> ReindexSummary:
        resolved = resolve_sources(self.sources, lambda *args: checkout(*args, self.mirror), cache_dir=self.mirror)
        cache = EmbeddingCache(self.settings.embedding_cache_path, self.embedder.model_name)
        try:
            return reindex(
                self.store,
                self.embedder,
                resolved.targets,
                lock_path=self.settings.lock_path,
                full=full,
                cache=cache,
                crawl_progress=crawl_progress,
            )
        finally:
            cache.close()

    def paths(self) -> set[str]:
        return set(self.store.doc_hashes("site"))


@pytest.fixture(params=BACKENDS)
def crawler(request, tmp_path, site, embedder, embedding_cache_dir):
    settings = backend_settings(request, request.param, tmp_path / "data", embedding_cache_dir)
    config = tmp_path / "docsctl.toml"
    include = '["/user/commands/c*", "/user/commands/misc/*"]'
    config.write_text(SITE_TOML.format(url=site.url, include=include, concurrency=CONCURRENCY, timeout=TIMEOUT))
    crawler = Crawler(settings, embedder, config, tmp_path / "cache")
    yield crawler
    crawler.store.drop()


# A Sphinx autodoc page: one class and its methods, each a `<dt id=...>` signature and its description,
# long enough that the page is several chunks; objects.inv places each name at its signature.
SPHINX_METHODS = [f"resize_{number}" for number in range(10)]
SPHINX_OBJECTS = {
    "shapes": "api.html#module-shapes",
    "shapes.Thing": "api.html#$",
    **{f"shapes.Thing.{method}": "api.html#$" for method in SPHINX_METHODS},
}


def sphinx_api_page() -> bytes:
    methods = "".join(
        f'<dl class="py method"><dt class="sig sig-object py" id="shapes.Thing.{method}">'
        f'<span class="sig-name descname"><span class="pre">{method}</span></span>(<em>width</em>, <em>height</em>)'
        f'<a class="headerlink" href="#shapes.Thing.{method}">¶</a></dt>'
        f"<dd><p>Resize the thing in the {method.replace('_', ' ')} way: " + "it keeps its aspect ratio " * 12 + "</p>"
        "<p>Returns the thing itself, so calls can be chained.</p></dd></dl>"
        for method in SPHINX_METHODS
    )
    body = (
        '<div class="related" role="navigation">previous | next</div><div class="document"><div class="body" '
        'role="main"><section id="module-shapes"><h1>shapes</h1><p>Shapes and the things made of them.</p>'
        '<dl class="py class"><dt class="sig sig-object py" id="shapes.Thing"><em class="property">class </em>'
        '<span class="sig-prename descclassname">shapes.</span><span class="sig-name descname">Thing</span>'
        f"(<em>size</em>)</dt><dd><p>A thing of a given size.</p>{methods}</dd></dl></section></div></div>"
    )
    return f"<html><head><title>shapes — Shapes 1.0</title></head><body>{body}</body></html>".encode()


def mcp_lookup(crawler: Crawler, name: str) -> tuple[LookupResponse, str]:
    """What the MCP tool `lookup` answers (docsctl/server/mcp.py) from the crawler's index."""
    pages = rank_pages(name, split_documents(crawler.store.lookup(name, ["site"])))
    return lookup_result(name, pages, max_chars=4000)


@pytest.fixture
def sphinx_site(tmp_path: Path):
    corpus = tmp_path / "site" / "user"
    (corpus / "commands").mkdir(parents=True)
    (corpus / "commands" / "api.html").write_bytes(sphinx_api_page())
    with serve_site(corpus, {"api.html"}, misbehaving=False, objects=SPHINX_OBJECTS) as server:
        yield server


@pytest.mark.parametrize("backend", BACKENDS)
def test_lookup_of_an_objects_inv_name_answers_from_its_signature_with_its_anchor(
    sphinx_site: SiteServer, backend, request, tmp_path, embedder, embedding_cache_dir
):
    settings = backend_settings(request, backend, tmp_path / "data", embedding_cache_dir)
    config = tmp_path / "docsctl.toml"
    include = '["/user/commands/api*"]'
    config.write_text(SITE_TOML.format(url=sphinx_site.url, include=include, concurrency=CONCURRENCY, timeout=TIMEOUT))
    crawler = Crawler(settings, embedder, config, tmp_path / "cache")
    try:
        crawler.run()
        page_url = f"{sphinx_site.url}/user/commands/api.html"
        page = crawler.store.get_document("user/commands/api.html", "site")
        assert len(page) >= 4
        starts: dict[str, int] = {}
        for name in ["shapes.Thing", "shapes.Thing.resize_0", "shapes.Thing.resize_6", "shapes.Thing.resize_9"]:
            signature = f"{name.rsplit('.', 1)[1]}(" if name != "shapes.Thing" else "class shapes.Thing(size)"
            expected = next(chunk for chunk in page if signature in " ".join(chunk.content.split()))
            assert [name.lower(), name] in expected.name_anchors, name
            response, text = mcp_lookup(crawler, name.upper())
            document = response.documents[0]
            assert document.url == f"{page_url}#{name}", name
            assert document.chunks[0].chunk_id == expected.chunk_id, name
            assert document.from_chunk == expected.chunk_index and f"url: {page_url}#{name}" in text
            opening = document.content.split("\n\n", 1)[1] if document.content.startswith("#") else document.content
            assert opening.startswith(expected.content), name  # the answer opens with it, after its section heading
            starts[name] = document.from_chunk
        assert starts["shapes.Thing"] == 0 < starts["shapes.Thing.resize_6"] < starts["shapes.Thing.resize_9"]
        module = mcp_lookup(crawler, "shapes")[0].documents[0]
        assert module.url == f"{page_url}#module-shapes" and module.from_chunk == 0
        # A new objects.inv takes effect on the next crawl, though the page itself has not changed.
        sphinx_site.objects = {**SPHINX_OBJECTS, "shapes.Thing.enlarge": "api.html#shapes.Thing.resize_3"}
        crawler.run()
        enlarge = mcp_lookup(crawler, "shapes.Thing.enlarge")[0].documents
        assert enlarge and enlarge[0].url == f"{page_url}#shapes.Thing.resize_3"
    finally:
        crawler.store.drop()


def test_a_crawl_draws_its_progress_bar(site: SiteServer, request, tmp_path, embedder, embedding_cache_dir):
    """The bar `docsctl reindex` draws (cli/common.ProgressBars): pages fetched, queued, skipped, per second,
    counts that only grow, and nothing left queued at the end."""
    settings = backend_settings(request, "sqlite", tmp_path / "data", embedding_cache_dir)
    config = tmp_path / "docsctl.toml"
    config.write_text(SITE_TOML.format(url=site.url, include='["/user/commands/c*"]', concurrency=1, timeout=TIMEOUT))
    crawler = Crawler(settings, embedder, config, tmp_path / "cache")
    screen = Console(file=io.StringIO(), force_terminal=True, width=200)
    seen: list[tuple[int, int, int]] = []
    with Progress(TextColumn("{task.description}"), MofNCompleteColumn(), console=screen) as progress:
        bars = ProgressBars(progress, str)

        def report(source: str, stats: CrawlStats) -> None:
            seen.append((stats.fetched + stats.not_modified, stats.queued, stats.skipped))
            bars.crawled(source, stats)

        summary = crawler.run(crawl_progress=report)
    fetched = [done for done, _, _ in seen]
    assert len(seen) > 3 and fetched == sorted(fetched)
    assert fetched[-1] == summary.crawls["site"]["fetched"] == len(site.pages) + 1  # and the start page
    assert max(queued for _, queued, _ in seen) > 0 and seen[-1][1] == 0
    drawn = screen.file.getvalue()
    assert f"crawling site: {fetched[-1]} fetched, 0 queued, 0 skipped" in drawn and "/s" in drawn


def skipped_reasons(summary: ReindexSummary) -> dict[str, str]:
    return {path.removeprefix("site:"): reason for path, reason in summary.skipped}


def page_requests(site: SiteServer) -> list:
    return [request for request in site.log if request.path.startswith("/user/")]


def test_a_site_is_crawled_politely_and_recrawled_cheaply(site: SiteServer, crawler: Crawler):
    # -- first crawl ----------------------------------------------------------------------------------
    summary = crawler.run()
    commands = {f"user/commands/{name}" for name in site.pages}
    recovered = {path.lstrip("/") for path, reason in MISBEHAVING.items() if not reason}
    twins = {path.lstrip("/") for path, kept in EXTRAS.items() if kept == "twin"}
    indexed = crawler.paths()
    assert len(indexed & twins) == 1, "identical content is indexed once"
    others = {kept for kept in EXTRAS.values() if kept and kept != "twin"} | {
        LLMS_ONLY.lstrip("/"),
        NEGOTIATED.lstrip("/"),
    }
    assert indexed - twins == commands | recovered | others | {"user/commands/"}
    (guide,) = [chunk for chunk in crawler.store.iter_chunks(with_embedding=False) if chunk.path.endswith("guide.html")]
    assert "Markdown version" in guide.content and guide.doc_type == "markdown"  # its .md alternate was read
    assert guide.url == f"{site.url}/user/commands/misc/guide.html"
    (negotiated,) = [
        chunk for chunk in crawler.store.iter_chunks(with_embedding=False) if chunk.path == NEGOTIATED.lstrip("/")
    ]
    assert negotiated.doc_type == "markdown"  # llms.txt links to it: asked for Markdown, which the server has
    for name, uri in INVENTORY.items():  # objects.inv: API names find their page, and their anchor on it
        assert {chunk.path for chunk in crawler.store.lookup(name, ["site"])} == {f"user/commands/{uri.split('#')[0]}"}
        assert mcp_lookup(crawler, name)[0].documents[0].url == f"{site.url}/user/commands/{uri}"
    skipped = skipped_reasons(summary)
    for path, reason in MISBEHAVING.items():
        if reason:
            assert reason.format(url=site.url) in skipped.pop(path.lstrip("/")), path
    assert not skipped, skipped
    crawled = summary.crawls["site"]
    # misc/private/ is disallowed; misc/moved.html redirects to color.html, a twin, alias.html's canonical
    assert crawled["disallowed"] == 1 and crawled["duplicates"] >= 2

    requested = {request.path for request in site.log}
    assert not any(path.startswith(DISALLOWED) for path in requested)
    assert {"/user/tools/basicactions.html", "/user/commands/save.html"}.isdisjoint(requested)
    assert all(path.startswith(("/user/commands/c", MISC)) or path.count("/") <= 3 for path in requested), requested
    assert {"/robots.txt", "/sitemaps/index.xml", "/sitemaps/pages.xml.gz", "/user/commands/llms.txt"} <= requested
    assert all("docsctl/" in request.headers["user-agent"] for request in site.log)

    assert site.max_in_flight(TIMEOUT) <= CONCURRENCY
    busy = site.requests_for(MISC + "busy.html")
    assert [request.status for request in busy] == [429, 200] and busy[1].started - busy[0].started >= 0.95
    assert [request.status for request in site.requests_for(MISC + "flaky.html")] == [500, 200]
    assert len(site.requests_for(MISC + "slow.html")) == 3  # the first attempt and 2 retries
    starts = sorted(request.started for request in site.log)
    gaps = [later - earlier for earlier, later in zip(starts, starts[1:], strict=False)]
    # Each request starts a Crawl-delay after the one before; a generous margin for the server's own jitter.
    ordered = sorted(site.log, key=lambda request: request.started)
    close = [(a.path, b.path) for a, b in zip(ordered, ordered[1:], strict=False) if b.started - a.started < 0.05]
    assert min(gaps) >= CRAWL_DELAY / 2, close
    assert statistics.median(gaps) >= CRAWL_DELAY * 0.9

    hits = Searcher(crawler.store, crawler.embedder).search("how to color protein by chain", limit=5).hits
    assert "user/commands/color.html" in [hit.chunk.path for hit in hits][:3]
    top = hits[0].chunk
    assert top.url.startswith(f"{site.url}/user/commands/") and top.source == "site"

    # -- unchanged: conditional requests or none at all, nothing embedded ----------------------------
    site.crawl_delay = 0.01
    site.reset_log()
    again = crawler.run()
    assert again.chunks_embedded == 0 and again.added == again.changed == again.removed == 0
    assert again.unchanged == len(crawler.paths())
    by_page = {name: site.requests_for(f"/user/commands/{name}") for name in site.pages}
    not_requested = [name for name, requests in by_page.items() if not requests]
    assert not_requested, "pages whose sitemap lastmod predates the last crawl are not requested again"
    for name, requests in by_page.items():
        for request in requests:
            assert request.headers.get("if-none-match") and request.status == 304, name
    # A page reached only through a redirect is asked through it again, with its own validators.
    (renamed,) = site.requests_for(MISC + "renamed/")
    assert renamed.headers.get("if-none-match") and renamed.status == 304
    assert again.crawls["site"]["requests"] < summary.crawls["site"]["requests"]

    # -- one page changed, one deleted, one failing -----------------------------------------------------
    # Pages the sitemap gives no lastmod for are asked again each time, so they can be found gone or failing.
    asked = sorted(f"/user/commands/{name}" for name, requests in by_page.items() if requests)
    color, cartoon, clip = "/user/commands/color.html", asked[0], asked[-1]
    assert color not in (cartoon, clip)
    original = (site.corpus / "commands" / "color.html").read_bytes()
    novel = f"<p>Chameleons change color too ({uuid.uuid4().hex}).</p>".encode()  # never in the embedding cache
    site.changed[color] = original.replace(b"</h3>", b"</h3>" + novel, 1)
    site.changed_at[color] = site.started_at + 10_000
    site.deleted.add(cartoon)
    site.failing.add(clip)
    hashes_before = crawler.store.doc_hashes("site")
    third = crawler.run()
    assert third.changed == 1 and third.removed == 1 and third.added == 0
    hashes_after = crawler.store.doc_hashes("site")
    assert hashes_after.keys() == hashes_before.keys() - {cartoon.lstrip("/")}
    assert {path for path in hashes_after if hashes_after[path] != hashes_before[path]} == {color.lstrip("/")}
    assert "stays indexed" in skipped_reasons(third)[clip.lstrip("/")]
    assert 0 < third.chunks_embedded <= third.chunks_written

    # -- the whole site down: robots.txt cannot be read, so nothing is crawled and everything stays -----
    site.failing.add("/robots.txt")
    site.reset_log()
    down = crawler.run()
    assert down.removed == down.added == down.changed == 0 and down.chunks_embedded == 0
    assert crawler.store.doc_hashes("site") == hashes_after
    assert all("robots.txt unreachable" in reason for reason in skipped_reasons(down).values())
    assert {request.path for request in site.log} == {"/robots.txt"}


def test_full_fetches_every_page_again(site: SiteServer, crawler: Crawler):
    crawler.sources = tuple(
        source.__class__(**{**source.__dict__, "include": ("/user/commands/co*",)}) for source in crawler.sources
    )
    site.crawl_delay = 0.01
    first = crawler.run()
    site.reset_log()
    full = crawler.run(full=True)
    assert full.rebuilt and full.rebuild_reason == "--full"
    assert full.added == first.added and full.chunks_embedded == 0  # the embedding cache still knows them
    assert page_requests(site) and not any("if-none-match" in request.headers for request in page_requests(site))


def test_reindex_url_crawls_a_one_off_site(site: SiteServer, tmp_path, embedding_cache_dir, request):
    settings = backend_settings(request, "sqlite", tmp_path / "data", tmp_path / "cache")
    (tmp_path / "cache").mkdir()
    (tmp_path / "cache" / "embeddings.sqlite").symlink_to(embedding_cache_dir / "embeddings.sqlite")
    site.crawl_delay = 0.01
    result = CliRunner().invoke(app, ["reindex", f"{site.url}/user/tutorials/", "--json"], env=settings_env(settings))
    assert result.exit_code == 0, result.output
    summary = json.loads(result.stdout)
    name = f"127.0.0.1-{site.url.rsplit(':', 1)[1]}"
    assert summary["sources"] == [name]
    assert summary["added"] == 2 and summary["crawls"][name]["fetched"] == 2  # the folder index and its page
    hashes = open_store(settings).doc_hashes(name)
    assert set(hashes) == {"user/tutorials/", "user/tutorials/binding-sites.html"}
    open_store(settings).drop()


@pytest.mark.parametrize(
    ("body", "message"),
    [
        ('kind = "site"\nurl = "ftp://example.org/"', "url must start with http:// or https://"),
        ('kind = "site"\npath = "/tmp"', "needs a name and a path (a url for kind 'site')"),
        ('kind = "site"\nurl = "https://example.org/"\nmax_pages = "many"', "max_pages must be an integer"),
        ('kind = "site"\nurl = "https://example.org/"\nrequests_per_second = 0', "must be positive"),
        ('path = "."\nmax_depth = 3', "max_depth is for kind 'site'"),
    ],
)
def test_bad_site_settings_are_one_line_errors(tmp_path, body, message):
    config = tmp_path / "docsctl.toml"
    config.write_text(f'[[source]]\nname = "docs"\n{body}\n')
    result = CliRunner().invoke(app, ["reindex", "--config", str(config)], env={"DOCSCTL_DATA_DIR": str(tmp_path)})
    assert result.exit_code == 1
    assert message in result.output and "Traceback" not in result.output


@pytest.mark.parametrize("address", ["http://", "https://[bad/"])
def test_reindex_of_a_bad_web_address_is_a_one_line_error(tmp_path, address):
    result = CliRunner().invoke(app, ["reindex", address], env={"DOCSCTL_DATA_DIR": str(tmp_path)})
    assert result.exit_code == 1
    assert f"not a web address: {address}" in result.output and "Traceback" not in result.output


def crawl_only(site: SiteServer, tmp_path: Path, **settings) -> CrawlResult:
    """The crawler alone (no extraction, no embedding) on the well-behaved part of the site."""
    url = f"{site.url}/user/commands/"
    job = SiteJob(
        name="site",
        start_url=url,
        scope=Scope(scope_of(url), ("/user/commands/c*",)),
        settings=SiteSettings(requests_per_second=200, **settings),
        mirror=tmp_path / "mirror",
        make_doc=lambda page, path, file, entries: SourceDoc("site", path, file, "docs", "", page),
        previous={},
    )
    return asyncio.run(crawl(job))


@pytest.mark.parametrize("max_pages", [1, 5])
def test_max_pages_bounds_the_pages_requested(site: SiteServer, tmp_path, max_pages):
    site.crawl_delay, site.misbehaving = 0, False
    result = crawl_only(site, tmp_path, max_pages=max_pages)
    assert len(result.pages) == max_pages == len([r for r in site.log if r.path.endswith((".html", "/"))])


@pytest.mark.parametrize(("max_depth", "pages"), [(0, {"/"}), (1, {"/", "/color.html"}), (2, None)])
def test_max_depth_bounds_how_far_links_are_followed(site: SiteServer, tmp_path, max_depth, pages):
    site.crawl_delay, site.misbehaving = 0, False
    site.pages = {"color.html"}  # the index links to color.html alone; the pages color.html links to are deeper
    result = crawl_only(site, tmp_path, max_depth=max_depth)
    found = {doc.path.removeprefix("user/commands") or "/" for doc, _ in result.pages}
    if pages is not None:
        assert found == pages
    else:
        assert found > {"/", "/color.html"}
