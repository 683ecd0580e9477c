"""robots.txt, parsed as RFC 9309 says: the group for our user agent (else `*`), the longest matching rule
decides (Allow on a tie), `*` and `$` in paths; plus Crawl-delay and Sitemap lines, which it leaves to us.

urllib.robotparser is not used: it takes the first matching rule rather than the longest, which
disallows `/docs/` wholesale under `Disallow: /` + `Allow: /docs/` the other way round from every
search engine.
"""

from __future__ import annotations

import contextlib
import re
from dataclasses import dataclass, field
from urllib.parse import unquote


@dataclass(frozen=True)
class RobotsRules:
    rules: tuple[tuple[bool, str], ...] = ()  # (allow, path pattern) of the group that applies to us
    crawl_delay: float | None = None
    sitemaps: tuple[str, ...] = field(default=())

    def allows(self, path: str) -> bool:
        """Whether a URL path (with its query) may be fetched."""
        if path == "/robots.txt":
            return True
        path = unquote(path)
        best: tuple[int, bool] | None = None
        for allow, pattern in self.rules:
            if not pattern:
                continue  # "Disallow:" with nothing allows everything
            if _pattern(pattern).match(path):
                candidate = (len(pattern), allow)
                if best is None or candidate > best:  # longer wins; on a tie, allow (True > False)
                    best = candidate
        return True if best is None else best[1]


def _pattern(rule: str) -> re.Pattern[str]:
    anchored = rule.endswith("$")
    body = re.escape(unquote(rule.rstrip("$") if anchored else rule)).replace(r"\*", ".*")
    return re.compile(body + ("$" if anchored else ""))


def parse_robots(text: str, user_agent: str) -> RobotsRules:
    """The rules of `text` for the product token `user_agent` (e.g. "docsctl"), else for `*`."""
    groups: list[tuple[list[str], list[tuple[bool, str]], list[float]]] = []
    sitemaps: list[str] = []
    current: tuple[list[str], list[tuple[bool, str]], list[float]] | None = None
    in_agents = False  # consecutive user-agent lines share one group
    for raw_line in text.splitlines():
        line = raw_line.split("#", 1)[0].strip()
        if ":" not in line:
            continue
        key, value = (part.strip() for part in line.split(":", 1))
        key = key.lower()
        if key == "sitemap":
            if value:
                sitemaps.append(value)
            continue
        if key == "user-agent":
            if current is None or not in_agents:
                current = ([], [], [])
                groups.append(current)
            current[0].append(value.lower())
            in_agents = True
            continue
        in_agents = False
        if current is None:
            continue
        if key in {"allow", "disallow"}:
            current[1].append((key == "allow", value))
        elif key == "crawl-delay":
            with contextlib.suppress(ValueError):
                current[2].append(float(value))
    token = user_agent.lower()
    chosen = [group for group in groups if token in group[0]]
    if not chosen:
        chosen = [group for group in groups if "*" in group[0]]
    rules = tuple(rule for group in chosen for rule in group[1])
    delays = [delay for group in chosen for delay in group[2]]
    return RobotsRules(rules, max(delays) if delays else None, tuple(sitemaps))


ALLOW_ALL = RobotsRules()
