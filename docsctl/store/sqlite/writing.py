"""Writing: one open transaction on the live file, or on the building file of a rebuild."""

from __future__ import annotations

import json
import math
import sqlite3
from collections.abc import Collection, Iterable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import numpy as np

from docsctl.errors import StoreError
from docsctl.models import Chunk, IndexMeta
from docsctl.store.base import SourceVersion, WriteReport
from docsctl.store.sqlite.schema import (
    _CHUNK_FIELDS,
    _COLUMNS,
    BATCH,
    _batched,
    _chunk_from_row,
    _connect,
    _disk_full,
    _marks,
    _now,
    _read_meta,
    _select_in,
)
from docsctl.text import (
    code_text,
)


def _replaced_sql(replaced: Collection[SourceVersion]) -> tuple[str, list[str]]:
    """A condition on `c` true for the chunks among `replaced` (StoreWriter.copy_sources), and its values."""
    clauses, params = ["0"], []
    for source, version in replaced:
        clauses.append("c.source = ?" if version is None else "(c.source = ? AND c.version = ?)")
        params.extend([source] if version is None else [source, version])
    return " OR ".join(clauses), params


def _chunk_params(chunk: Chunk, indexed_at: str) -> list[Any]:
    """The values of _CHUNK_FIELDS for one chunk, as stored."""
    data = {name: getattr(chunk, name) for name in _CHUNK_FIELDS}  # not to_dict(): it deep-copies the vector
    data["breadcrumb"], data["names"] = json.dumps(chunk.breadcrumb), json.dumps(chunk.names)
    data["merged_anchors"], data["name_anchors"] = json.dumps(chunk.merged_anchors), json.dumps(chunk.name_anchors)
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
            raise _disk_full(self._path, exc) or StoreError(f"cannot write {self._path}: {exc}") from None

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
