"""The crawler's pure parts, table-driven: URL normalisation and scope, robots.txt, sitemaps, content
sniffing, links of HTML and Markdown pages, objects.inv."""

from __future__ import annotations

import gzip

import pytest
import sphobjinv

from docsctl.indexer.site.crawl import page_kind
from docsctl.indexer.site.inventory import parse_inventory
from docsctl.indexer.site.robots import parse_robots
from docsctl.indexer.site.sitemaps import parse_lastmod, parse_sitemap
from docsctl.indexer.site.urls import Scope, doc_path, html_links, markdown_links, normalize_url, scope_of


@pytest.mark.parametrize(
    ("url", "expected"),
    [
        ("HTTPS://Docs.Example.org:443/Guide/", "https://docs.example.org/Guide/"),
        ("http://example.org:80", "http://example.org/"),
        ("http://example.org:8080/a", "http://example.org:8080/a"),
        ("https://example.org/a/index.html#intro", "https://example.org/a/"),
        ("https://example.org/a/b/../c/./d.html", "https://example.org/a/c/d.html"),
        ("https://example.org/p?utm_source=x&b=2&a=1&fbclid=z", "https://example.org/p?a=1&b=2"),
        ("https://example.org/caf%c3%a9 menu", "https://example.org/caf%C3%A9%20menu"),
        ("mailto:someone@example.org", None),
        ("javascript:void(0)", None),
        ("ftp://example.org/file", None),
        ("http://[::1]:8000/x", "http://[::1]:8000/x"),
    ],
)
def test_normalize_url(url, expected):
    assert normalize_url(url) == expected


def test_normalize_url_resolves_against_a_base():
    assert normalize_url("../tools/x.html#top", "https://e.org/user/commands/color.html") == (
        "https://e.org/user/tools/x.html"
    )


@pytest.mark.parametrize(
    ("url", "inside"),
    [
        ("https://e.org/docs/reference/api.html", True),
        ("https://e.org/docs/how_to/", True),
        ("https://e.org/docs/blog/post.html", False),  # not included
        ("https://e.org/docs/reference/old/x.html", False),  # excluded
        ("https://e.org/other/reference/x.html", False),  # outside the start folder
        ("http://e.org/docs/reference/api.html", False),  # another scheme
        ("https://f.org/docs/reference/api.html", False),  # another host
    ],
)
def test_scope(url, inside):
    scope = Scope(scope_of("https://e.org/docs/index.html"), ("/docs/reference/*", "/docs/how_to"), ("*/old/*",))
    assert scope.contains(url) is inside


@pytest.mark.parametrize(
    ("url", "path"),
    [("https://e.org/", "/"), ("https://e.org/a/b.html", "a/b.html"), ("https://e.org/a?x=1", "a?x=1")],
)
def test_doc_path(url, path):
    assert doc_path(url) == path


ROBOTS = """
User-agent: Googlebot
Disallow: /

User-agent: *
User-agent: docsctl-old
Disallow: /private/
Allow: /private/public*.html$
Disallow: /*.pdf$
Crawl-delay: 2.5

User-agent: docsctl
Disallow: /drafts/
Crawl-delay: 1

Sitemap: https://e.org/sitemap-a.xml
sitemap: https://e.org/sitemap-b.xml.gz
"""


@pytest.mark.parametrize(
    ("agent", "path", "allowed"),
    [
        ("docsctl", "/drafts/x.html", False),
        ("docsctl", "/private/x.html", True),  # our own group replaces `*`
        ("otherbot", "/private/x.html", False),
        ("otherbot", "/private/public-1.html", True),  # the longer Allow wins
        ("otherbot", "/private/public-1.html?x", False),  # `$` anchors the end
        ("otherbot", "/manual.pdf", False),
        ("otherbot", "/manual.pdf.html", True),
        ("otherbot", "/robots.txt", True),
        ("googlebot", "/anything", False),
    ],
)
def test_robots_rules(agent, path, allowed):
    assert parse_robots(ROBOTS, agent).allows(path) is allowed


