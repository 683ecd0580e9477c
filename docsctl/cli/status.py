"""`docsctl status`, `docsctl sources`, `docsctl export` and `docsctl import`: what is indexed, and moving it."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.console import Console
from rich.table import Table

from docsctl.cli.common import (
    BackendOption,
    ConfigOption,
    DataDirOption,
    JsonOption,
    UrlOption,
    err_console,
    print_json,
    settings_from,
    user_errors,
)
from docsctl.errors import IndexMissingError

console = Console(highlight=False)


def status(
    *,
    as_json: JsonOption = False,
    config: ConfigOption = None,
    opensearch_url: UrlOption = None,
    backend: BackendOption = None,
    data_dir: DataDirOption = None,
) -> None:
    """Say which backend is in use, where its data lives, and what the index holds.

    Example: docsctl status --json
    """
    with user_errors():
        settings = settings_from(config, opensearch_url, backend, data_dir)
        from docsctl.store import open_store

        store = open_store(settings)
        info: dict[str, Any] = {"backend": settings.backend_name, "data_dir": str(settings.data_dir)}
        info.update(store.describe())
        meta = store.index_meta()
        info["index_exists"] = meta is not None
        if meta is not None:
            info.update(model=meta.model, dimension=meta.dimension, mapping_version=meta.mapping_version)
            sources = store.list_sources()
            info["documents"] = sum(s.documents for s in sources)
            info["chunks"] = sum(s.chunks for s in sources)
            info["sources"] = [s.source for s in sources]
    if as_json:
        print_json(info)
        return
    table = Table(show_header=False, box=None, pad_edge=False)
    for key, value in info.items():
        table.add_row(key, ", ".join(value) if isinstance(value, list) else str(value))
    console.print(table)
    if not info["index_exists"]:
        console.print("no index yet: run docsctl reindex PATH")


def sources(
    *,
    as_json: JsonOption = False,
    config: ConfigOption = None,
    opensearch_url: UrlOption = None,
    backend: BackendOption = None,
    data_dir: DataDirOption = None,
) -> None:
    """List configured and indexed sources: documents, chunks, versions, when and from where they were indexed.

    Example: docsctl sources
    """
    with user_errors():
        settings = settings_from(config, opensearch_url, backend, data_dir)
        from docsctl.store import open_store

        store = open_store(settings)
        try:
            indexed = {info.source: info for info in store.list_sources()}
            states = store.source_states()
        except IndexMissingError:
            indexed, states = {}, {}
    rows = []
    configured = {source.name: source for source in settings.sources}
    for name in [*configured, *(n for n in indexed if n not in configured)]:
        info, state = indexed.get(name), states.get(name, {})
        rows.append(
            {
                "source": name,
                "configured": name in configured,
                "kind": configured[name].kind if name in configured else None,
                "documents": info.documents if info else 0,
                "chunks": info.chunks if info else 0,
                "versions": info.versions if info else {},
                "categories": info.categories if info else {},
                "last_indexed": state.get("last_indexed") or (info.last_indexed if info else None),
                "origin": state.get("origin"),
                "commit": state.get("commit"),
            }
        )
    if as_json:
        print_json(rows)
        return
    if not rows:
        console.print("no sources: run docsctl reindex PATH, or declare [[source]] entries in docsctl.toml")
        return
    table = Table("source", "documents", "chunks", "versions", "last indexed", "origin")
    for row in rows:
        versions = ", ".join(v or "(none)" for v in row["versions"]) or "-"
        origin = (row["origin"] or "-") + (f" @ {row['commit'][:10]}" if row["commit"] else "")
        table.add_row(
            row["source"],
            str(row["documents"]),
            str(row["chunks"]),
            versions,
            str(row["last_indexed"] or "never"),
            origin,
        )
    console.print(table)


def export(
    output: Annotated[Path | None, typer.Argument(help="File to write (default: standard output).")] = None,
    *,
    config: ConfigOption = None,
    opensearch_url: UrlOption = None,
    backend: BackendOption = None,
    data_dir: DataDirOption = None,
) -> None:
    """Write the whole index, vectors included, as JSON Lines (to move it to another backend).

    Example: docsctl export index.jsonl, then docsctl import index.jsonl --opensearch-url http://127.0.0.1:9200
    """
    with user_errors():
        settings = settings_from(config, opensearch_url, backend, data_dir)
        from docsctl.store import open_store
        from docsctl.store.transfer import export_index

        store = open_store(settings)
        if output is None:
            count = export_index(store, sys.stdout)
        else:
            with output.open("w", encoding="utf-8") as handle:
                count = export_index(store, handle)
    err_console.print(f"exported {count} chunks from {store.backend}")


def import_(
    file: Annotated[Path, typer.Argument(help="A file written by docsctl export.", exists=True, dir_okay=False)],
    *,
    config: ConfigOption = None,
    opensearch_url: UrlOption = None,
    backend: BackendOption = None,
    data_dir: DataDirOption = None,
) -> None:
    """Load an export into the configured backend without re-embedding; its sources replace any of the same name.

    Example: docsctl import index.jsonl --opensearch-url http://127.0.0.1:9200
    """
    with user_errors():
        settings = settings_from(config, opensearch_url, backend, data_dir)
        from docsctl.indexer.lock import reindex_lock
        from docsctl.store import open_store
        from docsctl.store.transfer import import_index

        store = open_store(settings)
        with reindex_lock(settings.lock_path, f"import of {file.name}"):
            count, names = import_index(store, file)
    err_console.print(f"imported {count} chunks of {', '.join(names) or 'no source'} into {store.backend}")
