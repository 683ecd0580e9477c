"""HTML -> sections, with the structure taken from the page itself (lxml).

Why trafilatura does not give the structure: trafilatura 2.3 drops every heading of the ChimeraX
pages (run it on user/commands/color.html: "Simple Coloring", "Sequential Coloring (Rainbow)" ...
are gone, and with them any way to split the page or to find the `<a name>` anchors). Those pages
are plain HTML with no boilerplate beyond a "back to top" bar and a footer, so lxml alone gives the
better result: drop script/style/nav/page header and footer/images/`.nav` bars, pick `<main>`,
`[role=main]` or `<article>` when a page has one, then walk the content in document order and start a
section at each h1-h6. trafilatura is kept only as a last resort, for a page where that walk finds no
text at all (its main-content detection may still find something); it never decides the structure.

Text is Markdown-like: paragraphs separated by blank lines, `<pre>` as fenced code, `<b>`/`<i>` kept
inline as plain words, `<code>` as `code`, lists as "- " items, tables as "| a | b |" rows.
Line numbers are the source lines lxml reports for the elements a paragraph starts at.
"""

from __future__ import annotations

import re
from pathlib import Path

import lxml.etree
import lxml.html

from docsctl.errors import ExtractError
from docsctl.indexer.extract.text import SectionBuilder, code_fence, decode_text
from docsctl.models import ExtractedDoc

_DROPPED = {
    "script",
    "style",
    "nav",
    "noscript",
    "template",
    "iframe",
    "svg",
    "math",
    "button",
    "form",
    "select",
    "input",
    "textarea",
    "img",
    "picture",
    "video",
    "audio",
    "canvas",
    "map",
    "object",
    "embed",
    "head",
    "address",  # the ChimeraX footer ("UCSF Resource for Biocomputing ... / January 2026")
}
_PAGE_CHROME = {"header", "footer"}  # dropped unless inside <article>/<main>, where they hold its title
_DROPPED_CLASSES = re.compile(
    r"^(nav\d*|navbar|navigation|breadcrumbs?|sphinxsidebar|related|headerlink"
    # Chrome of the usual documentation themes, kept out of chunks when a site is crawled: Sphinx
    # (basic, Read the Docs, Furo), pydata-sphinx-theme, MkDocs and Material for MkDocs, Docusaurus.
    r"|footer|rst-footer-buttons|rst-versions|wy-nav-side|wy-nav-top|wy-breadcrumbs"
    r"|sidebar-drawer|toc-drawer|related-pages|mobile-header|back-to-top|bottom-of-page"
    r"|bd-header|bd-header-article|bd-sidebar|bd-sidebar-primary|bd-sidebar-secondary|bd-footer|bd-footer-article"
    r"|bd-search|bd-breadcrumbs|prev-next-area|prev-next-footer|edit-this-page|skip-link|header-article"
    r"|md-header|md-tabs|md-sidebar|md-footer|md-source-file|md-content__button|md-search|md-skip|md-banner"
    r"|theme-doc-sidebar-container|theme-doc-toc-desktop|theme-doc-toc-mobile|pagination-nav|theme-doc-footer"
    r"|theme-edit-this-page|theme-last-updated|theme-doc-breadcrumbs|theme-announcement-bar)$"
)
_BLOCKS = {
    "p",
    "div",
    "blockquote",
    "section",
    "article",
    "main",
    "aside",
    "dl",
    "dt",
    "dd",
    "figure",
    "figcaption",
    "center",
    "details",
    "summary",
    "fieldset",
    "hr",
    "body",
    "html",
    "caption",
    "h1",
    "h2",
    "h3",
    "h4",
    "h5",
    "h6",
}
_HEADINGS = {"h1": 1, "h2": 2, "h3": 3, "h4": 4, "h5": 5, "h6": 6}
_STRUCTURED = {"ul", "ol", "pre", "table"}
_SPACE = re.compile(r"[ \t\r\n\f\v\u00a0\u2002\u2003\u2009]+")
_TITLE_KIND = re.compile(r"^(?:commands?|tools?|toolbars?)\s*:\s*(.+)$", re.I)
_NAME = re.compile(r"^[\w][\w .:/+-]*$")


