"""Which section of a chunk a result's highlighted words are in.

The chunker merges a short section with the sibling sections after it (and their children), keeping
their headings in the chunk's text as Markdown heading lines, and labels the chunk with the first one
(docsctl/indexer/chunking.py). A result whose matching words are all under a later heading is shown
under that heading instead, so that text found under "Rebuilding without downtime" is not labelled
"Incremental updates", and links to that section's anchor when the chunker recorded one
(Chunk.merged_anchors). Pure: the chunk and the highlights are all it reads.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, replace

from docsctl.models import Chunk
from docsctl.text import FENCE, WORD, closes_fence

_HEADING = re.compile(r"(#{1,6}) +(\S.*)")  # as chunking writes a merged section's heading
_MARKED = re.compile(r"<em>(.*?)</em>", re.DOTALL)


@dataclass(frozen=True)
class _Part:
    level: int  # of its heading line; 0 for the text before the first one
    heading: str
    text: str


def _parts(content: str) -> list[_Part]:
    """The chunk's text cut at its Markdown heading lines (none inside fenced code)."""
    parts = [_Part(0, "", "")]
    lines: list[str] = []
    fence = ""
    for line in content.splitlines():
        if fence:
            fence = "" if closes_fence(line, fence) else fence
            lines.append(line)
            continue
        opened = FENCE.match(line)
        fence = opened.group(1) if opened else ""
        heading = None if fence else _HEADING.fullmatch(line.rstrip())
        if heading:
            parts[-1] = replace(parts[-1], text="\n".join(lines))
            parts.append(_Part(len(heading.group(1)), heading.group(2).strip(), ""))
            lines = []
        else:
            lines.append(line)
    parts[-1] = replace(parts[-1], text="\n".join(lines))
    return parts


def highlighted_words(highlights: list[str]) -> set[str]:
    """The distinct words the highlighter marked, lowercased."""
    return {
        word.lower() for fragment in highlights for marked in _MARKED.findall(fragment) for word in WORD.findall(marked)
    }


@dataclass(frozen=True)
class Shown:
    breadcrumb: list[str]
    section: str
    anchor: str | None  # None when the chunk holds no anchor for it


def shown_section(chunk: Chunk, highlights: list[str]) -> Shown | None:
    """The merged section holding most of the highlighted words, when that is not the chunk's own (first)
    section; None to keep the chunk's labels."""
    marked = highlighted_words(highlights)
    if not marked:
        return None
    parts = _parts(chunk.content)
    if len(parts) < 2:
        return None
    first_text = next((i for i, part in enumerate(parts) if part.text.strip()), None)
    if first_text is None:
        return None

    def matches(part: _Part) -> int:
        return len(marked & {word.lower() for word in WORD.findall(f"{part.heading}\n{part.text}")})

    # Heading lines before the chunk's first text are its own section's (and its parents'): not merged.
    best = max(range(first_text, len(parts)), key=lambda i: (matches(parts[i]), -i))
    if best == first_text or not parts[best].text.strip() or parts[best].heading == chunk.section:
        return None
    stack: list[_Part] = []  # the merged headings above `best`, from the first merged sibling down
    for part in parts[first_text + 1 : best + 1]:
        while stack and stack[-1].level >= part.level:
            stack.pop()
        stack.append(part)
    parent = list(chunk.breadcrumb[:-1])
    return Shown([*parent, *(part.heading for part in stack)], parts[best].heading, _anchor(chunk, parts, best))


def _anchor(chunk: Chunk, parts: list[_Part], index: int) -> str | None:
    """The anchor recorded for the heading of parts[index], matched by heading and occurrence (a heading can
    repeat in one chunk: "Parameters" under two merged sections)."""
    heading = parts[index].heading
    occurrence = sum(1 for part in parts[1:index] if part.heading == heading)  # parts[0]: text before any heading
    recorded = [anchor for name, anchor in chunk.merged_anchors if name == heading]
    return (recorded[occurrence] or None) if occurrence < len(recorded) else None


def relabel(chunk: Chunk, highlights: list[str]) -> Chunk:
    """`chunk` labelled and anchored with the section its highlights are in (shown_section), or unchanged."""
    shown = shown_section(chunk, highlights)
    if shown is None:
        return chunk
    # Without an anchor of its own, the link keeps the chunk's: the first merged section, a few lines above.
    return replace(chunk, breadcrumb=shown.breadcrumb, section=shown.section, anchor=shown.anchor or chunk.anchor)
