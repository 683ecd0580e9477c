"""The `docsctl` command: one module per command, registered here in one place.

Command modules import heavy libraries (torch, opensearch-py) inside their functions so that
`docsctl --help` answers at once.
"""

from __future__ import annotations

import typer

from docsctl.cli import opensearch

app = typer.Typer(
    name="docsctl",
    help="Index documentation and search it with hybrid BM25 + vector search, from the shell or an AI assistant.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)
app.add_typer(opensearch.app, name="opensearch")


def main() -> None:
    app()
