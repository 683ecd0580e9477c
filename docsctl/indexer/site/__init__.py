"""Websites as sources: `crawl_target` turns a site target into pages the pipeline indexes like files.

robots.py    robots.txt rules, Crawl-delay, Sitemap lines (pure)
sitemaps.py  sitemap and sitemap-index parsing, gzip, lastmod (pure)
urls.py      normalisation, scope, links of HTML and Markdown pages (pure)
inventory.py Sphinx objects.inv -> API names per page, each with its anchor
fetch.py     the HTTP client: per-host rate and concurrency, redirects, size cap, retries
crawl.py     discovery and the breadth-first crawl into a mirror folder
"""

from __future__ import annotations

import asyncio
from dataclasses import replace
from pathlib import Path
from typing import Any

from docsctl.errors import ConfigError
from docsctl.indexer.site.crawl import CrawlProgress, CrawlResult, CrawlStats, SiteJob, crawl
from docsctl.indexer.site.urls import Scope, normalize_url, scope_of
from docsctl.indexer.sources import SourceTarget, category_for
from docsctl.models import SourceDoc

__all__ = ["CrawlProgress", "CrawlStats", "crawl_target", "previous_pages"]


def previous_pages(state: dict[str, Any], version: str) -> dict[str, dict[str, Any]]:
    """The per-URL state the last crawl of this source version left in the source state."""
    entry = (state.get("versions") or {}).get(version) or {}
    pages = entry.get("pages")
    return pages if isinstance(pages, dict) else {}


def crawl_target(
    target: SourceTarget, previous: dict[str, dict[str, Any]], progress: CrawlProgress | None = None
) -> tuple[SourceTarget, CrawlResult]:
    """Crawl a site target; the target again, now holding its pages and the state to remember.

    `previous` is the per-URL state of the last crawl ({} to fetch every page unconditionally).
    """
    assert target.site is not None, "crawl_target is for site targets"
    start = normalize_url(target.origin)
    if start is None:
        raise ConfigError(f"source {target.name}: not a web address: {target.origin}")

    def make_doc(url: str, path: str, file: Path, entries: tuple[tuple[str, str], ...]) -> SourceDoc:
        category = category_for(path, target.category_rules)
        names = tuple(dict.fromkeys(name for name, _ in entries))
        anchored = tuple((name, anchor) for name, anchor in entries if anchor)
        return SourceDoc(target.name, path, file, category, target.version, url, names, anchored)

    job = SiteJob(
        name=target.name,
        start_url=start,
        scope=Scope(scope_of(start), target.include, target.exclude),
        settings=target.site,
        mirror=target.root,
        make_doc=make_doc,
        previous=previous,
    )
    result = asyncio.run(crawl(job, progress))
    return replace(target, pages=tuple(result.pages), crawl_state=result.state), result