def _classes(el: lxml.html.HtmlElement) -> list[str]:
    return (el.get("class") or "").split()


def _is_dropped(el: lxml.html.HtmlElement) -> bool:
    tag = el.tag
    if not isinstance(tag, str):
        return True  # comments, processing instructions
    tag = tag.lower()
    if tag in _DROPPED:
        return True
    if tag in _PAGE_CHROME and not any(a.tag in {"article", "main"} for a in el.iterancestors()):
        return True
    if el.get("role") in {"navigation", "banner", "contentinfo"} or el.get("hidden") is not None:
        return True
    return any(_DROPPED_CLASSES.match(name) for name in _classes(el))


def flat_text(el: lxml.html.HtmlElement, *, skip: frozenset[str] = frozenset(), ticks: bool = True) -> str:
    """The words of `el` on one line: whitespace collapsed, dropped elements left out (tails kept)."""
    parts: list[str] = []

    def visit(node: lxml.html.HtmlElement) -> None:
        code = ticks and node.tag in {"code", "kbd", "samp", "tt"}
        if code:
            parts.append("`")
        if node.text:
            parts.append(node.text)
        for child in node:
            if not _is_dropped(child) and child.tag not in skip:
                if child.tag == "br":
                    parts.append(" ")
                visit(child)
            if child.tail:
                parts.append(child.tail)
        if code:
            parts.append("`")

    visit(el)
    text = _SPACE.sub(" ", "".join(parts)).strip()
    return text.replace("``", "")


def _anchor_of(el: lxml.html.HtmlElement) -> str | None:
    if el.get("id"):
        return el.get("id")
    for inner in el.iterdescendants("a", "span"):
        name = inner.get("name") or inner.get("id")
        if name:
            return name
    return None


class _Walker:
    """Walks the content tree in document order, feeding paragraphs and headings to a SectionBuilder."""

    def __init__(self, builder: SectionBuilder) -> None:
        self.builder = builder
        self.parts: list[str] = []
        self.start_line: int | None = None
        self.line = 1
        self.link_anchors: list[str] = []  # <a name=...></a> seen since the last text
        self.box_anchors: list[str] = []  # ids of containers entered since the last text
        # Ids of every element, for the chunk that holds it (a Sphinx `<dt id=...>` signature): those
        # entered since the last text start at the next text; those met inside a paragraph, in it.
        self.pending_ids: list[str] = []
        self.paragraph_ids: list[str] = []
        self.headings: list[str] = []

    def text(self, value: str | None) -> None:
        if not value:
            return
        value = _SPACE.sub(" ", value)
        if value.strip():
            self.link_anchors.clear()
            self.box_anchors.clear()
            if self.start_line is None:
                self.start_line = self.line
                self.paragraph_ids.extend(self.pending_ids)
                self.pending_ids.clear()
        self.parts.append(value)

    def flush(self) -> None:
        lines = [line.strip() for line in "".join(self.parts).split("\n")]
        lines = [line for line in lines if line]
        if lines:
            self.builder.block(lines, self.start_line or self.line, self.paragraph_ids)
        self.parts = []
        self.start_line = None
        self.paragraph_ids = []

    def walk(self, el: lxml.html.HtmlElement) -> None:
        tag = el.tag.lower()
        self.line = el.sourceline or self.line
        if tag in _HEADINGS and "usage" not in _classes(el):
            heading = flat_text(el, ticks=False).strip(" \u2190\u2191")
            if heading:
                self.flush()
                anchor = _anchor_of(el) or next(iter(self.link_anchors), None)
                anchor = anchor or (self.box_anchors[-1] if self.box_anchors else None)
                self.link_anchors.clear()
                self.box_anchors.clear()
                self.headings.append(heading)
                self.builder.heading(heading, _HEADINGS[tag], anchor, self.line)
                return
        if tag == "pre":
            self.flush()
            code = "".join(el.itertext()).strip("\n")
            if code.strip():
                lines = [line.rstrip() for line in code.split("\n")]
                self.text_block(code_fence("\n".join(lines), _language(el)), _ids_in(el))
            return
        if tag in {"ul", "ol"}:
            self.flush()
            self.text_block(_list_lines(el, 0), _ids_in(el))
            return
        if tag == "table":
            rows = _table_lines(el)
            if rows:  # a table without text (a row of colour swatches) stays inline: no break
                self.flush()
                self.text_block(rows, _ids_in(el))
            return
        if tag == "br":
            self.parts.append("\n")
            return
        block = tag in _BLOCKS
        name = el.get("name") or el.get("id")
        if name and (tag == "a" or not block) and not flat_text(el):
            self.link_anchors.append(name)
        elif name and block:
            self.box_anchors.append(name)
        if block:
            self.flush()
        if name:
            (self.pending_ids if self.start_line is None else self.paragraph_ids).append(name)
        code = tag in {"code", "kbd", "samp", "tt"}
        opened = len(self.parts)
        if code:
            self.parts.append("`")
        self.text(el.text)
        for child in el:
            if not _is_dropped(child):
                self.walk(child)
            self.text(child.tail)
        if code:
            if "".join(self.parts[opened:]).strip() == "`":
                del self.parts[opened:]
            else:
                self.parts.append("`")
        if block:
            self.flush()

    def text_block(self, lines: list[str], ids: list[str]) -> None:
        """Lines made whole from an element (code, a list, a table); `ids`: those of the element and inside it."""
        if lines:
            self.link_anchors.clear()
            self.box_anchors.clear()
            self.builder.block(lines, self.line, [*self.pending_ids, *ids])
            self.pending_ids.clear()


