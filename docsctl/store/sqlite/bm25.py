"""BM25 over the FTS5 tables: from their postings (postings.py), or ranked by FTS5 itself (_Bm25Query)."""

from __future__ import annotations

import heapq
import json
import sqlite3
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass
from functools import cache

import numpy as np

from docsctl.models import Chunk, Filters
from docsctl.store.sqlite.filters import _codes, _filter_mask
from docsctl.store.sqlite.postings import Postings, QueryTokenizer, top_rows
from docsctl.store.sqlite.schema import CODE_TOKENIZE, PROSE_TOKENIZE

# BM25 takes each table's best TOP_PER_TABLE x k rows (at least MIN_TOP_PER_TABLE) first (_Bm25Query):
# on the dev queries at k 10 and 50 that always proved the top k, so every match was never scored.
TOP_PER_TABLE = 4
MIN_TOP_PER_TABLE = 100

# Column weights, in table column order. FTS5's bm25() sums a term's weighted frequency over the columns and
# normalizes by the row's whole length: with equal weights, the chunk's title, breadcrumb, section and content
# are scored as one text, as opensearch_queries.text_query's combined_fields does. The path is not searched.
PROSE_WEIGHTS = (1.0, 1.0, 1.0, 1.0)  # title, breadcrumb, section, content
CODE_WEIGHTS = (1.0, 1.0, 1.0, 1.0, 0.0)  # title, breadcrumb, section, content, path
NAME_BOOST = 4.0
# What explain_bm25 calls the columns of fts and fts_code: the OpenSearch fields they stand for.
PROSE_FIELDS = ("title", "breadcrumb", "section", "content")
CODE_FIELDS = ("title.code", "breadcrumb.code", "section.code", "content.code", "path.text")

# Per FTS5 table: its fts5vocab table on every read connection, its columns.
_VOCABS = {"fts": "temp.fts_terms", "fts_code": "temp.fts_code_terms"}
_TABLE_COLUMNS = {
    "fts": ("title", "breadcrumb", "section", "content"),
    "fts_code": ("title", "breadcrumb", "section", "content", "path"),
}


def _fts_query(terms: Sequence[str]) -> str:
    """Every term as an FTS5 string, ORed: user text never reaches the query parser as syntax. A NUL would
    end the query string early for FTS5's parser (an "unterminated string"), so it becomes a space."""
    return " OR ".join('"' + term.replace('"', '""').replace("\0", " ") + '"' for term in terms)


@dataclass
class _PostingsCache:
    """BM25 from the FTS5 tables' postings (docsctl.store.sqlite.postings) for one index generation: each
    table's statistics and cached postings, and every chunk's filter fields as codes and its ids, by rowid."""

    key: tuple[str, str]
    tables: dict[str, Postings]
    size: int  # one more than the largest rowid
    chunks: int  # how many chunks the index holds
    codes: dict[str, np.ndarray]
    values: dict[str, dict[str, int]]
    # What Chunk.brief needs, by rowid: brief hits come from here, not from a query for 100 rows (half of
    # BM25's time at 6,640 chunks).
    chunk_ids: list[str]
    doc_ids: list[str]

    @classmethod
    def load(cls, conn: sqlite3.Connection, key: tuple[str, str]) -> _PostingsCache:
        weights = {"fts": PROSE_WEIGHTS, "fts_code": CODE_WEIGHTS}
        tables = {
            table: Postings(conn, table, _VOCABS[table], _TABLE_COLUMNS[table], weights[table]) for table in _VOCABS
        }
        rows = conn.execute("SELECT id, category, source, version, chunk_id, doc_id FROM chunks").fetchall()
        size = max([max((row[0] for row in rows), default=0) + 1, *(postings.size for postings in tables.values())])
        ids = np.fromiter((row[0] for row in rows), dtype=np.int64, count=len(rows))
        codes: dict[str, np.ndarray] = {}
        values: dict[str, dict[str, int]] = {}
        for position, field in enumerate(("category", "source", "version"), start=1):
            codes[field] = np.full(size, -1, dtype=np.int32)  # rowids no chunk has match no filter
            codes[field][ids], values[field] = _codes((row[position] for row in rows), len(rows))
        chunk_ids, doc_ids = [""] * size, [""] * size
        for row in rows:
            chunk_ids[row[0]], doc_ids[row[0]] = row[4], row[5]
        return cls(key, tables, size, len(rows), codes, values, chunk_ids, doc_ids)

    def brief(self, rowid: int) -> Chunk:
        """The Chunk.brief stand-in of one chunk."""
        return Chunk.brief(self.chunk_ids[rowid], self.doc_ids[rowid])


