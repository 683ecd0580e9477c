"""SqliteStore: the embedded backend, one SQLite file holding chunks, vectors and full-text indexes.

Schema (`PRAGMA application_id` = APPLICATION_ID, `PRAGMA user_version` = SCHEMA_VERSION):

    meta(key, value)            mapping_version, model, dimension, index_id, generation
    sources(source, state)      what record_source stored, as JSON
    chunks(id, chunk_id, ...)   every Chunk field; breadcrumb, names, merged_anchors as JSON. `id` is the rowid
                                shared by the three tables below.
    chunk_names(name, chunk)    lowercased names, for lookup
    vectors(chunk, vector)      normalized float32 little-endian blobs
    fts                         FTS5 over title, breadcrumb, section, content; `porter unicode61`
                                (stemmed prose, like the `prose` analyzer)
    fts_code                    FTS5 over docsctl.text.code_text() of title, breadcrumb, section, content
                                and path: the identifiers only, each whole and by its parts; unicode61
                                keeping `-_./` inside tokens, so `add_filter` and `pn.state.onload`
                                match whole as well as by their parts

bm25 ORs the quoted terms of the user's text (never FTS5 syntax) over both tables and adds the
weighted scores, with the column boosts of the OpenSearch multi_match (title 3, section 2,
breadcrumb 1.5, content 1, path 0.5) plus the same boost for an exact documented name. Filters
restrict the matches before ranking.

knn is an exact dot product over a matrix kept in memory and reloaded when the index changes
(a new index_id or generation in meta); filters are a mask applied before the top k. Measured on
8000 x 384 float32, k=10, 2 cores: numpy 0.18 ms (filtered 0.18 ms) vs sqlite-vec 0.1.9 vec0
2.8 ms (1.7 ms with a metadata filter), and sqlite-vec would need apsw or pysqlite3 besides: this
Python's sqlite3 cannot load extensions.

At 10,000 chunks of real docs (58 MB file, 2 busy cores): write 1.9 s, rebuild over a live index
2.1 s; bm25 k=10 1 ms (`SelectEditor`) to 6 ms (`color protein by chain`) and 12 ms (seven common
words matching 5,600 chunks: the cost is FTS5 scoring every match); knn 0.3 ms (first call loads
the matrix: 45 ms); highlight of 10 chunks 1.8 ms. bm25 now sorts each table's matches in SQLite and
reads only the best of them, with a bound that proves the top k exact (_Bm25Query).

Reads do not share a connection: each takes an idle one (or opens one), so that a search's BM25 runs
beside its k-NN.

A rebuild writes `<name>.building-<pid>` and, when the block exits cleanly, copies it over the
live file with SQLite's backup API in one write transaction. It does not os.replace() the file:
with WAL, a reader that keeps the old file open also keeps its `-wal` alive, and a connection that
opens the new file under the old name reads those frames as if they were its own (the old data
shadows the new, then gets checkpointed into it). Readers keep their snapshot until their read
ends, then see the new index; nothing else changes for them. Only a missing, empty or explicitly
replaced foreign file is swapped by rename.
"""

from __future__ import annotations

import glob
import heapq
import json
import math
import os
import re
import sqlite3
import threading
import uuid
from collections import defaultdict
from collections.abc import Collection, Iterable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import UTC, datetime
from functools import cache, lru_cache
from itertools import islice
from pathlib import Path
from typing import Any

import numpy as np
from threadpoolctl import ThreadpoolController

from docsctl.errors import IndexMissingError, LockedError, NotFoundError, StoreError
from docsctl.models import Chunk, Filters, Hit, IndexMeta, SourceInfo, Vector
from docsctl.process import pid_alive
from docsctl.store.base import SourceVersion, WriteReport
from docsctl.store.doc_vectors import group_centroids
from docsctl.store.sqlite_postings import Postings, QueryTokenizer, top_rows
from docsctl.text import (
    CODE_SEPARATOR,
    CODE_TOKEN,
    code_query_terms,
    code_text,
    code_token_terms,
    identifier_terms,
    prose_terms,
    trim_token,
)

APPLICATION_ID = 0x64637478  # "dctx"
SCHEMA_VERSION = 2
# Schema changes that only add a column, by the version they upgrade from: a file of that version is
# upgraded in place when opened, so it keeps answering (the next reindex rebuilds it, since its meta
# records the older version, and fills the new column).
UPGRADES = {1: "ALTER TABLE chunks ADD COLUMN merged_anchors TEXT NOT NULL DEFAULT '[]'"}
BATCH = 256
BUSY_TIMEOUT_MS = 5000
MAX_IDLE_READERS = 8
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
LOOKUP_MAX_DOCS = 5  # as opensearch_queries.lookup_body
HIGHLIGHT_CHARS = 160
HIGHLIGHT_FRAGMENTS = 2
_MARK_START, _MARK_END = "\x01", "\x02"
_SPACE = re.compile(r"\s+")
_IDENTIFIER = re.compile(r"[._\-/]|.[A-Z]")  # has parts: `a_b`, `a.b`, `--a`, `aB`
_SEGMENT = re.compile(r"[./]")  # separates the identifiers of a dotted name or a path
_SEGMENTS = re.compile(r"[^./]+")

# The tokenizers of fts and fts_code: the schema's, and what bm25 tokenizes query terms with (sqlite_postings).
PROSE_TOKENIZE = "'porter unicode61 remove_diacritics 2'"
CODE_TOKENIZE = "\"unicode61 remove_diacritics 2 tokenchars '-_./'\""
# Per FTS5 table: its fts5vocab table on every read connection, its columns.
_VOCABS = {"fts": "temp.fts_terms", "fts_code": "temp.fts_code_terms"}
_TABLE_COLUMNS = {
    "fts": ("title", "breadcrumb", "section", "content"),
    "fts_code": ("title", "breadcrumb", "section", "content", "path"),
}

_SCHEMA = f"""
CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE sources (source TEXT PRIMARY KEY, state TEXT NOT NULL);
CREATE TABLE chunks (
    id INTEGER PRIMARY KEY,
    chunk_id TEXT NOT NULL UNIQUE,
    doc_id TEXT NOT NULL,
    source TEXT NOT NULL,
    path TEXT NOT NULL,
    version TEXT NOT NULL,
    title TEXT NOT NULL,
    breadcrumb TEXT NOT NULL,
    section TEXT NOT NULL,
    category TEXT NOT NULL,
    doc_type TEXT NOT NULL,
    chunk_index INTEGER NOT NULL,
    content TEXT NOT NULL,
    content_hash TEXT NOT NULL,
    start_line INTEGER NOT NULL,
    end_line INTEGER NOT NULL,
    names TEXT NOT NULL,
    url TEXT,
    anchor TEXT,
    merged_anchors TEXT NOT NULL,
    indexed_at TEXT NOT NULL
);
CREATE INDEX chunks_doc ON chunks (doc_id, chunk_index);
CREATE INDEX chunks_path ON chunks (path, source, version);
CREATE INDEX chunks_source ON chunks (source, version, path);
CREATE INDEX chunks_filter ON chunks (category, source, version);
CREATE TABLE chunk_names (name TEXT NOT NULL, chunk INTEGER NOT NULL);
CREATE INDEX chunk_names_name ON chunk_names (name);
CREATE INDEX chunk_names_chunk ON chunk_names (chunk);
CREATE TABLE vectors (chunk INTEGER PRIMARY KEY, vector BLOB NOT NULL);
CREATE VIRTUAL TABLE fts USING fts5(title, breadcrumb, section, content, tokenize = {PROSE_TOKENIZE});
CREATE VIRTUAL TABLE fts_code USING fts5(title, breadcrumb, section, content, path, tokenize = {CODE_TOKENIZE});
PRAGMA application_id = {APPLICATION_ID};
PRAGMA user_version = {SCHEMA_VERSION};
"""