def _ids_in(el: lxml.html.HtmlElement) -> list[str]:
    """The ids (and `<a name>`s) of `el` and the elements inside it, in document order."""
    found = (node.get("id") or (node.get("name") if node.tag == "a" else None) for node in el.iter())
    return [name for name in found if name]


def _language(el: lxml.html.HtmlElement) -> str:
    for node in (el, el.getparent()):
        if node is None:
            continue
        match = re.search(r"(?:language|lang|highlight)-([\w+-]+)", node.get("class") or "")
        if match and match.group(1) not in {"default", "none", "text"}:
            return match.group(1)
    return ""


def _structured_children(el: lxml.html.HtmlElement) -> list[lxml.html.HtmlElement]:
    """Lists, code and tables inside `el`, not nested in another one of those, in document order."""
    found = []
    for child in el:
        if not isinstance(child.tag, str) or _is_dropped(child):
            continue
        if child.tag in _STRUCTURED:
            found.append(child)
        else:
            found.extend(_structured_children(child))
    return found


def _list_lines(el: lxml.html.HtmlElement, depth: int) -> list[str]:
    lines: list[str] = []
    number = 1
    indent = "  " * depth
    for item in el:
        if not isinstance(item.tag, str) or _is_dropped(item):
            continue
        if item.tag in {"ul", "ol"}:
            lines.extend(_list_lines(item, depth + 1))
            continue
        marker = f"{number}." if el.tag == "ol" else "-"
        number += 1
        words = flat_text(item, skip=frozenset(_STRUCTURED))
        if words:
            lines.append(f"{indent}{marker} {words}")
        for inner in _structured_children(item):
            if inner.tag in {"ul", "ol"}:
                lines.extend(_list_lines(inner, depth + 1))
            elif inner.tag == "pre":
                code = "".join(inner.itertext()).strip("\n")
                if code.strip():
                    lines.extend(code_fence(code, _language(inner)))
            else:
                lines.extend(indent + "  " + row for row in _table_lines(inner))
    return lines


