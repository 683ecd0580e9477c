"""Markdown (CommonMark + the MyST extensions Sphinx sites use) -> sections.

A line-by-line parser, aware of code fences (``` and ~~~: a `#` inside one is no heading), ATX and
setext headings, YAML front matter and MyST directives. Directives whose body is code (```{code-block},
```{pyodide} ...) stay fenced code; toctree/image/raw bodies are dropped; every other directive
(```{note}, :::{tab-item} ...) is unwrapped: its fence and options go, its body stays as text, and its
argument (an admonition or card title) stays as a line. Headings inside directives are not structure
(a tab or a dropdown is not a section) and are kept as plain lines.

Text lines stay close to the source: links become their text, images and raw HTML tags are dropped,
"*" and "+" bullets become "- ". Line numbers come from the caller, so notebooks can reuse the parser
with cell numbers.
"""

from __future__ import annotations

import html
import re
from dataclasses import dataclass
from pathlib import Path

from docsctl.indexer.extract.text import (
    FENCE,
    SectionBuilder,
    decode_text,
    github_slug,
    identifier_name,
    is_closing_fence,
    unique_anchor,
)
from docsctl.models import ExtractedDoc

_ATX = re.compile(r"^ {0,3}(#{1,6})(?:[ \t]+(.*?))?(?:[ \t]+#+)?[ \t]*$")
_SETEXT = re.compile(r"^ {0,3}(=+|-{2,})[ \t]*$")
_RST_DIRECTIVE = re.compile(r"^\.\. [\w-]+::")  # rst left in a .md file (".. raw:: html")
_COLON_FENCE = re.compile(r"^\s*(:{3,})(.*)$")
_DIRECTIVE_INFO = re.compile(r"^\s*\{+([\w:.-]+)\}+\s*(.*)$")
_OPTION = re.compile(r"^\s*:[\w.-]+:(\s.*)?$")
_TARGET = re.compile(r"^\s*\([\w.:-]+\)=\s*$")
_LINK_DEF = re.compile(r"^ {0,3}\[[^\]]+\]:\s+\S+")
_BULLET = re.compile(r"^(\s*)[*+](\s+)")
_TAG = re.compile(r"</?[A-Za-z][\w:-]*(?:\s[^<>]*)?/?>")
# repeats are bounded: a line of "[[[[..." must not take quadratic (or worse) time
_IMAGE = re.compile(r"!\[([^\]]{0,1000})\]\([^)]{0,2000}\)")
_LINK = re.compile(r"\[([^\]]{0,1000})\]\((?:[^()\s]|\([^)]{0,500}\)){0,2000}(?:\s+\"[^\"]{0,500}\")?\)")
_REF_LINK = re.compile(r"\[([^\]]{1,1000})\]\[[^\]]{0,200}\]")
_ROLE = re.compile(r"\{([\w:.-]{1,60})\}`([^`]{0,1000})`")
_CODE_SPAN = re.compile(r"(`{1,10})(.{1,2000}?)\1")
_BLOCK_SKIP = re.compile(r"^\s*<(style|script)\b", re.I)

CODE_DIRECTIVES = {
    "code-block": "",
    "code": "",
    "sourcecode": "",
    "code-cell": "python",
    "pyodide": "python",
    "jupyter-execute": "python",
    "ipython": "python",
}
DROPPED_DIRECTIVES = {"toctree", "image", "raw", "include", "literalinclude", "contents", "tableofcontents"}
# directives whose argument is layout or a path, not a title worth keeping as text
_SILENT_ARGUMENT = {
    "grid",
    "figure",
    "notebook",
    "tab-set",
    "div",
    "container",
    "eval-rst",
    "margin",
    "card-carousel",
}
_ICON_ROLES = {"octicon", "fas", "far", "fab", "material-regular", "material-outlined"}
_CODE_ROLES = {"py", "func", "class", "meth", "attr", "mod", "obj", "exc", "data", "const", "code", "file"}


def role_text(role: str, content: str) -> str:
    """What a Sphinx/MyST role shows: `:py:class:`~a.B`` -> `a.B`, `:ref:`text <label>`` -> text."""
    kind = role.split(":")[-1] if role.split(":")[-1] else role
    if kind in _ICON_ROLES:
        return ""
    content = content.strip()
    explicit = re.match(r"^(.*?)\s*<([^<>]*)>$", content, re.S)
    shown = explicit.group(1) if explicit and explicit.group(1) else content
    shown = shown.lstrip("~!")
    if kind in _CODE_ROLES or role.startswith("py:"):
        return f"`{shown}`"
    return shown