_CHUNK_FIELDS = [
    "chunk_id", "doc_id", "source", "path", "version", "title", "breadcrumb", "section", "category", "doc_type",
    "chunk_index", "content", "content_hash", "start_line", "end_line", "names", "url", "anchor", "merged_anchors",
    "indexed_at",
]  # fmt: skip
_COLUMNS = ", ".join(f"c.{name}" for name in _CHUNK_FIELDS)
_BUILDING = re.compile(r"\.building-(\d+)(-wal|-shm|-journal)?$")


def _now() -> str:
    return datetime.now(UTC).isoformat(timespec="seconds")


def _batched(items: Iterable[Any], size: int) -> Iterator[list[Any]]:
    iterator = iter(items)
    while batch := list(islice(iterator, size)):
        yield batch


def _marks(count: int) -> str:
    return ",".join("?" * count)


def _fts_query(terms: Sequence[str]) -> str:
    """Every term as an FTS5 string, ORed: user text never reaches the query parser as syntax."""
    return " OR ".join('"' + term.replace('"', '""') + '"' for term in terms)


def _replaced_sql(replaced: Collection[SourceVersion]) -> tuple[str, list[str]]:
    """A condition on `c` true for the chunks among `replaced` (StoreWriter.copy_sources), and its values."""
    clauses, params = ["0"], []
    for source, version in replaced:
        clauses.append("c.source = ?" if version is None else "(c.source = ? AND c.version = ?)")
        params.extend([source] if version is None else [source, version])
    return " OR ".join(clauses), params


def _select_in(conn: sqlite3.Connection, select: str, column: str, values: Sequence[Any]) -> list[tuple]:
    """`select WHERE column IN values`, in batches that stay under SQLite's parameter limit."""
    return [
        row
        for batch in _batched(values, 500)
        for row in conn.execute(f"{select} WHERE {column} IN ({_marks(len(batch))})", batch)
    ]


def _chunks_in(
    conn: sqlite3.Connection, column: str, values: Sequence[Any], *, brief: bool = False
) -> dict[int, Chunk]:
    """The chunks whose `column` (of `chunks c`) is one of `values`, by rowid; `brief`: Chunk.brief stand-ins
    (reading and decoding 50 whole chunks was a tenth of a search's time)."""
    if brief:
        found = _select_in(conn, "SELECT c.id, c.chunk_id, c.doc_id, c.names FROM chunks c", column, values)
        return {row[0]: Chunk.brief(row[1], row[2], json.loads(row[3])) for row in found}
    found = _select_in(conn, f"SELECT c.id, {_COLUMNS} FROM chunks c", column, values)
    return {row[0]: _chunk_from_row(row[1:]) for row in found}


def _chunk_from_row(row: Sequence[Any], embedding: bytes | None = None) -> Chunk:
    data = dict(zip(_CHUNK_FIELDS, row, strict=False))
    data["breadcrumb"] = json.loads(data["breadcrumb"])
    data["names"] = json.loads(data["names"])
    data["merged_anchors"] = json.loads(data["merged_anchors"])
    if embedding is not None:
        data["embedding"] = np.frombuffer(embedding, dtype="<f4").tolist()
    return Chunk(**data)


def _filter_sql(filters: Filters | None, alias: str = "c") -> tuple[str, list[str]]:
    """`AND ...` restricting chunks to the filters, with its parameters."""
    if filters is None:
        return "", []
    clauses, params = [], []
    for column, values in _filter_fields(filters):
        if values:
            clauses.append(f"{alias}.{column} IN ({_marks(len(values))})")
            params.extend(values)
    if filters.pinned_versions:
        pinned = [source for source, _ in filters.pinned_versions]
        pairs = " OR ".join(f"({alias}.source = ? AND {alias}.version = ?)" for _ in filters.pinned_versions)
        clauses.append(f"({alias}.source NOT IN ({_marks(len(pinned))}) OR {pairs})")
        params.extend(pinned)
        params.extend(value for pair in filters.pinned_versions for value in pair)
    return "".join(f" AND {clause}" for clause in clauses), params


def _filter_fields(filters: Filters) -> list[tuple[str, tuple[str, ...]]]:
    return [("category", filters.categories), ("source", filters.sources), ("version", filters.versions)]


@cache
def _blas() -> ThreadpoolController:
    return ThreadpoolController()


def _cosines(matrix: np.ndarray, query: np.ndarray) -> np.ndarray:
    """matrix @ query on one BLAS thread. OpenBLAS's helper threads spin for a while after each product, on
    the core that a search's BM25 thread and query embedding need: with one thread, in-process hybrid p95
    fell from 32-44 to 22-33 ms (bench/README.md, session 5); the product takes 0.1 ms more at 6,640 rows."""
    with _blas().limit(limits=1, user_api="blas"):
        return matrix @ query


def _top_rows(cosines: np.ndarray, mask: np.ndarray | None, k: int) -> list[tuple[int, float]]:
    """The k best rows allowed by `mask`, best first, each with its score reported like OpenSearch's
    cosinesimil space: (1 + cosine) / 2, in [0, 1]."""
    candidates = np.flatnonzero(mask) if mask is not None else np.arange(len(cosines))
    if not len(candidates):
        return []
    scores = cosines[candidates]
    top = min(k, len(candidates))
    best = np.argpartition(-scores, top - 1)[:top]
    best = best[np.argsort(-scores[best], kind="stable")]
    return [(int(candidates[i]), (1.0 + float(scores[i])) / 2.0) for i in best]


def _not_an_index(path: Path, reason: str) -> StoreError:
    return StoreError(
        f"{path} is not a docsctl index ({reason}); it was left untouched. Move it away, or replace it "
        "with a new index: docsctl reindex --full ..."
    )


def _sidecars(path: Path) -> list[Path]:
    return [path.with_name(path.name + suffix) for suffix in ("-wal", "-shm", "-journal")]


def _unlink(paths: Iterable[Path]) -> None:
    for path in paths:
        path.unlink(missing_ok=True)


def _pid_alive(pid: int) -> bool:
    # Our own pid means a leftover of this process: it has no writer open on it.
    return pid != os.getpid() and pid_alive(pid)


def _connect(path: Path, *, create: bool = False) -> sqlite3.Connection:
    """Autocommit connection (we BEGIN ourselves); without `create`, a missing file is an error."""
    target = str(path) if create else f"{path.absolute().as_uri()}?mode=rw"
    conn = sqlite3.connect(target, uri=not create, isolation_level=None, check_same_thread=False)
    conn.execute(f"PRAGMA busy_timeout = {BUSY_TIMEOUT_MS}")
    return conn


