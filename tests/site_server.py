"""A documentation website on 127.0.0.1 for the crawler's tests and benchmark, with every request logged.

It serves ../shared/corpora/chimerax/user under /user/ (read in place, never copied), plus what a real
site has: robots.txt (one folder disallowed, a Crawl-delay, a Sitemap line), a sitemap index pointing to
a gzipped sitemap with lastmod dates, llms.txt, ETag and Last-Modified with conditional GETs answered by
304, generated folder indexes; and misbehaving pages under /user/commands/misc/ (see MISBEHAVING).
Pages can be changed, deleted or made to fail while it runs.
"""

from __future__ import annotations

import gzip
import hashlib
import math
import os
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from email.utils import formatdate
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import sphobjinv

MISC = "/user/commands/misc/"
# page -> the reason the crawler gives for skipping it ("" for pages that recover and are indexed)
MISBEHAVING = {
    MISC + "flaky.html": "",  # 500 once, then fine
    MISC + "busy.html": "",  # 429 with Retry-After: 1 once, then fine
    MISC + "loop.html": "redirect loop",
    MISC + "huge.html": "larger than 10 MB",  # 50 MB, streamed without a Content-Length
    MISC + "binary.html": "binary content served as text/html",
    MISC + "slow.html": "timed out after 3 attempts",  # trickles a byte per 0.1 s for 5 s
    MISC + "away.html": "redirected to {url}/user/tools/basicactions.html, out of scope",  # the target: never requested
    MISC + "scheme.html": "redirected to a non-web URL",  # to ftp://
}
# Pages of other kinds, each indexed once under the path given (None: not indexed on its own)
EXTRAS = {
    MISC + "guide.html": "user/commands/misc/guide.html",  # offers a Markdown alternate, guide.md
    MISC + "alias.html": None,  # <link rel=canonical> to guide.html
    MISC + "twin-a.html": "twin",  # identical to twin-b.html: one of the two is indexed
    MISC + "twin-b.html": "twin",
    MISC + "renamed.html": "user/commands/misc/renamed/",  # redirects to renamed/, which nothing else links
}
LLMS_ONLY = MISC + "notes.md"  # linked from llms.txt alone, served as text/markdown
NEGOTIATED = MISC + "negotiated.html"  # Markdown to a request that prefers it (llms.txt links to it), else HTML
INVENTORY = {"chimerax.color": "color.html#simple", "chimerax.cartoon.style": "cartoon.html#style"}
DISALLOWED = MISC + "private/"
# page under misc/ -> (status, Location): a loop, a page moved within the scope (to a page linked on its own,
# and to one reached only through the redirect, as `/page` to `/page/`), out of it, and to ftp://
REDIRECTS = {
    "renamed.html": (301, MISC + "renamed/"),
    "loop.html": (302, MISC + "loop2.html"),
    "loop2.html": (301, "loop.html"),
    "moved.html": (301, "/user/commands/color.html"),
    "away.html": (302, "/user/tools/basicactions.html"),
    "scheme.html": (302, "ftp://x.invalid/f"),
}
SLOW_SECONDS = 5.0


@dataclass
class Request:
    path: str
    headers: dict[str, str]
    started: float  # monotonic
    ended: float = 0.0
    status: int = 0


