"""Format extraction, on the real corpora in ../shared/corpora and on small table-driven inputs."""

from __future__ import annotations

import collections
import json
import re
from pathlib import Path

import pytest

from docsctl.errors import ExtractError
from docsctl.indexer.extract import SUPPORTED_SUFFIXES, extract_file
from docsctl.indexer.extract.html import title_names
from docsctl.models import ExtractedDoc, Section

CORPORA = Path(__file__).resolve().parents[1].parent / "shared" / "corpora"
CHIMERAX = CORPORA / "chimerax"
HOLOVIZ = CORPORA / "holoviz"
FENCE_LINE = re.compile(r"^\s*(`{3,}|~{3,})")


def extract(path: Path) -> ExtractedDoc:
    return extract_file(path, path.read_bytes())


def extract_text(name: str, text: str) -> ExtractedDoc:
    return extract_file(Path(name), text.encode())


def section(doc: ExtractedDoc, heading: str) -> Section:
    found = [s for s in doc.sections if s.heading == heading]
    assert found, f"no section {heading!r} in {[s.heading for s in doc.sections]}"
    return found[0]


def source_line(path: Path, needle: str) -> int:
    return next(n for n, line in enumerate(path.read_text().splitlines(), start=1) if needle in line)


def fences_balanced(text: str) -> bool:
    open_fence = None
    for line in text.split("\n"):
        marker = FENCE_LINE.match(line)
        if open_fence is None and marker:
            open_fence = marker.group(1)
        elif open_fence and set(line.strip()) == {open_fence[0]} and len(line.strip()) >= len(open_fence):
            open_fence = None
    return open_fence is None


# --- HTML: ChimeraX user guide ----------------------------------------------------------------


@pytest.fixture(scope="module")
def color_page() -> ExtractedDoc:
    return extract(CHIMERAX / "user/commands/color.html")


def test_color_page_title_and_names(color_page):
    assert color_page.title == "Command: color, rainbow"
    assert color_page.doc_type == "html"
    assert color_page.names[:2] == ["color", "rainbow"]
    assert {"color sequential", "color byattribute", "color name"} <= set(color_page.names)
    assert len(color_page.names) == len(set(color_page.names))
    assert all(name == name.lower() for name in color_page.names)


@pytest.mark.parametrize(
    ("heading", "anchor", "usage_lines"),
    [
        ("Simple Coloring", "simple", ["Usage: color spec colorname [ what | target string ]"]),
        (
            "Sequential Coloring (Rainbow)",
            "sequential",
            ["Usage: color sequential atom-spec [ level ]", "Usage: rainbow atom-spec [ level ]"],
        ),
    ],
)
def test_color_page_sections_keep_usage_lines_and_anchors(color_page, heading, anchor, usage_lines):
    found = section(color_page, heading)
    assert found.level == 3
    assert found.anchor == anchor
    lines = found.text.split("\n")
    for usage in usage_lines:
        assert any(line.startswith(usage) for line in lines), (usage, found.text[:400])
    path = CHIMERAX / "user/commands/color.html"
    assert found.start_line == source_line(path, f"<h3>{heading}</h3>")
    assert found.start_line < found.end_line


def test_color_page_structure_and_boilerplate(color_page):
    headings = [s.heading for s in color_page.sections]
    assert headings[0] == "Command: color, rainbow"
    assert "Examples (Simple)" in headings and section(color_page, "Examples (Simple)").level == 4
    assert not any(h.startswith("Usage") for h in headings)  # <h3 class="usage"> is text, not structure
    everything = "\n".join(s.text for s in color_page.sections)
    assert "back to top" not in everything
    assert "UCSF Resource for Biocomputing" not in everything
    assert "Usage:\ncolor name cname color-spec" in section(color_page, "Defining and Listing Colors").text
    starts = [s.start_line for s in color_page.sections]
    assert starts == sorted(starts)


def test_tool_page():
    doc = extract(CHIMERAX / "user/tools/basicactions.html")
    assert doc.title == "Tool: Basic Actions"
    assert doc.names == ["basic actions"]
    text = doc.sections[0].text
    assert "| Atom | Cartoon | Surface |" in text
    assert "- sets defined by the user with the name command" in text
    assert "Basic Actions is a simple graphical interface" in text


