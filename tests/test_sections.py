"""A result is labelled with the merged section its highlighted words are in."""

from __future__ import annotations

import pytest
from corpus_fixtures import BACKENDS, backend_settings, index_folder

from docsctl.models import Chunk
from docsctl.server.search import Searcher
from docsctl.server.sections import Shown, highlighted_words, relabel, shown_section
from docsctl.store import open_store

MERGED = """Each document is hashed. Unchanged documents are skipped.

## Rebuilding without downtime

`--full` builds a new index beside the live one and swaps it in.

### Failures

A rebuild that fails leaves the old index serving.

## Categories

Categories come from path rules."""


def chunk(
    content: str, breadcrumb: tuple[str, ...] = ("Incremental updates",), merged_anchors: list[list[str]] | None = None
) -> Chunk:
    return Chunk(
        chunk_id="c",
        doc_id="docs:reindex.md",
        source="docs",
        path="reindex.md",
        title="reindex",
        breadcrumb=list(breadcrumb),
        section=breadcrumb[-1] if breadcrumb else "",
        category="commands",
        doc_type="markdown",
        chunk_index=1,
        content=content,
        content_hash="h",
        anchor="incremental-updates",
        merged_anchors=merged_anchors or [],
    )


def test_marked_words_are_read_from_every_fragment():
    assert highlighted_words(["<em>Rebuild</em> it", "the <em>old index</em>"]) == {"rebuild", "old", "index"}


def test_the_section_holding_the_marked_words_labels_the_result():
    shown = shown_section(chunk(MERGED), ["a new <em>index</em> and <em>swaps</em> it in"])
    assert shown == Shown(["Rebuilding without downtime"], "Rebuilding without downtime", None)


def test_a_child_of_a_merged_section_keeps_its_parent_in_the_breadcrumb():
    shown = shown_section(chunk(MERGED, ("Guide", "Incremental updates")), ["a <em>rebuild</em> that <em>fails</em>"])
    assert shown == Shown(["Guide", "Rebuilding without downtime", "Failures"], "Failures", None)


ANCHORS = [["Rebuilding without downtime", "rebuild"], ["Failures", "failures"], ["Categories", "categories"]]


def test_the_shown_section_links_to_its_own_anchor():
    shown = relabel(chunk(MERGED, merged_anchors=ANCHORS), ["a <em>rebuild</em> that <em>fails</em>"])
    assert (shown.section, shown.anchor) == ("Failures", "failures")
    # No anchor recorded (an index written before merged_anchors, a heading without one): the chunk's own.
    assert relabel(chunk(MERGED), ["a <em>rebuild</em> that <em>fails</em>"]).anchor == "incremental-updates"
    unanchored = [["Rebuilding without downtime", "rebuild"], ["Failures", ""]]
    assert relabel(chunk(MERGED, merged_anchors=unanchored), ["<em>fails</em>"]).anchor == "incremental-updates"


def test_a_repeated_heading_links_to_the_occurrence_that_matched():
    content = "Intro.\n\n## Color\n\n### Parameters\n\nhue\n\n## Size\n\n### Parameters\n\nwidth in pixels"
    anchors = [["Color", "color"], ["Parameters", "color-parameters"], ["Size", "size"], ["Parameters", "size-params"]]
    shown = relabel(chunk(content, merged_anchors=anchors), ["<em>width</em> in <em>pixels</em>"])
    assert (shown.breadcrumb, shown.section, shown.anchor) == (["Size", "Parameters"], "Parameters", "size-params")


def test_the_first_section_keeps_its_label_when_it_matches_as_well():
    assert shown_section(chunk(MERGED), ["<em>documents</em> <em>index</em>"]) is None  # a tie: the first wins
    assert shown_section(chunk(MERGED), ["<em>hashed</em>"]) is None


def test_no_marks_or_no_merged_sections_change_nothing():
    merged = chunk(MERGED)
    assert relabel(merged, ["an opening fragment without marks"]) is merged
    single = chunk("Each document is hashed.")
    assert relabel(single, ["<em>hashed</em>"]) is single


def test_comment_lines_in_fenced_code_are_not_headings():
    content = "Install it:\n\n```bash\n# swaps the index\npip install docsctl\n```\n\nThen run it."
    assert shown_section(chunk(content), ["<em>swaps</em>"]) is None


def test_heading_lines_before_the_first_text_are_the_chunks_own():
    content = "# Guide\n\n## Incremental updates\n\nEach document is hashed."
    assert shown_section(chunk(content, ("Guide", "Incremental updates")), ["<em>Guide</em> <em>hashed</em>"]) is None


@pytest.mark.parametrize("backend", BACKENDS)
def test_search_labels_a_merged_chunk_by_the_section_it_matched_in(
    request, backend, embedder, tmp_path, embedding_cache_dir
):
    root = tmp_path / "docs"
    root.mkdir()
    (root / "reindex.md").write_text(
        "# reindex\n\n## Incremental updates\n\nEach document is hashed; unchanged ones are skipped.\n\n"
        "## Rebuilding without downtime\n\n`--full` builds a new index beside the live one and swaps it in.\n",
        encoding="utf-8",
    )
    settings = backend_settings(request, backend, tmp_path / "data", embedding_cache_dir)
    try:
        index_folder(settings, embedder, root, "docs")
        searcher = Searcher(open_store(settings), embedder)
        (hit,) = searcher.search("rebuild beside the live index, then swap", limit=1).hits
        assert "## Rebuilding without downtime" in hit.chunk.content  # one chunk holds both sections
        assert (hit.chunk.section, hit.chunk.breadcrumb, hit.chunk.anchor) == (
            "Rebuilding without downtime",
            ["Rebuilding without downtime"],
            "rebuilding-without-downtime",  # the section's own anchor, stored with the chunk
        )
        (hit,) = searcher.search("hashed unchanged documents skipped", limit=1).hits
        assert (hit.chunk.section, hit.chunk.anchor) == ("Incremental updates", "incremental-updates")
    finally:
        open_store(settings).drop()
