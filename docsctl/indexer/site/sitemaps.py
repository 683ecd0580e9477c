"""Sitemaps (sitemaps.org): <urlset> pages with their lastmod, <sitemapindex> children, gzip or not."""

from __future__ import annotations

import gzip
import io
import zlib
from dataclasses import dataclass, field
from datetime import UTC, datetime

import lxml.etree

MAX_SITEMAP_BYTES = 50 * 1024 * 1024  # the protocol's own limit, uncompressed


@dataclass
class Sitemap:
    pages: dict[str, float | None] = field(default_factory=dict)  # URL as written -> lastmod (epoch seconds)
    children: list[str] = field(default_factory=list)  # sitemaps an index points to


def parse_sitemap(raw: bytes) -> Sitemap:
    """Pages and child sitemaps of one sitemap document; an unreadable one yields nothing."""
    if raw[:2] == b"\x1f\x8b":
        try:
            raw = gzip.GzipFile(fileobj=io.BytesIO(raw)).read(MAX_SITEMAP_BYTES)
        except (OSError, EOFError, zlib.error):
            return Sitemap()
    result = Sitemap()
    parser = lxml.etree.XMLParser(resolve_entities=False, no_network=True, recover=True, huge_tree=False)
    try:
        root = lxml.etree.fromstring(raw, parser)
    except lxml.etree.XMLSyntaxError:
        return result
    if root is None:
        return result
    kind = lxml.etree.QName(root).localname
    for entry in root:
        if not isinstance(entry.tag, str):
            continue
        values = {
            lxml.etree.QName(child).localname: (child.text or "").strip()
            for child in entry
            if isinstance(child.tag, str)
        }
        loc = values.get("loc")
        if not loc:
            continue
        if kind == "sitemapindex":
            result.children.append(loc)
        else:
            result.pages[loc] = parse_lastmod(values.get("lastmod", ""))
    return result


def parse_lastmod(value: str) -> float | None:
    """W3C datetime (2024-05-01, 2024-05-01T10:00:00+02:00, ...Z) -> epoch seconds; None when absent or bad."""
    if not value:
        return None
    try:
        moment = datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError:
        return None
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=UTC)
    # A date alone may mean any time that day: read it as its last second, so that a page changed later
    # on the day it was crawled is not taken as unchanged.
    return moment.timestamp() + (86400 - 1 if len(value) == 10 else 0)