class _Bm25Query:
    """BM25 over the FTS5 tables: the sum of each table's bm25() for the rows matching any of its terms,
    plus the name bonus for the chunks documenting the query as a name.

    `top` does not bring every match into Python: each table sorts its matches in SQLite and gives its
    best `TOP_PER_TABLE x k`; the rows found there get their exact scores from the other table, and the
    sum of each full list's last score bounds what any row found in neither can have (the threshold
    algorithm of top-k aggregation). When the k-th best is above that bound, it is the exact top k; when
    not, every match is scored. A question's common words match most chunks, and SQLite lets go of the
    GIL at every row it returns: thousands of rows stalled the thread embedding the query beside it.
    """

    def __init__(
        self,
        conn: sqlite3.Connection,
        searches: Sequence[tuple[str, Sequence[float], list[str]]],
        name: str,
        bonus: float,
        allowed: tuple[str, list[str]] | None,
    ) -> None:
        self.conn, self.searches, self.name, self.bonus = conn, searches, name, bonus
        self.allowed, self.allowed_params = allowed or ("", [])

    def _score_sql(self, table: str, weights: Sequence[float]) -> str:
        return f"SELECT rowid, -bm25({table}, {', '.join(map(str, weights))}) FROM {table} WHERE {table} MATCH ?"

    def top(self, k: int, *, every_match: bool = False) -> list[tuple[int, float]]:
        """The k best (rowid, score), best first, ties by rowid; `every_match` scores all (for tests)."""
        scores = None if every_match else self._bounded(k)
        if scores is None:
            scores = self.scores()
        return heapq.nsmallest(k, scores.items(), key=lambda item: (-item[1], item[0]))

    def _bounded(self, k: int) -> dict[int, float] | None:
        """The scores of the rows that can be in the top k, or None when the lists cannot prove it."""
        depth = max(TOP_PER_TABLE * k, MIN_TOP_PER_TABLE)
        lists = [
            self.conn.execute(
                f"{self._score_sql(table, weights)}{self.allowed} ORDER BY 2 DESC LIMIT ?",
                [_fts_query(terms), *self.allowed_params, depth],
            ).fetchall()
            for table, weights, terms in self.searches
        ]
        named = self._named()
        seen = {rowid for rows in lists for rowid, _ in rows} | set(named)
        scores = dict.fromkeys(seen, 0.0)
        for (table, weights, terms), rows in zip(self.searches, lists, strict=True):
            for rowid, score in rows:
                scores[rowid] += score
            listed = {rowid for rowid, _ in rows}
            missing = [rowid for rowid in seen if rowid not in listed]
            if len(rows) == depth and missing:  # a full list: the others may match this table lower down
                sql = f"{self._score_sql(table, weights)} AND +rowid IN (SELECT value FROM json_each(?))"
                for rowid, score in self.conn.execute(sql, [_fts_query(terms), json.dumps(missing)]):
                    scores[rowid] += score
        for rowid in named:
            scores[rowid] += self.bonus
        full = [rows for rows in lists if len(rows) == depth]
        if not full:
            return scores  # every match is in the lists
        unseen = sum(rows[-1][1] for rows in full)  # the most a row found in no list can score
        kth = heapq.nlargest(k, scores.values())
        return scores if len(kth) == k and kth[-1] > unseen else None

    def _named(self, *, filtered: bool = True) -> list[int]:
        """The chunks documenting the query as a name; `filtered`: only those the filters allow."""
        if not self.bonus:
            return []
        allowed, params = (self.allowed, self.allowed_params) if filtered else ("", [])
        sql = f"SELECT DISTINCT chunk FROM chunk_names WHERE name = ?{allowed.replace('+rowid', 'chunk')}"
        return [rowid for (rowid,) in self.conn.execute(sql, [self.name, *params])]

    def scores(self) -> dict[int, float]:
        """Every matching row's score."""
        # Each table scores its matches; summing in Python is several times faster than a GROUP BY
        # over a UNION ALL in SQLite (measured: 5 + 6 ms of matching became 32 ms grouped).
        scores: dict[int, float] = defaultdict(float)
        for table, weights, terms in self.searches:
            sql = f"{self._score_sql(table, weights)}{self.allowed}"
            for rowid, score in self.conn.execute(sql, [_fts_query(terms), *self.allowed_params]):
                scores[rowid] += score
        for rowid in self._named():
            scores[rowid] += self.bonus
        return scores


@cache
def _tokenizer(table: str) -> QueryTokenizer:
    """The query tokenizer of one FTS5 table, made on first use (importing the store opens nothing)."""
    return QueryTokenizer({"fts": PROSE_TOKENIZE, "fts_code": CODE_TOKENIZE}[table])


def _postings_top(
    conn: sqlite3.Connection, cache: _PostingsCache, query: _Bm25Query, filters: Filters | None, k: int
) -> list[tuple[int, float]] | None:
    """What query.top(k) returns, computed from the postings (postings.py): the same scores, summed in
    the same order (each table's, then the name bonus); None when a term is a phrase to FTS5."""
    tokenized = []
    for table, _, terms in query.searches:
        tokens = _tokenizer(table).tokens(terms)
        if any(len(token) != 1 for token in tokens):
            return None
        tokenized.append((table, [token[0] for token in tokens]))
    total = np.zeros(cache.size, dtype=np.float64)
    matched = np.zeros(cache.size, dtype=bool)
    for table, tokens in tokenized:
        scores = np.zeros(cache.size, dtype=np.float64)
        cache.tables[table].score(conn, tokens, scores, matched)
        total += scores
    mask = _filter_mask(filters, cache.codes, cache.values)
    # Filtered by the mask, not in SQL: the SQL filter lists every allowed chunk (half the index, say).
    named = np.asarray(query._named(filtered=False), dtype=np.int64)
    if len(named):
        total[named] += query.bonus
        matched[named] = True
    return top_rows(total, np.flatnonzero(matched if mask is None else matched & mask), k)