def _table_lines(table: lxml.html.HtmlElement) -> list[str]:
    rows = []
    for row in table.iter("tr"):
        if next(row.iterancestors("table"), None) is not table:
            continue
        cells = [flat_text(cell).replace("|", "\\|") for cell in row if cell.tag in {"td", "th"}]
        if any(cells):
            rows.append("| " + " | ".join(cells) + " |")
    return rows


def _content_root(root: lxml.html.HtmlElement) -> lxml.html.HtmlElement:
    for query in ("//main", "//*[@role='main']", "//article"):
        found = [el for el in root.xpath(query) if flat_text(el)]
        if len(found) == 1:
            return found[0]
    body = root.find(".//body")
    return body if body is not None else root


def usage_names(root: lxml.html.HtmlElement) -> list[str]:
    """The bold command names after "Usage:" on ChimeraX pages: "color", "color sequential" ...

    The name is the run of bold words right after the "Usage:" label (a link or `<b>`), ended by
    the first non-bold element or text.
    """
    names: list[str] = []
    for node in root.iter("a", "b", "strong"):
        parent = node.getparent()
        if flat_text(node) != "Usage" or (parent is not None and flat_text(parent) == "Usage"):
            continue  # not the label, or not its outermost element
        if (node.tail or "").strip() != ":":
            continue
        words: list[str] = []
        sibling = node.getnext()
        while sibling is not None:
            if sibling.tag == "br" and not words:
                sibling = sibling.getnext()
                continue
            if sibling.tag not in {"b", "strong"}:
                break
            words.append(flat_text(sibling))
            if (sibling.tail or "").strip():
                break
            sibling = sibling.getnext()
        if words:
            full = " ".join(words).lower()
            names.extend([full.split()[0], full])
    return names


def title_names(title: str) -> list[str]:
    """Names in a ChimeraX title: "Command: color, rainbow" -> color, rainbow; "Tool: Basic Actions"
    -> basic actions; "Tool: Foldseek (Similar Structures)" -> foldseek, similar structures."""
    match = _TITLE_KIND.match(title.strip())
    if not match:
        return []
    names: list[str] = []
    for part in match.group(1).split(","):
        names.extend(re.findall(r"\(([^)]*)\)", part))
        names.append(re.sub(r"\([^)]*\)", "", part))
    return [name.strip().lower() for name in names]


def _dedupe(names: list[str]) -> list[str]:
    out: list[str] = []
    for name in names:
        name = _SPACE.sub(" ", name).strip().lower()
        if name and len(name) <= 60 and _NAME.match(name) and name not in out:
            out.append(name)
    return out


def _fallback_text(text: str) -> list[str]:
    """trafilatura's main-content text, for pages where the lxml walk found nothing."""
    import trafilatura  # slow to import; only this rare path needs it

    extracted = trafilatura.extract(text, output_format="markdown", include_tables=True, favor_recall=True)
    return (extracted or "").split("\n")


def extract_html(path: Path, raw: bytes) -> ExtractedDoc:
    text = decode_text(raw)
    parser = lxml.html.HTMLParser(encoding="utf-8", remove_comments=True, remove_pis=True)
    try:
        root = lxml.html.document_fromstring(text.encode("utf-8"), parser=parser)
    except (lxml.etree.ParserError, ValueError) as exc:
        raise ExtractError(f"unparsable HTML: {exc}") from None
    title_el = root.find(".//title")
    page_title = flat_text(title_el) if title_el is not None else ""
    builder = SectionBuilder()
    walker = _Walker(builder)
    walker.walk(_content_root(root))
    walker.flush()
    sections = builder.sections()
    if not sections:  # line numbers are then those of trafilatura's text: the best there is
        fallback = _fallback_text(text)
        for number, line in enumerate(fallback, start=1):
            builder.line(line, number)
        sections = builder.sections()
    title = page_title or next(iter(walker.headings), "") or path.stem
    names = _dedupe(title_names(page_title) + usage_names(root))
    return ExtractedDoc(title=title, sections=sections, doc_type="html", names=names)
