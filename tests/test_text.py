"""docsctl.text: how prose and code become search terms (pure functions, table-driven)."""

from __future__ import annotations

import pytest

from docsctl.text import (
    case_parts,
    code_query_terms,
    code_terms,
    code_text,
    identifier_terms,
    identifier_tokens,
    prose_terms,
    trim_token,
)


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("SelectEditor", "selecteditor select editor"),
        ("add_filter", "add_filter add filter"),
        ("pn.state.onload", "pn.state.onload pn state onload"),
        ("--transparency", "--transparency transparency"),
        ("pn.state.onload(callback)", "pn.state.onload pn state onload callback"),
        ("getHTTPResponse2", "gethttpresponse2 get http response2"),
        ("HTTPServer", "httpserver http server"),
        ("__init__", "__init__ init"),
        ("user/commands/color.html", "user/commands/color.html user commands color html"),
        ("color protein by chain", "color protein by chain"),
        ("ends a sentence.", "ends a sentence"),
        ("/path/", "path"),
        ("a:b", "a b"),
        ("[x", "x"),
        ("key=value, other;", "key value other"),
        ("café Über", "café über"),
        ("* ^ -- ...", ""),
        ("", ""),
    ],
)
def test_code_terms(text, expected):
    assert " ".join(code_terms(text)) == expected


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("call table.add_filter(widget) now", "table.add_filter table add filter"),
        ("A SelectEditor offers a dropdown.", "selecteditor select editor"),
        ("With --transparency the background", "--transparency transparency"),
        ("plain words only, utf8 and Color.", ""),
    ],
)
def test_code_text_keeps_identifiers_only(text, expected):
    assert code_text(text) == expected


def test_code_terms_keep_repeats_for_term_frequency():
    assert code_terms("color color") == ["color", "color"]


def test_long_tokens_keep_only_their_parts():
    assert code_terms("x" * 70 + "_tail") == ["tail"]


@pytest.mark.parametrize(
    ("word", "parts"),
    [
        ("SelectEditor", ["Select", "Editor"]),
        ("selectEditor", ["select", "Editor"]),
        ("HTTPServer", ["HTTP", "Server"]),
        ("utf8", ["utf8"]),
        ("Vec3D", ["Vec3", "D"]),
        ("lower", ["lower"]),
        ("ÜberMaß", ["Über", "Maß"]),
    ],
)
def test_case_parts(word, parts):
    assert case_parts(word) == parts


@pytest.mark.parametrize(
    ("token", "trimmed"),
    [("--flag", "--flag"), ("onload.", "onload"), ("/path/", "path"), ("__init__", "__init__"), ("...", "")],
)
def test_trim_token(token, trimmed):
    assert trim_token(token) == trimmed


@pytest.mark.parametrize(
    ("query", "prose", "code"),
    [
        ("color protein by chain", ["color", "protein", "chain"], ["color", "protein", "chain"]),
        ("the user's colors", ["user", "colors"], ["user", "s", "colors"]),
        ("SelectEditor", ["selecteditor"], ["selecteditor", "select", "editor"]),
        ("AND OR NOT", [], []),
        ('"quoted" (unbalanced', ["quoted", "unbalanced"], ["quoted", "unbalanced"]),
        ("NEAR(a b)", ["near", "b"], ["near", "b"]),
        ("*", [], []),
        ("color color Color", ["color"], ["color"]),
    ],
)
def test_query_terms(query, prose, code):
    assert prose_terms(query) == prose
    assert code_query_terms(query) == code


def test_query_terms_are_bounded():
    text = " ".join(f"word{i}" for i in range(5000))
    assert len(prose_terms(text)) == 64
    assert len(code_query_terms(text)) == 64


@pytest.mark.parametrize(
    ("query", "tokens", "terms"),
    [
        ("how do I color the protein by chain?", [], []),
        ("Tabulator", [], []),  # a capitalized word is a word
        (
            "add_filter RangeSlider",
            ["add_filter", "RangeSlider"],
            ["add_filter", "add", "filter", "rangeslider", "range", "slider"],
        ),
        ("what does hv.dim do?", ["hv.dim"], ["hv.dim", "hv", "dim"]),
        ("set --transparency 50", ["--transparency"], ["--transparency", "transparency"]),
        ("pn.bind pn.bind", ["pn.bind"], ["pn.bind", "pn", "bind"]),
    ],
)
def test_identifiers_of_a_query(query, tokens, terms):
    """What a query asks of the code-aware index: only its tokens with parts, whole and by their parts."""
    assert identifier_tokens(query) == tokens
    assert identifier_terms(query) == terms