def _upgrade(conn: sqlite3.Connection) -> int:
    """The file's schema version after applying UPGRADES to it (unchanged when none applies, or when the file
    cannot be written: the caller then asks for a rebuild)."""
    version = conn.execute("PRAGMA user_version").fetchone()[0]
    if version not in UPGRADES:
        return version
    try:
        conn.execute("BEGIN IMMEDIATE")
        version = conn.execute("PRAGMA user_version").fetchone()[0]  # another process may have upgraded it
        while version in UPGRADES:
            conn.execute(UPGRADES[version])
            version += 1
        conn.execute(f"PRAGMA user_version = {version}")
        conn.execute("COMMIT")
    except sqlite3.OperationalError:
        if conn.in_transaction:
            conn.execute("ROLLBACK")
        return conn.execute("PRAGMA user_version").fetchone()[0]
    return version


def _probe(conn: sqlite3.Connection, path: Path) -> bool:
    """True for a docsctl index, False for an empty database; StoreError for anything else."""
    try:
        app_id = conn.execute("PRAGMA application_id").fetchone()[0]
        objects = conn.execute("SELECT count(*) FROM sqlite_schema").fetchone()[0]
    except sqlite3.DatabaseError as exc:
        raise _not_an_index(path, str(exc)) from None
    if app_id == 0 and objects == 0:
        return False
    if app_id != APPLICATION_ID:
        raise _not_an_index(path, "a SQLite database of another application")
    return True


def _read_meta(conn: sqlite3.Connection) -> dict[str, str]:
    return dict(conn.execute("SELECT key, value FROM meta").fetchall())


@dataclass
class _VectorCache:
    """Every vector of one index generation, with the filter fields as small integer codes, and the
    documents' centroids (docsctl.store.doc_vectors), computed on first use."""

    key: tuple[str, str]
    ids: np.ndarray  # chunk rowids, one per matrix row
    matrix: np.ndarray  # (n, dimension) float32, rows normalized
    codes: dict[str, np.ndarray]
    values: dict[str, dict[str, int]]
    doc_of_row: np.ndarray  # per matrix row: the position of its document in doc_ids
    doc_ids: list[str]
    _documents: tuple[np.ndarray, dict[str, np.ndarray]] | None = None

    @classmethod
    def load(cls, conn: sqlite3.Connection, key: tuple[str, str], dimension: int) -> _VectorCache:
        rows = conn.execute(
            "SELECT v.chunk, v.vector, c.category, c.source, c.version, c.doc_id "
            "FROM vectors v JOIN chunks c ON c.id = v.chunk ORDER BY v.chunk"
        ).fetchall()
        ids = np.fromiter((row[0] for row in rows), dtype=np.int64, count=len(rows))
        blob = b"".join(row[1] for row in rows)
        matrix = np.frombuffer(blob, dtype="<f4").reshape(len(rows), dimension).astype(np.float32)
        codes: dict[str, np.ndarray] = {}
        values: dict[str, dict[str, int]] = {}
        for position, field in enumerate(("category", "source", "version", "doc_id"), start=2):
            table: dict[str, int] = {}
            codes[field] = np.fromiter(
                (table.setdefault(row[position], len(table)) for row in rows), dtype=np.int32, count=len(rows)
            )
            values[field] = table
        doc_of_row, doc_ids = codes.pop("doc_id"), list(values.pop("doc_id"))
        return cls(key, ids, matrix, codes, values, doc_of_row, doc_ids)

    def documents(self) -> tuple[np.ndarray, dict[str, np.ndarray]]:
        """Centroid per document (rows in doc_ids order) and each document's filter codes."""
        if self._documents is None:
            centroids = group_centroids(self.doc_of_row, self.matrix, len(self.doc_ids))
            # The chunks of a document share its category, source and version: any one row tells them.
            some_row = np.zeros(len(self.doc_ids), dtype=np.int64)
            some_row[self.doc_of_row] = np.arange(len(self.doc_of_row))
            self._documents = centroids, {field: codes[some_row] for field, codes in self.codes.items()}
        return self._documents

    def mask(self, filters: Filters | None, codes: dict[str, np.ndarray] | None = None) -> np.ndarray | None:
        """Rows (chunks, or documents with their `codes`) that match the filters; None: all do."""
        return _filter_mask(filters, self.codes if codes is None else codes, self.values)


def _filter_mask(
    filters: Filters | None, codes: dict[str, np.ndarray], values: dict[str, dict[str, int]]
) -> np.ndarray | None:
    """Which rows match the filters, given each row's category, source and version as codes into `values`
    (a code no value has, e.g. -1, matches no wanted value); None: all rows do."""
    if filters is None or filters.is_empty():
        return None
    mask = np.ones(len(codes["source"]), dtype=bool)
    for field, wanted in _filter_fields(filters):
        if wanted:
            known = [values[field][value] for value in wanted if value in values[field]]
            mask &= np.isin(codes[field], known)
    if filters.pinned_versions:
        source_codes, version_codes = codes["source"], codes["version"]
        pinned = [values["source"][s] for s, _ in filters.pinned_versions if s in values["source"]]
        allowed = ~np.isin(source_codes, pinned)
        for source, version in filters.pinned_versions:
            if source in values["source"] and version in values["version"]:
                allowed |= (source_codes == values["source"][source]) & (version_codes == values["version"][version])
        mask &= allowed
    return mask


@dataclass
class _PostingsCache:
    """BM25 from the FTS5 tables' postings (docsctl.store.sqlite_postings) for one index generation: each
    table's statistics and cached postings, and every chunk's filter fields as codes, by rowid."""

    key: tuple[str, str]
    tables: dict[str, Postings]
    size: int  # one more than the largest rowid
    codes: dict[str, np.ndarray]
    values: dict[str, dict[str, int]]

    @classmethod
    def load(cls, conn: sqlite3.Connection, key: tuple[str, str]) -> _PostingsCache:
        weights = {"fts": PROSE_WEIGHTS, "fts_code": CODE_WEIGHTS}
        tables = {
            table: Postings(conn, table, _VOCABS[table], _TABLE_COLUMNS[table], weights[table]) for table in _VOCABS
        }
        rows = conn.execute("SELECT id, category, source, version FROM chunks").fetchall()
        size = max([max((row[0] for row in rows), default=0) + 1, *(postings.size for postings in tables.values())])
        ids = np.fromiter((row[0] for row in rows), dtype=np.int64, count=len(rows))
        codes: dict[str, np.ndarray] = {}
        values: dict[str, dict[str, int]] = {}
        for position, field in enumerate(("category", "source", "version"), start=1):
            table: dict[str, int] = {}
            codes[field] = np.full(size, -1, dtype=np.int32)
            codes[field][ids] = np.fromiter(
                (table.setdefault(row[position], len(table)) for row in rows), dtype=np.int32, count=len(rows)
            )
            values[field] = table
        return cls(key, tables, size, codes, values)


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

    def _named(self) -> list[int]:
        if not self.bonus:
            return []
        sql = f"SELECT DISTINCT chunk FROM chunk_names WHERE name = ?{self.allowed.replace('+rowid', 'chunk')}"
        return [rowid for (rowid,) in self.conn.execute(sql, [self.name, *self.allowed_params])]

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


_TOKENIZERS = {"fts": QueryTokenizer(PROSE_TOKENIZE), "fts_code": QueryTokenizer(CODE_TOKENIZE)}


