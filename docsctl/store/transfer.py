"""Moving an index between backends as JSON Lines, vectors included, so nothing is re-embedded.

Line 1 is a header: {"docsctl_export": 2, "model": ..., "dimension": ..., "mapping_version": ...};
then one {"source_state": name, "state": {...}} line per source, then one chunk object per line, then
{"docsctl_export_end": <chunks>}. Without that last line a file cut at a line end (a full disk, an
interrupted copy) would import as a smaller index; version 1 files, written before it existed, still
import without the check.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import IO, Any

from docsctl.errors import ConfigError, StoreError
from docsctl.jsonlines import json_object
from docsctl.models import Chunk, IndexMeta
from docsctl.store.base import Store

FORMAT_VERSION = 2
READABLE_VERSIONS = (1, 2)
END = "docsctl_export_end"
BATCH = 500


def export_index(store: Store, out: IO[str]) -> int:
    """Write the whole live index to `out`; returns the number of chunks written."""
    meta = store.index_meta()
    if meta is None:
        store.list_sources()  # raises the backend's IndexMissingError with its advice
        raise StoreError("nothing to export: the index is empty")
    header = {"docsctl_export": FORMAT_VERSION, "model": meta.model, "dimension": meta.dimension}
    out.write(json.dumps(header) + "\n")
    for source, state in store.source_states().items():
        out.write(json.dumps({"source_state": source, "state": state}) + "\n")
    count = 0
    for chunk in store.iter_chunks(with_embedding=True):
        out.write(json.dumps(chunk.to_dict(with_embedding=True), ensure_ascii=False) + "\n")
        count += 1
    out.write(json.dumps({END: count}) + "\n")
    return count


def _read(path: Path) -> tuple[dict[str, Any], Iterator[tuple[int, dict[str, Any]]]]:
    """The header, and the rows after it; every problem is a ConfigError naming the line."""
    handle = path.open(encoding="utf-8", errors="replace")  # bytes that are not UTF-8 fail as bad JSON
    try:
        header = json.loads(handle.readline() or "null")
    except json.JSONDecodeError:
        header = None
    if not isinstance(header, dict) or header.get("docsctl_export") not in READABLE_VERSIONS:
        handle.close()
        raise ConfigError(f"{path} is not a docsctl export (its first line is not a docsctl_export header)")
    try:
        int(header["dimension"]), str(header["model"])
    except (KeyError, TypeError, ValueError):
        handle.close()
        raise ConfigError(f"{path}: its header lacks the model or the vector dimension") from None
    checked = header["docsctl_export"] >= 2

    def rows() -> Iterator[tuple[int, dict[str, Any]]]:
        chunks, end = 0, None
        with handle:
            for number, line in enumerate(handle, start=2):
                if not line.strip():
                    continue
                if end is not None:
                    raise ConfigError(f"{path}:{number}: more lines after the end line")
                row = json_object(line, f"{path}:{number}")
                if END in row:
                    end = row[END]
                    continue
                chunks += "source_state" not in row
                yield number, row
        if checked and end != chunks:
            raise ConfigError(
                f"{path} is incomplete: it ends after {chunks} chunks without its end line (truncated?)"
                if end is None
                else f"{path} is incomplete: its end line counts {end} chunks, it holds {chunks}"
            )

    return header, rows()


def import_index(store: Store, path: Path) -> tuple[int, list[str]]:
    """Replace the sources found in the export; other sources in `store` are kept when compatible.

    Returns (chunks written, sources imported). Builds beside the live index and swaps on success.
    The caller holds the reindex lock.
    """
    header, rows = _read(path)
    states: dict[str, dict[str, Any]] = {}
    meta = IndexMeta(store.schema_version, str(header["model"]), int(header["dimension"]))
    live = store.index_meta()
    with store.writer(meta, rebuild=True) as writer:
        pending: list[Chunk] = []
        written = 0
        sources: set[str] = set()
        for number, row in rows:
            if "source_state" in row:
                states[row["source_state"]] = row.get("state", {})
                continue
            chunk = _chunk(row, path, number, meta.dimension)
            sources.add(chunk.source)
            pending.append(chunk)
            if len(pending) >= BATCH:
                written += _write(writer, pending)
                pending = []
        written += _write(writer, pending)
        if live is not None and (live.model, live.dimension) == (meta.model, meta.dimension):
            writer.copy_sources(exclude={(source, None) for source in sources})
        elif live is not None:
            others = sorted({info.source for info in store.list_sources()} - sources)
            if others:  # raising here abandons the new index: the live one stays as it was
                raise ConfigError(
                    f"the index holds {', '.join(others)} embedded with {live.model}; the export uses "
                    f"{meta.model}, so importing would drop them: import into another index "
                    "(DOCSCTL_INDEX_ALIAS or --data-dir)"
                )
        for source in sources:
            writer.record_source(source, states.get(source, {}))
    return written, sorted(sources)


# Fields a chunk must have, with their type: anything else in a file would reach the store as is.
_REQUIRED = {
    **dict.fromkeys(("chunk_id", "doc_id", "source", "path", "title", "section", "category", "doc_type"), str),
    **dict.fromkeys(("content", "content_hash"), str),
    "breadcrumb": list,
    "chunk_index": int,
    "embedding": list,
}


def _chunk(row: dict[str, Any], path: Path, number: int, dimension: int) -> Chunk:
    wrong = [name for name, kind in _REQUIRED.items() if not isinstance(row.get(name), kind)]
    if wrong:
        raise ConfigError(f"{path}:{number}: not a chunk (missing or mistyped: {', '.join(wrong)})")
    vector = row["embedding"]
    if len(vector) != dimension or not all(isinstance(x, int | float) and not isinstance(x, bool) for x in vector):
        raise ConfigError(f"{path}:{number}: chunk {row['chunk_id']} has no {dimension}-d vector of numbers")
    try:
        return Chunk.from_dict(row)
    except TypeError as exc:
        raise ConfigError(f"{path}:{number}: not a chunk ({exc})") from None


def _write(writer, chunks: list[Chunk]) -> int:  # noqa: ANN001 - a StoreWriter
    if not chunks:
        return 0
    report = writer.write(chunks)
    if report.failed:
        chunk_id, reason = report.failed[0]
        raise StoreError(f"{len(report.failed)} chunks could not be imported (first {chunk_id}: {reason})")
    return report.written
