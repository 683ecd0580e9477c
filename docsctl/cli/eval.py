"""`docsctl eval`: measure search quality on judged queries (MRR, recall, nDCG at document level)."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer
from rich.console import Console
from rich.markup import escape
from rich.table import Table

from docsctl.cli.common import (
    BackendOption,
    ConfigOption,
    DataDirOption,
    UrlOption,
    print_json,
    progress_bars,
    settings_from,
    user_errors,
)

if TYPE_CHECKING:
    from docsctl.evaluation.run import EvalReport

console = Console(highlight=False)

# (metric, column header): short headers keep the table within 80 columns.
SHOWN = (
    ("MRR@10", "MRR@10"),
    ("Recall@1", "R@1"),
    ("Recall@5", "R@5"),
    ("Recall@10", "R@10"),
    ("Success@5", "S@5"),
    ("nDCG@10", "nDCG@10"),
)
LEGEND = (
    "R@k: Recall@k, the fraction of a query's relevant documents in its top k; "
    "S@5: Success@5, 1 when any relevant document is in the top 5."
)


def _metrics_table(title: str, rows: list[tuple[str, str, int, dict[str, float]]]) -> Table:
    table = Table(title=title, title_justify="left", caption=LEGEND, caption_justify="left", show_edge=False)
    table.add_column("mode")
    table.add_column("corpus / kind", no_wrap=True)
    table.add_column("n", justify="right")
    for _, header in SHOWN:
        table.add_column(header, justify="right")
    for mode, kind, count, means in rows:
        table.add_row(mode, kind, str(count), *(f"{means[name]:.3f}" for name, _ in SHOWN))
    return table


def eval_command(
    queries: Annotated[Path, typer.Argument(help="Judged queries, JSON Lines: id, corpus, query, relevant, kind.")],
    *,
    corpora: Annotated[
        Path, typer.Option("--corpora", help="Folder holding one sub-folder per corpus named in the queries.")
    ],
    mode: Annotated[str, typer.Option(help="bm25, knn, hybrid or all (default).")] = "all",
    index: Annotated[
        str | None,
        typer.Option(
            "--index",
            help="Index to build and search (an OpenSearch alias; the SQLite file's name). Default: the "
            "configured index_alias + '-eval', so that the corpora never join the index you search.",
        ),
    ] = None,
    as_json: Annotated[
        bool, typer.Option("--json", help="Print the whole report, rankings included, as JSON.")
    ] = False,
    config: ConfigOption = None,
    opensearch_url: UrlOption = None,
    backend: BackendOption = None,
    data_dir: DataDirOption = None,
) -> None:
    """Index each corpus (incrementally) as a source named after it, run every query in its corpus, and
    report MRR@10, Recall@1/5/10, Success@5 and nDCG@10 per mode, overall and per query kind.

    The corpora go into an index of their own (--index), kept for the next run, which only indexes what changed.

    Example: docsctl eval ../shared/eval/dev.jsonl --corpora ../shared/corpora --mode all
    """
    with user_errors():
        settings = settings_from(config, opensearch_url, backend, data_dir)
        settings = replace(settings, index_alias=index or f"{settings.index_alias}-eval")
        from docsctl.evaluation.run import corpora_of, load_queries, parse_modes

        modes = parse_modes(mode)
        judged = load_queries(queries)
        corpora_of(judged, corpora)  # fail on bad input before loading the model or touching the index

        from docsctl.embedding import EmbeddingCache, embedder_for
        from docsctl.evaluation.run import run_eval
        from docsctl.store import open_store

        store = open_store(settings)
        embedder = embedder_for(settings)
        cache = EmbeddingCache(settings.embedding_cache_path, settings.model)
        try:
            with progress_bars(as_json) as advance:
                report = run_eval(
                    store, embedder, queries, corpora, modes=modes, lock_path=settings.lock_path,
                    cache=cache, progress=advance,
                )  # fmt: skip
        finally:
            cache.close()
    if as_json:
        print_json(report.to_dict())
        return
    print_report(report, f"{len(judged)} queries · {settings.backend_name} · document level")


def print_report(report: EvalReport, title: str) -> None:
    """The metrics table (every mode overall, per corpus, per kind) and each mode's misses."""
    rows = []
    for name, mode_report in report.modes.items():
        rows.append((name, "all", mode_report.overall.count, mode_report.overall.means))
    for group in ("by_corpus", "by_kind"):
        for name, mode_report in report.modes.items():
            for label, summary in getattr(mode_report, group).items():
                rows.append((name, label, summary.count, summary.means))
    console.print(_metrics_table(title, rows))
    for name, mode_report in report.modes.items():
        misses = mode_report.misses
        console.print(f"\n[bold]{name}[/]: {len(misses)} queries with no relevant document in the top 5")
        for result in misses:
            where = f"first relevant at {result.first_relevant}" if result.first_relevant else "none in the top 10"
            console.print(f"  {result.query.id} {escape(result.query.query)} [dim]({where})[/]")
            if result.ranking:
                console.print(f"    [dim]1. {escape(result.ranking[0])}[/]", overflow="ellipsis", no_wrap=True)