@pytest.mark.parametrize(
    ("title", "names"),
    [
        ("Command: color, rainbow", ["color", "rainbow"]),
        ("Command: registration status", ["registration status"]),
        ("Tool: Basic Actions", ["basic actions"]),
        ("Tool: Foldseek (Similar Structures)", ["similar structures", "foldseek"]),
        ("Toolbar: Medical Image", ["medical image"]),
        ("Command-Line Color Specification", []),
        ("Selection", []),
    ],
)
def test_title_names(title, names):
    assert title_names(title) == names


@pytest.mark.parametrize(
    ("html", "expected"),
    [
        # (heading, level, anchor, text snippet)
        (
            '<h1 id="top">Guide</h1><p>Intro <b>bold</b> and <i>it</i>.</p>',
            [("Guide", 1, "top", "Intro bold and it.")],
        ),
        (
            '<a name="x"></a><p class="nav"><a href="#t">back</a></p><h2>Part</h2><pre>a = 1\n\nb = 2</pre>',
            [("Part", 2, "x", "```\na = 1\n\nb = 2\n```")],
        ),
        (
            '<section id="s1"><h2>Inside</h2><ul><li>one<ul><li>two</li></ul></li></ul></section>',
            [("Inside", 2, "s1", "- one\n  - two")],
        ),
        (
            '<h3><a name="in"></a>Named</h3>'
            "<table><tr><th>a</th><th>b|c</th></tr><tr><td>1</td><td>2</td></tr></table>",
            [("Named", 3, "in", "| a | b\\|c |\n| 1 | 2 |")],
        ),
        (
            "<p>before</p><nav>menu</nav><script>x()</script><h2>After</h2><p>use <code>f(x)</code></p>",
            [("", 0, None, "before"), ("After", 2, None, "use `f(x)`")],
        ),
    ],
)
def test_html_small_pages(html, expected):
    doc = extract_text("page.html", f"<html><head><title>T</title></head><body>{html}</body></html>")
    assert doc.title == "T"
    got = [(s.heading, s.level, s.anchor) for s in doc.sections]
    assert got == [(h, lvl, a) for h, lvl, a, _ in expected]
    for found, (*_, snippet) in zip(doc.sections, expected, strict=True):
        assert snippet in found.text
        assert "menu" not in found.text and "x()" not in found.text


SPHINX_API = """<main><section id="module-pkg"><h1>pkg</h1><p>Tools for things.</p>
<dl class="py class"><dt class="sig sig-object py" id="pkg.Thing"><em class="property">class </em>
<span class="sig-prename descclassname">pkg.</span><span class="sig-name descname">Thing</span>(<em>size</em>)
<a class="headerlink" href="#pkg.Thing">¶</a></dt><dd><p>A thing of a given <span id="size-note"></span>size.</p>
<ul id="options"><li>one</li></ul><pre id="example">pkg.Thing(3)</pre></dd></dl></section></main>"""


def test_html_element_ids_are_placed_on_the_line_their_text_starts_at():
    doc = extract_text("api.html", f"<html><head><title>pkg</title></head><body>{SPHINX_API}</body></html>")
    (section,) = doc.sections
    lines = section.text.split("\n")
    placed = {anchor: " ".join(lines[line].split()) for anchor, line in section.anchors}
    assert placed == {
        "module-pkg": "Tools for things.",  # a section's id: its first text (and the heading's anchor)
        "pkg.Thing": "class pkg.Thing(size)",  # a Sphinx signature
        "size-note": "A thing of a given size.",  # met inside a paragraph: that paragraph
        "options": "- one",
        "example": "```",
    }
    assert section.anchor == "module-pkg"


# --- reStructuredText: ChimeraX developer guide ----------------------------------------------


