"""`docsctl query`: search the index from the shell."""

from __future__ import annotations

import re
from typing import Annotated

import typer
from rich.console import Console
from rich.markup import escape

from docsctl.cli.common import (
    BackendOption,
    ConfigOption,
    DataDirOption,
    UrlOption,
    print_json,
    settings_from,
    user_errors,
)
from docsctl.models import Filters, Hit

console = Console(highlight=False)


def _fragment(text: str) -> str:
    """Highlight markup (<em>) as bold; everything else printed literally."""
    parts = re.split(r"(<em>.*?</em>)", " ".join(text.split()))
    return "".join(
        f"[bold yellow]{escape(part[4:-5])}[/]" if part.startswith("<em>") else escape(part) for part in parts
    )


def _location(hit: Hit) -> str:
    chunk = hit.chunk
    anchor = f"#{chunk.anchor}" if chunk.anchor else ""
    return f"{chunk.source}:{chunk.path}{anchor}"


def query(
    text: Annotated[str, typer.Argument(help="What to look for, in plain words or exact names.")],
    *,
    also: Annotated[
        list[str] | None,
        typer.Option("--also", help="Another wording of the same question (repeatable, up to 4): rankings are fused."),
    ] = None,
    category: Annotated[list[str] | None, typer.Option("--category", help="Only this category (repeatable).")] = None,
    source: Annotated[list[str] | None, typer.Option("--source", "-s", help="Only this source (repeatable).")] = None,
    version: Annotated[list[str] | None, typer.Option("--version", help="Only this version label.")] = None,
    mode: Annotated[str, typer.Option(help="hybrid (default), bm25 or knn.")] = "hybrid",
    k: Annotated[int, typer.Option("-k", "--limit", help="How many results (1-50).")] = 5,
    offset: Annotated[int, typer.Option(help="Skip this many results (paging).")] = 0,
    all_chunks: Annotated[
        bool, typer.Option("--all-chunks", help="Show every matching chunk, not one per document.")
    ] = False,
    as_json: Annotated[bool, typer.Option("--json", help="Print the full result as JSON.")] = False,
    config: ConfigOption = None,
    opensearch_url: UrlOption = None,
    backend: BackendOption = None,
    data_dir: DataDirOption = None,
) -> None:
    """Search the index: the best section of each matching document, with highlights.

    Example: docsctl query "how to color protein by chain" --category commands
    Example: docsctl query "turn a lysine into an alanine" --also "swap amino acid residue"
    """
    with user_errors():
        settings = settings_from(config, opensearch_url, backend, data_dir)
        from docsctl.embedding import embedder_for
        from docsctl.server.search import Searcher
        from docsctl.store import open_store

        searcher = Searcher(open_store(settings), embedder_for(settings))
        filters = Filters(tuple(category or ()), tuple(source or ()), tuple(version or ()))
        result = searcher.search(
            text, limit=k, offset=offset, mode=mode, filters=filters, per_document=not all_chunks, rewordings=also or ()
        )
    if as_json:
        print_json(result.to_dict())
        return
    if not result.hits:
        console.print("no results")
        return
    for rank, hit in enumerate(result.hits, start=offset + 1):
        chunk = hit.chunk
        trail = " › ".join(chunk.trail())
        console.print(f"[bold]{rank}. {escape(trail)}[/]  [dim]{hit.score:.4f}[/]")
        where = f"{chunk.category} · lines {chunk.start_line}-{chunk.end_line}"
        console.print(f"   [cyan]{escape(_location(hit))}[/]  [dim]{where}[/]")
        for fragment in hit.highlights[:2]:
            console.print(f"   {_fragment(fragment)}")
    console.print(f"[dim]{len(result.hits)} of {result.total} · {result.mode} · {result.took_ms:.0f} ms[/]")