def test_robots_delay_and_sitemaps():
    ours, others = parse_robots(ROBOTS, "docsctl"), parse_robots(ROBOTS, "otherbot")
    assert (ours.crawl_delay, others.crawl_delay) == (1.0, 2.5)
    assert ours.sitemaps == ("https://e.org/sitemap-a.xml", "https://e.org/sitemap-b.xml.gz")
    assert parse_robots("", "docsctl").allows("/x") and parse_robots("Disallow:\n", "docsctl").allows("/x")


URLSET = b"""<?xml version="1.0" encoding="UTF-8"?>
<urlset xmlns="http://www.sitemaps.org/schemas/sitemap/0.9">
  <url><loc>https://e.org/a.html</loc><lastmod>2024-05-01</lastmod></url>
  <url><loc> https://e.org/b.html </loc></url>
  <url><lastmod>2024-05-01</lastmod></url>
</urlset>"""
INDEX = b"""<sitemapindex xmlns="http://www.sitemaps.org/schemas/sitemap/0.9">
<sitemap><loc>https://e.org/s1.xml.gz</loc></sitemap><sitemap><loc>https://e.org/s2.xml</loc></sitemap>
</sitemapindex>"""


@pytest.mark.parametrize("compress", [False, True])
def test_sitemap_pages(compress):
    sitemap = parse_sitemap(gzip.compress(URLSET) if compress else URLSET)
    assert sitemap.pages == {"https://e.org/a.html": parse_lastmod("2024-05-01"), "https://e.org/b.html": None}
    assert not sitemap.children


def test_sitemap_index_and_junk():
    assert parse_sitemap(INDEX).children == ["https://e.org/s1.xml.gz", "https://e.org/s2.xml"]
    assert parse_sitemap(b"<html>not a sitemap").pages == {}
    assert parse_sitemap(b"\x1f\x8bbroken gzip").pages == {}


@pytest.mark.parametrize(
    ("value", "epoch"),
    [
        ("2024-05-01T10:00:00Z", 1714557600.0),
        ("2024-05-01T12:00:00+02:00", 1714557600.0),
        ("2024-05-01", 1714608000.0 - 1),  # a date alone counts to the end of that day
        ("yesterday", None),
        ("", None),
    ],
)
def test_lastmod(value, epoch):
    assert parse_lastmod(value) == epoch


@pytest.mark.parametrize(
    ("content_type", "body", "url", "kind"),
    [
        ("text/html; charset=utf-8", b"<html><p>hi</p></html>", "https://e.org/a", "html"),
        ("text/markdown", b"# Title\n", "https://e.org/a", "md"),
        ("text/plain", b"# Title\n", "https://e.org/a.md", "md"),
        ("text/plain", b"just text", "https://e.org/a", "txt"),
        ("", b"<!DOCTYPE html><html></html>", "https://e.org/a", "html"),
        ("application/octet-stream", b"plain words", "https://e.org/notes.txt", "txt"),
        ("text/html", b"\x89PNG\r\n\x1a\n\0\0\0\rIHDR", "https://e.org/a.html", None),
        ("application/pdf", b"%PDF-1.7", "https://e.org/a.pdf", None),
        ("image/png", b"\x89PNG", "https://e.org/a.png", None),
    ],
)
def test_page_kind(content_type, body, url, kind):
    assert page_kind(content_type, body, url)[0] == kind


def test_html_links():
    raw = b"""<html><head><base href="/docs/">
    <link rel="canonical" href="https://e.org/docs/page.html">
    <link rel="alternate" type="text/markdown" href="page.md"></head>
    <body><a href="a.html">a</a><a href="../b.html#x">b</a>
    <a rel="nofollow" href="c.html">c</a><a>none</a></body></html>"""
    links = html_links(raw, "https://e.org/docs/sub/page.html")
    assert links.links == ["https://e.org/docs/a.html", "https://e.org/b.html#x"]
    assert links.canonical == "https://e.org/docs/page.html"
    assert links.markdown_alternate == "https://e.org/docs/page.md"


