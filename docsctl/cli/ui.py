"""`docsctl ui`: the web pages alone (search, documents and their chunks, explain, sources), for people."""

from __future__ import annotations

from typing import Annotated

import typer

from docsctl.cli.common import (
    BackendOption,
    ConfigOption,
    DataDirOption,
    TokenOption,
    UrlOption,
    fail,
    settings_from,
    user_errors,
)
from docsctl.cli.serve import log_to_stderr


def ui(
    *,
    host: Annotated[
        str, typer.Option(help="Address to listen on; other than 127.0.0.1, anyone reaching it can search.")
    ] = "127.0.0.1",
    port: Annotated[int, typer.Option(help="Port to listen on.")] = 8766,
    token: TokenOption = None,
    open_browser: Annotated[bool, typer.Option("--open", help="Open the search page in the default browser.")] = False,
    config: ConfigOption = None,
    opensearch_url: UrlOption = None,
    backend: BackendOption = None,
    data_dir: DataDirOption = None,
) -> None:
    """Serve the web pages: search with filters, each document's chunks and embedded text, why a result
    ranks where it does, and what is indexed. Read-only; Ctrl-C stops it.

    docsctl serve --transport http serves the same pages beside its MCP endpoint.

    Example: docsctl ui --open   (then http://127.0.0.1:8766/)
    """
    if not 1 <= port <= 65535:
        fail(f"port must be between 1 and 65535, not {port}")
    log_to_stderr()
    with user_errors():
        settings = settings_from(config, opensearch_url, backend, data_dir, token=token)
        from docsctl.server.web import serve

        serve(settings, host=host, port=port, open_browser=open_browser)