class SqliteStore:
    """The Store protocol over one SQLite file; nothing is opened until the first call."""

    backend = "sqlite"
    every_bm25_match = False  # True: bm25 scores every match, not just the lists of _Bm25Query (tests)
    bm25_from_postings = True  # False: FTS5 ranks (_Bm25Query), as before sqlite_postings (tests, benchmarks)
    schema_version = SCHEMA_VERSION  # what the indexer records as IndexMeta.mapping_version

    def __init__(self, path: Path) -> None:
        self.path = Path(path)
        self._lock = threading.RLock()
        # Idle read connections with the file they opened: each concurrent read takes its own, so that a
        # search's BM25 and k-NN run side by side (SQLite releases the GIL while it steps).
        self._idle: list[tuple[sqlite3.Connection, tuple[int, int]]] = []
        self._epoch = 0  # close() makes connections of an earlier epoch close when returned
        self._vectors: _VectorCache | None = None
        self._postings: _PostingsCache | None = None

    def __repr__(self) -> str:
        return f"SqliteStore({str(self.path)!r})"

    # -- opening and errors ---------------------------------------------------------------------

    def _missing(self) -> IndexMissingError:
        return IndexMissingError(f"no index at {self.path} yet: run docsctl reindex PATH")

    @contextmanager
    def _errors(self) -> Iterator[None]:
        """sqlite3 errors become StoreError naming the file; corruption also names the fix."""
        try:
            yield
        except sqlite3.Error as exc:
            if getattr(exc, "sqlite_errorname", "") in {"SQLITE_NOTADB", "SQLITE_CORRUPT"}:
                raise _not_an_index(self.path, str(exc)) from None
            if getattr(exc, "sqlite_errorname", "") in {"SQLITE_BUSY", "SQLITE_LOCKED"}:
                raise LockedError(f"{self.path} is locked by another docsctl process: {exc}") from None
            raise StoreError(f"{self.path}: {exc}") from None

    def _close(self) -> None:
        for conn, _ in self._idle:
            conn.close()
        self._idle, self._vectors, self._postings = [], None, None
        self._epoch += 1

    def close(self) -> None:
        """Close the read connections (one in use closes when its read ends; the next read opens one)."""
        with self._lock:
            self._close()

    def _file_id(self) -> tuple[int, int]:
        """The live file's identity (a rebuild may replace it); IndexMissingError without an index."""
        try:
            stat = self.path.stat()
        except FileNotFoundError:
            raise self._missing() from None
        if stat.st_size == 0:
            raise self._missing()
        return stat.st_dev, stat.st_ino

    def _checkout(self) -> tuple[sqlite3.Connection, tuple[int, int], int]:
        """An idle read connection to the live file, or a new one; with the file it reads and its epoch."""
        try:
            file_id = self._file_id()
        except IndexMissingError:
            with self._lock:
                self._close()
            raise
        with self._lock:
            while self._idle:
                conn, opened = self._idle.pop()
                if opened == file_id:
                    return conn, file_id, self._epoch
                conn.close()  # the file was replaced: this one reads the old one
            epoch = self._epoch
        return self._open_reader(), file_id, epoch

    def _checkin(self, conn: sqlite3.Connection, file_id: tuple[int, int], epoch: int) -> None:
        with self._lock:
            if epoch == self._epoch and len(self._idle) < MAX_IDLE_READERS:
                self._idle.append((conn, file_id))
                return
        conn.close()

    def _open_reader(self) -> sqlite3.Connection:
        conn = _connect(self.path)
        try:
            if not _probe(conn, self.path):
                raise self._missing()
            version = _upgrade(conn)
            if version != SCHEMA_VERSION:
                raise StoreError(
                    f"{self.path} was written by another docsctl version (index schema {version}, this "
                    f"one reads {SCHEMA_VERSION}): rebuild it with docsctl reindex --full ..."
                )
            for table, vocab in _VOCABS.items():  # the postings bm25 reads (in the connection's temp schema)
                conn.execute(f"CREATE VIRTUAL TABLE IF NOT EXISTS {vocab} USING fts5vocab(main, {table}, 'instance')")
        except BaseException:
            conn.close()
            raise
        return conn

    @contextmanager
    def _reading(self) -> Iterator[sqlite3.Connection]:
        """One read transaction: every query inside sees the same snapshot."""
        with self._errors():
            conn, file_id, epoch = self._checkout()
            try:
                conn.execute("BEGIN")
                try:
                    yield conn
                finally:
                    conn.execute("COMMIT")
            finally:
                self._checkin(conn, file_id, epoch)

    # -- index management -------------------------------------------------------------------------

    def index_meta(self) -> IndexMeta | None:
        with self._lock, self._errors():
            if not self.path.exists() or self.path.stat().st_size == 0:
                return None
            conn = _connect(self.path)
            try:
                if not _probe(conn, self.path):
                    return None
                meta = _read_meta(conn)
            finally:
                conn.close()
        try:
            return IndexMeta(int(meta["mapping_version"]), meta["model"], int(meta["dimension"]))
        except (KeyError, ValueError):
            raise _not_an_index(self.path, "its meta table is incomplete") from None

    def _live_kind(self) -> str:
        """'index', 'none' (missing or empty) or 'foreign' (StoreError when read)."""
        if not self.path.exists() or self.path.stat().st_size == 0:
            return "none"
        conn = _connect(self.path)
        try:
            return "index" if _probe(conn, self.path) else "none"
        finally:
            conn.close()

    def _clean_leftovers(self) -> None:
        """Remove `.building-<pid>` files of writers that died (a running one is left alone)."""
        for candidate in self.path.parent.glob(f"{glob.escape(self.path.name)}.building-*"):
            match = _BUILDING.search(candidate.name)
            if match and not _pid_alive(int(match.group(1))):
                candidate.unlink(missing_ok=True)

    @contextmanager
    def writer(self, meta: IndexMeta, *, rebuild: bool) -> Iterator[_SqliteWriter]:
        with self._errors():
            self.path.parent.mkdir(parents=True, exist_ok=True)
            self._clean_leftovers()
            try:
                kind = self._live_kind()
            except StoreError:
                if not rebuild:
                    raise
                kind = "foreign"  # replaced only because a rebuild was asked for explicitly
        if kind == "index" and not rebuild:
            with self._incremental(meta) as writer:
                yield writer
        else:
            with self._rebuild(meta, live_is_index=kind == "index") as writer:
                yield writer

    @contextmanager
    def _incremental(self, meta: IndexMeta) -> Iterator[_SqliteWriter]:
        with self._errors():
            conn = _connect(self.path)
        try:
            with self._errors():
                conn.execute("PRAGMA journal_mode = WAL")
                conn.execute("BEGIN IMMEDIATE")
                live = _read_meta(conn)
                live_meta = IndexMeta(int(live["mapping_version"]), live["model"], int(live["dimension"]))
                if live_meta != meta or conn.execute("PRAGMA user_version").fetchone()[0] != SCHEMA_VERSION:
                    raise StoreError(
                        f"{self.path} was built with {live_meta}, not {meta}: rebuild it with docsctl reindex --full"
                    )
            writer = _SqliteWriter(conn, self.path, meta, live=None)
            try:
                yield writer
            except BaseException:
                conn.execute("ROLLBACK")
                raise
            with self._errors():
                conn.execute("UPDATE meta SET value = CAST(value AS INTEGER) + 1 WHERE key = 'generation'")
                conn.execute("COMMIT")
        finally:
            conn.close()

    @contextmanager
    def _rebuild(self, meta: IndexMeta, *, live_is_index: bool) -> Iterator[_SqliteWriter]:
        building = self.path.with_name(f"{self.path.name}.building-{os.getpid()}")
        _unlink([building, *_sidecars(building)])
        try:
            with self._errors():
                conn = _connect(building, create=True)
                conn.executescript("PRAGMA journal_mode = OFF; PRAGMA synchronous = OFF;" + _SCHEMA)
                conn.executemany(
                    "INSERT INTO meta (key, value) VALUES (?, ?)",
                    [
                        ("mapping_version", str(meta.mapping_version)),
                        ("model", meta.model),
                        ("dimension", str(meta.dimension)),
                        ("index_id", uuid.uuid4().hex),
                        ("generation", "0"),
                        ("created_at", _now()),
                    ],
                )
                conn.execute("BEGIN")
            try:
                yield _SqliteWriter(conn, building, meta, live=self.path if live_is_index else None)
                with self._errors():
                    conn.execute("COMMIT")
                    self._swap_in(conn, building)
            finally:
                conn.close()
        finally:
            _unlink([building, *_sidecars(building)])

    def _swap_in(self, conn: sqlite3.Connection, building: Path) -> None:
        """Make the finished `building` index live: backup over a live index, else rename."""
        try:
            kind = self._live_kind()
        except StoreError:
            kind = "foreign"  # the caller asked for a rebuild, which replaces it
        if kind == "index":
            live = _connect(self.path)
            try:
                live.execute("PRAGMA journal_mode = WAL")
                conn.backup(live)  # one write transaction on the live file: atomic for its readers
                live.execute("PRAGMA busy_timeout = 100")
                live.execute("PRAGMA wal_checkpoint(TRUNCATE)")  # best effort: readers may hold it
            finally:
                live.close()
            return
        conn.execute("PRAGMA journal_mode = WAL")
        conn.close()
        fd = os.open(building, os.O_RDONLY)  # built with synchronous=OFF: on disk before it goes live
        try:
            os.fsync(fd)
        finally:
            os.close(fd)
        # Nothing docsctl could be reading: a missing, empty or foreign file (with its journal files).
        _unlink(_sidecars(self.path))
        os.replace(building, self.path)

    def describe(self) -> dict[str, Any]:
        size = sum(p.stat().st_size for p in [self.path, *_sidecars(self.path)] if p.exists())
        return {"backend": self.backend, "location": str(self.path), "index": self.path.name, "size_bytes": size}

    def drop(self) -> None:
        with self._lock, self._errors():
            self._close()
            self._live_kind()  # refuses to delete a file that is not a docsctl index
            _unlink([self.path, *_sidecars(self.path)])
            self._clean_leftovers()

    # -- search -----------------------------------------------------------------------------------

    def bm25(self, text: str, k: int, filters: Filters | None = None, *, brief: bool = False) -> list[Hit]:
        prose, code = prose_terms(text), identifier_terms(text)
        name = " ".join(text.split()).lower()
        with self._reading() as conn:
            if k <= 0 or not (prose or code):
                return []
            # Filters restrict the matches before ranking: a covering-index scan gives the allowed ids.
            where, filter_params = _filter_sql(filters, alias="f")
            allowed = (f" AND +rowid IN (SELECT f.id FROM chunks f WHERE 1{where})", filter_params) if where else None
            searches = [
                (table, weights, terms)
                for table, weights, terms in (("fts", PROSE_WEIGHTS, prose), ("fts_code", CODE_WEIGHTS, code))
                if terms
            ]
            query = _Bm25Query(conn, searches, name, self._name_bonus(conn, name), allowed)
            ranked = None
            if self.bm25_from_postings and not self.every_bm25_match:
                ranked = self._bm25_postings(conn, query, filters, k)
            if ranked is None:
                ranked = query.top(k, every_match=self.every_bm25_match)
            chunks = _chunks_in(conn, "c.id", [rowid for rowid, _ in ranked], brief=brief)
        # No highlights here: callers ask page() for the few hits they show (bm25 runs deep for fusion).
        return [Hit(chunk=chunks[rowid], score=score) for rowid, score in ranked]

    def explain_bm25(self, text: str, chunk_id: str) -> dict[str, Any]:
        """How bm25(text) scores one chunk: the same sum of FTS5 bm25() scores (its statistics are the
        whole table's, so restricting the match to one row changes nothing) plus the name bonus, and per
        column the words FTS5 marks as matching, under the names of the OpenSearch fields they stand for."""
        prose, code = prose_terms(text), identifier_terms(text)
        name = " ".join(text.split()).lower()
        with self._reading() as conn:
            found = conn.execute("SELECT id FROM chunks WHERE chunk_id = ?", (chunk_id,)).fetchone()
            if found is None:
                raise NotFoundError(f"no chunk with id {chunk_id!r}")
            rowid, score, fields = found[0], 0.0, {}
            for table, weights, terms, names in (
                ("fts", PROSE_WEIGHTS, prose, PROSE_FIELDS),
                ("fts_code", CODE_WEIGHTS, code, CODE_FIELDS),
            ):
                if not terms:
                    continue
                marked = ", ".join(f"highlight({table}, {column}, ?, ?)" for column in range(len(names)))
                row = conn.execute(
                    f"SELECT bm25({table}, {', '.join(map(str, weights))}), {marked} FROM {table} "
                    f"WHERE {table} MATCH ? AND rowid = ?",
                    [*[_MARK_START, _MARK_END] * len(names), _fts_query(terms), rowid],
                ).fetchone()
                if row is None:
                    continue
                score -= row[0]
                for field, column_text in zip(names, row[1:], strict=True):
                    words = re.findall(f"{_MARK_START}(.*?){_MARK_END}", column_text or "", flags=re.DOTALL)
                    if words:
                        fields[field] = list(dict.fromkeys(word.lower() for word in words))
            if prose or code:
                bonus = self._name_bonus(conn, name)
                named = conn.execute("SELECT 1 FROM chunk_names WHERE name = ? AND chunk = ?", (name, rowid)).fetchone()
                if bonus and named:
                    score += bonus
                    fields["name"] = [name]
        return {"chunk_id": chunk_id, "score": score, "matched": bool(fields), "fields": fields}

    def _bm25_postings(
        self, conn: sqlite3.Connection, query: _Bm25Query, filters: Filters | None, k: int
    ) -> list[tuple[int, float]] | None:
        """What query.top(k) returns, computed from the postings (sqlite_postings): the same scores, summed in
        the same order (each table's, then the name bonus); None when a term is a phrase to FTS5."""
        tokenized = []
        for table, _, terms in query.searches:
            tokens = _TOKENIZERS[table].tokens(terms)
            if any(len(token) != 1 for token in tokens):
                return None
            tokenized.append((table, [token[0] for token in tokens]))
        cache = self._postings_cache(conn)
        total = np.zeros(cache.size, dtype=np.float64)
        matched = np.zeros(cache.size, dtype=bool)
        for table, tokens in tokenized:
            scores = np.zeros(cache.size, dtype=np.float64)
            cache.tables[table].score(conn, tokens, scores, matched)
            total += scores
        named = query._named()
        if named:
            total[named] += query.bonus
            matched[named] = True
        mask = _filter_mask(filters, cache.codes, cache.values)
        return top_rows(total, np.flatnonzero(matched if mask is None else matched & mask), k)

    def _postings_cache(self, conn: sqlite3.Connection) -> _PostingsCache:
        meta = _read_meta(conn)
        key = (meta["index_id"], meta["generation"])
        with self._lock:
            if self._postings is None or self._postings.key != key:
                self._postings = _PostingsCache.load(conn, key)
            return self._postings

    @staticmethod
    def _name_bonus(conn: sqlite3.Connection, name: str) -> float:
        """What the OpenSearch `term` query on names adds: NAME_BOOST x BM25 idf of the name."""
        if not name:
            return 0.0
        matching = conn.execute("SELECT count(DISTINCT chunk) FROM chunk_names WHERE name = ?", (name,)).fetchone()[0]
        if not matching:
            return 0.0
        total = conn.execute("SELECT count(*) FROM chunks").fetchone()[0]
        return NAME_BOOST * math.log(1 + (total - matching + 0.5) / (matching + 0.5))

    def _vector_cache(self, conn: sqlite3.Connection) -> _VectorCache:
        meta = _read_meta(conn)
        key = (meta["index_id"], meta["generation"])
        with self._lock:  # one load for concurrent searches
            if self._vectors is None or self._vectors.key != key:
                self._vectors = _VectorCache.load(conn, key, int(meta["dimension"]))
            return self._vectors

    def _unit_query(self, vector: Vector, cache: _VectorCache) -> np.ndarray | None:
        query = np.asarray(vector, dtype=np.float32).ravel()
        if query.shape[0] != cache.matrix.shape[1]:
            raise StoreError(
                f"the query vector has {query.shape[0]} dimensions, the index at {self.path} "
                f"{cache.matrix.shape[1]}: was it built with another model?"
            )
        norm = float(np.linalg.norm(query))
        return query / norm if norm else None

    def knn(self, vector: Vector, k: int, filters: Filters | None = None, *, brief: bool = False) -> list[Hit]:
        with self._reading() as conn:
            cache = self._vector_cache(conn)
            query = self._unit_query(vector, cache)
            if query is None or k <= 0 or not len(cache.ids):
                return []
            best = _top_rows(_cosines(cache.matrix, query), cache.mask(filters), k)
            ids = [int(cache.ids[row]) for row, _ in best]
            chunks = _chunks_in(conn, "c.id", ids, brief=brief)
        scores = [score for _, score in best]
        return [Hit(chunk=chunks[chunk], score=score) for chunk, score in zip(ids, scores, strict=True)]

    def knn_documents(self, vector: Vector, k: int, filters: Filters | None = None) -> list[tuple[str, float]]:
        with self._reading() as conn:
            cache = self._vector_cache(conn)
            query = self._unit_query(vector, cache)
            if query is None or k <= 0 or not len(cache.ids):
                return []
            centroids, codes = cache.documents()
            best = _top_rows(_cosines(centroids, query), cache.mask(filters, codes), k)
        return [(cache.doc_ids[row], score) for row, score in best]

    def page(self, text: str, chunk_ids: list[str]) -> dict[str, Hit]:
        with self._reading() as conn:
            if not chunk_ids:
                return {}
            rows = _chunks_in(conn, "c.chunk_id", list(dict.fromkeys(chunk_ids)))
            contents = {rowid: chunk.content for rowid, chunk in rows.items()}
            shown = self._fragments(conn, prose_terms(text), code_query_terms(text), contents)
        return {chunk.chunk_id: Hit(chunk, 0.0, shown[rowid]) for rowid, chunk in rows.items()}

    def _fragments(
        self, conn: sqlite3.Connection, prose: list[str], code: list[str], contents: dict[int, str]
    ) -> dict[int, list[str]]:
        """Highlighted fragments per chunk rowid: FTS5 marks the (stemmed) prose matches in the content;
        identifiers whose parts match a code term (`SelectEditor` for "select editor") are marked too."""
        marked: dict[int, str] = {}
        if prose and contents:
            for batch in _batched(contents, 500):
                marked.update(
                    conn.execute(
                        f"SELECT rowid, highlight(fts, 3, ?, ?) FROM fts WHERE fts MATCH ? "
                        f"AND rowid IN ({_marks(len(batch))})",
                        [_MARK_START, _MARK_END, _fts_query(prose), *batch],
                    ).fetchall()
                )
        return {
            rowid: fragments(content, _spans(marked.get(rowid), content) + _code_spans(content, set(code)))
            for rowid, content in contents.items()
        }

    # -- documents --------------------------------------------------------------------------------

    def _chunks(self, conn: sqlite3.Connection, where: str, params: Sequence[Any], order: str) -> list[Chunk]:
        rows = conn.execute(f"SELECT {_COLUMNS} FROM chunks c WHERE {where} ORDER BY {order}", params)
        return [_chunk_from_row(row) for row in rows]

    def lookup(self, name: str, sources: Iterable[str] = ()) -> list[Chunk]:
        wanted = list(sources)
        key = name.strip().lower()
        with self._reading() as conn:
            source_sql = f" AND c.source IN ({_marks(len(wanted))})" if wanted else ""
            doc_ids = [
                row[0]
                for row in conn.execute(
                    "SELECT DISTINCT c.doc_id FROM chunk_names n JOIN chunks c ON c.id = n.chunk "
                    f"WHERE n.name = ?{source_sql} ORDER BY c.doc_id LIMIT ?",
                    [key, *wanted, LOOKUP_MAX_DOCS],
                )
            ]
            if not doc_ids:
                return []
            return self._chunks(conn, f"c.doc_id IN ({_marks(len(doc_ids))})", doc_ids, "c.doc_id, c.chunk_index")

    def get_chunk(self, chunk_id: str) -> Chunk:
        with self._reading() as conn:
            chunks = self._chunks(conn, "c.chunk_id = ?", [chunk_id], "c.id")
        if not chunks:
            raise NotFoundError(f"no chunk with id {chunk_id!r}")
        return chunks[0]

    def get_document(self, path: str, source: str | None = None, version: str | None = None) -> list[Chunk]:
        where, params = "c.path = ?", [path]
        if source:
            where, params = where + " AND c.source = ?", [*params, source]
        if version is not None:
            where, params = where + " AND c.version = ?", [*params, version]
        with self._reading() as conn:
            chunks = self._chunks(conn, where, params, "c.source, c.version DESC, c.chunk_index")
        if not chunks:
            raise NotFoundError(f"no document with path {path!r}" + (f" in source {source!r}" if source else ""))
        sources = sorted({chunk.source for chunk in chunks})
        if len(sources) > 1:
            raise NotFoundError(f"path {path!r} exists in several sources ({', '.join(sources)}): name one")
        newest = chunks[0].version  # without a version, the newest (as OpenSearch sorts them)
        return [chunk for chunk in chunks if chunk.version == newest]

    def doc_hashes(self, source: str, version: str = "") -> dict[str, str]:
        with self._reading() as conn:
            rows = conn.execute(
                "SELECT path, max(content_hash) FROM chunks WHERE source = ? AND version = ? GROUP BY path",
                (source, version),
            ).fetchall()
        return dict(rows)

    def source_states(self) -> dict[str, dict[str, Any]]:
        with self._reading() as conn:
            return {source: json.loads(state) for source, state in conn.execute("SELECT source, state FROM sources")}

    def list_sources(self) -> list[SourceInfo]:
        """Per source: documents, chunks, and chunks per category and per version."""
        with self._reading() as conn:
            states = {source: json.loads(state) for source, state in conn.execute("SELECT source, state FROM sources")}
            totals = conn.execute(
                "SELECT source, count(DISTINCT doc_id), count(*), max(indexed_at) FROM chunks "
                "GROUP BY source ORDER BY source"
            ).fetchall()
            breakdown: dict[tuple[str, str], dict[str, int]] = {}
            for field in ("category", "version"):
                for source, value, count in conn.execute(
                    f"SELECT source, {field}, count(*) FROM chunks GROUP BY source, {field} ORDER BY 3 DESC, 2"
                ):
                    breakdown.setdefault((source, field), {})[value] = count
        return [
            SourceInfo(
                source=source,
                documents=documents,
                chunks=chunks,
                categories=breakdown.get((source, "category"), {}),
                versions=breakdown.get((source, "version"), {}),
                last_indexed=states.get(source, {}).get("last_indexed") or last_indexed,
                origin=states.get(source, {}).get("origin"),
            )
            for source, documents, chunks, last_indexed in totals
        ]

    def category_counts(self) -> list[dict[str, Any]]:
        with self._reading() as conn:
            rows = conn.execute(
                "SELECT source, category, count(DISTINCT doc_id), count(*) FROM chunks "
                "GROUP BY source, category ORDER BY source, category"
            ).fetchall()
        return [
            {"source": source, "category": category, "documents": documents, "chunks": chunks}
            for source, category, documents, chunks in rows
        ]

    def iter_chunks(self, with_embedding: bool = True) -> Iterator[Chunk]:
        with self._errors():
            self._file_id()  # IndexMissingError now, not at the first next()
            conn = self._open_reader()  # its own connection: callers may use the store while iterating
        return self._iter_chunks(conn, with_embedding)

    def _iter_chunks(self, conn: sqlite3.Connection, with_embedding: bool) -> Iterator[Chunk]:
        vector_sql = "v.vector" if with_embedding else "NULL"
        try:
            with self._errors():
                conn.execute("BEGIN")
                cursor = conn.execute(
                    f"SELECT {_COLUMNS}, {vector_sql} FROM chunks c LEFT JOIN vectors v ON v.chunk = c.id "
                    "ORDER BY c.source, c.path, c.version, c.chunk_index"
                )
                for row in cursor:
                    yield _chunk_from_row(row[:-1], row[-1])
        finally:
            conn.close()