@dataclass
class SiteServer:
    corpus: Path  # the folder served as /user/
    pages: set[str]  # paths under /user/commands/ that the generated index links to, e.g. "color.html"
    crawl_delay: float = 0.0
    misbehaving: bool = True  # the index links to the pages under misc/ (False: a well-behaved site)
    objects: dict[str, str] = field(default_factory=lambda: dict(INVENTORY))  # objects.inv: name -> uri
    url: str = ""
    log: list[Request] = field(default_factory=list)
    changed: dict[str, bytes] = field(default_factory=dict)  # path -> new content
    changed_at: dict[str, float] = field(default_factory=dict)
    deleted: set[str] = field(default_factory=set)
    failing: set[str] = field(default_factory=set)  # paths answering 503 until removed from here
    accepted: dict[tuple[str, int], float] = field(default_factory=dict)  # client address -> monotonic
    _hits: dict[str, int] = field(default_factory=dict)
    _lock: threading.Lock = field(default_factory=threading.Lock)
    started_at: float = field(default_factory=time.time)

    def requests_for(self, path: str) -> list[Request]:
        return [request for request in self.log if request.path == path]

    def hit(self, path: str) -> int:
        with self._lock:
            self._hits[path] = self._hits.get(path, 0) + 1
            return self._hits[path]

    def reset_log(self) -> None:
        """Forget the requests so far (pages that misbehave once keep behaving)."""
        with self._lock:
            self.log.clear()

    def max_in_flight(self, timeout: float) -> int:
        """Most requests in progress at once; a request the client gave up on counts until its deadline."""
        events = []
        for request in self.log:
            end = min(request.ended or request.started + timeout, request.started + timeout)
            events += [(request.started, 1), (end, -1)]
        current = best = 0
        for _, step in sorted(events, key=lambda event: (event[0], event[1])):
            current += step
            best = max(best, current)
        return best

    # -- content ---------------------------------------------------------------------------------------

    def index_page(self) -> bytes:
        links = [f'<li><a href="{name}">{name}</a></li>' for name in sorted(self.pages)]
        if not self.misbehaving:
            return f"<html><body><h1>Commands</h1><ul>{''.join(links)}</ul></body></html>".encode()
        links += [f'<li><a href="{path}">{path}</a></li>' for path in [*MISBEHAVING, *EXTRAS]]
        links += [
            f'<li><a href="{DISALLOWED}secret.html">secret</a></li>',
            '<li><a href="save.html">not included</a></li>',
            '<li><a href="../tools/basicactions.html">out of scope</a></li>',
            '<li><a href="http://elsewhere.invalid/docs/">another host</a></li>',
            '<li><a href="color.html?utm_source=index#top">color again</a></li>',
            f'<li><a href="{MISC}moved.html">moved</a></li>',
        ]
        body = f"<h1>Commands</h1><ul>{''.join(links)}</ul>"
        return f"<html><head><title>Commands</title></head><body>{body}</body></html>".encode()

    def sitemap_index(self) -> bytes:
        return (
            '<?xml version="1.0" encoding="UTF-8"?>\n'
            '<sitemapindex xmlns="http://www.sitemaps.org/schemas/sitemap/0.9">'
            f"<sitemap><loc>{self.url}/sitemaps/pages.xml.gz</loc></sitemap></sitemapindex>"
        ).encode()

    def sitemap(self) -> bytes:
        # Half the pages carry a lastmod (when they last changed): those the crawler need not request again.
        entries = []
        for index, name in enumerate(sorted(self.pages)):
            path = f"/user/commands/{name}"
            lastmod = ""
            if index % 2 == 0:
                moment = math.ceil(self.changed_at.get(path, self.started_at - 86400))  # never before the change
                lastmod = f"<lastmod>{time.strftime('%Y-%m-%dT%H:%M:%SZ', time.gmtime(moment))}</lastmod>"
            entries.append(f"<url><loc>{self.url}{path}</loc>{lastmod}</url>")
        body = '<urlset xmlns="http://www.sitemaps.org/schemas/sitemap/0.9">' + "".join(entries) + "</urlset>"
        return gzip.compress(body.encode())

    def robots(self) -> bytes:
        delay = f"Crawl-delay: {self.crawl_delay}\n" if self.crawl_delay else ""
        return (
            f"User-agent: somebot\nDisallow: /\n\nUser-agent: *\nDisallow: {DISALLOWED}\n{delay}"
            f"Sitemap: {self.url}/sitemaps/index.xml\n"
        ).encode()

    def llms(self) -> bytes:
        return (
            b"# ChimeraX commands\n\n- [Coloring](color.html): color atoms, cartoons and surfaces\n"
            b"- [Notes](misc/notes.md): release notes\n"
            b"- [Negotiated](misc/negotiated.html): either format\n"
        )

    def inventory(self) -> bytes:
        inventory = sphobjinv.Inventory()
        inventory.project, inventory.version = "ChimeraX", "1.0"
        for name, uri in self.objects.items():
            entry = sphobjinv.DataObjStr(name=name, domain="py", role="function", priority="1", uri=uri, dispname="-")
            inventory.objects.append(entry)
        return sphobjinv.compress(inventory.data_file())


