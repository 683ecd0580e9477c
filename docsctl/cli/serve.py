"""`docsctl serve`: the MCP server, for AI assistants (stdio by default, or streamable HTTP)."""

from __future__ import annotations

import logging
import sys
from typing import Annotated

import typer

from docsctl.cli.common import (
    BackendOption,
    ConfigOption,
    DataDirOption,
    TokenOption,
    UrlOption,
    settings_from,
    user_errors,
)


def log_to_stderr(verbose: bool = False) -> None:
    """How a server logs (serve, ui): on stderr, docsctl's own lines at INFO, libraries' warnings only."""
    logging.basicConfig(
        stream=sys.stderr,
        level=logging.WARNING,
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
        force=True,
    )
    logging.getLogger("docsctl").setLevel(logging.INFO)
    if verbose:
        logging.getLogger("mcp").setLevel(logging.INFO)
    else:  # a traceback per retry; the store turns the failure into one clear error anyway
        logging.getLogger("opensearch").setLevel(logging.ERROR)


def serve(
    *,
    transport: Annotated[
        str, typer.Option(help="stdio (default: the assistant starts this command) or http (streamable HTTP).")
    ] = "stdio",
    host: Annotated[str, typer.Option(help="Address to listen on with --transport http.")] = "127.0.0.1",
    port: Annotated[int, typer.Option(help="Port to listen on with --transport http.")] = 8765,
    token: TokenOption = None,
    verbose: Annotated[
        bool, typer.Option("--verbose", "-v", help="Log every request and backend retry (on stderr).")
    ] = False,
    config: ConfigOption = None,
    opensearch_url: UrlOption = None,
    backend: BackendOption = None,
    data_dir: DataDirOption = None,
) -> None:
    """Serve the documentation tools to AI assistants over MCP (search_docs, lookup, get_chunk, ...).

    Loads the model and opens the index once, at start-up; logs go to stderr. It never indexes:
    build the index first with docsctl reindex PATH. With --transport http the MCP endpoint is /mcp and
    the web pages (as docsctl ui serves them) are at /.

    Example: claude mcp add docsctl -- docsctl serve
    """
    log_to_stderr(verbose)
    with user_errors():
        settings = settings_from(config, opensearch_url, backend, data_dir, token=token)
        from docsctl.server.mcp import serve as run_server

        run_server(settings, transport=transport, host=host, port=port)