def _chunk_params(chunk: Chunk, indexed_at: str) -> list[Any]:
    """The values of _CHUNK_FIELDS for one chunk, as stored."""
    data = {name: getattr(chunk, name) for name in _CHUNK_FIELDS}  # not to_dict(): it deep-copies the vector
    data["breadcrumb"], data["names"] = json.dumps(chunk.breadcrumb), json.dumps(chunk.names)
    data["merged_anchors"] = json.dumps(chunk.merged_anchors)
    data["indexed_at"] = chunk.indexed_at or indexed_at
    return [data[name] for name in _CHUNK_FIELDS]


class _SqliteWriter:
    """Writes into one open transaction: on the live file, or on a building file in a rebuild."""

    def __init__(self, conn: sqlite3.Connection, path: Path, meta: IndexMeta, live: Path | None) -> None:
        self._conn = conn
        self._path = path
        self._meta = meta
        self._live = live  # the live index a rebuild may copy from

    @contextmanager
    def _errors(self) -> Iterator[None]:
        try:
            yield
        except sqlite3.Error as exc:
            raise StoreError(f"cannot write {self._path}: {exc}") from None

    def write(self, chunks: Iterable[Chunk], *, whole_documents: bool = False) -> WriteReport:
        # Document vectors are derived when the vectors are loaded for reading: nothing to do here.
        report = WriteReport()
        indexed_at = _now()
        dimension = self._meta.dimension
        for batch in _batched(chunks, BATCH):
            rows: dict[str, tuple[Chunk, bytes | None]] = {}
            for chunk in batch:
                vector = None
                if chunk.embedding is not None:
                    array = np.asarray(chunk.embedding, dtype=np.float32).ravel()
                    norm = float(np.linalg.norm(array))
                    if array.shape[0] != dimension:
                        reason = f"embedding has {array.shape[0]} dimensions, the index takes {dimension}"
                        report.failed.append((chunk.chunk_id, reason))
                        continue
                    if not math.isfinite(norm) or norm == 0.0:
                        report.failed.append((chunk.chunk_id, "embedding is zero or not finite"))
                        continue
                    vector = (array / norm).astype("<f4").tobytes()
                rows[chunk.chunk_id] = (chunk, vector)  # a repeated id: the last one wins
            with self._errors():
                self._insert(list(rows.values()), indexed_at)
            report.written += len(rows)
        return report

    def _insert(self, rows: list[tuple[Chunk, bytes | None]], indexed_at: str) -> None:
        if not rows:
            return
        conn = self._conn
        ids = [chunk.chunk_id for chunk, _ in rows]
        self._delete_ids([row[0] for row in _select_in(conn, "SELECT id FROM chunks", "chunk_id", ids)])
        first = conn.execute("SELECT coalesce(max(id), 0) + 1 FROM chunks").fetchone()[0]
        numbered = list(enumerate(rows, start=first))
        conn.executemany(
            f"INSERT INTO chunks (id, {', '.join(_CHUNK_FIELDS)}) VALUES (?, {_marks(len(_CHUNK_FIELDS))})",
            [(rowid, *_chunk_params(c, indexed_at)) for rowid, (c, _) in numbered],
        )
        conn.executemany(
            "INSERT INTO fts (rowid, title, breadcrumb, section, content) VALUES (?, ?, ?, ?, ?)",
            [(rowid, c.title, " > ".join(c.breadcrumb), c.section, c.content) for rowid, (c, _) in numbered],
        )
        conn.executemany(
            "INSERT INTO fts_code (rowid, title, breadcrumb, section, content, path) VALUES (?, ?, ?, ?, ?, ?)",
            [
                (rowid, *map(code_text, (c.title, " ".join(c.breadcrumb), c.section, c.content, c.path)))
                for rowid, (c, _) in numbered
            ],
        )
        conn.executemany(
            "INSERT INTO vectors (chunk, vector) VALUES (?, ?)",
            [(rowid, vector) for rowid, (_, vector) in numbered if vector is not None],
        )
        conn.executemany(
            "INSERT INTO chunk_names (name, chunk) VALUES (?, ?)",
            [(name, rowid) for rowid, (c, _) in numbered for name in {n.strip().lower() for n in c.names} if name],
        )

    def _delete_ids(self, ids: list[int]) -> None:
        for batch in _batched(ids, 500):
            marks = _marks(len(batch))
            for sql in (
                f"DELETE FROM fts WHERE rowid IN ({marks})",
                f"DELETE FROM fts_code WHERE rowid IN ({marks})",
                f"DELETE FROM vectors WHERE chunk IN ({marks})",
                f"DELETE FROM chunk_names WHERE chunk IN ({marks})",
                f"DELETE FROM chunks WHERE id IN ({marks})",
            ):
                self._conn.execute(sql, batch)

    def delete_documents(self, doc_ids: Iterable[str], keep_hash: str | None = None) -> int:
        removed = 0
        with self._errors():
            for batch in _batched(doc_ids, 500):
                sql = f"SELECT id FROM chunks WHERE doc_id IN ({_marks(len(batch))})"
                params = list(batch)
                if keep_hash is not None:
                    sql, params = sql + " AND content_hash != ?", [*params, keep_hash]
                ids = [row[0] for row in self._conn.execute(sql, params)]
                self._delete_ids(ids)
                removed += len(ids)
        return removed

    def copy_sources(self, exclude: Collection[SourceVersion]) -> int:
        if self._live is None:
            return 0
        replaced_sql, replaced_params = _replaced_sql(exclude)
        copied = 0
        with self._errors():
            live = _connect(self._live)
            try:
                live.execute("BEGIN")
                meta = _read_meta(live)
                if (meta["model"], int(meta["dimension"])) != (self._meta.model, self._meta.dimension):
                    raise StoreError(
                        f"cannot copy vectors from {self._live}: built with {meta['model']} "
                        f"({meta['dimension']} dimensions), this index uses {self._meta.model}; reindex every source"
                    )
                cursor = live.execute(
                    f"SELECT {_COLUMNS}, v.vector FROM chunks c LEFT JOIN vectors v ON v.chunk = c.id "
                    f"WHERE NOT ({replaced_sql}) ORDER BY c.id",
                    replaced_params,
                )
                for batch in _batched(cursor, BATCH):
                    ids = [row[0] for row in batch]
                    present = {row[0] for row in _select_in(self._conn, "SELECT chunk_id FROM chunks", "chunk_id", ids)}
                    rows = [(_chunk_from_row(row[:-1]), row[-1]) for row in batch if row[0] not in present]
                    self._insert(rows, _now())
                    copied += len(rows)
                states = live.execute("SELECT source, state FROM sources").fetchall()
                self._conn.executemany(
                    "INSERT OR IGNORE INTO sources (source, state) VALUES (?, ?)",
                    [(source, state) for source, state in states if (source, None) not in exclude],
                )
                live.execute("COMMIT")
            finally:
                live.close()
        return copied

    def record_source(self, source: str, state: dict[str, Any]) -> None:
        with self._errors():
            self._conn.execute(
                "INSERT OR REPLACE INTO sources (source, state) VALUES (?, ?)",
                (source, json.dumps(state, default=str)),
            )


