"""Highlighting (pure): match offsets from FTS5 highlight() and from code terms -> fragments."""

from __future__ import annotations

import re
from collections.abc import Iterator
from functools import lru_cache

from docsctl.text import (
    CODE_SEPARATOR,
    CODE_TOKEN,
    code_token_terms,
    trim_token,
)

HIGHLIGHT_CHARS = 160
HIGHLIGHT_FRAGMENTS = 2
_MARK_START, _MARK_END = "\x01", "\x02"
_SPACE = re.compile(r"\s+")
_IDENTIFIER = re.compile(r"[._\-/]|.[A-Z]")  # has parts: `a_b`, `a.b`, `--a`, `aB`
_SEGMENT = re.compile(r"[./]")  # separates the identifiers of a dotted name or a path
_SEGMENTS = re.compile(r"[^./]+")


def _spans(marked: str | None, content: str) -> list[tuple[int, int]]:
    """Match offsets in `content` from FTS5 highlight() output using the two marker characters."""
    if not marked:
        return []
    spans, markers, position = [], 0, 0  # markers: how many marker characters precede `position`
    while (start := marked.find(_MARK_START, position)) >= 0 and (end := marked.find(_MARK_END, start)) >= 0:
        spans.append((start - markers, end - markers - 1))
        markers += 2
        position = end + 1
    return spans if len(marked) - marked.count(_MARK_START) - marked.count(_MARK_END) == len(content) else []


@lru_cache(maxsize=64)
def _code_term_finder(code: frozenset[str]) -> re.Pattern[str]:
    return re.compile("|".join(re.escape(term) for term in sorted(code, key=len, reverse=True)))


def _tokens_at(content: str, positions: list[int]) -> Iterator[re.Match[str]]:
    """The code tokens of `content` holding these offsets, each once, in text order."""
    reverse, starts = content[::-1], set()
    for position in positions:
        separator = CODE_SEPARATOR.search(reverse, len(content) - position)
        start = len(content) - separator.start() if separator else 0
        if start not in starts:
            starts.add(start)
            if token := CODE_TOKEN.match(content, start):
                yield token


def _code_spans(content: str, code: set[str]) -> list[tuple[int, int]]:
    """Identifiers matched whole (`add_filter`, also inside `table.add_filter`) or, when camel-cased, by a
    part (`SelectEditor` for "editor"): FTS5 alone marks `add` and `filter` apart, and nothing in `SelectEditor`."""
    if not code:
        return []
    lowered = content.lower()
    if len(lowered) == len(content):  # offsets kept: look only at the tokens that hold a code term
        tokens = _tokens_at(content, [m.start() for m in _code_term_finder(frozenset(code)).finditer(lowered)])
    else:
        tokens = CODE_TOKEN.finditer(content)
    spans = []
    for match in tokens:
        raw = match.group()
        if (raw.isalnum() and raw[1:].islower()) or not _IDENTIFIER.search(raw):
            continue  # a plain word (the first test is the common case, cheaply): FTS5 has marked it if it matched
        pieces = [(match.start(), raw)]
        if _SEGMENT.search(raw):
            pieces += [(match.start() + m.start(), m.group()) for m in _SEGMENTS.finditer(raw)]
        for offset, piece in pieces:
            token = trim_token(piece)
            if not token:
                continue
            if token.lower() not in code:
                camel = any(char.isupper() for char in token[1:]) and any(char.islower() for char in token)
                if not (camel and code.intersection(code_token_terms(token))):
                    continue
            start = offset + piece.find(token)
            spans.append((start, start + len(token)))
    return spans


def _opening(content: str, size: int = HIGHLIGHT_CHARS) -> str:
    text = " ".join(content.split())
    if len(text) <= size:
        return text
    cut = text.rfind(" ", 0, size + 1)
    return text[: cut if cut > size // 2 else size]


def fragments(content: str, spans: list[tuple[int, int]], size: int = HIGHLIGHT_CHARS) -> list[str]:
    """About `size` characters around the matches, matches in <em>...</em>: the HIGHLIGHT_FRAGMENTS
    windows with the most matches, in text order, never overlapping; the opening words when none matched."""
    merged: list[list[int]] = []
    for start, end in sorted(spans):
        if start >= end:
            continue
        if merged and start <= merged[-1][1]:
            merged[-1][1] = max(merged[-1][1], end)
        else:
            merged.append([start, end])
    if not merged:
        return [_opening(content, size)] if content.strip() else []
    windows: list[list[int]] = []  # [first match start, last match end, matches]
    for start, end in merged:
        if windows and end - windows[-1][0] <= size:
            windows[-1][1:] = [end, windows[-1][2] + 1]
        else:
            windows.append([start, end, 1])
    chosen = sorted(sorted(windows, key=lambda w: (-w[2], w[0]))[:HIGHLIGHT_FRAGMENTS])
    out, floor = [], 0
    for number, (start, end, _) in enumerate(chosen):
        ceiling = chosen[number + 1][0] if number + 1 < len(chosen) else len(content)
        slack = max(0, size - (end - start))
        left = max(floor, start - slack // 3)
        right = min(ceiling, end + slack - (start - left))
        if left > floor:  # begin and end on whole words
            gap = _SPACE.search(content, left, start)
            left = gap.end() if gap else left
        if right < ceiling:
            gaps = [gap.start() for gap in _SPACE.finditer(content, end, right)]
            right = gaps[-1] if gaps else right
        pieces, cursor = [], left
        for span_start, span_end in merged:
            if left <= span_start and span_end <= right:
                pieces += [content[cursor:span_start], "<em>", content[span_start:span_end], "</em>"]
                cursor = span_end
        pieces.append(content[cursor:right])
        out.append(" ".join("".join(pieces).split()))
        floor = right
    return out
