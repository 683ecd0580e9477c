"""`docsctl remove`: take a source, or one version of it, out of the index."""

from __future__ import annotations

from typing import Annotated

import typer
from rich.console import Console
from rich.markup import escape

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

console = Console(highlight=False)


def remove(
    source: Annotated[str, typer.Argument(help="The source to remove, as `docsctl sources` names it.")],
    *,
    version: Annotated[
        str | None,
        typer.Option(help="Remove only this version of the source (its other versions stay); default: every version."),
    ] = None,
    as_json: JsonOption = False,
    config: ConfigOption = None,
    opensearch_url: UrlOption = None,
    backend: BackendOption = None,
    data_dir: DataDirOption = None,
) -> None:
    """Remove a source's documents from the index (searches keep seeing it whole until the new index is swapped
    in). A source still declared in docsctl.toml comes back with the next `docsctl reindex`.

    Example: docsctl remove olddocs   (or: docsctl remove mydocs --version 1.7)
    """
    with user_errors():
        settings = settings_from(config, opensearch_url, backend, data_dir)
        from docsctl.indexer.removal import remove_source
        from docsctl.store import open_store

        store = open_store(settings)
        with err_console.status(f"removing {escape(source)}: copying the other sources into a new index"):
            summary = remove_source(store, source, version, lock_path=settings.lock_path)
    if as_json:
        print_json(summary.to_dict())
        return
    what = f"{summary.source} version {summary.version!r}" if summary.version is not None else summary.source
    console.print(
        f"removed {escape(what)}: {summary.documents} documents, {summary.chunks} chunks "
        f"({summary.kept} chunks of other sources kept, {summary.seconds:.1f} s)"
    )
