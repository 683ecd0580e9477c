"""HTTP for the crawler: per-host concurrency and rate, redirects by hand, size cap, retries with backoff.

Every request of a crawl goes through one `Fetcher`, so the per-host limits hold for robots.txt,
sitemaps and pages alike. Outcomes are values, never exceptions: a `Fetched` (200 or 304) or a
`Failed` with a short reason and whether the failure is transient (the page's old chunks are then kept).
"""

from __future__ import annotations

import asyncio
import email.utils
import time
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from urllib.parse import urljoin, urlsplit

import httpx

from docsctl import __version__
from docsctl.config import SiteSettings
from docsctl.indexer.site.urls import normalize_url

USER_AGENT = f"docsctl/{__version__} (documentation indexer; +https://pypi.org/project/docsctl/)"
ROBOTS_TOKEN = "docsctl"  # what robots.txt groups name us by
MAX_REDIRECTS = 10
RETRIED_STATUSES = frozenset({429, 500, 502, 503, 504})
GONE_STATUSES = frozenset({404, 410})


@dataclass(frozen=True)
class Fetched:
    url: str  # after redirects, normalised
    status: int  # 200 or 304
    headers: httpx.Headers
    body: bytes = b""


@dataclass(frozen=True)
class Failed:
    url: str
    reason: str
    transient: bool = False  # worth trying again next run: the old version stays indexed
    gone: bool = False  # 404/410: the page no longer exists
    refused_redirect: str | None = None  # the redirect target `may_follow` refused


@dataclass
class Traffic:
    """What a crawl cost the server."""

    requests: int = 0
    bytes: int = 0
    retries: int = 0
    started_at: list[float] = field(default_factory=list)  # monotonic start of each request


class _Host:
    """At most `concurrency` requests in flight, and each request sent at least `interval` seconds after the
    one before.

    The interval is measured between requests as they go on the wire (httpx's trace of the request
    headers), not between the moments they were allowed to go: when the event loop is busy for a while
    (parsing a page), a request allowed before the pause must not leave together with the next one
    after it. So the turn is held from the wait until the request is sent."""

    def __init__(self, interval: float, concurrency: int) -> None:
        self.interval = interval
        self.in_flight = asyncio.Semaphore(concurrency)
        self._last_sent = float("-inf")
        self._turn = asyncio.Lock()

    def slow_down(self, interval: float) -> None:
        self.interval = max(self.interval, interval)

    @asynccontextmanager
    async def turn(self) -> AsyncIterator[Callable[[], float]]:
        """Wait for this host's turn; call the function given once the request is sent (it returns the time)."""
        await self._turn.acquire()
        released = False

        def sent() -> float:
            nonlocal released
            if not released:
                released = True
                self._last_sent = time.monotonic()
                self._turn.release()
            return self._last_sent

        try:
            while (wait := self._last_sent + self.interval - time.monotonic()) > 0:
                await asyncio.sleep(wait)
            yield sent
        finally:
            sent()  # a request that failed before it was sent (no connection) counts as sent then


