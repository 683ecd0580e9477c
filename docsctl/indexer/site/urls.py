"""Pure URL handling for the crawler: normalisation (one spelling per page), scope, and link extraction."""

from __future__ import annotations

import fnmatch
import re
from collections.abc import Sequence
from dataclasses import dataclass
from urllib.parse import parse_qsl, quote, unquote, urlencode, urljoin, urlsplit, urlunsplit

import lxml.etree
import lxml.html

DEFAULT_PORTS = {"http": 80, "https": 443}
# Query parameters that say where a visitor came from, never what the page is.
TRACKING_PARAMS = re.compile(r"^(utm_\w+|fbclid|gclid|dclid|msclkid|mc_cid|mc_eid|_ga|_gl|ref_src|yclid)$", re.I)
INDEX_FILES = ("index.html", "index.htm")
_SAFE_PATH = "/:@!$&'()*+,;=-._~%"


def normalize_url(url: str, base: str | None = None) -> str | None:
    """One spelling per page, or None for what is not an http(s) page.

    Lower-case scheme and host, no default port, no fragment, no tracking parameters, the remaining
    query sorted, `index.html` dropped, dot segments resolved, percent-escapes spelled one way.
    """
    url = url.strip()
    if base is not None:
        url = urljoin(base, url)
    try:
        parts = urlsplit(url)
        port = parts.port
    except ValueError:
        return None
    scheme = parts.scheme.lower()
    if scheme not in DEFAULT_PORTS or not parts.hostname:
        return None
    host = parts.hostname.lower()
    if ":" in host:  # IPv6 literal
        host = f"[{host}]"
    netloc = host if port in (None, DEFAULT_PORTS[scheme]) else f"{host}:{port}"
    path = _resolve_dots(quote(unquote(parts.path), safe=_SAFE_PATH) or "/")
    for index in INDEX_FILES:
        if path.endswith("/" + index):
            path = path[: -len(index)]
    query_pairs = [(k, v) for k, v in parse_qsl(parts.query, keep_blank_values=True) if not TRACKING_PARAMS.match(k)]
    query = urlencode(sorted(query_pairs))
    return urlunsplit((scheme, netloc, path, query, ""))


def _resolve_dots(path: str) -> str:
    out: list[str] = []
    segments = path.split("/")
    for index, segment in enumerate(segments):
        last = index == len(segments) - 1
        if segment == ".":
            if last:
                out.append("")
            continue
        if segment == "..":
            if len(out) > 1:
                out.pop()
            if last:
                out.append("")
            continue
        out.append(segment)
    return "/".join(out) or "/"


def scope_of(start_url: str) -> str:
    """The default scope of a start URL: its host and the folder its path is in."""
    parts = urlsplit(start_url)
    folder = parts.path if parts.path.endswith("/") else parts.path.rsplit("/", 1)[0] + "/"
    return urlunsplit((parts.scheme, parts.netloc, folder, "", ""))


@dataclass(frozen=True)
class Scope:
    """Which URLs belong to a site source: same scheme and host, under the start folder, include/exclude globs
    (on the URL path, e.g. "/reference/*")."""

    root: str  # scheme://host/folder/
    include: tuple[str, ...] = ()
    exclude: tuple[str, ...] = ()

    def contains(self, url: str) -> bool:
        if not url.startswith(self.root):
            return False
        path = urlsplit(url).path
        if self.include and not _matches(path, self.include):
            return False
        return not (self.exclude and _matches(path, self.exclude))


def _matches(path: str, globs: Sequence[str]) -> bool:
    return any(fnmatch.fnmatchcase(path, glob) or fnmatch.fnmatchcase(path, glob.rstrip("/") + "/*") for glob in globs)


def doc_path(url: str) -> str:
    """A page's path inside its source: the URL path without its leading slash ('/' for the root),
    with the query, so that category rules and result paths read like a folder source's."""
    parts = urlsplit(url)
    path = unquote(parts.path).lstrip("/") or "/"
    return f"{path}?{parts.query}" if parts.query else path


@dataclass(frozen=True)
class PageLinks:
    """What a fetched HTML page says about other URLs."""

    links: list[str]  # absolute, as written (normalise before queueing)
    canonical: str | None = None
    markdown_alternate: str | None = None


def html_links(raw: bytes, page_url: str) -> PageLinks:
    """Links of an HTML page: <a href>, <link rel=canonical>, and a Markdown alternate, resolved against
    <base href> or the page URL. rel=nofollow links are left out."""
    try:
        root = lxml.html.fromstring(raw)
    except (ValueError, lxml.etree.ParserError):
        return PageLinks([])
    base = page_url
    for href in root.xpath("//base/@href")[:1]:
        base = urljoin(page_url, href)
    links = []
    for anchor in root.iter("a", "area"):
        href = anchor.get("href")
        if href and "nofollow" not in (anchor.get("rel") or "").lower():
            links.append(urljoin(base, href))
    canonical = alternate = None
    for link in root.iter("link"):
        rel = (link.get("rel") or "").lower().split()
        href = link.get("href")
        if not href:
            continue
        if "canonical" in rel and canonical is None:
            canonical = urljoin(base, href)
        elif "alternate" in rel and (link.get("type") or "").lower() in {"text/markdown", "text/x-markdown"}:
            alternate = urljoin(base, href)
    return PageLinks(links, canonical, alternate)


_MARKDOWN_LINK = re.compile(r"\[[^\]]*\]\(\s*<?([^)\s>]+)>?(?:\s+\"[^\"]*\")?\s*\)|<(https?://[^>\s]+)>")


def markdown_links(text: str, page_url: str) -> list[str]:
    """Links of a Markdown page (llms.txt and pages served as Markdown): [text](url) and <url>."""
    return [urljoin(page_url, inline or bare) for inline, bare in _MARKDOWN_LINK.findall(text)]