def test_rst_writing_bundles():
    doc = extract(CHIMERAX / "devel/writing_bundles.rst")
    assert doc.title == "Building and Distributing Bundles"
    assert doc.doc_type == "rst"
    assert [(s.heading, s.level) for s in doc.sections[:3]] == [
        ("Building and Distributing Bundles", 1),
        ("Bundle Format", 2),
        ("Bundle Sample Code", 2),
    ]
    assert section(doc, "Bundle Format").anchor == "bundle-format"
    docs = section(doc, "Bundle Documentation").text
    assert "```\n<ExtraFiles>\n  <ExtraDir source='docs'/>\n</ExtraFiles>\n```" in docs
    assert "::" not in docs.replace("`::`", "")
    assert fences_balanced(docs)
    everything = "\n".join(s.text for s in doc.sections)
    assert "Copyright" not in everything and "vim:" not in everything  # comments dropped
    assert "`wheel\n<https" not in everything  # hyperlinks across lines become their text
    assert "`chimerax.core.toolshed.BundleAPI`" in everything
    lines = (CHIMERAX / "devel/writing_bundles.rst").read_text().splitlines()
    assert lines[section(doc, "Bundle Format").start_line - 1] == "Bundle Format"


def test_rst_overlined_title_labels_and_roles():
    doc = extract(CHIMERAX / "devel/tutorials/tutorial_tool_qt.rst")
    assert doc.title == "Bundle Example: Add a Qt-based Tool"
    levels = {s.heading: s.level for s in doc.sections}
    assert levels["Bundle Example: Add a Qt-based Tool"] == 1  # ==== over and under
    assert levels["Source Code Organization"] == 2  # ==== under only: another style
    assert levels["src/__init__.py"] == 3
    assert section(doc, "Interface Construction").anchor == "interface"  # from ".. _interface:"
    assert section(doc, "Sessions").anchor == "session-saving"
    everything = "\n".join(s.text for s in doc.sections)
    assert "`chimerax.ui.gui.MainToolWindow`" in everything
    assert ":py:class:" not in everything


RST_SAMPLE = """\
.. a comment
   spanning lines

=====
Title
=====

Intro with :func:`pkg.run` and a `link <https://x.org>`_ and ``code``.

.. _first:

Part One
--------

Text::

    literal # not a heading
    ===

.. code-block:: python
   :linenos:

   print("hi")

.. note::

   A *note* body.

.. toctree::
   :maxdepth: 2

   other/page

Sub
~~~

- item one
* item two

Part Two
--------

tail
"""


@pytest.mark.parametrize(
    ("heading", "level", "anchor", "contains", "absent"),
    [
        ("Title", 1, "title", ["Intro with `pkg.run` and a link and `code`."], ["a comment"]),
        (
            "Part One",
            2,
            "first",
            [
                "Text:\n",
                "```\nliteral # not a heading\n===\n```",
                '```python\nprint("hi")\n```',
                "A *note* body.",
            ],
            ["other/page", ":linenos:", "maxdepth", ".. note"],
        ),
        ("Sub", 3, "sub", ["- item one\n- item two"], []),
        ("Part Two", 2, "part-two", ["tail"], []),
    ],
)
def test_rst_sample(heading, level, anchor, contains, absent):
    doc = extract_text("sample.rst", RST_SAMPLE)
    assert [s.heading for s in doc.sections] == ["Title", "Part One", "Sub", "Part Two"]
    found = section(doc, heading)
    assert (found.level, found.anchor) == (level, anchor)
    for snippet in contains:
        assert snippet in found.text
    for snippet in absent:
        assert snippet not in found.text


@pytest.mark.parametrize(
    "text",
    [
        "Title\n===\n",  # underline too short: not a title, still text
        "====\n\n====\n",
        ".. code-block::\n",
        "::\n\n",
        "Text\n\n    indented ``unclosed\n\n.. |x| replace:: y\n",
        "+----+\n| a  |\n+----+\n",
    ],
)
def test_invalid_rst_never_raises(text):
    try:
        doc = extract_text("broken.rst", text)
    except ExtractError as exc:  # only a file with no text left at all may be refused
        assert str(exc) == "no text content"
        return
    assert doc.sections


