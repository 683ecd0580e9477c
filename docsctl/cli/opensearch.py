"""`docsctl opensearch up|down|status|logs`: a local OpenSearch node for docsctl, without Docker."""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Annotated

import typer
from rich.markup import escape

from docsctl import opensearch_node
from docsctl.cli.common import ConfigOption, DataDirOption, err_console, print_json, settings_from, user_errors
from docsctl.config import Settings

app = typer.Typer(
    help="Run a local OpenSearch node (k-NN plugin included, plain HTTP on 127.0.0.1) for docsctl. "
    "The first `up` downloads OpenSearch from Maven Central into the cache; Java 21+ is needed.",
    no_args_is_help=True,
)

PortOption = Annotated[
    int | None, typer.Option("--port", help="HTTP port of the node (default 9200, or opensearch_port).")
]
JsonOption = Annotated[bool, typer.Option("--json", help="Print one JSON object instead of text.")]


def _settings(config: Path | None, data_dir: Path | None, port: int | None, **more: str | None) -> Settings:
    return settings_from(config, data_dir=data_dir, opensearch_port=port, **more)


def _flags(port: int, data_dir: Path | None) -> str:
    """The flags that name this node again in a follow-up command."""
    return f"--port {port}" + (f" --data-dir {data_dir}" if data_dir else "")


@contextmanager
def _progress(first: str) -> Iterator[Callable[[str], None]]:
    """A spinner on a terminal; elsewhere (CI, pipes) each new kind of message once, on stderr."""
    if err_console.is_terminal:
        with err_console.status(escape(first)) as spinner:
            yield lambda message: spinner.update(escape(message))
        return
    shown: set[str] = set()

    def say(message: str) -> None:
        kind = re.sub(r"\d+", "#", message)
        if kind not in shown:
            shown.add(kind)
            err_console.print(message, markup=False, highlight=False, soft_wrap=True)

    yield say


@app.command()
def up(
    *,
    port: PortOption = None,
    heap_max: Annotated[
        str | None, typer.Option("--heap-max", help="Largest Java heap, like 1g or 512m (default 1g).")
    ] = None,
    data_dir: DataDirOption = None,
    config: ConfigOption = None,
    wait: Annotated[int, typer.Option("--wait", help="Seconds to wait for the node to get ready.")] = 120,
    fast_start: Annotated[
        bool,
        typer.Option(
            "--fast-start",
            help="Ready in about half the time (JVM quick compiler only) but slower under sustained load: "
            "for short-lived nodes such as CI's.",
        ),
    ] = False,
    as_json: JsonOption = False,
) -> None:
    """Start a local OpenSearch node and wait until it is ready; nothing happens if one already runs.

    Example: docsctl opensearch up --port 9200
    """
    with user_errors():
        settings = _settings(config, data_dir, port, opensearch_heap_max=heap_max)
        already = opensearch_node.status(settings).running
        with _progress(f"starting OpenSearch on port {settings.opensearch_port}") as say:
            node = opensearch_node.up(settings, progress=say, wait_seconds=wait, fast_start=fast_start)
    if as_json:
        print_json(node.to_dict() | {"already_running": already})
        return
    owner = f"pid {node.pid}" if node.pid else "not started by docsctl"
    verb = "was already running" if already else "is up"
    typer.echo(f"OpenSearch {node.version} {verb} at {node.url} (health {node.health}, {owner})")
    typer.echo("Next, point docsctl at it and index your documentation:")
    typer.echo(f"  export DOCSCTL_OPENSEARCH_URL={node.url}")
    typer.echo("  docsctl reindex ./docs --source mydocs")
    if node.pid:
        typer.echo(f"Stop it with: docsctl opensearch down {_flags(settings.opensearch_port, data_dir)}")


@app.command()
def down(
    *,
    port: PortOption = None,
    data_dir: DataDirOption = None,
    config: ConfigOption = None,
    wait: Annotated[int, typer.Option("--wait", help="Seconds to wait after SIGTERM before SIGKILL.")] = 60,
    as_json: JsonOption = False,
) -> None:
    """Stop the node that `docsctl opensearch up` started on this port (its data stays).

    Example: docsctl opensearch down --port 9200
    """
    with user_errors():
        settings = _settings(config, data_dir, port)
        with _progress(f"stopping OpenSearch on port {settings.opensearch_port}"):
            stopped = opensearch_node.down(settings, wait_seconds=wait)
    url = opensearch_node.node_url(settings)
    if as_json:
        print_json({"stopped": stopped, "url": url})
    elif stopped:
        typer.echo(f"stopped OpenSearch on {url}")
    else:
        typer.echo(f"no node is running on port {settings.opensearch_port}: nothing to stop")


@app.command()
def status(
    *,
    port: PortOption = None,
    data_dir: DataDirOption = None,
    config: ConfigOption = None,
    as_json: JsonOption = False,
) -> None:
    """Show whether a node answers on the port, with its version, health, PID and folders.

    Exits 1 when no node is running, so scripts can write
    `docsctl opensearch status >/dev/null || docsctl opensearch up`.

    Example: docsctl opensearch status --json
    """
    with user_errors():
        settings = _settings(config, data_dir, port)
        node = opensearch_node.status(settings)
    if as_json:
        print_json(node.to_dict())
    else:
        rows = {
            "state": node.state,
            "url": node.url,
            "version": node.version or "-",
            "health": node.health or "-",
            "pid": node.pid or "-",
            "data": node.data_dir,
            "log": node.log_file,
            "install": node.install_dir,
        }
        for key, value in rows.items():
            typer.echo(f"{key:<8} {value}")
    if not node.running:
        raise typer.Exit(1)


@app.command()
def logs(
    *,
    port: PortOption = None,
    data_dir: DataDirOption = None,
    config: ConfigOption = None,
    lines: Annotated[int, typer.Option("--lines", "-n", min=1, help="How many lines from the end.")] = 50,
) -> None:
    """Print the end of the node's console log (what OpenSearch wrote to stdout and stderr).

    Example: docsctl opensearch logs --lines 100
    """
    with user_errors():
        text = opensearch_node.logs(_settings(config, data_dir, port), lines=lines)
    typer.echo(text)
