"""Sections of an extracted document -> pieces of searchable size. Pure: no I/O, no globals.

    chunk_sections(doc, *, target_chars, max_chars, min_chars, overlap_chars) -> list[Piece]

How:
1. Every section gets a breadcrumb: the headings above it and its own (not the document title).
2. Sections become *units*. A section shorter than `min_chars` takes in the sections after it that
   share its parent (siblings, their children), as long as the unit stays under `max_chars`; their
   headings stay in the text as Markdown heading lines. A heading-only section gives just its
   heading line to the next unit.
3. Each unit is cut into blocks at blank lines; a fenced code block is one block, never split. A
   prose block longer than `max_chars` is cut at line, then sentence, then word boundaries.
4. Blocks are packed greedily up to `target_chars` (up to `max_chars` while the piece is shorter than
   `min_chars`). A piece after the first of a unit starts with the tail of the previous one (at most
   `overlap_chars`, whole paragraphs or sentences, never from code).

A piece is labelled with the section of its first own block (overlap excluded), and keeps the
heading and anchor of each heading line in its text (`merged_anchors`), so that a result can link to
the merged section it matched in, and the ids of the elements that start in its own blocks (`anchors`:
those of its heading lines and the `Section.anchors` extraction placed in the text), so that a name the
page documents at an anchor is found in the piece that documents it. Line numbers are
mapped from a block's position in its section's text onto the section's source lines, linearly:
exact where the extractor kept one text line per source line (Markdown, rst), approximate for HTML.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from docsctl.models import ExtractedDoc, Section
from docsctl.text import FENCE, closes_fence

_SENTENCE_END = re.compile(r"(?<=[.!?;:])\s+")


@dataclass(frozen=True)
class Piece:
    """One chunk of one document: text plus where it sits (headings, anchor, source lines)."""

    breadcrumb: tuple[str, ...]
    section: str
    anchor: str | None
    content: str
    start_line: int
    end_line: int
    # (heading, anchor or "") of each heading line in `content`, in order
    merged_anchors: tuple[tuple[str, str], ...] = ()
    # ids of the elements that start in this piece (Section.anchors, and the anchors of the heading lines in
    # `content`), overlap excluded
    anchors: tuple[str, ...] = ()


@dataclass(frozen=True)
class _Block:
    text: str
    section: int  # index into doc.sections of the section the block labels a piece with
    start: int
    end: int
    kind: str = "text"  # text | code | heading | overlap
    anchor: str | None = None  # a heading block's own section's (`section` may be a later one's)
    anchors: tuple[tuple[str, int], ...] = ()  # Section.anchors in this block: (id, line of the block's text)


_Group = tuple[list[_Block], int]  # the blocks of one piece, and the section it is labelled with


def chunk_sections(
    doc: ExtractedDoc,
    *,
    target_chars: int = 1000,
    max_chars: int = 1500,
    min_chars: int = 300,
    overlap_chars: int = 150,
) -> list[Piece]:
    """The pieces of `doc`, in document order; the same input always gives the same output."""
    if not 0 < min_chars <= target_chars <= max_chars or not 0 <= overlap_chars < target_chars:
        raise ValueError("chunk sizes need 0 < min <= target <= max and 0 <= overlap < target")
    sections = doc.sections
    crumbs = breadcrumbs(sections, doc.title.strip())
    pieces: list[Piece] = []
    for unit in _units(sections, crumbs, min_chars=min_chars, max_chars=max_chars):
        for blocks, own in _pack(unit, target_chars, max_chars, min_chars, overlap_chars):
            first = sections[own]
            pieces.append(
                Piece(
                    breadcrumb=crumbs[own],
                    section=first.heading,
                    anchor=first.anchor,
                    content="\n\n".join(block.text for block in blocks),
                    start_line=min(block.start for block in blocks),
                    end_line=max(block.end for block in blocks),
                    merged_anchors=tuple(
                        (_heading_text(block.text), block.anchor or "") for block in blocks if block.kind == "heading"
                    ),
                    anchors=_anchors(blocks),
                )
            )
    return pieces


def _anchors(blocks: list[_Block]) -> tuple[str, ...]:
    found: list[str] = []
    for block in blocks:
        if block.kind == "heading" and block.anchor:
            found.append(block.anchor)
        if block.kind != "overlap":
            found.extend(anchor for anchor, _ in block.anchors)
    return tuple(dict.fromkeys(found))


def breadcrumbs(sections: list[Section], title: str = "") -> list[tuple[str, ...]]:
    """For each section, the headings from the top down to and including its own.

    A top heading that repeats the document title (a Markdown H1, an rst title, the first `<h3>` of
    a ChimeraX page) is left out: the title is shown next to the breadcrumb anyway.
    """
    stack: list[tuple[int, str]] = []
    out: list[tuple[str, ...]] = []
    for section in sections:
        if section.level <= 0:
            stack = []
        else:
            while stack and stack[-1][0] >= section.level:
                stack.pop()
            stack.append((section.level, section.heading))
        crumb = tuple(heading for _, heading in stack if heading)
        if crumb and title and crumb[0] == title:
            crumb = crumb[1:]
        out.append(crumb)
    return out


def _heading_line(section: Section) -> str:
    return f"{'#' * min(max(section.level, 1), 6)} {section.heading}"


def _heading_text(line: str) -> str:
    """The heading of a Markdown heading line as _heading_line writes it."""
    return line.lstrip("#").strip()


def _heading_block(section: Section, index: int) -> _Block:
    """A section's heading as a Markdown heading line, labelled with section `index`."""
    return _Block(_heading_line(section), index, section.start_line, section.start_line, "heading", section.anchor)


