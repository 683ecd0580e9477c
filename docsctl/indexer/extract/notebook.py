"""Jupyter notebooks (nbformat 4 JSON) -> sections.

Markdown cells go through the Markdown parser (their headings start sections), code cells become
fenced code in the notebook's language, raw cells plain text; outputs are ignored.

Line numbers of a notebook's sections are **cell numbers** (index in `cells` + 1), not lines of the
JSON file: a cell is what a reader finds in Jupyter, and JSON line numbers depend on how the file
happened to be serialised.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from docsctl.errors import ExtractError
from docsctl.indexer.extract.markdown import MarkdownParser
from docsctl.indexer.extract.text import SectionBuilder, code_fence, decode_text, identifier_name
from docsctl.models import ExtractedDoc


def _source(cell: dict[str, Any]) -> str:
    source = cell.get("source", "")
    if isinstance(source, list):
        return "".join(part for part in source if isinstance(part, str))
    return source if isinstance(source, str) else ""


def _language(notebook: dict[str, Any]) -> str:
    metadata = notebook.get("metadata")
    if not isinstance(metadata, dict):
        return "python"
    for key, field in (("language_info", "name"), ("kernelspec", "language")):
        entry = metadata.get(key)
        if isinstance(entry, dict) and isinstance(entry.get(field), str) and entry[field].strip():
            return entry[field].strip().lower()
    return "python"


def extract_notebook(path: Path, raw: bytes) -> ExtractedDoc:
    text = decode_text(raw)
    try:
        notebook = json.loads(text)
    except json.JSONDecodeError as exc:
        raise ExtractError(f"malformed notebook JSON: {exc.msg} at line {exc.lineno}") from None
    if not isinstance(notebook, dict) or not isinstance(notebook.get("cells"), list):
        raise ExtractError("malformed notebook JSON: no 'cells' list (only nbformat 4 is supported)")
    language = _language(notebook)
    builder = SectionBuilder()
    parser = MarkdownParser(builder)
    for number, cell in enumerate(notebook["cells"], start=1):
        if not isinstance(cell, dict):
            continue
        source = _source(cell).replace("\r\n", "\n")
        if not source.strip():
            continue
        kind = cell.get("cell_type")
        if kind == "markdown":
            builder.blank(number)
            parser.feed([(number, line) for line in source.split("\n")])
            builder.blank(number)
        elif kind == "code":
            builder.block(code_fence(source.strip("\n"), language), number)
        else:
            builder.block(source.strip("\n").split("\n"), number)
    sections = builder.sections()
    title = parser.first_h1 or path.stem
    # Reference notebooks (Panel's Tabulator.ipynb, HoloViews' Scatter.ipynb) have no H1 and are
    # named after the class they document, so the stem is the name then.
    names = identifier_name(title)
    return ExtractedDoc(title=title, sections=sections, doc_type="notebook", names=names)
