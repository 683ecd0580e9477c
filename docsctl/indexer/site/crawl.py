"""One crawl of a site source: robots.txt, sitemaps, llms.txt, objects.inv, then breadth-first links.

Pages are written to a mirror folder (one file per page, named by a hash of its URL, suffixed by its
format) and handed to the pipeline as ordinary `SourceDoc`s whose `path` is the URL path and whose
`url` is the live page. A page that answers 304, or that the sitemap says has not changed since the
last crawl, keeps its mirror file, so the pipeline finds its content hash unchanged and neither extracts
nor embeds it. Per-URL state (ETag, Last-Modified, hash, last fetch) is returned for the source state.
"""

from __future__ import annotations

import asyncio
import hashlib
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import urljoin, urlsplit

from docsctl.config import SiteSettings
from docsctl.indexer.site.fetch import ROBOTS_TOKEN, Failed, Fetched, Fetcher
from docsctl.indexer.site.inventory import InventoryEntry, parse_inventory
from docsctl.indexer.site.robots import ALLOW_ALL, RobotsRules, parse_robots
from docsctl.indexer.site.sitemaps import parse_sitemap
from docsctl.indexer.site.urls import Scope, doc_path, html_links, markdown_links, normalize_url
from docsctl.models import SourceDoc

MAX_SITEMAPS = 50
# Links to these are never requested: images, styles, scripts, archives and media are not documents.
ASSET_SUFFIXES = frozenset({
    ".png", ".jpg", ".jpeg", ".gif", ".svg", ".webp", ".ico", ".bmp", ".css", ".js", ".mjs", ".map", ".woff",
    ".woff2", ".ttf", ".otf", ".eot", ".pdf", ".zip", ".gz", ".tgz", ".tar", ".bz2", ".xz", ".whl", ".exe", ".dmg",
    ".mp3", ".mp4", ".webm", ".mov", ".avi", ".ogg", ".wav",
})  # fmt: skip
ACCEPT = "text/html,application/xhtml+xml;q=0.9,text/markdown;q=0.9,text/plain;q=0.8,*/*;q=0.1"
# For the pages llms.txt links to: Markdown where the server negotiates it (llmstxt.org).
ACCEPT_MARKDOWN = "text/markdown,text/html;q=0.9,application/xhtml+xml;q=0.9,text/plain;q=0.8,*/*;q=0.1"
_KINDS = {
    "text/html": "html",
    "application/xhtml+xml": "html",
    "text/markdown": "md",
    "text/x-markdown": "md",
    "text/plain": "txt",
}
SUFFIX_KINDS = {".md": "md", ".markdown": "md", ".txt": "txt"}


@dataclass
class CrawlStats:
    """Counts the progress bar shows and the summary reports."""

    fetched: int = 0  # 200s
    not_modified: int = 0  # 304s, and pages the sitemap's lastmod says are unchanged (no request)
    queued: int = 0
    skipped: int = 0
    gone: int = 0  # 404/410
    disallowed: int = 0  # by robots.txt: never requested
    duplicates: int = 0  # the same page under another URL (redirect, canonical or identical content)
    requests: int = 0
    bytes: int = 0
    seconds: float = 0.0

    @property
    def pages_per_second(self) -> float:
        return (self.fetched + self.not_modified) / self.seconds if self.seconds else 0.0

    def to_dict(self) -> dict[str, Any]:
        return {**self.__dict__, "pages_per_second": round(self.pages_per_second, 2)}


CrawlProgress = Callable[[str, CrawlStats], None]  # (source, counts so far)


@dataclass
class CrawlResult:
    pages: list[tuple[SourceDoc, str | None]]  # (document, why it is skipped or None), as walk_source yields
    # per URL: etag, last_modified, hash, fetched, file, path; or, for a URL that redirected, {"redirect": target}
    state: dict[str, dict[str, Any]]
    stats: CrawlStats
    requests_started: list[float] = field(default_factory=list)  # monotonic; for the benchmark