# -- highlighting (pure) -------------------------------------------------------------------------


def _spans(marked: str | None, content: str) -> list[tuple[int, int]]:
    """Match offsets in `content` from FTS5 highlight() output using the two marker characters."""
    if not marked:
        return []
    spans, markers, position = [], 0, 0  # markers: how many marker characters precede `position`
    while (start := marked.find(_MARK_START, position)) >= 0 and (end := marked.find(_MARK_END, start)) >= 0:
        spans.append((start - markers, end - markers - 1))
        markers += 2
        position = end + 1
    return spans if len(marked) - marked.count(_MARK_START) - marked.count(_MARK_END) == len(content) else []


@lru_cache(maxsize=64)
def _code_term_finder(code: frozenset[str]) -> re.Pattern[str]:
    return re.compile("|".join(re.escape(term) for term in sorted(code, key=len, reverse=True)))


def _tokens_at(content: str, positions: list[int]) -> Iterator[re.Match[str]]:
    """The code tokens of `content` holding these offsets, each once, in text order."""
    reverse, starts = content[::-1], set()
    for position in positions:
        separator = CODE_SEPARATOR.search(reverse, len(content) - position)
        start = len(content) - separator.start() if separator else 0
        if start not in starts:
            starts.add(start)
            if token := CODE_TOKEN.match(content, start):
                yield token