class Fetcher:
    """One crawl's HTTP client; use as `async with Fetcher(settings) as fetcher`."""

    def __init__(self, settings: SiteSettings) -> None:
        self.settings = settings
        self.traffic = Traffic()
        self.max_bytes = int(settings.max_page_mb * 1024 * 1024)
        self._hosts: dict[str, _Host] = {}
        self._client = httpx.AsyncClient(
            headers={"User-Agent": USER_AGENT},
            timeout=httpx.Timeout(settings.timeout_seconds),
            follow_redirects=False,  # followed here, to count hops, see loops and check each target
        )  # trust_env: HTTP(S)_PROXY and NO_PROXY are honoured, as curl would

    async def __aenter__(self) -> Fetcher:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self._client.aclose()

    def set_crawl_delay(self, url: str, seconds: float) -> None:
        """A robots.txt Crawl-delay: it wins when slower than the configured rate."""
        self._host(url).slow_down(seconds)

    def _host(self, url: str) -> _Host:
        key = urlsplit(url).netloc
        if key not in self._hosts:
            self._hosts[key] = _Host(1.0 / self.settings.requests_per_second, self.settings.concurrency)
        return self._hosts[key]

    async def get(
        self,
        url: str,
        headers: dict[str, str] | None = None,
        may_follow: Callable[[str], str | None] = lambda url: None,
    ) -> Fetched | Failed:
        """GET `url`, following up to MAX_REDIRECTS redirects; `may_follow(target)` returns why a
        redirect target must not be fetched (out of scope, disallowed), or None."""
        visited = {url}
        current = url
        for _ in range(MAX_REDIRECTS + 1):
            outcome = await self._get_with_retries(current, headers or {})
            if not isinstance(outcome, str):
                return outcome
            target = normalize_url(outcome)
            if target is None:
                return Failed(url, f"redirected to a non-web URL {outcome!r}")
            if target in visited:
                return Failed(url, "redirect loop")
            refusal = may_follow(target)
            if refusal:
                return Failed(url, f"redirected to {target}, {refusal}", refused_redirect=target)
            visited.add(target)
            current = target
        return Failed(url, f"more than {MAX_REDIRECTS} redirects")

    async def _get_with_retries(self, url: str, headers: dict[str, str]) -> Fetched | Failed | str:
        """One hop: the response, a failure, or (a str) the absolute URL a redirect points to."""
        settings = self.settings
        for attempt in range(settings.retries + 1):
            outcome, retry_after = await self._attempt(url, headers)
            if not isinstance(outcome, Failed) or not outcome.transient or attempt == settings.retries:
                if isinstance(outcome, Failed) and outcome.transient and attempt:
                    outcome = Failed(url, f"{outcome.reason} after {attempt + 1} attempts", transient=True)
                return outcome
            wait = settings.backoff_seconds * 2**attempt if retry_after is None else retry_after
            if wait > settings.max_retry_after_seconds:
                return Failed(url, f"{outcome.reason}, asked to wait {wait:.0f} s", transient=True)
            self.traffic.retries += 1
            await asyncio.sleep(wait)
        raise AssertionError("unreachable")

    async def _attempt(self, url: str, headers: dict[str, str]) -> tuple[Fetched | Failed | str, float | None]:
        host = self._host(url)
        async with host.in_flight, host.turn() as sent:

            async def on_trace(event: str, info: dict) -> None:
                if event == "http11.send_request_headers.started":
                    self.traffic.started_at.append(sent())

            self.traffic.requests += 1
            try:
                # A whole-request deadline: httpx's timeouts are per read, which a page trickling a
                # byte a second never reaches.
                async with (
                    asyncio.timeout(self.settings.timeout_seconds),
                    self._client.stream("GET", url, headers=headers, extensions={"trace": on_trace}) as response,
                ):
                    return await self._read(url, response)
            except (httpx.TimeoutException, TimeoutError):
                return Failed(url, "timed out", transient=True), None
            except (httpx.TransportError, httpx.DecodingError) as exc:
                return Failed(url, f"connection failed: {type(exc).__name__}", transient=True), None
            except httpx.InvalidURL as exc:
                return Failed(url, f"invalid URL: {exc}"), None

    async def _read(self, url: str, response: httpx.Response) -> tuple[Fetched | Failed | str, float | None]:
        status = response.status_code
        if status in {301, 302, 303, 307, 308}:
            location = response.headers.get("location")
            if not location:
                return Failed(url, f"HTTP {status} without a Location"), None
            return urljoin(url, location), None
        if status in RETRIED_STATUSES:
            return Failed(url, f"HTTP {status}", transient=True), _retry_after(response.headers.get("retry-after"))
        if status in GONE_STATUSES:
            return Failed(url, f"HTTP {status}", gone=True), None
        if status == 304:
            return Fetched(url, 304, response.headers), None
        if status != 200:
            return Failed(url, f"HTTP {status}", transient=status >= 500), None
        declared = response.headers.get("content-length", "")
        if declared.isdigit() and int(declared) > self.max_bytes:
            return Failed(url, self._too_large()), None
        body = bytearray()
        async for piece in response.aiter_bytes():
            body += piece
            self.traffic.bytes += len(piece)
            if len(body) > self.max_bytes:
                return Failed(url, self._too_large()), None
        return Fetched(url, 200, response.headers, bytes(body)), None

    def _too_large(self) -> str:
        return f"larger than {self.settings.max_page_mb:g} MB"


def _retry_after(value: str | None) -> float | None:
    """Retry-After as seconds: a number of seconds or an HTTP date."""
    if not value:
        return None
    value = value.strip()
    if value.isdigit():
        return float(value)
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    return max(0.0, when.timestamp() - time.time())
