"""The `docsctl` command: one module per command, registered here in one place.

Command modules import heavy libraries (torch, opensearch-py) inside their functions so that
`docsctl --help` answers at once.
"""

from __future__ import annotations

import typer

from docsctl.cli import dashboards, opensearch, query, reindex, remove, serve, stats, status, ui
from docsctl.cli import eval as eval_cli

app = typer.Typer(
    name="docsctl",
    help="Index documentation and search it (hybrid BM25 + vectors) from a shell or an AI assistant.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)
app.command()(reindex.reindex)
app.command()(remove.remove)
app.command()(query.query)
app.command()(serve.serve)
app.command()(ui.ui)
app.command()(status.status)
app.command()(status.sources)
app.command()(status.export)
app.command("import")(status.import_)
app.command("eval")(eval_cli.eval_command)
app.add_typer(opensearch.app, name="opensearch")
app.command()(stats.stats)
app.command()(stats.explain)
app.add_typer(dashboards.app, name="dashboards")


def main() -> None:
    app()