@dataclass(frozen=True)
class SiteJob:
    """Everything a crawl needs to know about its source."""

    name: str
    start_url: str
    scope: Scope
    settings: SiteSettings
    mirror: Path
    # (url, path, file, (name, anchor) of each objects.inv name on the page) -> SourceDoc
    make_doc: Callable[[str, str, Path, tuple[tuple[str, str], ...]], SourceDoc]
    previous: dict[str, dict[str, Any]]  # the state of the last crawl ({} for a full one)


def page_kind(content_type: str, body: bytes, url: str) -> tuple[str | None, str]:
    """('html'|'md'|'txt', '') for a page docsctl reads, else (None, why not): by Content-Type, then by sniffing."""
    mime = content_type.split(";", 1)[0].strip().lower()
    head = body[:4096]
    if b"\0" in head or _mostly_binary(head):
        return None, f"binary content served as {mime or 'no type'}"
    kind = _KINDS.get(mime)
    if kind == "txt" or kind is None and mime in {"", "application/octet-stream"}:
        suffix = Path(urlsplit(url).path).suffix.lower()
        sniffed = head.lstrip()[:15].lower()
        if sniffed.startswith((b"<!doctype html", b"<html")):
            return "html", ""
        return SUFFIX_KINDS.get(suffix, "txt"), ""
    if kind is None:
        return None, f"not a document ({mime})"
    return kind, ""


def _mostly_binary(head: bytes) -> bool:
    if not head:
        return False
    try:
        head.decode("utf-8")
        return False
    except UnicodeDecodeError as exc:
        if exc.start >= len(head) - 4:  # a multi-byte character cut by the 4 KB window
            return False
    controls = sum(1 for byte in head if byte < 9 or 13 < byte < 32)
    return controls > len(head) // 20


