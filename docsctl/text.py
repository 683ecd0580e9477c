"""Pure text helpers shared by the backends: how prose and code are cut into search terms.

`code_terms` is the Python twin of the `code_index` analyzer in mappings/chunks.json: the same
`code_tokens` split, then every token emitted whole and by its parts (word_delimiter_graph with
`preserve_original`), lowercased. The SQLite backend indexes `code_text` (the identifiers only) and
highlights with `code_query_terms`; OpenSearch may use them query-side (e.g. to explain a match).
`identifier_terms` is the part of a query that goes to the code-aware index (its identifiers, whole and by
parts); `prose_terms` is what a user's words become for the prose fields: words, lowercased, English stop
words dropped (the stemming is left to the backend).
"""

from __future__ import annotations

import re

# The `code_tokens` tokenizer pattern of mappings/chunks.json, and what it leaves between matches.
_SEPARATORS = r"\s,;:()\[\]{}<>\"'`=|*+!?"
CODE_SEPARATOR = re.compile(f"[{_SEPARATORS}]")
_CODE_SPLIT = re.compile(f"[{_SEPARATORS}]+")
CODE_TOKEN = re.compile(f"[^{_SEPARATORS}]+")
_PART_SPLIT = re.compile(r"[\W_]+")
WORD = re.compile(r"[^\W_]+")
# A Markdown code fence's opening line. Chunks keep Markdown fences and heading lines (indexer/chunking.py),
# and the server reads chunks by them (server/sections.py): one rule for both.
FENCE = re.compile(r"^\s*(`{3,}|~{3,})")
_POSSESSIVE = re.compile(r"['’]s\b", re.IGNORECASE)

# Lucene's `_english_` stop words, which the `prose` analyzer removes.
STOP_WORDS = frozenset(
    {
        "a", "an", "and", "are", "as", "at", "be", "but", "by", "for", "if", "in", "into", "is", "it", "no", "not",
        "of", "on", "or", "such", "that", "the", "their", "then", "there", "these", "they", "this", "to", "was",
        "will", "with",
    }
)  # fmt: skip

MAX_TERM_LENGTH = 64  # longer "words" are hashes or base64: their parts still count
MAX_QUERY_TERMS = 64  # a pasted page becomes a bounded query


def closes_fence(line: str, fence: str) -> bool:
    """Whether `line` closes the code block that `fence` (the FENCE match of its opening line) opened."""
    stripped = line.strip()
    return bool(stripped) and set(stripped) == {fence[0]} and len(stripped) >= len(fence)


def case_parts(word: str) -> list[str]:
    """Split one run of letters and digits on case changes: `getHTTPResponse2` -> get, HTTP, Response2.

    Like word_delimiter_graph with split_on_numerics=false: digits stay with the letters before them.
    """
    parts: list[str] = []
    start = 0
    for i in range(1, len(word)):
        prev, cur = word[i - 1], word[i]
        nxt = word[i + 1] if i + 1 < len(word) else ""
        lower_to_upper = (prev.islower() or prev.isdigit()) and cur.isupper()
        acronym_end = prev.isupper() and cur.isupper() and nxt.islower()
        if lower_to_upper or acronym_end:
            parts.append(word[start:i])
            start = i
    parts.append(word[start:])
    return parts


def trim_token(token: str) -> str:
    """Drop edge punctuation (`onload.`, `/path/`) but keep `--flag` dashes and `__dunder__` underscores."""
    end = len(token)
    while end and not (token[end - 1].isalnum() or token[end - 1] == "_"):
        end -= 1
    start = 0
    while start < end and not (token[start].isalnum() or token[start] in "-_"):
        start += 1
    return token[start:end]


def code_token_terms(token: str) -> list[str]:
    """One code token, whole and by its parts, lowercased, without repeats.

    >>> code_token_terms("pn.state.onload")
    ['pn.state.onload', 'pn', 'state', 'onload']
    """
    if token.isalnum() and token[1:] == token[1:].lower():  # a plain word, the common case: one term
        return [token.lower()] if len(token) <= MAX_TERM_LENGTH else []
    token = trim_token(token)
    if not any(char.isalnum() for char in token):
        return []
    terms: list[str] = []
    if len(token) <= MAX_TERM_LENGTH:
        terms.append(token.lower())
    for piece in _PART_SPLIT.split(token):
        for part in case_parts(piece) if piece else ():
            part = part.lower()
            if part and len(part) <= MAX_TERM_LENGTH and part not in terms:
                terms.append(part)
    return terms


def code_terms(text: str) -> list[str]:
    """Every code token of `text`, each followed by its parts, in text order (repeats kept).

    `SelectEditor` -> selecteditor select editor; `add_filter` -> add_filter add filter;
    `pn.state.onload` -> pn.state.onload pn state onload; `--transparency` -> --transparency transparency.
    """
    terms: list[str] = []
    for token in _CODE_SPLIT.split(text):
        if token:
            terms.extend(code_token_terms(token))
    return terms


def code_text(text: str) -> str:
    """The identifier-like tokens of `text` (those with parts: `add_filter`, `SelectEditor`, `--flag`),
    each whole and by its parts, as one string for a full-text column. Plain words are left to the prose
    columns, which keeps the code column small and its matches meaningful."""
    terms: list[str] = []
    for token in _CODE_SPLIT.split(text):
        token_terms = code_token_terms(token) if token else []
        if len(token_terms) > 1:
            terms.extend(token_terms)
    return " ".join(terms)


def _unique(terms: list[str], limit: int) -> list[str]:
    return list(dict.fromkeys(terms))[:limit]


def code_query_terms(text: str, limit: int = MAX_QUERY_TERMS) -> list[str]:
    """The distinct code terms of a user's query, stop words dropped, at most `limit`."""
    return _unique([term for term in code_terms(text) if term not in STOP_WORDS], limit)


def identifier_tokens(text: str, limit: int = MAX_QUERY_TERMS) -> list[str]:
    """The tokens of `text` that have parts (`add_filter`, `pn.state.onload`, `SelectEditor`, `--flag`), as
    written: what a query asks of the code-aware fields. Plain words are left to the prose fields."""
    tokens = (trim_token(token) for token in _CODE_SPLIT.split(text) if len(code_token_terms(token)) > 1)
    return _unique([token for token in tokens if token], limit)


def identifier_terms(text: str, limit: int = MAX_QUERY_TERMS) -> list[str]:
    """The code terms of `text`'s identifiers (identifier_tokens), each whole and by its parts, distinct."""
    return _unique([term for token in identifier_tokens(text) for term in code_token_terms(token)], limit)


def prose_terms(text: str, limit: int = MAX_QUERY_TERMS) -> list[str]:
    """The distinct words of a user's query, lowercased, stop words and possessive 's dropped."""
    words = (word.lower() for word in WORD.findall(_POSSESSIVE.sub("", text)))
    return _unique([word for word in words if word not in STOP_WORDS and len(word) <= MAX_TERM_LENGTH], limit)
