"""Crawl speed against a loopback site: pages per second at a configured rate vs the rate itself, and
what re-crawling an unchanged site costs (requests, bytes, seconds).

    python bench/crawl.py [--rates 5 10 20 50 1000] [--out bench/results/crawl.json]

The site is tests/site_server.py serving ../shared/corpora/chimerax/user/commands (146 pages, a sitemap
giving half of them a lastmod, ETags) with no misbehaving pages and no Crawl-delay. Only the crawler runs
(docsctl.indexer.site.crawl): extraction and embedding are measured by bench/indexing.py. Each rate
crawls into a fresh mirror; the re-crawls (at the slowest and the fastest rate) reuse that rate's
mirror and per-URL state, as the pipeline does.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import platform
import sys
import tempfile
import time
from datetime import UTC, datetime
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))  # this checkout, whatever docsctl the environment has installed
sys.path.insert(0, str(ROOT / "tests"))  # the loopback site

from site_server import serve_site  # noqa: E402

from docsctl.config import SiteSettings  # noqa: E402
from docsctl.indexer.site.crawl import CrawlResult, SiteJob, crawl  # noqa: E402
from docsctl.indexer.site.urls import Scope, scope_of  # noqa: E402
from docsctl.models import SourceDoc  # noqa: E402

CORPUS = ROOT.parent / "shared" / "corpora" / "chimerax" / "user"


def run_crawl(url: str, mirror: Path, rate: float, previous: dict) -> tuple[CrawlResult, float]:
    settings = SiteSettings(requests_per_second=rate, concurrency=4, timeout_seconds=10)
    job = SiteJob(
        name="bench",
        start_url=url,
        scope=Scope(scope_of(url), (), ("/user/commands/misc/*",)),
        settings=settings,
        mirror=mirror,
        make_doc=lambda page, path, file, entries: SourceDoc("bench", path, file, "docs", "", page),
        previous=previous,
    )
    started = time.perf_counter()
    result = asyncio.run(crawl(job))
    return result, time.perf_counter() - started


def figures(result: CrawlResult, seconds: float) -> dict:
    stats = result.stats
    starts = result.requests_started
    gaps = [later - earlier for earlier, later in zip(starts, starts[1:], strict=False)]
    return {
        "seconds": round(seconds, 2),
        "pages": stats.fetched + stats.not_modified,
        "fetched": stats.fetched,
        "not_modified": stats.not_modified,
        "requests": stats.requests,
        "bytes": stats.bytes,
        "requests_per_second": round(stats.requests / seconds, 2),
        "pages_per_second": round((stats.fetched + stats.not_modified) / seconds, 2),
        "min_gap_ms": round(min(gaps) * 1000, 1) if gaps else None,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rates", type=float, nargs="+", default=[5, 10, 20, 50, 1000])
    parser.add_argument("--out", type=Path, default=ROOT / "bench" / "results" / "crawl.json")
    args = parser.parse_args()
    pages = {file.name for file in (CORPUS / "commands").glob("*.html")}
    report: dict = {
        "when": datetime.now(UTC).isoformat(timespec="seconds"),
        "machine": f"{platform.system()} {platform.machine()}, python {platform.python_version()}",
        "site": f"{len(pages)} pages of chimerax/user/commands on 127.0.0.1, concurrency 4",
        "rates": [],
    }
    with serve_site(CORPUS, pages, misbehaving=False) as site, tempfile.TemporaryDirectory() as tmp:
        url = f"{site.url}/user/commands/"
        states = {}
        for rate in args.rates:
            mirror = Path(tmp) / f"rate-{rate:g}"
            result, seconds = run_crawl(url, mirror, rate, {})
            states[rate] = result.state
            row = {"configured_rate": rate, **figures(result, seconds)}
            report["rates"].append(row)
            print(json.dumps(row), flush=True)
        report["recrawl_unchanged"] = []
        for rate in sorted({min(args.rates), max(args.rates)}):
            again, seconds = run_crawl(url, Path(tmp) / f"rate-{rate:g}", rate, states[rate])
            row = {"configured_rate": rate, **figures(again, seconds)}
            report["recrawl_unchanged"].append(row)
            print(json.dumps(row), flush=True)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(report, indent=2) + "\n")
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