# --- Markdown: Panel docs ---------------------------------------------------------------------


def test_markdown_hash_comments_in_fences_are_not_headings():
    path = HOLOVIZ / "panel/doc/tutorials/basic/build_dashboard.md"
    assert "# Extract Data" in path.read_text()  # a Python comment inside a ```python fence
    doc = extract(path)
    assert doc.title == "Build a Dashboard"
    headings = [s.heading for s in doc.sections]
    assert "Extract Data" not in headings and "Transform Data" not in headings
    assert {"Explanation", "Data Extraction", "Conclusion"} <= set(headings)
    intro = doc.sections[0].text
    assert "```python\nimport hvplot.pandas" in intro
    assert "\n# Extract Data\n" in intro
    assert all(fences_balanced(s.text) for s in doc.sections)
    assert ":::" not in intro and "{dropdown}" not in intro
    lines = path.read_text().splitlines()
    assert lines[section(doc, "Conclusion").start_line - 1] == "### Conclusion"


def test_markdown_front_matter_and_html():
    doc = extract(HOLOVIZ / "panel/doc/index.md")
    assert doc.title == "Overview"
    assert doc.names == ["overview"]
    everything = "\n".join(s.text for s in doc.sections)
    assert "sd_hide_title" not in everything and "<h2" not in everything
    assert "The Powerful Data Exploration & Web App Framework for Python" in everything


MD_SAMPLE = """\
---
title: From Front Matter
---

Intro line.

Setext One
==========

```{note}
A note body.
```

~~~python
# comment, not a heading
~~~

```{toctree}
:maxdepth: 1

hidden/page
```

```{code-block} python
:caption: x

x = 1
```

## Same

### Same

Setext Two
----------

:::{tip} A tip title
Tip text with [a link](https://x.org) and {py:class}`pkg.Thing`.
:::
"""


def test_markdown_sample():
    doc = extract_text("notes.md", MD_SAMPLE)
    assert doc.title == "Setext One"  # the first H1 wins over the front matter title
    assert doc.names == []
    got = [(s.heading, s.level, s.anchor) for s in doc.sections]
    assert got == [
        ("", 0, None),
        ("Setext One", 1, "setext-one"),
        ("Same", 2, "same"),
        ("Same", 3, "same-1"),
        ("Setext Two", 2, "setext-two"),
    ]
    one = section(doc, "Setext One").text
    assert "A note body." in one and "{note}" not in one
    assert "~~~python\n# comment, not a heading\n~~~" in one
    assert "hidden/page" not in one and "maxdepth" not in one
    assert "```python\nx = 1\n```" in one and ":caption:" not in one
    two = section(doc, "Setext Two").text
    assert "A tip title" in two
    assert "Tip text with a link and `pkg.Thing`." in two


def test_markdown_title_falls_back_to_front_matter_then_stem():
    assert extract_text("a.md", "---\ntitle: Fm\n---\n\ntext\n").title == "Fm"
    assert extract_text("stem_name.md", "## Only H2\n\ntext\n").title == "stem_name"


# --- Notebooks: HoloViz -----------------------------------------------------------------------


def test_notebook_tabulator():
    path = HOLOVIZ / "panel/examples/reference/widgets/Tabulator.ipynb"
    doc = extract(path)
    cells = len(json.loads(path.read_text())["cells"])
    assert doc.doc_type == "notebook"
    assert doc.title == "Tabulator"
    assert "tabulator" in doc.names
    formatters = section(doc, "Formatters")
    assert (formatters.level, formatters.anchor) == (2, "formatters")
    assert "```python\nfrom bokeh.models.widgets.tables import NumberFormatter" in formatters.text
    assert "Bokeh `CellFormatter`" in formatters.text
    headings = {s.heading for s in doc.sections}
    assert {"Editors/Editing", "Nested editor", "Pagination", "Streaming"} <= headings
    for found in doc.sections:  # line numbers are cell numbers
        assert 1 <= found.start_line <= found.end_line <= cells
        assert fences_balanced(found.text)