def test_markdown_links():
    text = '# Docs\n\n- [Guide](guide.md "The guide")\n- [API](<api/index.md>)\n- <https://e.org/faq>\n'
    assert markdown_links(text, "https://e.org/llms.txt") == [
        "https://e.org/guide.md",
        "https://e.org/api/index.md",
        "https://e.org/faq",
    ]


def test_objects_inv():
    inventory = sphobjinv.Inventory()
    inventory.project, inventory.version = "panel", "1.0"
    for name, role, uri in [
        ("panel.widgets.Select", "class", "api/widgets.html#$"),
        ("panel.serve", "function", "api/panel.html#panel-serve"),
        ("panel", "module", "api/panel.html"),
        ("installation", "label", "install.html#installation"),
    ]:
        inventory.objects.append(
            sphobjinv.DataObjStr(name=name, domain="py", role=role, priority="1", uri=uri, dispname="-")
        )
    entries = parse_inventory(sphobjinv.compress(inventory.data_file()))
    assert [(entry.name, entry.uri, entry.anchor) for entry in entries] == [
        ("panel.widgets.Select", "api/widgets.html#panel.widgets.Select", "panel.widgets.Select"),
        ("panel.serve", "api/panel.html#panel-serve", "panel-serve"),
        ("panel", "api/panel.html", ""),  # the page as a whole: no anchor
    ]
    assert parse_inventory(b"not an inventory") == []


THEMES = {
    "sphinx-basic": """<div class="related" role="navigation"><a href="#">CHROME previous</a></div>
      <div class="document"><div class="body" role="main"><h1>Install</h1><p>Run pip install panel.</p></div></div>
      <div class="sphinxsidebar"><h3>CHROME Table of contents</h3></div><div class="footer">CHROME copyright</div>""",
    "pydata": """<div class="bd-header">CHROME header</div><main class="bd-main"><div class="bd-sidebar-primary">
      CHROME section nav</div><article class="bd-article"><h1>Install</h1><p>Run pip install panel.</p></article>
      <div class="bd-sidebar-secondary">CHROME on this page</div>
      <footer class="bd-footer-article">
      <div class="prev-next-area">CHROME next</div></footer></main>
      <footer class="bd-footer">CHROME footer</footer>""",
    "mkdocs-material": """<header class="md-header">CHROME header</header>
      <div class="md-container"><main class="md-main">
      <div class="md-sidebar md-sidebar--primary">CHROME nav</div>
      <div class="md-content"><article class="md-content__inner">
      <a class="md-content__button md-icon">CHROME edit</a><h1>Install</h1><p>Run pip install panel.</p>
      <aside class="md-source-file">CHROME last update</aside></article></div></main>
      <footer class="md-footer">CHROME footer</footer></div>""",
    "docusaurus": """<nav class="navbar">CHROME navbar</nav><div class="main-wrapper"><aside
      class="theme-doc-sidebar-container">CHROME sidebar</aside>
      <main><div class="theme-doc-toc-mobile">CHROME toc</div>
      <article><nav class="theme-doc-breadcrumbs">CHROME crumbs</nav><div class="markdown"><h1>Install</h1>
      <p>Run pip install panel.</p></div><footer class="theme-doc-footer">
      <a class="theme-edit-this-page">CHROME edit</a>
      </footer></article>
      <nav class="pagination-nav">CHROME next</nav></main></div><footer class="footer">CHROME</footer>""",
}


@pytest.mark.parametrize("theme", sorted(THEMES))
def test_theme_chrome_stays_out_of_the_text(theme, tmp_path):
    from docsctl.indexer.extract.html import extract_html

    page = f"<html><head><title>Install</title></head><body>{THEMES[theme]}</body></html>"
    extracted = extract_html(tmp_path / "page.html", page.encode())
    text = " ".join(section.heading + " " + section.text for section in extracted.sections)
    assert "pip install panel" in text
    assert "CHROME" not in text, text
