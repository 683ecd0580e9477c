"""Plain text, and the small helpers every format module shares.

The helpers live here because plain text is the base every other format falls back to:
`decode_text` (binary / encoding / empty checks), `SectionBuilder` (collects text lines with their
source line numbers and cuts them into `Section`s at headings), `github_slug`, `docutils_slug` and
`identifier_name`.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from docsctl.errors import ExtractError
from docsctl.models import ExtractedDoc, Section

BINARY_SNIFF_BYTES = 8192
_IDENTIFIER = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
FENCE = re.compile(r"^(\s*)(`{3,}|~{3,})(.*)$")


def is_closing_fence(line: str, opening: str) -> bool:
    """Whether `line` closes a code block opened by `opening` (same character, at least as long)."""
    stripped = line.strip()
    return bool(stripped) and set(stripped) == {opening[0]} and len(stripped) >= len(opening)


def code_fence(code: str, language: str = "") -> list[str]:
    """`code` as fenced lines, the fence longer than any backtick run at a line start inside it."""
    longest = max((len(m.group(1)) for m in re.finditer(r"^\s*(`{3,})", code, re.M)), default=2)
    fence = "`" * max(3, longest + 1)
    return [fence + language, *code.split("\n"), fence]


def decode_text(raw: bytes) -> str:
    """`raw` as text with `\\n` line ends; ExtractError for binary, non-UTF-8 or blank input."""
    if b"\x00" in raw[:BINARY_SNIFF_BYTES]:
        raise ExtractError("binary file")
    try:
        text = raw.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise ExtractError(f"not UTF-8 text (bad byte at offset {exc.start})") from None
    if not text.strip():
        raise ExtractError("empty file")
    return text.replace("\r\n", "\n").replace("\r", "\n")


def github_slug(text: str) -> str:
    """The id GitHub gives a Markdown heading: lowercase, punctuation dropped, spaces as hyphens."""
    slug = re.sub(r"[^\w\- ]", "", text.strip().lower())
    return slug.replace(" ", "-")


def docutils_slug(text: str) -> str:
    """The id docutils/Sphinx gives a title or label: ASCII lowercase words joined by hyphens."""
    ascii_text = unicodedata.normalize("NFKD", text).encode("ascii", "ignore").decode("ascii")
    return "-".join(re.findall(r"[a-z0-9]+", ascii_text.lower()))


def identifier_name(title: str) -> list[str]:
    """`["tabulator"]` for a title that is one identifier-like word such as "Tabulator", else []."""
    title = title.strip().strip("`")
    return [title.lower()] if _IDENTIFIER.fullmatch(title) else []


def unique_anchor(slug: str, seen: dict[str, int]) -> str | None:
    """`slug`, or `slug-1`, `slug-2` ... when the page already used it (GitHub's rule); None if empty."""
    if not slug:
        return None
    count = seen.get(slug, 0)
    seen[slug] = count + 1
    return slug if count == 0 else f"{slug}-{count}"


@dataclass
class _OpenSection:
    heading: str
    level: int
    anchor: str | None
    start_line: int
    lines: list[tuple[int, str]] = field(default_factory=list)
    anchors: list[tuple[str, int]] = field(default_factory=list)  # (id, index into `lines`)


class SectionBuilder:
    """Collects output lines (each with the source line it came from) and cuts sections at headings.

    Blank lines separate paragraphs; runs of blank lines collapse to one, and leading/trailing
    blank lines of a section are dropped. Text before the first heading becomes a level-0 section
    with heading "" (kept only when it has text).
    """

    def __init__(self) -> None:
        self._sections: list[Section] = []
        self._current = _OpenSection(heading="", level=0, anchor=None, start_line=1)

    def heading(self, text: str, level: int, anchor: str | None, line: int) -> None:
        self._close()
        level = max(1, min(level, 6))
        self._current = _OpenSection(heading=text, level=level, anchor=anchor, start_line=line)

    def line(self, text: str, line: int) -> None:
        self._current.lines.append((line, text.rstrip()))

    def blank(self, line: int) -> None:
        self._current.lines.append((line, ""))

    def block(self, lines: list[str], line: int, anchors: Sequence[str] = ()) -> None:
        """A paragraph-like block: a blank line, the lines, a blank line. `anchors`: ids of the elements
        whose text starts in it."""
        self.blank(line)
        self._current.anchors.extend((anchor, len(self._current.lines)) for anchor in anchors)
        for text in lines:
            self.line(text, line)
        self.blank(line)

    def sections(self) -> list[Section]:
        self._close()
        self._current = _OpenSection(heading="", level=0, anchor=None, start_line=1)
        return list(self._sections)

    def _close(self) -> None:
        current = self._current
        out: list[str] = []
        last_line = current.start_line
        fence: str | None = None  # the opening fence while inside a code block: blank lines kept there
        placed: list[int] = []  # for each of current.lines, where in `out` it goes (or would go, if blank)
        for line_no, text in current.lines:
            placed.append(len(out))
            marker = FENCE.match(text)
            if fence is None and marker:
                fence = marker.group(2)
            elif fence is not None and marker and is_closing_fence(text, fence):
                fence = None
            elif fence is not None:
                out.append(text)
                last_line = max(last_line, line_no)
                continue
            if text.strip():
                out.append(text)
                last_line = max(last_line, line_no)
            elif out and out[-1] != "":
                out.append("")
        while out and out[-1] == "":
            out.pop()
        anchors = tuple((anchor, placed[index]) for anchor, index in current.anchors if placed[index] < len(out))
        body = "\n".join(out)
        if current.level == 0 and not body:
            return
        start = current.start_line
        if current.level == 0 and current.lines:
            start = min(line_no for line_no, text in current.lines if text.strip())
        self._sections.append(
            Section(
                heading=current.heading,
                level=current.level,
                text=body,
                anchor=current.anchor,
                start_line=start,
                end_line=max(start, last_line),
                anchors=anchors,
            )
        )


def extract_text(path: Path, raw: bytes) -> ExtractedDoc:
    """One section holding the whole file; the title is its first non-empty line."""
    text = decode_text(raw)
    lines = text.split("\n")
    builder = SectionBuilder()
    for number, line in enumerate(lines, start=1):
        builder.line(line, number)
    first = next(line.strip() for line in lines if line.strip())
    title = first[:200] if first else path.stem
    return ExtractedDoc(title=title, sections=builder.sections(), doc_type="text")
