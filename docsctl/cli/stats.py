"""`docsctl stats` and `docsctl explain`: the operator's view of an index, and of one ranking."""

from __future__ import annotations

from typing import Annotated, Any

import typer
from rich.console import Console
from rich.markup import escape
from rich.table import Table

from docsctl.cli.common import (
    BackendOption,
    ConfigOption,
    DataDirOption,
    JsonOption,
    UrlOption,
    print_json,
    settings_from,
    user_errors,
)

console = Console(highlight=False, soft_wrap=True)  # lines stay whole: easy to grep and paste


def stats(
    *,
    as_json: JsonOption = False,
    config: ConfigOption = None,
    opensearch_url: UrlOption = None,
    backend: BackendOption = None,
    data_dir: DataDirOption = None,
) -> None:
    """Show what the index holds: documents and chunks per source and category, size on disk, mapping
    version, model and dimension, and each source's last reindex (files seen and skipped).

    Example: docsctl stats --json
    """
    with user_errors():
        settings = settings_from(config, opensearch_url, backend, data_dir)
        from docsctl.server.explain import human_size, index_stats
        from docsctl.store import open_store

        info = index_stats(open_store(settings))
    if as_json:
        print_json(info)
        return
    console.print(
        f"[bold]{escape(info['backend'])}[/] {escape(str(info['location']))}"
        + (f" ({escape(str(info['index']))})" if info["index"] else "")
    )
    console.print(
        f"{info['documents']} documents, {info['chunks']} chunks, {human_size(info['size_bytes'])} on disk · "
        f"mapping v{info['mapping_version']} · {escape(info['model'])} ({info['dimension']} dimensions)"
    )
    table = Table("source", "category", "documents", "chunks")
    for source in info["sources"]:
        name = escape(source["source"])
        for row in source["categories"]:
            table.add_row(name, escape(row["category"]), str(row["documents"]), str(row["chunks"]))
        table.add_row(f"[bold]{name}[/]", "[bold]all[/]", str(source["documents"]), str(source["chunks"]))
    console.print(table)
    runs = Table("source", "last reindex", "files", "skipped", "origin")
    for source in info["sources"]:
        last = source["last_reindex"] or {}
        origin = (last.get("origin") or "-") + (f" @ {last['commit'][:10]}" if last.get("commit") else "")
        runs.add_row(
            escape(source["source"]),
            escape(str(last.get("last_indexed") or "unknown")),
            str(last.get("files", "-")),
            str(last.get("skipped", "-")),
            escape(origin),
        )
    console.print(runs)


def _where(view: dict[str, Any]) -> str:
    if view["rank"] is None:
        return f"not in top {view['depth']}"
    return f"rank {view['rank']} (chunk rank {view['chunk_rank']} of {view['depth']}), score {view['score']:.4g}"


def _chunk(chunk: dict[str, Any] | None) -> str:
    if chunk is None:
        return "-"
    return f"#{chunk['chunk_index']} {' › '.join(chunk['trail'])}"


def explain(
    text: Annotated[str, typer.Argument(help="The query, as you would give it to docsctl query.")],
    *,
    path: Annotated[str, typer.Option("--path", help="The document's path, as docsctl query shows it.")],
    source: Annotated[
        str | None, typer.Option("--source", "-s", help="The document's source (needed when paths repeat).")
    ] = None,
    depth: Annotated[int, typer.Option("--depth", help="How deep to look in each retriever's list.")] = 200,
    as_json: JsonOption = False,
    config: ConfigOption = None,
    opensearch_url: UrlOption = None,
    backend: BackendOption = None,
    data_dir: DataDirOption = None,
) -> None:
    """Explain why a document ranks where it does for a query: its BM25 and k-NN ranks and scores, the
    fused score and rank of hybrid search, and the fields that matched the query's terms.

    Example: docsctl explain "color protein by chain" --path user/commands/color.html
    """
    with user_errors():
        if not 1 <= depth <= 10_000:  # 10,000: what an OpenSearch search returns at most
            from docsctl.errors import ConfigError

            raise ConfigError(f"depth must be between 1 and 10000, not {depth}")
        settings = settings_from(config, opensearch_url, backend, data_dir)
        from docsctl.embedding import embedder_for
        from docsctl.server.explain import explain as explain_rank
        from docsctl.server.search import Searcher
        from docsctl.store import open_store

        searcher = Searcher(open_store(settings), embedder_for(settings))
        result = explain_rank(searcher, text, path, source, depth=depth).to_dict()
    if as_json:
        print_json(result)
        return
    doc, fusion = result["document"], result["fusion"]
    weight_text = " · ".join(f"{name} {weight:g}" for name, weight in fusion["weights"].items())
    console.print(f"[bold]{escape(doc['source'])}:{escape(doc['path'])}[/]  {escape(doc['title'])}")
    console.print(
        f"[dim]query {escape(repr(result['query']))}: {result['query_kind']} weights {weight_text}; "
        f"{fusion['method']}" + (f" k={fusion['rrf_k']}" if fusion["method"] == "rrf" else "") + "[/]"
    )
    if result["rank"] is None:
        console.print(
            f"hybrid   not among the {result['fused_total']} fused documents: in neither retriever's "
            f"top {fusion['candidates']} chunks"
        )
    else:
        console.print(
            f"hybrid   rank {result['rank']} of {result['fused_total']}, score {result['score']:.5f} "
            f"(fused from the top {fusion['candidates']} chunks of each retriever)"
        )
        weights, ranks, k = fusion["weights"], result["list_ranks"], fusion["rrf_k"]
        parts = [
            f"{name} {weights.get(name, 1.0):g}/({k}+{ranks[name]}) = {value:.5f}"
            for name, value in result["contributions"].items()
        ]
        if parts:
            console.print(f"         = {' + '.join(parts)}")
        console.print(f"         shows {escape(_chunk(result['shown']))}")
    for name, view in result["retrievers"].items():
        console.print(f"{name:<8} {_where(view)}")
        if view["chunk"] is not None:
            console.print(f"         best chunk {escape(_chunk(view['chunk']))}")
    matched = result["matched"]
    fields = ", ".join(f"{field} ({', '.join(terms)})" for field, terms in matched["fields"].items())
    console.print(f"matched  {escape(fields) if fields else 'no field matches the terms of the query'}")
    console.print(f"         in chunk {escape(_chunk(matched['chunk']))}, bm25 score {matched['score'] or 0:.4g}")