def _code_spans(content: str, code: set[str]) -> list[tuple[int, int]]:
    """Identifiers matched whole (`add_filter`, also inside `table.add_filter`) or, when camel-cased, by a
    part (`SelectEditor` for "editor"): FTS5 alone marks `add` and `filter` apart, and nothing in `SelectEditor`."""
    if not code:
        return []
    lowered = content.lower()
    if len(lowered) == len(content):  # offsets kept: look only at the tokens that hold a code term
        tokens = _tokens_at(content, [m.start() for m in _code_term_finder(frozenset(code)).finditer(lowered)])
    else:
        tokens = CODE_TOKEN.finditer(content)
    spans = []
    for match in tokens:
        raw = match.group()
        if (raw.isalnum() and raw[1:].islower()) or not _IDENTIFIER.search(raw):
            continue  # a plain word (the first test is the common case, cheaply): FTS5 has marked it if it matched
        pieces = [(match.start(), raw)]
        if _SEGMENT.search(raw):
            pieces += [(match.start() + m.start(), m.group()) for m in _SEGMENTS.finditer(raw)]
        for offset, piece in pieces:
            token = trim_token(piece)
            if not token:
                continue
            if token.lower() not in code:
                camel = any(char.isupper() for char in token[1:]) and any(char.islower() for char in token)
                if not (camel and code.intersection(code_token_terms(token))):
                    continue
            start = offset + piece.find(token)
            spans.append((start, start + len(token)))
    return spans


