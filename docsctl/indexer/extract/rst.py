"""reStructuredText -> sections, with a small forgiving parser (docutils is not a dependency).

Covered: section titles (underline, or over- and underline, of one punctuation character at least
as long as the title; levels by order of first appearance of each style, as docutils does),
`.. _label:` targets (the anchor of the next title), literal blocks (`::` and `.. code-block::` /
`.. code::` -> fenced code), directives (body kept as text; toctree/include/image/raw dropped),
comments (dropped), roles (:py:class:`Foo` -> `Foo`) and hyperlinks (`text <url>`_ -> text).
Anything it does not understand stays as text: invalid rst never raises.
"""

from __future__ import annotations

import re
from pathlib import Path

from docsctl.indexer.extract.markdown import role_text
from docsctl.indexer.extract.text import SectionBuilder, code_fence, decode_text, docutils_slug, unique_anchor
from docsctl.models import ExtractedDoc

_Lines = list[tuple[int, str]]  # (source line number, text)
_ADORNMENT_CHARS = "!\"#$%&'()*+,-./:;<=>?@[\\]^_`{|}~"
_DIRECTIVE = re.compile(r"^\.\.\s+(?:\|[^|]+\|\s+)?([\w:.+-]+)::(?:\s+(.*))?$")
_TARGET = re.compile(r"^\.\.\s+_(`[^`]+`|(?:[^:\\]|\\.)+):(.*)$")
_FOOTNOTE = re.compile(r"^\.\.\s+\[([^\]]+)\]\s*(.*)$")
_DOCINFO = re.compile(r"^:(orphan|nocomments|nosearch|tocdepth|hidden)(:.*)?$")

CODE_DIRECTIVES = {"code-block", "code", "sourcecode", "ipython", "doctest", "testcode", "parsed-literal"}
DROPPED_DIRECTIVES = {
    "toctree",
    "include",
    "literalinclude",
    "raw",
    "image",
    "role",
    "highlight",
    "index",
    "contents",
    "sectnum",
    "meta",
    "default-role",
    "currentmodule",
    "tabularcolumns",
    "moduleauthor",
    "codeauthor",
}
# directives whose argument is worth a line of text: API objects, titled boxes
_ARGUMENT_AS_CODE = re.compile(r"^(auto\w+|py:\w+|module|class|function|method|attribute|data|exception)$")
_ARGUMENT_AS_TEXT = {
    "admonition",
    "topic",
    "sidebar",
    "rubric",
    "versionadded",
    "versionchanged",
    "deprecated",
}

_LITERAL = re.compile(r"``(.+?)``")
# bounded repeats: unbounded nested ones go quadratic on lines like "a:a:a:...:a" or "a.b.c. ... z"
_ROLE = re.compile(r":((?:[\w.+-]{1,40}:){0,3}[\w.+-]{1,40}):`((?:[^`\\]|\\.)*)`")
_LINK = re.compile(r"`([^`<]*?)\s*<([^<>`]*)>`__?")
_REFERENCE = re.compile(r"`([^`]+)`__?")
_INTERPRETED = re.compile(r"(?<![`\w])`([^`]+)`(?![`\w])")
_WORD_REFERENCE = re.compile(r"(?<![\w.*`-])([A-Za-z][\w.-]{0,80}[A-Za-z0-9])__?(?![\w*])")
_FOOTNOTE_REF = re.compile(r"\s?\[(?:\d+|#\w*|\*)\]_")
_SUBSTITUTION = re.compile(r"\|([^|\s][^|]*)\|(?:__?)?")


def inline(text: str) -> str:
    """rst inline markup as Markdown-like text."""
    literals: list[str] = []

    def keep(value: str) -> str:  # protect a rendered literal or role from the rules that follow
        literals.append(value)
        return f"\ue000{len(literals) - 1}\ue001"

    text = _LITERAL.sub(lambda m: keep(f"`{m.group(1)}`"), text)
    text = _ROLE.sub(lambda m: keep(role_text(m.group(1), m.group(2).replace("\\", ""))), text)
    text = _LINK.sub(lambda m: m.group(1) or m.group(2), text)
    text = _REFERENCE.sub(lambda m: m.group(1), text)
    text = _INTERPRETED.sub(lambda m: m.group(1), text)
    text = _FOOTNOTE_REF.sub("", text)
    text = _WORD_REFERENCE.sub(lambda m: m.group(1), text)
    text = _SUBSTITUTION.sub(lambda m: m.group(1), text)
    return re.sub("\ue000(\\d+)\ue001", lambda m: literals[int(m.group(1))], text)


def _is_adornment(line: str) -> bool:
    stripped = line.rstrip()
    return (
        len(stripped) >= 2
        and stripped[0] in _ADORNMENT_CHARS
        and stripped == stripped[0] * len(stripped)
        and stripped != "::"
    )


def _indent(line: str) -> int:
    return len(line) - len(line.lstrip(" "))


def _dedent(block: _Lines) -> _Lines:
    width = min((_indent(text) for _, text in block if text.strip()), default=0)
    return [(number, text[width:] if text.strip() else "") for number, text in block]


def _take_indented(lines: _Lines, i: int, indent: int = 0) -> tuple[_Lines, int]:
    """The block from `i` of blank lines and lines indented more than `indent` (trailing blanks left)."""
    end = i
    last = i
    while end < len(lines):
        text = lines[end][1]
        if text.strip() and _indent(text) <= indent:
            break
        end += 1
        if text.strip():
            last = end
    return lines[i:last], last


