"""What every command shares: turning errors into one red line, and the settings flags."""

from __future__ import annotations

import json
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, NoReturn

import typer
from rich.console import Console
from rich.markup import escape
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

from docsctl.config import Settings, load_settings
from docsctl.errors import DocsctlError

if TYPE_CHECKING:
    from docsctl.indexer.site import CrawlStats

err_console = Console(stderr=True)


def fail(message: str, code: int = 1) -> NoReturn:
    err_console.print(f"[bold red]error:[/] {escape(message)}", highlight=False, soft_wrap=True)
    raise typer.Exit(code)


@contextmanager
def user_errors() -> Iterator[None]:
    """Turn any DocsctlError into one line on stderr and exit code 1; Ctrl-C into exit 130."""
    try:
        yield
    except DocsctlError as exc:
        fail(str(exc))
    except KeyboardInterrupt:
        fail("interrupted", 130)


class ProgressBars:
    """Called as `(what, done, total)`, draws one bar per `what`; `crawled(source, stats)` draws a crawl's."""

    def __init__(self, progress: Progress, label: Callable[[str], str]) -> None:
        self._progress, self._label = progress, label
        self._tasks: dict[str, Any] = {}

    def __call__(self, what: str, done: int, total: int, description: str | None = None) -> None:
        if what not in self._tasks:
            self._tasks[what] = self._progress.add_task(description or self._label(what), total=total)
        self._progress.update(self._tasks[what], completed=done, total=total, description=description)

    def crawled(self, source: str, stats: CrawlStats) -> None:
        done = stats.fetched + stats.not_modified + stats.skipped + stats.gone + stats.duplicates
        description = (
            f"crawling {source}: {stats.fetched + stats.not_modified} fetched, {stats.queued} queued, "
            f"{stats.skipped} skipped, {stats.pages_per_second:.1f}/s"
        )
        self(f"crawl {source}", done, done + stats.queued, description)


@contextmanager
def progress_bars(quiet: bool, label: Callable[[str], str] = str) -> Iterator[ProgressBars]:
    """Bars on stderr (see ProgressBars); nothing when quiet or not a terminal."""
    progress = Progress(
        TextColumn("[bold]{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        console=err_console,
        transient=True,
        disable=quiet or not err_console.is_terminal,
    )
    with progress:
        yield ProgressBars(progress, label)


def print_json(data: Any) -> None:
    sys.stdout.write(json.dumps(data, ensure_ascii=False, default=str) + "\n")


ConfigOption = Annotated[
    Path | None,
    typer.Option("--config", help="docsctl.toml to read (default: ./docsctl.toml, or $DOCSCTL_CONFIG)."),
]
UrlOption = Annotated[
    str | None,
    typer.Option("--opensearch-url", help="OpenSearch URL; setting one selects the OpenSearch backend."),
]
BackendOption = Annotated[str | None, typer.Option("--backend", help="auto (default), sqlite or opensearch.")]
DataDirOption = Annotated[
    Path | None, typer.Option("--data-dir", help="Where the embedded index, caches and node data live.")
]
JsonOption = Annotated[bool, typer.Option("--json", help="Print as JSON.")]
TokenOption = Annotated[
    str | None,
    typer.Option(
        help="Over HTTP: a token every request must carry. Programs send Authorization: Bearer TOKEN; a browser "
        "opens /?token=TOKEN once (a cookie keeps it). Or set DOCSCTL_TOKEN, which keeps it out of the process list.",
        show_default=False,
    ),
]


def settings_from(
    config: Path | None = None,
    opensearch_url: str | None = None,
    backend: str | None = None,
    data_dir: Path | None = None,
    **more: Any,
) -> Settings:
    """Settings from the config file, environment and the flags given to this command."""
    return load_settings(config, opensearch_url=opensearch_url, backend=backend, data_dir=data_dir, **more)