def clean_inline(text: str) -> str:
    """Markdown inline text with links as their text, images, tags, icons dropped; code spans untouched."""
    text = _ROLE.sub(lambda m: role_text(m.group(1), m.group(2)), text)
    # links first: their text is often a code span, [`DataFrame`](./DataFrame.ipynb)
    text = _IMAGE.sub("", text)
    text = _LINK.sub(lambda m: m.group(1), text)
    text = _REF_LINK.sub(lambda m: m.group(1), text)
    parts: list[str] = []
    last = 0
    for match in _CODE_SPAN.finditer(text):
        start = match.start()
        parts.append(_clean_prose(text[last:start]))
        parts.append(match.group(0))
        last = match.end()
    parts.append(_clean_prose(text[last:]))
    return "".join(parts)


def _clean_prose(text: str) -> str:
    text = _TAG.sub("", text)
    return html.unescape(text)


def heading_text(raw: str) -> str:
    """A heading as plain words: no emphasis, code ticks, links, tags or trailing colon runs."""
    text = clean_inline(raw)
    text = re.sub(r"(\*\*|__|`)", "", text)
    text = re.sub(r"(?<!\w)[*_](\S(?:.*?\S)?)[*_](?!\w)", r"\1", text)
    return re.sub(r"\s+", " ", text).strip()


@dataclass
class _Container:
    """An open MyST directive or colon fence."""

    char: str  # "`", "~" or ":"
    length: int
    drop: bool  # body dropped (toctree ...)


class MarkdownParser:
    """Feeds Markdown lines into a SectionBuilder; one instance per document (or per notebook)."""

    def __init__(self, builder: SectionBuilder) -> None:
        self.builder = builder
        self.first_h1: str | None = None
        self._slugs: dict[str, int] = {}

    def feed(self, lines: list[tuple[int, str]], *, front_matter: bool = False) -> str | None:
        """Parse one self-contained piece (a file, a notebook cell); returns a front-matter title."""
        title = None
        if front_matter:
            lines, title = _strip_front_matter(lines)
        self._parse(lines)
        return title

    def _parse(self, lines: list[tuple[int, str]]) -> None:
        builder = self.builder
        containers: list[_Container] = []
        code: tuple[str, int] | None = None  # (opening fence, indent) while inside a code block
        code_depth = 0  # how many directives were open when the code block started
        skip_until: re.Pattern[str] | None = None  # end of an HTML comment, style/script or options block
        in_options = False  # right after a directive's opening line: its ":key: value" options
        prev_blank = True
        i = 0
        while i < len(lines):
            number, line = lines[i]
            i += 1
            if in_options:
                if _OPTION.match(line):
                    continue
                if not line.strip():  # the blank line between options and body
                    in_options = False
                    continue
                if line.strip() == "---" and code is None:
                    skip_until = re.compile(r"^\s*---\s*$")
                    in_options = False
                    continue
                in_options = False
            if code is not None:
                fence, indent = code
                colon = _COLON_FENCE.match(line)
                bare = colon is not None and not colon.group(2).strip()
                if code_depth and bare and _closes(containers, len(colon.group(1))):
                    builder.line(fence, number)  # an unclosed fence ends with the directive around it
                    code = None  # and the line goes on to close the directive
                else:
                    if is_closing_fence(line, fence):
                        builder.line(fence, number)
                        code = None
                    else:
                        builder.line(_dedent(line, indent), number)
                    continue
            if skip_until is not None:
                end = skip_until.search(line)
                if not end:
                    continue
                line = line[end.end() :]
                skip_until = None
            dropping = any(c.drop for c in containers)
            fence = FENCE.match(line)
            if fence:
                indent, marker, info = len(fence.group(1)), fence.group(2), fence.group(3).strip()
                top = containers[-1] if containers else None
                if top and top.char == marker[0] and not info and len(marker) >= top.length:
                    containers.pop()
                    prev_blank = True
                    continue
                directive = _DIRECTIVE_INFO.match(info)
                if directive and directive.group(1) not in CODE_DIRECTIVES:
                    self._open_directive(containers, marker[0], len(marker), directive, number)
                    in_options = True
                    prev_blank = True
                    continue
                if dropping:  # skip a code block inside a dropped directive
                    while i < len(lines) and not is_closing_fence(lines[i][1], marker):
                        i += 1
                    i += 1
                    continue
                language = info.split()[0] if info else ""
                if directive:
                    argument = directive.group(2).split()
                    language = argument[0] if argument else CODE_DIRECTIVES[directive.group(1)]
                    in_options = True
                language = "python" if language in {"ipython3", "ipython", "py"} else language
                builder.line(marker + language, number)
                code = (marker, indent)
                code_depth = len(containers)
                prev_blank = False
                continue
            colon = _COLON_FENCE.match(line)
            if colon:
                length, info = len(colon.group(1)), colon.group(2).strip()
                directive = _DIRECTIVE_INFO.match(info)
                if directive:
                    self._open_directive(containers, ":", length, directive, number)
                    in_options = True
                    prev_blank = True
                    continue
                if not info:
                    _closes(containers, length, pop=True)
                    prev_blank = True
                    continue
            if dropping:
                continue
            if "<!--" in line:
                line, unclosed = _strip_comments(line)
                if unclosed:
                    skip_until = re.compile(r"-->")
            block_skip = _BLOCK_SKIP.match(line)
            if block_skip:
                end = re.compile(rf"</{block_skip.group(1)}\s*>", re.I)
                if not end.search(line):
                    skip_until = end
                continue
            if not line.strip():
                builder.blank(number)
                prev_blank = True
                continue
            if _TARGET.match(line) or _LINK_DEF.match(line) or _RST_DIRECTIVE.match(line):
                continue
            atx = _ATX.match(line)
            if atx and not containers:
                self._heading(atx.group(2) or "", len(atx.group(1)), number)
                prev_blank = True
                continue
            underlined = i < len(lines) and _SETEXT.match(lines[i][1])
            if prev_blank and not containers and underlined and _is_plain(line):
                level = 1 if lines[i][1].strip().startswith("=") else 2
                self._heading(line.strip(), level, number)
                i += 1
                prev_blank = True
                continue
            if atx:
                line = atx.group(2) or ""
            text = clean_inline(_BULLET.sub(r"\1-\2", line))
            if text.strip():
                builder.line(text, number)
                prev_blank = False
            else:
                builder.blank(number)
                prev_blank = True
        if code is not None:
            builder.line(code[0], lines[-1][0])

    def _open_directive(
        self, containers: list[_Container], char: str, length: int, directive: re.Match[str], number: int
    ) -> None:
        name, argument = directive.group(1), directive.group(2).strip()
        drop = name in DROPPED_DIRECTIVES
        containers.append(_Container(char=char, length=length, drop=drop))
        if argument and not drop and name not in _SILENT_ARGUMENT and not any(c.drop for c in containers):
            self.builder.block([clean_inline(argument)], number)

    def _heading(self, raw: str, level: int, number: int) -> None:
        text = heading_text(raw)
        if level == 1 and self.first_h1 is None and text:
            self.first_h1 = text
        self.builder.heading(text, level, unique_anchor(github_slug(text), self._slugs), number)


