"""What the pages show, shaped from what Searcher, explain and the store return. Pure: no I/O.

Everything from the index is untrusted text. Templates escape it (autoescape); the few things that
become markup are built here from plain values: highlights as (text, matched) spans, links only for
http(s) and file URLs, chart geometry as numbers.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlencode, urlsplit

from docsctl.models import Chunk, Hit
from docsctl.server.results import document_pieces, section_url
from docsctl.store.base import FACETS

FACET_FIELDS = FACETS  # source, version, category: the filters a search page takes

PAGE_SIZE = 10
MAX_PAGE = 50  # 500 results: far below what anyone reads, and it bounds the candidate depth of a search
LINKABLE_SCHEMES = ("http", "https", "file")
_MARK = re.compile(r"(<em>|</em>)")


def safe_url(url: str | None) -> str | None:
    """`url` when it may be a link (http, https or file); None for anything else (javascript:, data:, ...)."""
    if not url:
        return None
    try:
        parts = urlsplit(url.strip())
    except ValueError:
        return None
    if parts.scheme.lower() not in LINKABLE_SCHEMES or (parts.scheme.lower() != "file" and not parts.netloc):
        return None
    return url.strip()


def highlight_spans(fragment: str) -> list[tuple[str, bool]]:
    """A highlight fragment as (text, matched) spans, whitespace collapsed.

    The store marks matches with <em>…</em> around runs of the chunk's own text; only those two markers
    are read, and every span stays text for the template to escape. Markup in the document itself is
    text too: at worst a literal "<em>" in a page shifts what is marked, never what is rendered."""
    spans: list[tuple[str, bool]] = []
    matched = False
    for part in _MARK.split(" ".join(fragment.split())):
        if part in ("<em>", "</em>"):
            matched = part == "<em>"
        elif part:
            spans.append((part, matched))
    return spans


def query_string(params: Mapping[str, Any]) -> str:
    """`?a=1&b=2` from the parameters that have a value ("" and None are left out); "" when none has."""
    kept = {key: value for key, value in params.items() if value not in ("", None)}
    return "?" + urlencode(kept) if kept else ""


def document_link(chunk: Chunk) -> str:
    """The document view of the chunk's document, scrolled to the chunk."""
    params = {"path": chunk.path, "source": chunk.source, "version": chunk.version}
    return "/doc" + query_string(params) + f"#chunk-{chunk.chunk_index}"


@dataclass(frozen=True)
class ResultView:
    rank: int
    hit: Hit
    trail: list[str]
    highlights: list[list[tuple[str, bool]]]
    original: str | None  # a safe link to the original page, at the section's anchor
    document: str  # the document view
    explain: str  # the explain page for this query and document


def result_views(hits: Sequence[Hit], query: str, offset: int, shown: int = 2) -> list[ResultView]:
    views = []
    for rank, hit in enumerate(hits, start=offset + 1):
        chunk = hit.chunk
        explain = "/explain" + query_string({"q": query, "path": chunk.path, "source": chunk.source})
        views.append(
            ResultView(
                rank=rank,
                hit=hit,
                trail=chunk.trail(),
                highlights=[highlight_spans(fragment) for fragment in hit.highlights[:shown]],
                original=safe_url(section_url(chunk)),
                document=document_link(chunk),
                explain=explain,
            )
        )
    return views


@dataclass(frozen=True)
class FacetValue:
    value: str
    label: str
    count: int
    selected: bool
    link: str | None  # the search with this value selected, or unselected when it is; None for ""


def facet_views(counts: Mapping[str, Mapping[str, int]], params: Mapping[str, str]) -> dict[str, list[FacetValue]]:
    """Per facet, its values with counts, each linking to the same search (first page) with the value
    chosen, or without it when it is the chosen one."""
    facets: dict[str, list[FacetValue]] = {}
    for field, values in counts.items():
        entries = []
        for value, count in values.items():
            selected = bool(value) and params.get(field) == value
            link_params = {**params, field: "" if selected else value, "page": ""}
            # "" (no version, no category) cannot be asked for in a URL: such a value is shown, not linked
            link = "/" + query_string(link_params) if value else None
            entries.append(FacetValue(value, value or "(none)", count, selected, link))
        selected_value = params.get(field)
        if selected_value and selected_value not in values:  # chosen, but nothing matches with the other filters
            link = "/" + query_string({**params, field: "", "page": ""})
            entries.insert(0, FacetValue(selected_value, selected_value, 0, True, link))
        facets[field] = entries
    return facets


@dataclass(frozen=True)
class Pager:
    page: int
    pages: int
    previous: str | None
    next: str | None


def pager(params: Mapping[str, str], page: int, total: int, page_size: int = PAGE_SIZE) -> Pager:
    pages = min(max(1, math.ceil(total / page_size)), MAX_PAGE)

    def link(number: int) -> str:
        return "/" + query_string({**params, "page": number if number > 1 else ""})

    return Pager(
        page=page,
        pages=pages,
        previous=link(page - 1) if page > 1 else None,
        next=link(page + 1) if page < pages else None,
    )


# -- the document view --------------------------------------------------------------------------------


@dataclass(frozen=True)
class ChunkView:
    chunk: Chunk
    piece: str  # what the chunk adds to the rebuilt document (its overlap with the previous one left out)
    embed_text: str  # exactly what the model embedded
    original: str | None


def chunk_views(chunks: Sequence[Chunk]) -> list[ChunkView]:
    return [
        ChunkView(chunk, piece, chunk.embed_text(), safe_url(section_url(chunk)))
        for chunk, piece in zip(chunks, document_pieces(chunks), strict=True)
    ]


# -- the explain chart --------------------------------------------------------------------------------

CHART_WIDTH = 480
BAR_HEIGHT = 22
LABEL_WIDTH = 150


@dataclass(frozen=True)
class Bar:
    label: str
    value: float
    note: str
    y: int
    width: float  # of the bar, in SVG units


def contribution_bars(explanation: Mapping[str, Any]) -> list[Bar]:
    """One bar per fused ranking (bm25, knn, document): its share of the fused score, labelled
    with the document's rank in that ranking. Empty when the document is not among the fused results."""
    contributions: Mapping[str, float] = explanation.get("contributions") or {}
    ranks: Mapping[str, int] = explanation.get("list_ranks") or {}
    largest = max(contributions.values(), default=0.0)
    room = CHART_WIDTH - LABEL_WIDTH - 90  # the value is written after the bar
    bars = []
    for row, (name, value) in enumerate(contributions.items()):
        width = room * value / largest if largest > 0 else 0.0
        bars.append(Bar(name, value, f"rank {ranks.get(name, '-')}", row * (BAR_HEIGHT + 6), max(width, 1.0)))
    return bars


def chart_height(bars: Sequence[Bar]) -> int:
    return len(bars) * (BAR_HEIGHT + 6)