def test_notebook_with_h1_and_raw_cells():
    notebook = {
        "cells": [
            {"cell_type": "markdown", "source": ["# Scatter\n", "\n", "Some *text*."]},
            {"cell_type": "code", "source": "x = 1\n# a comment", "outputs": [{"text": "IGNORED"}]},
            {"cell_type": "raw", "source": "raw words"},
            {"cell_type": "markdown", "source": "## Options\n\nMore."},
            {"cell_type": "code", "source": ""},
        ],
        "metadata": {"kernelspec": {"language": "R"}},
        "nbformat": 4,
    }
    doc = extract_text("Whatever.ipynb", json.dumps(notebook))
    assert doc.title == "Scatter" and doc.names == ["scatter"]
    assert [(s.heading, s.level, s.start_line, s.end_line) for s in doc.sections] == [
        ("Scatter", 1, 1, 3),
        ("Options", 2, 4, 4),
    ]
    assert doc.sections[0].text == "Some *text*.\n\n```r\nx = 1\n# a comment\n```\n\nraw words"
    assert "IGNORED" not in doc.sections[0].text


# --- Plain text and bad input -----------------------------------------------------------------


@pytest.mark.parametrize(("name", "title"), [("notes.txt", "First line"), ("README", "First line")])
def test_plain_text(name, title):
    doc = extract_text(name, "\n\nFirst line\nsecond\n\nthird\n")
    assert doc.title == title and doc.doc_type == "text"
    assert [(s.heading, s.level, s.start_line, s.end_line) for s in doc.sections] == [("", 0, 3, 6)]
    assert doc.sections[0].text == "First line\nsecond\n\nthird"


@pytest.mark.parametrize(
    ("name", "raw", "reason"),
    [
        ("a.html", b"<html>\x00\x01\x02</html>", "binary file"),
        ("a.md", b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR", "binary file"),
        ("a.rst", "Caf\u00e9 au lait".encode("latin-1"), "not UTF-8 text"),
        ("a.txt", b"", "empty file"),
        ("a.md", b"  \n\t\n", "empty file"),
        ("a.ipynb", b'{"cells": [', "malformed notebook JSON"),
        ("a.ipynb", b'{"nbformat": 4}', "malformed notebook JSON"),
        ("a.ipynb", b"[1, 2]", "malformed notebook JSON"),
        ("a.html", b"<html><body><script>x()</script></body></html>", "no text content"),
        ("a.rst", b".. only a comment\n", "no text content"),
        ("a.pdf", b"%PDF-1.4", "unsupported file type"),
    ],
)
def test_bad_input_raises_extract_error_with_reason(name, raw, reason):
    with pytest.raises(ExtractError) as info:
        extract_file(Path(name), raw)
    assert str(info.value).startswith(reason)


def test_supported_suffixes():
    assert {".html", ".htm", ".md", ".markdown", ".ipynb", ".rst", ".txt", ""} == SUPPORTED_SUFFIXES


# --- Every file of both corpora ---------------------------------------------------------------


@pytest.mark.parametrize("corpus", [CHIMERAX, HOLOVIZ], ids=["chimerax", "holoviz"])
def test_every_corpus_file_extracts_or_is_refused_with_a_reason(corpus, capsys):
    files = sorted(p for p in corpus.rglob("*") if p.is_file())
    assert len(files) > 300
    reasons: collections.Counter[str] = collections.Counter()
    extracted = 0
    for path in files:
        try:
            doc = extract(path)
        except ExtractError as exc:
            reasons[str(exc)] += 1
            print(f"skipped {path.relative_to(corpus)}: {exc}")
            continue
        extracted += 1
        assert any(s.text.strip() or s.heading.strip() for s in doc.sections), path
        assert doc.title.strip(), path
        for found in doc.sections:
            assert 0 <= found.level <= 6 and (found.level == 0) == (found.heading == ""), path
            assert 1 <= found.start_line <= found.end_line, path
            assert fences_balanced(found.text), (path, found.heading)
    print(f"{corpus.name}: {extracted} extracted, {sum(reasons.values())} skipped {dict(reasons)}")
    assert extracted >= 0.98 * len(files)