def _opening(content: str, size: int = HIGHLIGHT_CHARS) -> str:
    text = " ".join(content.split())
    if len(text) <= size:
        return text
    cut = text.rfind(" ", 0, size + 1)
    return text[: cut if cut > size // 2 else size]


def fragments(content: str, spans: list[tuple[int, int]], size: int = HIGHLIGHT_CHARS) -> list[str]:
    """About `size` characters around the matches, matches in <em>...</em>: the HIGHLIGHT_FRAGMENTS
    windows with the most matches, in text order, never overlapping; the opening words when none matched."""
    merged: list[list[int]] = []
    for start, end in sorted(spans):
        if start >= end:
            continue
        if merged and start <= merged[-1][1]:
            merged[-1][1] = max(merged[-1][1], end)
        else:
            merged.append([start, end])
    if not merged:
        return [_opening(content, size)] if content.strip() else []
    windows: list[list[int]] = []  # [first match start, last match end, matches]
    for start, end in merged:
        if windows and end - windows[-1][0] <= size:
            windows[-1][1:] = [end, windows[-1][2] + 1]
        else:
            windows.append([start, end, 1])
    chosen = sorted(sorted(windows, key=lambda w: (-w[2], w[0]))[:HIGHLIGHT_FRAGMENTS])
    out, floor = [], 0
    for number, (start, end, _) in enumerate(chosen):
        ceiling = chosen[number + 1][0] if number + 1 < len(chosen) else len(content)
        slack = max(0, size - (end - start))
        left = max(floor, start - slack // 3)
        right = min(ceiling, end + slack - (start - left))
        if left > floor:  # begin and end on whole words
            gap = _SPACE.search(content, left, start)
            left = gap.end() if gap else left
        if right < ceiling:
            gaps = [gap.start() for gap in _SPACE.finditer(content, end, right)]
            right = gaps[-1] if gaps else right
        pieces, cursor = [], left
        for span_start, span_end in merged:
            if left <= span_start and span_end <= right:
                pieces += [content[cursor:span_start], "<em>", content[span_start:span_end], "</em>"]
                cursor = span_end
        pieces.append(content[cursor:right])
        out.append(" ".join("".join(pieces).split()))
        floor = right
    return out
