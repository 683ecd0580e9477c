"""FTS5's own BM25, computed over its postings in numpy: the same scores as `bm25(table, weights...)`, without
FTS5 visiting every row that matches any word of a long question.

FTS5 ranks an OR query by scoring each matching row in turn: a ten-word question whose common words match
most chunks costs thousands of row visits (and as many GIL hand-overs) before the first result. Here each
query term's postings (rows and weighted frequencies, read once through an `fts5vocab` table and kept per
index generation) are added into one array of scores, term by term, then the top k are picked with
argpartition. The arithmetic is FTS5's (`fts5Bm25Function` in SQLite's ext/fts5/fts5_aux.c), in the same
order and in doubles, on the statistics FTS5 itself keeps (the averages record, `%_docsize`):

    idf(term) = max(log((N - n + 0.5) / (n + 0.5)), 1e-6)          N rows, n rows holding the term
    score(row) = sum over the query's terms, in order, of
                 idf * (f * (k1 + 1)) / (f + k1 * (1 - b + b * D / avgdl))
    f: the term's occurrences in the row, weighted per column; D: the row's tokens; k1 = 1.2, b = 0.75

so a ranking here is FTS5's ranking, score for score (tests/test_sqlite_store.py compares them). A term the
tokenizer splits in two (a phrase for FTS5) is not handled here: the caller falls back to FTS5.
"""

from __future__ import annotations

import math
import sqlite3
import threading
from collections.abc import Sequence

import numpy as np

K1, B = 1.2, 0.75  # FTS5's bm25() constants
MIN_IDF = 1e-6
AVERAGES_ROWID = 1  # FTS5_AVERAGES_ROWID: the %_data record holding the row count and per-column token totals
MAX_CACHED_POSTINGS = 4_000_000  # (row, frequency) pairs kept per table, 64 MB at most; then the cache restarts
MAX_CACHED_TOKENS = 50_000


def _varints(blob: bytes) -> list[int]:
    """SQLite varints (7 bits a byte, high bit set on all but the last; values here never need 9 bytes)."""
    values, value = [], 0
    for byte in blob:
        value = (value << 7) | (byte & 0x7F)
        if not byte & 0x80:
            values.append(value)
            value = 0
    return values


class QueryTokenizer:
    """What an FTS5 tokenizer makes of query terms: a private in-memory FTS5 table with the index's tokenizer,
    read back through fts5vocab (Python's sqlite3 cannot call a tokenizer directly). Results are cached."""

    def __init__(self, tokenize: str) -> None:
        self._conn = sqlite3.connect(":memory:", check_same_thread=False, isolation_level=None)
        self._conn.execute(f"CREATE VIRTUAL TABLE t USING fts5(x, tokenize = {tokenize})")
        self._conn.execute("CREATE VIRTUAL TABLE v USING fts5vocab(t, 'instance')")
        self._lock = threading.Lock()
        self._known: dict[str, tuple[str, ...]] = {}

    def tokens(self, terms: Sequence[str]) -> list[tuple[str, ...]]:
        """Each term's tokens, in order (one token for a plain word; none or several for odd input)."""
        missing = [term for term in dict.fromkeys(terms) if term not in self._known]
        if missing:
            with self._lock:
                if len(self._known) > MAX_CACHED_TOKENS:
                    self._known.clear()
                self._conn.executemany("INSERT INTO t (rowid, x) VALUES (?, ?)", enumerate(missing, start=1))
                found: dict[int, list[str]] = {}
                for doc, term in self._conn.execute('SELECT doc, term FROM v ORDER BY doc, "offset"'):
                    found.setdefault(doc, []).append(term)
                self._conn.execute("DELETE FROM t")
                for number, term in enumerate(missing, start=1):
                    self._known[term] = tuple(found.get(number, ()))
        return [self._known[term] for term in terms]


class Postings:
    """One FTS5 table's BM25 statistics for one snapshot of the index, and its terms' postings on demand.

    `vocab` names an `fts5vocab(main, <table>, 'instance')` table on the connections that read it;
    `weights` are the column weights bm25() is given, in column order.
    """

    def __init__(
        self, conn: sqlite3.Connection, table: str, vocab: str, columns: Sequence[str], weights: Sequence[float]
    ):
        self.vocab = vocab
        weighted = " ".join(
            f"WHEN '{column}' THEN {float(weight)!r}" for column, weight in zip(columns, weights, strict=True)
        )
        self._frequency_sql = f"SELECT doc, total(CASE col {weighted} END) FROM {vocab} WHERE term = ? GROUP BY doc"
        averages = conn.execute(f"SELECT block FROM {table}_data WHERE id = ?", (AVERAGES_ROWID,)).fetchone()
        totals = _varints(averages[0]) if averages else [0]
        self.rows = totals[0]
        self.avgdl = sum(totals[1:]) / self.rows if self.rows else 0.0
        sizes = conn.execute(f"SELECT id, sz FROM {table}_docsize").fetchall()
        self.size = max((rowid for rowid, _ in sizes), default=0) + 1
        lengths = np.zeros(self.size, dtype=np.float64)
        for rowid, blob in sizes:
            lengths[rowid] = sum(_varints(blob))
        # k1 * (1 - b + b * D / avgdl), per row, evaluated in FTS5's order: ((1 - b) + ((b * D) / avgdl)).
        self.norm = K1 * (1 - B + B * lengths / self.avgdl) if self.rows else lengths
        self._cache: dict[str, tuple[np.ndarray, np.ndarray]] = {}
        self._cached = 0
        self._lock = threading.Lock()

    def postings(self, conn: sqlite3.Connection, token: str) -> tuple[np.ndarray, np.ndarray]:
        """The rows holding `token` (ascending) and its weighted frequency in each."""
        found = self._cache.get(token)
        if found is None:
            pairs = conn.execute(self._frequency_sql, (token,)).fetchall()
            rows = np.fromiter((row for row, _ in pairs), dtype=np.int64, count=len(pairs))
            frequencies = np.fromiter((f for _, f in pairs), dtype=np.float64, count=len(pairs))
            found = rows, frequencies
            with self._lock:
                if self._cached + len(rows) > MAX_CACHED_POSTINGS:
                    self._cache.clear()
                    self._cached = 0
                self._cache[token] = found
                self._cached += len(rows)
        return found

    def score(self, conn: sqlite3.Connection, tokens: Sequence[str], scores: np.ndarray, matched: np.ndarray) -> None:
        """Add bm25() of the OR of `tokens` (one phrase each, repeats counted as FTS5 counts them) into
        `scores`, and mark the matching rows in `matched`; both arrays are indexed by rowid."""
        for token in tokens:
            rows, frequencies = self.postings(conn, token)
            if not len(rows):
                continue
            idf = math.log((self.rows - len(rows) + 0.5) / (len(rows) + 0.5))
            idf = idf if idf > 0.0 else MIN_IDF
            scores[rows] += idf * ((frequencies * (K1 + 1.0)) / (frequencies + self.norm[rows]))
            matched[rows] = True


def top_rows(scores: np.ndarray, candidates: np.ndarray, k: int) -> list[tuple[int, float]]:
    """The k best of `candidates` (ascending rowids) by score, best first, ties by rowid (as sorting
    (-score, rowid) would)."""
    if not len(candidates) or k <= 0:
        return []
    values = scores[candidates]
    if len(candidates) > k:
        kth = np.partition(values, len(values) - k)[len(values) - k]
        keep = values >= kth
        candidates, values = candidates[keep], values[keep]
    order = np.argsort(-values, kind="stable")[:k]
    return [(int(candidates[i]), float(values[i])) for i in order]
