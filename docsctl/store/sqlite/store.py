"""SqliteStore: the Store protocol over one SQLite file (see the package docstring)."""

from __future__ import annotations

import glob
import json
import math
import os
import re
import sqlite3
import threading
import uuid
from collections.abc import Iterable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import numpy as np

from docsctl.errors import IndexMissingError, LockedError, NotFoundError, StoreError
from docsctl.models import Chunk, Filters, Hit, IndexMeta, SourceInfo, Vector
from docsctl.phases import checkpoint
from docsctl.store.base import FACETS
from docsctl.store.sqlite.bm25 import (
    _VOCABS,
    CODE_FIELDS,
    CODE_WEIGHTS,
    NAME_BOOST,
    PROSE_FIELDS,
    PROSE_WEIGHTS,
    _Bm25Query,
    _fts_query,
    _postings_top,
    _PostingsCache,
)
from docsctl.store.sqlite.filters import _filter_sql
from docsctl.store.sqlite.highlight import _MARK_END, _MARK_START, _code_spans, _spans, fragments
from docsctl.store.sqlite.knn import _cosines, _top_rows, _VectorCache
from docsctl.store.sqlite.schema import (
    _BUILDING,
    _COLUMNS,
    _SCHEMA,
    MAX_IDLE_READERS,
    PROSE_TOKENIZE,
    SCHEMA_VERSION,
    _chunk_from_row,
    _chunks_in,
    _connect,
    _disk_full,
    _marks,
    _not_an_index,
    _now,
    _pid_alive,
    _probe,
    _read_meta,
    _sidecars,
    _unlink,
    _upgrade,
)
from docsctl.store.sqlite.writing import _SqliteWriter
from docsctl.text import (
    code_query_terms,
    identifier_terms,
    prose_terms,
)

LOOKUP_MAX_DOCS = 5  # as opensearch_queries.lookup_body
# Per read connection (its temp schema): the shown chunks' content, for FTS5 to highlight (see _fragments).
_SHOWN = "shown"


class SqliteStore:
    """The Store protocol over one SQLite file; nothing is opened until the first call."""

    backend = "sqlite"
    every_bm25_match = False  # True: bm25 scores every match, not just the lists of _Bm25Query (tests)
    bm25_from_postings = True  # False: FTS5 ranks (_Bm25Query), as before postings.py (tests, benchmarks)
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
            if full := _disk_full(self.path, exc):
                raise full from None
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
            conn.execute(
                f"CREATE VIRTUAL TABLE IF NOT EXISTS temp.{_SHOWN} USING fts5(content, tokenize = {PROSE_TOKENIZE})"
            )
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
                    checkpoint("swap")
                    self._swap_in(conn, building)
                    checkpoint("swapped")
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
            ranked = None
            if self.bm25_from_postings and not self.every_bm25_match:
                cache = self._postings_cache(conn)
                query = _Bm25Query(conn, searches, name, self._name_bonus(conn, name, cache.chunks), allowed)
                ranked = _postings_top(conn, cache, query, filters, k)
                if ranked is not None and brief:
                    return [Hit(chunk=cache.brief(rowid), score=score) for rowid, score in ranked]
            if ranked is None:
                query = _Bm25Query(conn, searches, name, self._name_bonus(conn, name), allowed)
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
                for field, weight, column_text in zip(names, weights, row[1:], strict=True):
                    words = re.findall(f"{_MARK_START}(.*?){_MARK_END}", column_text or "", flags=re.DOTALL)
                    if words and weight:  # a column of weight 0 (the path) matches but scores nothing
                        fields[field] = list(dict.fromkeys(word.lower() for word in words))
            if prose or code:
                bonus = self._name_bonus(conn, name)
                named = conn.execute("SELECT 1 FROM chunk_names WHERE name = ? AND chunk = ?", (name, rowid)).fetchone()
                if bonus and named:
                    score += bonus
                    fields["name"] = [name]
        return {"chunk_id": chunk_id, "score": score, "matched": bool(fields), "fields": fields}

    def _postings_cache(self, conn: sqlite3.Connection) -> _PostingsCache:
        meta = _read_meta(conn)
        key = (meta["index_id"], meta["generation"])
        with self._lock:
            if self._postings is None or self._postings.key != key:
                self._postings = _PostingsCache.load(conn, key)
            return self._postings

    @staticmethod
    def _name_bonus(conn: sqlite3.Connection, name: str, chunks: int | None = None) -> float:
        """What the OpenSearch `term` query on names adds: NAME_BOOST x BM25 idf of the name; `chunks`: how many
        the index holds, when known (counting them scans an index: 3-5 ms at 66,000 chunks)."""
        if not name:
            return 0.0
        matching = conn.execute("SELECT count(DISTINCT chunk) FROM chunk_names WHERE name = ?", (name,)).fetchone()[0]
        if not matching:
            return 0.0
        total = chunks if chunks is not None else conn.execute("SELECT count(*) FROM chunks").fetchone()[0]
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
            mask = cache.mask(filters)
            best = _top_rows(_cosines(cache.matrix, query, mask), mask, k)
            if brief:
                return [Hit(chunk=cache.brief(row), score=score) for row, score in best]
            ids = [int(cache.ids[row]) for row, _ in best]
            chunks = _chunks_in(conn, "c.id", ids)
        scores = [score for _, score in best]
        return [Hit(chunk=chunks[chunk], score=score) for chunk, score in zip(ids, scores, strict=True)]

    def knn_documents(self, vector: Vector, k: int, filters: Filters | None = None) -> list[tuple[str, float]]:
        with self._reading() as conn:
            cache = self._vector_cache(conn)
            query = self._unit_query(vector, cache)
            if query is None or k <= 0 or not len(cache.ids):
                return []
            centroids, codes = cache.documents()
            mask = cache.mask(filters, codes)
            best = _top_rows(_cosines(centroids, query, mask), mask, k)
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
        identifiers whose parts match a code term (`SelectEditor` for "select editor") are marked too.

        FTS5 marks them in a scratch table holding just these contents, written and rolled back here: the
        marks depend only on the text, the tokenizer and the query, while the same highlight() over `fts`
        reads every query term's postings in the whole index first (0.7 ms at 6,640 chunks, 1.4 ms at
        66,400, against 0.3 ms for this; bench/README.md, "Peers")."""
        marked: dict[int, str] = {}
        if prose and contents:
            conn.execute("SAVEPOINT highlights")
            try:
                conn.executemany(f"INSERT INTO temp.{_SHOWN} (rowid, content) VALUES (?, ?)", contents.items())
                marked = dict(
                    conn.execute(
                        f"SELECT rowid, highlight({_SHOWN}, 0, ?, ?) FROM temp.{_SHOWN} WHERE {_SHOWN} MATCH ?",
                        [_MARK_START, _MARK_END, _fts_query(prose)],
                    ).fetchall()
                )
            finally:
                conn.execute("ROLLBACK TO highlights")
                conn.execute("RELEASE highlights")
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

    def facet_counts(self, filters: Filters | None = None) -> dict[str, dict[str, int]]:
        where, params = _filter_sql(filters)
        with self._reading() as conn:
            return {
                field: dict(
                    conn.execute(
                        f"SELECT c.{field}, count(DISTINCT c.doc_id) FROM chunks c WHERE 1 = 1{where} "
                        f"GROUP BY c.{field} ORDER BY 2 DESC, 1",
                        params,
                    ).fetchall()
                )
                for field in FACETS
            }

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