def _closes(containers: list[_Container], length: int, *, pop: bool = False) -> bool:
    """Whether a bare run of `length` colons closes an open colon fence: the outermost one it is
    long enough for, with everything inside it (markdown-it-container's rule)."""
    for index, container in enumerate(containers):
        if container.char == ":" and container.length <= length:
            if pop:
                del containers[index:]
            return True
    return False


def _strip_comments(line: str) -> tuple[str, bool]:
    """`line` without its HTML comments, and whether the last one is still open at its end."""
    kept: list[str] = []
    position = 0
    while (start := line.find("<!--", position)) >= 0:
        kept.append(line[position:start])
        end = line.find("-->", start + 4)
        if end < 0:
            return "".join(kept), True
        position = end + 3
    kept.append(line[position:])
    return "".join(kept), False


def _dedent(line: str, indent: int) -> str:
    prefix = len(line) - len(line.lstrip(" "))
    return line[min(prefix, indent) :]


def _is_plain(line: str) -> bool:
    """A line that may be a setext heading's text (not a list item, quote, table row or HTML)."""
    stripped = line.strip()
    indented = len(line) - len(line.lstrip()) >= 4
    return not indented and not re.match(r"^([-*+>|<]|\d+[.)]\s|:{3,}|`{3,}|~{3,})", stripped)


def _strip_front_matter(lines: list[tuple[int, str]]) -> tuple[list[tuple[int, str]], str | None]:
    if not lines or lines[0][1].strip() != "---":
        return lines, None
    for index in range(1, len(lines)):
        if lines[index][1].strip() in {"---", "..."}:
            title = None
            for _, entry in lines[1:index]:
                match = re.match(r"^title:\s*(.+?)\s*$", entry)
                if match:
                    title = match.group(1).strip("'\"")
            return lines[index + 1 :], title
    return lines, None


def extract_markdown(path: Path, raw: bytes) -> ExtractedDoc:
    text = decode_text(raw)
    builder = SectionBuilder()
    parser = MarkdownParser(builder)
    numbered = list(enumerate(text.split("\n"), start=1))
    front_title = parser.feed(numbered, front_matter=True)
    title = parser.first_h1 or front_title or path.stem
    names = identifier_name(parser.first_h1) if parser.first_h1 else []
    return ExtractedDoc(title=title, sections=builder.sections(), doc_type="markdown", names=names)