class _Crawl:
    def __init__(self, job: SiteJob, fetcher: Fetcher, progress: CrawlProgress | None) -> None:
        self.job = job
        self.fetcher = fetcher
        self.progress = progress
        self.robots: RobotsRules = ALLOW_ALL
        self.stats = CrawlStats()
        self.pages: dict[str, tuple[SourceDoc, str | None]] = {}  # by identity URL
        self.state: dict[str, dict[str, Any]] = {}
        self.seen: set[str] = set()  # URLs queued or claimed, so each is requested at most once
        self.by_hash: dict[str, str] = {}  # content hash -> identity URL that holds it
        self.lastmod: dict[str, float | None] = {}
        self.names: dict[str, list[tuple[str, str]]] = {}  # page URL -> (API name, anchor) from objects.inv
        self.queue: asyncio.Queue[tuple[str, int]] = asyncio.Queue()
        self.unreachable = ""  # why the site was not crawled at all this time
        self.prefer_markdown: set[str] = set()  # pages llms.txt links to
        self.started = time.monotonic()
        # The last crawl's pages by identity URL, and where the URLs that redirected then went.
        self.previous_pages = {url: entry for url, entry in job.previous.items() if "file" in entry}
        self.previous_redirects = {url: entry["redirect"] for url, entry in job.previous.items() if "redirect" in entry}

    # -- discovery ---------------------------------------------------------------------------------

    async def discover(self) -> list[str]:
        """robots.txt, then sitemaps, llms.txt and objects.inv: the URLs to start from besides the start URL."""
        parts = urlsplit(self.job.scope.root)
        origin = f"{parts.scheme}://{parts.netloc}"
        robots = await self.fetcher.get(f"{origin}/robots.txt")
        if isinstance(robots, Failed) and robots.transient:
            # RFC 9309: a robots.txt that cannot be read (5xx, unreachable) means crawl nothing for now.
            self.unreachable = f"robots.txt unreachable ({robots.reason})"
            return []
        if isinstance(robots, Fetched):
            self.robots = parse_robots(robots.body.decode("utf-8", "replace"), ROBOTS_TOKEN)
            if self.robots.crawl_delay:
                self.fetcher.set_crawl_delay(origin, self.robots.crawl_delay)
        seeds: list[str] = []
        await self._read_sitemaps([*self.robots.sitemaps, f"{origin}/sitemap.xml"], seeds)
        for name in ("llms.txt", "llms-full.txt"):
            got = await self._fetch_allowed(urljoin(self.job.scope.root, name))
            if isinstance(got, Fetched) and page_kind(got.headers.get("content-type", ""), got.body, got.url)[0]:
                links = [normalize_url(link) for link in markdown_links(got.body.decode("utf-8", "replace"), got.url)]
                self.prefer_markdown.update(link for link in links if link)
                seeds.extend(link for link in links if link)
        inventory = await self._fetch_allowed(urljoin(self.job.scope.root, "objects.inv"))
        if isinstance(inventory, Fetched):
            self._read_inventory(parse_inventory(inventory.body), inventory.url)
        return seeds

    async def _fetch_allowed(self, url: str) -> Fetched | Failed:
        """A discovery file (sitemap, llms.txt, objects.inv): anywhere on the site that robots.txt allows."""
        if not self.robots.allows(_path_and_query(url)):
            return Failed(url, "disallowed by robots.txt")
        return await self.fetcher.get(url, may_follow=self._off_site)

    def _off_site(self, url: str) -> str | None:
        if urlsplit(url).netloc != urlsplit(self.job.scope.root).netloc:
            return "on another host"
        return None if self.robots.allows(_path_and_query(url)) else "disallowed by robots.txt"

    async def _read_sitemaps(self, roots: Sequence[str], seeds: list[str]) -> None:
        pending, read = list(dict.fromkeys(roots)), set()
        while pending and len(read) < MAX_SITEMAPS:
            url = pending.pop(0)
            if url in read or urlsplit(url).netloc != urlsplit(self.job.scope.root).netloc:
                continue
            read.add(url)
            got = await self._fetch_allowed(url)
            if not isinstance(got, Fetched):
                continue
            sitemap = parse_sitemap(got.body)
            pending.extend(child for child in sitemap.children if child not in read)
            for loc, lastmod in sitemap.pages.items():
                page = normalize_url(loc)
                if page is not None:
                    self.lastmod[page] = lastmod
                    seeds.append(page)

    def _read_inventory(self, entries: list[InventoryEntry], inventory_url: str) -> None:
        for entry in entries:
            url = normalize_url(entry.uri, inventory_url)
            if url is not None:
                self.names.setdefault(url, []).append((entry.name, entry.anchor))

    # -- the crawl ---------------------------------------------------------------------------------

    def _refusal(self, url: str) -> str | None:
        """Why `url` must not be requested, or None."""
        if not self.job.scope.contains(url):
            return "out of scope"
        if not self.robots.allows(_path_and_query(url)):
            return "disallowed by robots.txt"
        return None

    def _redirect_refusal(self, url: str) -> str | None:
        return "already crawled" if url in self.seen else self._refusal(url)

    def enqueue(self, url: str | None, depth: int, *, start: bool = False) -> None:
        """Queue `url` unless it was seen, is out of scope (the start URL ignores include globs), too deep,
        past max_pages, or disallowed by robots.txt (counted, never requested)."""
        if url is None or url in self.seen or depth > self.job.settings.max_depth:
            return
        if Path(urlsplit(url).path).suffix.lower() in ASSET_SUFFIXES:
            return
        if len(self.seen) >= self.job.settings.max_pages:
            return
        if not (self.job.scope.contains(url) or start and url.startswith(self.job.scope.root)):
            return
        self.seen.add(url)
        if not self.robots.allows(_path_and_query(url)):
            self.stats.disallowed += 1
            return
        self.queue.put_nowait((url, depth))
        self.stats.queued += 1

    async def worker(self) -> None:
        while True:
            url, depth = await self.queue.get()
            try:
                await self.visit(url, depth)
            except Exception as exc:  # a bug or a pathological page costs that page, never the crawl
                self.stats.skipped += 1
                reason = f"crawl failed: {type(exc).__name__}: {exc}"
                self.pages[url] = (self._doc(url, doc_path(url), self.job.mirror / "-"), reason)
            finally:
                self.stats.queued -= 1
                self._report()
                self.queue.task_done()

    def _report(self) -> None:
        self.stats.requests, self.stats.bytes = self.fetcher.traffic.requests, self.fetcher.traffic.bytes
        self.stats.seconds = time.monotonic() - self.started
        if self.progress:
            self.progress(self.job.name, self.stats)

    async def visit(self, url: str, depth: int) -> None:
        # A URL that redirected last time is asked with its target's validators: the redirect is followed
        # with them, and an unchanged target answers 304 (sites that link `/page` for `/page/` redirect a lot).
        identity = self.previous_redirects.get(url, url)
        previous = self.previous_pages.get(identity)
        mirror_file = self.job.mirror / previous["file"] if previous else None
        has_copy = mirror_file is not None and mirror_file.is_file()
        lastmod = self.lastmod.get(url)
        if has_copy and lastmod is not None and lastmod <= previous.get("fetched", 0):
            self.seen.add(identity)
            self._keep(identity, previous, depth)
            return
        headers = {"Accept": ACCEPT_MARKDOWN if url in self.prefer_markdown else ACCEPT}
        if has_copy and previous.get("etag"):
            headers["If-None-Match"] = previous["etag"]
        if has_copy and previous.get("last_modified"):
            headers["If-Modified-Since"] = previous["last_modified"]
        got = await self.fetcher.get(url, headers, may_follow=self._redirect_refusal)
        if isinstance(got, Failed) and got.refused_redirect in self.seen:
            self.stats.duplicates += 1  # redirected to a page crawled on its own: not requested twice
            self.state[url] = {"redirect": got.refused_redirect}
            return
        if isinstance(got, Failed):
            self._failed(url, got, previous if has_copy else None, depth)
            return
        if got.url != url:
            self.state[url] = {"redirect": got.url}
        if got.status == 304 and got.url != identity:  # the redirect moved: the validators were another page's
            got = await self.fetcher.get(got.url, {"Accept": headers["Accept"]}, may_follow=self._redirect_refusal)
            if isinstance(got, Failed):
                self._failed(url, got, None, depth)
                return
        if got.status == 304 and has_copy:
            self.seen.add(identity)
            self._keep(identity, {**previous, "fetched": time.time()}, depth)
        elif got.status == 304:  # to a request that was not conditional: nothing to read
            self._failed(url, Failed(url, "HTTP 304 to an unconditional request"), None, depth)
        else:
            await self._take(url, got, depth)

    def _keep(self, url: str, previous: dict[str, Any], depth: int) -> None:
        """An unchanged page: its mirror file stands; its links are read from it."""
        self.stats.not_modified += 1
        file = self.job.mirror / previous["file"]
        self.state[url] = previous
        self.by_hash.setdefault(previous.get("hash", ""), url)
        self.pages[url] = (self._doc(url, previous["path"], file), None)
        self._follow(file.read_bytes(), url, file.suffix.lstrip("."), depth)

    def _keep_previous(self, url: str, previous: dict[str, Any], reason: str, depth: int | None) -> None:
        """A page that could not be fetched this time stays as it was indexed, and so do the pages it links
        to: a site that is down for a while must not lose its chunks. `depth` None follows no links."""
        self.state[url] = previous
        file = self.job.mirror / previous["file"]
        self.pages[url] = (self._doc(url, previous["path"], file), f"{reason}; the previous version stays indexed")
        if depth is not None:
            self._follow(file.read_bytes(), url, file.suffix.lstrip("."), depth)

    def keep_everything(self) -> None:
        """The site could not be crawled: every page of the last crawl whose mirror file is there stays."""
        self.state.update({url: {"redirect": target} for url, target in self.previous_redirects.items()})
        for url, previous in self.previous_pages.items():
            if (self.job.mirror / previous["file"]).is_file():
                self._keep_previous(url, previous, self.unreachable, None)
                self.stats.skipped += 1
        if not self.pages:
            start = self.job.start_url
            self.pages[start] = (self._doc(start, doc_path(start), self.job.mirror / "-"), self.unreachable)
            self.stats.skipped += 1

    def _failed(self, url: str, failure: Failed, previous: dict[str, Any] | None, depth: int) -> None:
        if failure.gone:
            self.stats.gone += 1
            return  # not handed on: the pipeline drops the chunks it had
        self.stats.skipped += 1
        if failure.transient and previous is not None:
            self._keep_previous(url, previous, failure.reason, depth)
            return
        self.pages[url] = (self._doc(url, doc_path(url), self.job.mirror / "-"), failure.reason)

    async def _take(self, url: str, got: Fetched, depth: int) -> None:
        identity = got.url
        self.seen.add(identity)
        body, content_type = got.body, got.headers.get("content-type", "")
        kind, why_not = page_kind(content_type, body, identity)
        if kind is None:
            self.stats.skipped += 1
            self.pages[identity] = (self._doc(identity, doc_path(identity), self.job.mirror / "-"), why_not)
            return
        if kind == "html":
            links = html_links(body, identity)
            canonical = normalize_url(links.canonical) if links.canonical else None
            if canonical and canonical != identity and self.job.scope.contains(canonical):
                if canonical in self.pages:
                    self.stats.duplicates += 1
                    return
                identity = canonical
                self.seen.add(canonical)
            self._enqueue_all(links.links, depth)
            alternate = normalize_url(links.markdown_alternate) if links.markdown_alternate else None
            if alternate and not self._refusal(alternate):
                markdown = await self.fetcher.get(alternate, {"Accept": "text/markdown"}, may_follow=self._refusal)
                readable = isinstance(markdown, Fetched) and markdown.status == 200
                if readable and page_kind(markdown.headers.get("content-type", ""), markdown.body, alternate)[0]:
                    body, kind = markdown.body, "md"
        elif kind == "md":
            self._enqueue_all(markdown_links(body.decode("utf-8", "replace"), identity), depth)
        digest = hashlib.sha256(body).hexdigest()[:24]
        holder = self.by_hash.get(digest)
        if holder is not None and holder != identity:
            self.stats.duplicates += 1  # identical content under another URL: indexed once
            return
        self.by_hash[digest] = identity
        file_name = f"{hashlib.sha1(identity.encode()).hexdigest()[:20]}.{kind}"
        file = self.job.mirror / file_name
        if not file.is_file() or file.read_bytes() != body:
            file.write_bytes(body)
        path = doc_path(identity)
        self.state[identity] = {
            "path": path,
            "file": file_name,
            "etag": got.headers.get("etag"),
            "last_modified": got.headers.get("last-modified"),
            "hash": digest,
            "fetched": time.time(),
        }
        self.pages[identity] = (self._doc(identity, path, file), None)
        self.stats.fetched += 1

    def _follow(self, body: bytes, url: str, kind: str, depth: int) -> None:
        if kind == "html":
            self._enqueue_all(html_links(body, url).links, depth)
        elif kind == "md":
            self._enqueue_all(markdown_links(body.decode("utf-8", "replace"), url), depth)

    def _enqueue_all(self, links: list[str], depth: int) -> None:
        for link in links:
            self.enqueue(normalize_url(link), depth + 1)

    def _doc(self, url: str, path: str, file: Path) -> SourceDoc:
        return self.job.make_doc(url, path, file, tuple(self.names.get(url, ())))


