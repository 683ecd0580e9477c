"""The file: its schema and upgrades, connections, and the helpers that read chunks back."""

from __future__ import annotations

import json
import os
import re
import sqlite3
from collections.abc import Iterable, Iterator, Sequence
from datetime import UTC, datetime
from itertools import islice
from pathlib import Path
from typing import Any

import numpy as np

from docsctl.errors import StoreError
from docsctl.models import Chunk
from docsctl.process import pid_alive

APPLICATION_ID = 0x64637478  # "dctx"
SCHEMA_VERSION = 3
# Schema changes that only add a column, by the version they upgrade from: a file of that version is
# upgraded in place when opened, so it keeps answering (the next reindex rebuilds it, since its meta
# records the older version, and fills the new column).
UPGRADES = {
    1: "ALTER TABLE chunks ADD COLUMN merged_anchors TEXT NOT NULL DEFAULT '[]'",
    2: "ALTER TABLE chunks ADD COLUMN name_anchors TEXT NOT NULL DEFAULT '[]'",
}
BATCH = 256
BUSY_TIMEOUT_MS = 5000
MAX_IDLE_READERS = 8

# The tokenizers of fts and fts_code: the schema's, and what bm25 tokenizes query terms with (postings.py).
PROSE_TOKENIZE = "'porter unicode61 remove_diacritics 2'"
CODE_TOKENIZE = "\"unicode61 remove_diacritics 2 tokenchars '-_./'\""

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
    name_anchors TEXT NOT NULL,
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
    "name_anchors", "indexed_at",
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
        found = _select_in(conn, "SELECT c.id, c.chunk_id, c.doc_id FROM chunks c", column, values)
        return {row[0]: Chunk.brief(row[1], row[2]) for row in found}
    found = _select_in(conn, f"SELECT c.id, {_COLUMNS} FROM chunks c", column, values)
    return {row[0]: _chunk_from_row(row[1:]) for row in found}


def _chunk_from_row(row: Sequence[Any], embedding: bytes | None = None) -> Chunk:
    data = dict(zip(_CHUNK_FIELDS, row, strict=False))
    data["breadcrumb"] = json.loads(data["breadcrumb"])
    data["names"] = json.loads(data["names"])
    data["merged_anchors"] = json.loads(data["merged_anchors"])
    data["name_anchors"] = json.loads(data["name_anchors"])
    if embedding is not None:
        data["embedding"] = np.frombuffer(embedding, dtype="<f4").tolist()
    return Chunk(**data)


def _disk_full(path: Path, exc: sqlite3.Error) -> StoreError | None:
    """A write that ran out of space (or past the file size limit): the transaction was rolled back."""
    if getattr(exc, "sqlite_errorname", "") != "SQLITE_FULL":
        return None
    return StoreError(
        f"no space left to write {path} ({exc}): the index in use is unchanged; free space on "
        f"{path.parent} and run again"
    )


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