def _same_parent(first: tuple[str, ...], other: tuple[str, ...]) -> bool:
    """Whether `other` is under the same parent as `first` (a sibling, or below one)."""
    parent = first[:-1]
    return len(other) > len(parent) and other[: len(parent)] == parent


def _units(
    sections: list[Section], crumbs: list[tuple[str, ...]], *, min_chars: int, max_chars: int
) -> list[list[_Block]]:
    units: list[list[_Block]] = []
    pending: list[Section] = []  # heading-only sections waiting for the next section with text
    i = 0
    while i < len(sections):
        section = sections[i]
        if not section.text.strip():
            if section.heading:
                pending.append(section)
            i += 1
            continue
        unit: list[_Block] = []
        if pending:  # their heading lines, then this section's, so the text reads in order
            for heading in [*pending, section] if section.heading else pending:
                unit.append(_heading_block(heading, i))
            pending = []
        unit.extend(_blocks(section, i))
        size = _size(unit)
        j = i + 1
        while (
            size < min_chars
            and j < len(sections)
            and sections[j].level >= section.level
            and _same_parent(crumbs[i], crumbs[j])
        ):
            extra = [_heading_block(sections[j], j)]
            extra.extend(_blocks(sections[j], j))
            if size + 2 + _size(extra) > max_chars:
                break
            unit.extend(extra)
            size = _size(unit)
            j += 1
        while j - 1 > i and unit[-1].kind == "heading" and unit[-1].section == j - 1:
            unit.pop()  # a heading-only section merged last belongs to what follows it: put it back
            j -= 1
        units.append(unit)
        i = j
    if not units and pending:  # a document of headings only
        units.append([_heading_block(heading, 0) for heading in pending])
    return units


def _size(blocks: list[_Block]) -> int:
    return sum(len(block.text) for block in blocks) + 2 * max(0, len(blocks) - 1)


def _blocks(section: Section, index: int) -> list[_Block]:
    """The paragraphs and code blocks of a section's text, with approximate source lines."""
    lines = section.text.split("\n")
    first = min(section.start_line + (1 if section.heading else 0), section.end_line)
    last = max(section.end_line, first)

    blocks: list[_Block] = []
    current: list[str] = []
    start = 0
    fence: str | None = None
    unplaced = sorted(section.anchors, key=lambda pair: pair[1])  # an id on a blank line goes to the next block

    def flush(end: int, kind: str = "text") -> None:
        if current:
            lines_from, lines_to = _source_lines(first, last, len(lines), start, end)
            placed = _take_anchors(unplaced, start, end)
            blocks.append(_Block("\n".join(current), index, lines_from, lines_to, kind, anchors=placed))
            current.clear()

    for offset, line in enumerate(lines):
        if fence is not None:
            current.append(line)
            if closes_fence(line, fence):
                flush(offset, "code")
                fence = None
            continue
        marker = FENCE.match(line)
        if marker:
            flush(offset - 1)
            fence, start = marker.group(1), offset
            current.append(line)
        elif not line.strip():
            flush(offset - 1)
        else:
            if not current:
                start = offset
            current.append(line)
    if fence is not None:  # an unclosed fence: close it so every piece stays balanced
        current.append(fence)
        flush(len(lines) - 1, "code")
    flush(len(lines) - 1)
    return blocks