def _path_and_query(url: str) -> str:
    parts = urlsplit(url)
    return f"{parts.path}?{parts.query}" if parts.query else parts.path or "/"


async def crawl(job: SiteJob, progress: CrawlProgress | None = None) -> CrawlResult:
    """Crawl `job`'s site; what the pipeline needs to index it, and what to remember for the next crawl."""
    job.mirror.mkdir(parents=True, exist_ok=True)
    async with Fetcher(job.settings) as fetcher:
        run = _Crawl(job, fetcher, progress)
        seeds = await run.discover()
        if run.unreachable:
            run.keep_everything()
            run._report()
            return CrawlResult(list(run.pages.values()), run.state, run.stats, list(fetcher.traffic.started_at))
        run.enqueue(normalize_url(job.start_url), 0, start=True)
        for seed in seeds:
            run.enqueue(normalize_url(seed), 1)
        workers = [asyncio.create_task(run.worker()) for _ in range(job.settings.concurrency)]
        try:
            await run.queue.join()
        finally:
            for worker in workers:
                worker.cancel()
            await asyncio.gather(*workers, return_exceptions=True)
        run._report()
        _remove_stale_files(job.mirror, {entry["file"] for entry in run.state.values() if "file" in entry})
        return CrawlResult(list(run.pages.values()), run.state, run.stats, list(fetcher.traffic.started_at))


def _remove_stale_files(mirror: Path, kept: set[str]) -> None:
    for file in mirror.iterdir():
        if file.is_file() and file.name not in kept:
            file.unlink()