class _RstParser:
    def __init__(self, builder: SectionBuilder) -> None:
        self.builder = builder
        self.styles: list[tuple[str, bool]] = []  # (character, overlined) by first appearance
        self.first_title: str | None = None
        self._slugs: dict[str, int] = {}
        self._label: str | None = None

    def parse(self, lines: _Lines, *, top: bool) -> None:
        builder = self.builder
        paragraph: _Lines = []  # text lines waiting for inline markup (it spans lines)
        literal_next = False  # the last paragraph ended with "::"
        prev_blank = True
        i = 0

        def flush() -> None:
            if not paragraph:
                return
            # a link may join two lines: line numbers then shift a little, which is fine
            rendered = inline("\n".join(text for _, text in paragraph)).split("\n")
            for index, text in enumerate(rendered):
                number = paragraph[min(index, len(paragraph) - 1)][0]
                if _is_adornment(text):  # a transition or a stray adornment line: not text
                    builder.blank(number)
                elif text.strip():
                    builder.line(text, number)
            paragraph.clear()

        while i < len(lines):
            number, line = lines[i]
            if not line.strip():
                flush()
                builder.blank(number)
                prev_blank = True
                i += 1
                continue
            if _indent(line) > 0:
                flush()
                block, i = _take_indented(lines, i)
                if literal_next:
                    code = "\n".join(text for _, text in _dedent(block)).strip("\n")
                    builder.block(code_fence(code), block[0][0])
                else:
                    self.parse(_dedent(block), top=False)
                literal_next = False
                prev_blank = False
                continue
            literal_next = False
            if top and prev_blank:
                consumed = self._title(lines, i)
                if consumed:
                    i += consumed
                    prev_blank = True
                    continue
            if line.startswith(".."):
                flush()
                i = self._explicit(lines, i)
                prev_blank = True
                continue
            if top and _DOCINFO.match(line.strip()):
                i += 1
                continue
            stripped = line.rstrip()
            if stripped.endswith("::"):
                literal_next = True
                stripped = stripped[:-2].rstrip() if stripped[:-2].endswith((" ", "\t")) else stripped[:-1]
            if stripped.strip():
                paragraph.append((number, re.sub(r"^([*+])(\s+)", r"-\2", stripped)))
                self._label = None  # a target right before a paragraph names the paragraph, not a title
            prev_blank = False
            i += 1
        flush()

    def _title(self, lines: _Lines, i: int) -> int:
        """How many lines a section title at `i` takes (0 if none starts there)."""
        line = lines[i][1]
        after = lines[i + 1][1] if i + 1 < len(lines) else ""
        if _is_adornment(line) and i + 2 < len(lines):
            title, under = after.strip(), lines[i + 2][1].rstrip()
            if title and not _is_adornment(after) and under == line.rstrip() and len(under) >= len(title):
                self._heading(title, (line[0], True), lines[i + 1][0])
                return 3
            return 0
        if _is_adornment(after) and not _is_adornment(line) and len(after.rstrip()) >= len(line.rstrip()):
            self._heading(line.strip(), (after[0], False), lines[i][0])
            return 2
        return 0

    def _heading(self, raw: str, style: tuple[str, bool], number: int) -> None:
        if style not in self.styles:
            self.styles.append(style)
        text = re.sub(r"\s+", " ", inline(raw)).replace("`", "").strip()
        if self.first_title is None:
            self.first_title = text
        anchor = self._label or unique_anchor(docutils_slug(text), self._slugs)
        self._label = None
        self.builder.heading(text, self.styles.index(style) + 1, anchor, number)

    def _explicit(self, lines: _Lines, i: int) -> int:
        """Handle the explicit markup block (directive, target, comment ...) at `i`; return the next index."""
        number, line = lines[i]
        body, end = _take_indented(lines, i + 1)
        target = _TARGET.match(line)
        if target:
            if not target.group(2).strip():  # internal target: it names the next title
                self._label = docutils_slug(target.group(1).strip("`").replace("\\", ""))
            return end
        footnote = _FOOTNOTE.match(line)
        if footnote:
            self.builder.blank(number)
            self.parse([(number, footnote.group(2)), *_dedent(body)], top=False)
            return end
        directive = _DIRECTIVE.match(line)
        if not directive:
            return end  # a comment
        name, argument = directive.group(1).lower(), (directive.group(2) or "").strip()
        kind = name.split(":")[-1]
        body = _dedent(body)
        while body and re.match(r"^:[\w .-]+:", body[0][1]):  # options
            body = body[1:]
        if kind in DROPPED_DIRECTIVES:
            return end
        if kind in CODE_DIRECTIVES:
            code = "\n".join(text for _, text in body).strip("\n")
            if code:
                language = argument.split()[0] if argument and kind != "parsed-literal" else ""
                self.builder.block(code_fence(code, language), number)
            return end
        if argument and _ARGUMENT_AS_CODE.match(kind):
            self.builder.block([f"`{argument}`"], number)
        elif argument and kind in _ARGUMENT_AS_TEXT:
            self.builder.block([inline(argument)], number)
        self.builder.blank(number)
        self.parse(body, top=False)
        return end


def extract_rst(path: Path, raw: bytes) -> ExtractedDoc:
    text = decode_text(raw).expandtabs(8)  # docutils reads a tab as spaces to the next multiple of 8
    builder = SectionBuilder()
    parser = _RstParser(builder)
    parser.parse(list(enumerate(text.split("\n"), start=1)), top=True)
    title = parser.first_title or path.stem
    return ExtractedDoc(title=title, sections=builder.sections(), doc_type="rst")
