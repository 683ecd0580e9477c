"""Heading-aware chunking: table-driven cases on small documents, then the ChimeraX corpus."""

from __future__ import annotations

import re
import statistics
from pathlib import Path

import pytest

from docsctl.errors import ExtractError
from docsctl.indexer.chunking import Piece, breadcrumbs, chunk_sections
from docsctl.indexer.extract import extract_file
from docsctl.models import ExtractedDoc, Section

CORPORA = Path(__file__).resolve().parents[1].parent / "shared" / "corpora"
FENCE = re.compile(r"^\s*(`{3,}|~{3,})")
SIZES = {"target_chars": 1000, "max_chars": 1500, "min_chars": 300, "overlap_chars": 150}


def doc(*sections: Section, title: str = "Doc") -> ExtractedDoc:
    return ExtractedDoc(title=title, sections=list(sections), doc_type="markdown")


def prose(words: int, seed: str = "w") -> str:
    """One paragraph of sentences, each ten words."""
    sentences = [" ".join(f"{seed}{i * 10 + j}" for j in range(10)) + "." for i in range(words // 10)]
    return " ".join(sentences)


def fenced_blocks(text: str) -> list[str]:
    """The fenced code blocks of `text`; asserts every fence that opens also closes."""
    blocks, current, fence = [], [], None
    for line in text.split("\n"):
        if fence is None:
            marker = FENCE.match(line)
            if marker:
                fence, current = marker.group(1), [line]
            continue
        current.append(line)
        if line.strip() and set(line.strip()) == {fence[0]} and len(line.strip()) >= len(fence):
            blocks.append("\n".join(current))
            fence = None
    assert fence is None, f"unclosed fence in piece:\n{text}"
    return blocks


def check_sizes(pieces: list[Piece], max_chars: int = 1500, min_chars: int = 300) -> None:
    """Every piece fits max_chars, unless one code block alone is longer (plus a short lead-in)."""
    for piece in pieces:
        if len(piece.content) <= max_chars:
            continue
        biggest = max((len(block) for block in fenced_blocks(piece.content)), default=0)
        assert biggest > max_chars, f"oversized piece without an oversized code block:\n{piece.content}"
        assert len(piece.content) - biggest <= min_chars + 150 + 100


CODE = "```python\n" + "\n".join(f"value_{i} = {i}  # a # comment" for i in range(30)) + "\n\n\nend = 1\n```"
BIG_CODE = "```\n" + "\n".join(f"line {i} " + "x" * 60 for i in range(40)) + "\n```"


@pytest.mark.parametrize(
    "text",
    [
        "\n\n".join([prose(60, "a"), CODE, prose(80, "b"), CODE, prose(30, "c"), CODE]),
        "\n\n".join([prose(20), BIG_CODE, prose(20, "z")]),
        "\n\n".join([CODE] * 8),
        "intro:\n" + CODE + "\nafter the code without a blank line\n" + prose(400),
        "~~~\n" + "\n\n".join(["~~~ is not ``` inside"] * 3) + "\n```\nstill code\n~~~\n\n" + prose(400),
    ],
    ids=["mixed", "oversized-code", "only-code", "no-blank-lines", "tilde"],
)
def test_code_fences_are_never_split(text):
    pieces = chunk_sections(doc(Section("Code", 2, text, "code", 1, 200)))
    assert len(pieces) >= 2
    for piece in pieces:
        fenced_blocks(piece.content)  # balanced
        for block in fenced_blocks(piece.content):
            assert block in text  # every code block is whole
        if "~~~" not in text:  # the simple count the brief asks for; ``` inside ~~~ would fool it
            assert sum(1 for line in piece.content.split("\n") if line.strip().startswith("```")) % 2 == 0
    check_sizes(pieces)
    assert "\n".join(fenced_blocks(text)) in "\n".join(b for p in pieces for b in fenced_blocks(p.content))


@pytest.mark.parametrize(
    ("text", "kind"),
    [
        ("\n\n".join(prose(30, f"p{i}") for i in range(20)), "paragraphs"),
        (prose(900), "one giant paragraph"),
        ("\n".join(prose(12, f"l{i}") for i in range(150)), "lines without blank lines"),
        ("x" * 5000, "no spaces at all"),
    ],
)
def test_max_size_respected_and_nothing_lost(text, kind):
    pieces = chunk_sections(doc(Section("Long", 1, text, "long", 10, 400)))
    assert len(pieces) >= 3, kind
    assert all(len(p.content) <= 1500 for p in pieces), kind
    assert all(p.breadcrumb == ("Long",) and p.section == "Long" and p.anchor == "long" for p in pieces)
    words = set(text.split())
    assert words <= {w for p in pieces for w in p.content.split()} or kind == "no spaces at all"
    assert sum(len(p.content) for p in pieces) >= len(text)
    starts = [p.start_line for p in pieces]
    assert starts == sorted(starts) and all(10 <= p.start_line <= p.end_line <= 400 for p in pieces)


def test_overlap_repeats_the_tail_of_the_previous_piece():
    text = "\n\n".join(prose(40, f"p{i}") for i in range(12))
    pieces = chunk_sections(doc(Section("Prose", 2, text, None, 1, 60)))
    assert len(pieces) >= 3
    for before, after in zip(pieces, pieces[1:], strict=False):
        first_paragraph = after.content.split("\n\n")[0]
        assert len(first_paragraph) <= 150
        assert before.content.endswith(first_paragraph)
        assert first_paragraph.endswith(".") and first_paragraph[0].isalpha()  # whole sentences
        assert after.start_line <= before.end_line


def test_overlap_never_comes_from_code():
    text = "\n\n".join([prose(80), CODE, prose(80, "q")])
    pieces = chunk_sections(doc(Section("S", 2, text, None, 1, 50)), target_chars=600, max_chars=900)
    for before, after in zip(pieces, pieces[1:], strict=False):
        if before.content.endswith("```"):
            assert after.content.split("\n\n")[0] not in before.content.split("```")[-2]


def test_overlap_does_not_cross_sections():
    long = "\n\n".join(prose(40, f"p{i}") for i in range(6))
    sections = [Section("A", 2, long, None, 1, 20), Section("B", 2, long.upper(), None, 21, 40)]
    pieces = chunk_sections(doc(*sections))
    firsts = [p for p in pieces if p.section == "B"][0]
    assert firsts.content.startswith("P0")


def test_element_ids_go_to_the_piece_their_text_starts_in_never_to_an_overlap():
    paragraphs = [prose(40, f"p{i}x") for i in range(12)]
    anchors = tuple((f"id{i}", 2 * i) for i in range(12))  # paragraph i is line 2i of the text
    pieces = chunk_sections(doc(Section("Prose", 2, "\n\n".join(paragraphs), "prose", 1, 60, anchors)))
    assert len(pieces) >= 3 and pieces[0].anchor == "prose"
    for i, paragraph in enumerate(paragraphs):
        (holder,) = [piece for piece in pieces if f"id{i}" in piece.anchors]
        assert paragraph in holder.content


def test_an_id_inside_a_paragraph_too_long_for_one_piece_goes_to_the_part_holding_its_line():
    text = "\n".join([prose(150, "a"), prose(150, "b"), prose(150, "c")])  # one block of three long lines
    pieces = chunk_sections(doc(Section("Long", 2, text, None, 1, 3, (("at-b", 1),))))
    (holder,) = [piece for piece in pieces if "at-b" in piece.anchors]
    assert "b0 b1 b2" in holder.content and "a0 a1" not in holder.content


@pytest.mark.parametrize(
    ("levels", "expected"),
    [
        ([1, 2, 3, 2, 1], [(), ("h1",), ("h1", "h2"), ("h3",), ("h4",)]),
        ([2, 3, 3, 4, 2], [("h0",), ("h0", "h1"), ("h0", "h2"), ("h0", "h2", "h3"), ("h4",)]),
        ([3, 1, 2], [("h0",), ("h1",), ("h1", "h2")]),
    ],
)
def test_breadcrumbs_follow_heading_levels(levels, expected):
    sections = [Section(f"h{i}", level, "x") for i, level in enumerate(levels)]
    # the first case's top heading repeats the title: it is left out of every breadcrumb
    title = "h0" if levels[0] == 1 else "Doc"
    assert breadcrumbs(sections, title) == expected


def test_nested_breadcrumbs_on_pieces():
    body = "\n\n".join(prose(40, f"p{i}") for i in range(4))
    sections = [
        Section("", 0, "preamble " + body, None, 1, 9),
        Section("Guide", 1, body, "guide", 10, 19),
        Section("Install", 2, body, "install", 20, 29),
        Section("Linux", 3, body, "linux", 30, 39),
        Section("Usage", 2, body, "usage", 40, 49),
    ]
    pieces = chunk_sections(doc(*sections, title="Guide"))
    seen = {p.section: (p.breadcrumb, p.anchor) for p in pieces}
    assert seen == {
        "": ((), None),
        "Guide": ((), "guide"),
        "Install": (("Install",), "install"),
        "Linux": (("Install", "Linux"), "linux"),
        "Usage": (("Usage",), "usage"),
    }
    for piece in pieces:
        owner = next(s for s in sections if s.heading == piece.section)
        assert owner.start_line <= piece.start_line <= piece.end_line <= owner.end_line


def test_tiny_sections_merge_with_following_siblings_and_children():
    sections = [
        Section("Page", 1, "Intro " + prose(100), "page", 1, 5),  # 405 chars: not tiny
        Section("Options", 2, "One line.", "options", 6, 7),
        Section("Colour", 3, "Sets the colour.", "colour", 8, 9),
        Section("Size", 2, "Sets the size.", "size", 10, 11),
        Section("Big", 2, prose(150), "big", 12, 20),
    ]
    pieces = chunk_sections(doc(*sections, title="Page"))
    merged = [p for p in pieces if p.section == "Options"]
    assert len(merged) == 1
    piece = merged[0]
    assert piece.breadcrumb == ("Options",) and piece.anchor == "options"
    merged_text = "One line.\n\n### Colour\n\nSets the colour.\n\n## Size\n\nSets the size.\n\n## Big\n\n"
    assert piece.content == merged_text + prose(150)
    assert (piece.start_line, piece.end_line) == (7, 20)
    assert [p.section for p in pieces] == ["Page", "Options"]
    assert piece.merged_anchors == (("Colour", "colour"), ("Size", "size"), ("Big", "big"))
    assert pieces[0].merged_anchors == ()


def test_tiny_section_does_not_merge_across_parents_or_past_max():
    sections = [
        Section("A", 2, "short a", None, 1, 2),
        Section("A1", 3, "short a1", None, 3, 4),
        Section("B", 1, "short b", None, 5, 6),  # a new top section: not A's sibling
        Section("C", 1, "short c", None, 7, 8),
        Section("D", 1, prose(300), None, 9, 20),  # too big to join C under max_chars
    ]
    pieces = chunk_sections(doc(*sections), max_chars=1000, target_chars=900)
    assert [p.section for p in pieces] == ["A", "B", "D", "D"]
    assert pieces[0].content == "short a\n\n### A1\n\nshort a1"
    assert pieces[1].content == "short b\n\n# C\n\nshort c"


def test_heading_only_sections_give_their_heading_to_the_next_piece():
    sections = [
        Section("Guide", 1, "", "guide", 1, 1),
        Section("Part", 2, "", "part", 3, 3),
        Section("Step", 3, prose(50), "step", 5, 9),
        Section("Trailing", 2, "", "trailing", 11, 11),
    ]
    pieces = chunk_sections(doc(*sections, title="Guide"))
    assert len(pieces) == 1
    assert pieces[0].content.startswith("# Guide\n\n## Part\n\n### Step\n\n" + prose(50)[:20])
    assert (pieces[0].section, pieces[0].breadcrumb, pieces[0].anchor) == ("Step", ("Part", "Step"), "step")
    assert (pieces[0].start_line, pieces[0].end_line) == (1, 9)
    assert "Trailing" not in pieces[0].content  # a heading-only section at the end has nothing to give


def test_heading_only_section_is_not_left_at_the_end_of_a_merged_piece():
    sections = [
        Section("A", 2, "short a", "a", 1, 2),
        Section("B", 2, "", "b", 3, 3),
        Section("C", 3, prose(400), "c", 4, 30),  # too big to merge into A
    ]
    pieces = chunk_sections(doc(*sections))
    assert pieces[0].content == "short a"
    assert pieces[1].content.startswith("## B\n\n### C\n\nw0 w1")
    assert (pieces[1].section, pieces[1].breadcrumb) == ("C", ("B", "C"))


def test_a_document_of_headings_only_still_gives_a_piece():
    pieces = chunk_sections(doc(Section("Alone", 1, "", "a", 4, 4), Section("Too", 2, "", "t", 6, 6)))
    got = [(p.content, p.section, p.start_line, p.end_line) for p in pieces]
    assert got == [("# Alone\n\n## Too", "Alone", 4, 6)]


def test_deterministic_and_pure():
    path = CORPORA / "chimerax/user/commands/color.html"
    extracted = extract_file(path, path.read_bytes())
    snapshot = repr(extracted)
    first = chunk_sections(extracted)
    assert first == chunk_sections(extracted)
    assert repr(extracted) == snapshot  # the input is not changed
    assert first != chunk_sections(extracted, target_chars=500, max_chars=800)


@pytest.mark.parametrize(
    "sizes",
    [
        {"min_chars": 0},
        {"target_chars": 2000},  # above max_chars
        {"min_chars": 1200},  # above target_chars
        {"overlap_chars": 1000},
    ],
)
def test_bad_sizes_are_refused(sizes):
    with pytest.raises(ValueError):
        chunk_sections(doc(Section("A", 1, "text")), **{**SIZES, **sizes})


def test_color_page_pieces():
    path = CORPORA / "chimerax/user/commands/color.html"
    pieces = chunk_sections(extract_file(path, path.read_bytes()))
    simple = [p for p in pieces if p.section == "Simple Coloring"]
    assert simple[0].anchor == "simple" and simple[0].breadcrumb == ("Simple Coloring",)
    assert simple[0].content.startswith("Usage: color spec colorname")
    assert pieces[0].breadcrumb == ()  # the page's own <h3> repeats its title
    check_sizes(pieces)


def test_chimerax_corpus_chunk_sizes_are_sensible():
    sizes: list[int] = []
    for path in sorted((CORPORA / "chimerax").rglob("*")):
        if not path.is_file():
            continue
        try:
            extracted = extract_file(path, path.read_bytes())
        except ExtractError:
            continue
        pieces = chunk_sections(extracted)
        assert pieces, path
        check_sizes(pieces)
        for piece in pieces:
            fenced_blocks(piece.content)
            assert piece.content.strip()
            assert 1 <= piece.start_line <= piece.end_line
        sizes.extend(len(p.content) for p in pieces)
    median = statistics.median(sizes)
    deciles = [round(q) for q in statistics.quantiles(sizes, n=10)]
    print(f"{len(sizes)} pieces, median {median}, deciles {deciles}, max {max(sizes)}")
    assert 400 <= median <= 1500
    assert sum(size < 100 for size in sizes) < 0.02 * len(sizes)
    assert sum(size > 1500 for size in sizes) < 0.01 * len(sizes)