def _handler(site: SiteServer) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        def log_message(self, *args: object) -> None:  # quiet: the log is `site.log`
            pass

        def do_GET(self) -> None:  # noqa: N802 (http.server's name)
            path = self.path.split("?", 1)[0]
            # When the connection was accepted (one request per connection: HTTP/1.0), not when this
            # thread got round to it: the server shares the GIL with the crawler and its own big pages.
            started = site.accepted.pop(self.client_address, time.monotonic())
            request = Request(path, {k.lower(): v for k, v in self.headers.items()}, started)
            with site._lock:
                site.log.append(request)
            try:
                request.status = self.answer(path, site.hit(path))
            except (BrokenPipeError, ConnectionResetError):
                request.status = -1
            finally:
                request.ended = time.monotonic()

        def send(self, status: int, body: bytes, content_type: str = "text/html", **headers: str) -> int:
            self.send_response(status)
            self.send_header("Content-Type", content_type)
            self.send_header("Content-Length", str(len(body)))
            for name, value in headers.items():
                self.send_header(name.replace("_", "-"), value)
            self.end_headers()
            self.wfile.write(body)
            return status

        def document(self, body: bytes, content_type: str, mtime: float) -> int:
            etag = '"' + hashlib.sha1(body).hexdigest()[:16] + '"'
            if self.headers.get("If-None-Match") == etag:
                self.send_response(304)
                self.send_header("ETag", etag)
                self.end_headers()
                return 304
            return self.send(200, body, content_type, ETag=etag, Last_Modified=formatdate(mtime, usegmt=True))

        def answer(self, path: str, hits: int) -> int:
            if path in site.failing:
                return self.send(503, b"down for maintenance")
            if path == "/robots.txt":
                return self.send(200, site.robots(), "text/plain")
            if path == "/sitemaps/index.xml":
                return self.send(200, site.sitemap_index(), "application/xml")
            if path == "/sitemaps/pages.xml.gz":
                return self.send(200, site.sitemap(), "application/gzip")
            if path == "/user/commands/llms.txt":
                return self.send(200, site.llms(), "text/plain")
            if path == "/user/commands/objects.inv":
                return self.send(200, site.inventory(), "application/octet-stream")
            if path in site.deleted:
                return self.send(404, b"gone")
            if path in site.changed:
                return self.document(site.changed[path], "text/html", site.changed_at[path])
            if path.startswith(MISC):
                return self.misbehave(path, hits)
            if path == "/user/commands/":
                return self.document(site.index_page(), "text/html", site.started_at)
            if path.startswith("/user/"):
                file = site.corpus / path.removeprefix("/user/")
                if path.endswith("/") and file.is_dir():
                    return self.folder(file)
                if file.is_file():
                    return self.document(file.read_bytes(), "text/html", file.stat().st_mtime)
            return self.send(404, b"not found")

        def folder(self, folder: Path) -> int:
            links = "".join(f'<a href="{child.name}">{child.name}</a><br>' for child in sorted(folder.iterdir()))
            return self.document(f"<html><body>{links}</body></html>".encode(), "text/html", site.started_at)

        def misbehave(self, path: str, hits: int) -> int:
            name = path.removeprefix(MISC)
            page = f"<html><head><title>{name}</title></head><body><h1>{name}</h1><p>Recovered page.</p></body></html>"
            if name == "flaky.html":
                return self.send(500, b"oops") if hits == 1 else self.document(page.encode(), "text/html", 0)
            if name == "busy.html":
                if hits == 1:
                    return self.send(429, b"slow down", Retry_After="1")
                return self.document(page.replace("Recovered", "Patient").encode(), "text/html", 0)
            if name in REDIRECTS:
                status, location = REDIRECTS[name]
                self.send_response(status)
                self.send_header("Location", location)
                self.end_headers()
                return status
            if name == "guide.html":
                head = '<link rel="alternate" type="text/markdown" href="guide.md">'
                body = "<h1>Guide</h1><p>The HTML version of the guide.</p>"
                return self.document(f"<html><head>{head}</head><body>{body}</body></html>".encode(), "text/html", 0)
            if name == "guide.md":
                return self.document(b"# Guide\n\nThe Markdown version of the guide.\n", "text/markdown", 0)
            if name == "alias.html":
                head = '<link rel="canonical" href="guide.html">'
                body = "<h1>Guide alias</h1><p>Another address of the guide.</p>"
                return self.document(f"<html><head>{head}</head><body>{body}</body></html>".encode(), "text/html", 0)
            if name in {"twin-a.html", "twin-b.html"}:
                twin = b"<html><body><h1>Twins</h1><p>The same page under two addresses.</p></body></html>"
                return self.document(twin, "text/html", 0)
            if name == "negotiated.html":
                if self.headers.get("Accept", "").startswith("text/markdown"):
                    return self.document(b"# Negotiated\n\nServed as Markdown on request.\n", "text/markdown", 0)
                html = b"<html><body><h1>Negotiated</h1><p>Served as HTML.</p></body></html>"
                return self.document(html, "text/html", 0)
            if name == "renamed/":
                body = b"<html><body><h1>Renamed</h1><p>Reached through a redirect only.</p></body></html>"
                return self.document(body, "text/html", 0)
            if name == "notes.md":
                return self.document(b"# Notes\n\nOnly llms.txt links to these notes.\n", "text/markdown", 0)
            if name == "binary.html":
                return self.send(200, os.urandom(64 * 1024), "text/html")
            if name == "huge.html":
                self.send_response(200)
                self.send_header("Content-Type", "text/html")
                self.end_headers()
                block = b"<p>" + b"lorem ipsum " * 5000 + b"</p>\n"
                for _ in range(50 * 1024 * 1024 // len(block) + 1):
                    self.wfile.write(block)
                return 200
            if name == "slow.html":
                self.send_response(200)
                self.send_header("Content-Type", "text/html")
                self.end_headers()
                deadline = time.monotonic() + SLOW_SECONDS
                while time.monotonic() < deadline:
                    self.wfile.write(b" ")
                    self.wfile.flush()
                    time.sleep(0.1)
                return 200
            return self.send(404, b"not found")

    return Handler


@contextmanager
def serve_site(
    corpus: Path,
    pages: set[str],
    crawl_delay: float = 0.0,
    misbehaving: bool = True,
    objects: dict[str, str] | None = None,
) -> Iterator[SiteServer]:
    """The site on a free port of 127.0.0.1, for the duration of the `with` block; `objects`: its objects.inv
    (name -> uri relative to /user/commands/), INVENTORY when not given."""
    site = SiteServer(corpus=corpus, pages=pages, crawl_delay=crawl_delay, misbehaving=misbehaving)
    if objects is not None:
        site.objects = objects

    class Server(ThreadingHTTPServer):
        def process_request(self, request, client_address):  # noqa: ANN001 (socketserver's signature)
            site.accepted[client_address] = time.monotonic()
            super().process_request(request, client_address)

    server = Server(("127.0.0.1", 0), _handler(site))
    server.daemon_threads = True
    site.url = f"http://127.0.0.1:{server.server_address[1]}"
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield site
    finally:
        server.shutdown()
        server.server_close()
