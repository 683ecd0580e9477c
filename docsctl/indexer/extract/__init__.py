"""Files -> `ExtractedDoc`: one module per format, picked by file suffix.

`extract_file(path, raw)` is the only entry point; for a file that cannot be turned into text it
raises ExtractError (and nothing else) with a short reason. `SUPPORTED_SUFFIXES` lists the suffixes
it understands ("" is a file without one, read as plain text).
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from docsctl.errors import ExtractError
from docsctl.indexer.extract.html import extract_html
from docsctl.indexer.extract.markdown import extract_markdown
from docsctl.indexer.extract.notebook import extract_notebook
from docsctl.indexer.extract.rst import extract_rst
from docsctl.indexer.extract.text import extract_text
from docsctl.models import ExtractedDoc

__all__ = ["SUPPORTED_SUFFIXES", "extract_file"]

_EXTRACTORS: dict[str, Callable[[Path, bytes], ExtractedDoc]] = {
    ".html": extract_html,
    ".htm": extract_html,
    ".md": extract_markdown,
    ".markdown": extract_markdown,
    ".ipynb": extract_notebook,
    ".rst": extract_rst,
    ".txt": extract_text,
    "": extract_text,
}
SUPPORTED_SUFFIXES: frozenset[str] = frozenset(_EXTRACTORS)


def extract_file(path: Path, raw: bytes) -> ExtractedDoc:
    """Title, sections and documented names of the file at `path`, whose bytes are `raw`.

    Dispatches on the suffix of `path` (case-insensitive); `path` itself is never read.
    """
    suffix = path.suffix.lower()
    extractor = _EXTRACTORS.get(suffix)
    if extractor is None:
        raise ExtractError(f"unsupported file type {suffix!r}")
    try:
        doc = extractor(path, raw)
    except ExtractError:
        raise
    except Exception as exc:  # a bug or a pathological file must cost one file, not the whole run
        raise ExtractError(f"extraction failed: {type(exc).__name__}: {exc}") from exc
    if not any(section.text.strip() or section.heading.strip() for section in doc.sections):
        raise ExtractError("no text content")
    return doc