def _split_prose(block: _Block, limit: int) -> list[_Block]:
    """A prose block longer than `limit` cut at line, sentence, then word boundaries."""
    lines = block.text.split("\n")
    pieces: list[tuple[str, int]] = []  # (text, line offset in the block)
    for offset, line in enumerate(lines):
        if len(line) <= limit:
            pieces.append((line, offset))
            continue
        for sentence in _SENTENCE_END.split(line):
            while len(sentence) > limit:
                cut = sentence.rfind(" ", 0, limit)
                cut = cut if cut > limit // 2 else limit
                pieces.append((sentence[:cut], offset))
                sentence = sentence[cut:].lstrip()
            if sentence:
                pieces.append((sentence, offset))
    out: list[_Block] = []
    text: list[str] = []
    offsets: list[int] = []
    unplaced = list(block.anchors)
    for piece, offset in pieces:
        joined = len("\n".join(text)) + 1 + len(piece)
        if text and joined > limit:
            out.append(_chunk_of(block, text, offsets, len(lines), unplaced))
            text, offsets = [], []
        text.append(piece)
        offsets.append(offset)
    if text:
        out.append(_chunk_of(block, text, offsets, len(lines), unplaced))
    return out


def _chunk_of(
    block: _Block, text: list[str], offsets: list[int], count: int, unplaced: list[tuple[str, int]]
) -> _Block:
    """Lines `offsets` of `block` as a block of their own, taking the ids in `unplaced` that start by its end."""
    start, end = _source_lines(block.start, block.end, count, offsets[0], offsets[-1])
    placed = _take_anchors(unplaced, offsets[0], offsets[-1])
    return _Block("\n".join(text), block.section, start, end, block.kind, anchors=placed)


def _take_anchors(unplaced: list[tuple[str, int]], first: int, last: int) -> tuple[tuple[str, int], ...]:
    """The ids of `unplaced` (id, line; in line order) that start by line `last`, taken out of it, their lines
    counted from line `first` (an id before it, on a blank line, starts the text at `first`)."""
    placed = tuple((anchor, max(0, line - first)) for anchor, line in unplaced if line <= last)
    del unplaced[: len(placed)]
    return placed


def _source_lines(first: int, last: int, count: int, start: int, end: int) -> tuple[int, int]:
    """Source lines of text lines `start`..`end` of `count` lines spread evenly over `first`..`last`."""
    span = last - first + 1
    low = first + start * span // count
    high = first + (end + 1) * span // count - 1
    return low, max(low, high)


def _tail(blocks: list[_Block], overlap_chars: int) -> list[_Block]:
    """The end of a piece to repeat at the start of the next: whole paragraphs or sentences, no code."""
    taken: list[_Block] = []
    size = 0
    for block in reversed(blocks):
        if block.kind != "text":
            break
        if size + len(block.text) + 2 <= overlap_chars:
            taken.insert(0, block)
            size += len(block.text) + 2
            continue
        if not taken:
            sentences = _SENTENCE_END.split(block.text)
            tail = ""
            for sentence in reversed(sentences):
                candidate = f"{sentence} {tail}".strip() if tail else sentence
                if len(candidate) > overlap_chars:
                    break
                tail = candidate
            if not tail:  # one long sentence: its last words
                words = block.text[-overlap_chars:]
                tail = words[words.find(" ") + 1 :] if " " in words else words
            taken.insert(0, _Block(tail.strip(), block.section, block.end, block.end, "overlap"))
        break
    return [_Block(b.text, b.section, b.start, b.end, "overlap") for b in taken]


def _is_big_code(block: _Block, maximum: int) -> bool:
    return block.kind == "code" and len(block.text) > maximum


def _pack(unit: list[_Block], target: int, maximum: int, minimum: int, overlap: int) -> list[_Group]:
    """Blocks grouped into pieces; each with the index of the section it is labelled with."""
    blocks: list[_Block] = []
    for block in unit:
        if block.kind == "text" and len(block.text) > maximum:
            blocks.extend(_split_prose(block, target))
        else:
            blocks.append(block)
    groups: list[list[_Block]] = []
    current: list[_Block] = []
    for block in blocks:
        own = [b for b in current if b.kind not in {"overlap", "heading"}]
        size = _size([*current, block])
        small = _size(own) < minimum
        if not own or size <= target or (small and (size <= maximum or _is_big_code(block, maximum))):
            current.append(block)  # a short lead-in ("Create a file app.py:") stays with its code
            continue
        carried: list[_Block] = []
        while current and current[-1].kind == "heading":  # a heading goes with what follows it
            carried.insert(0, current.pop())
        groups.append(current)
        current = [*_tail(current, overlap), *carried, block]
        if _size(current) > maximum:
            current = [*carried, block]
    if current:
        own = [b for b in current if b.kind != "overlap"]
        if groups and _size(own) < minimum and _size([*groups[-1], *own]) <= maximum:
            groups[-1].extend(own)  # a short remainder joins the piece before it, without the overlap
        else:
            groups.append(current)
    out: list[_Group] = []
    for group in groups:
        own = [b for b in group if b.kind != "overlap"]
        out.append((group, own[0].section if own else group[0].section))
    return out
