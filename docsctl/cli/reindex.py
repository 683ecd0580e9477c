"""`docsctl reindex`: index folders (or the sources of docsctl.toml) into the configured backend."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Annotated
from urllib.parse import urlsplit

import typer
from rich.markup import escape
from rich.table import Table

from docsctl.cli.common import (
    BackendOption,
    ConfigOption,
    DataDirOption,
    UrlOption,
    err_console,
    fail,
    print_json,
    progress_bars,
    settings_from,
    user_errors,
)
from docsctl.config import Settings, SiteSettings
from docsctl.errors import ConfigError
from docsctl.indexer.git import Checkout, checkout
from docsctl.indexer.site.urls import normalize_url
from docsctl.indexer.sources import (
    ResolvedSources,
    SourceTarget,
    parse_category_rule,
    resolve_sources,
    site_target,
)

if TYPE_CHECKING:
    from docsctl.indexer.pipeline import ReindexSummary  # imports the model stack; typing only


def is_web_address(path: str) -> bool:
    return path.startswith(("http://", "https://"))


def name_for_site(url: str) -> str:
    """A one-off site source is named after its host (and port, when it has one)."""
    parts = urlsplit(url)
    return f"{parts.hostname}-{parts.port}" if parts.port else str(parts.hostname)


def targets_for(
    settings: Settings, paths: list[str], names: list[str], rules: list[str], base_url: str | None, version: str
) -> ResolvedSources:
    """What to index: the folders or web addresses given (named by --source, else after the folder or
    host), else configured sources."""
    category_rules = tuple(parse_category_rule(rule) for rule in rules)
    if paths:
        if names and len(names) != len(paths):
            raise ConfigError("give one --source name per PATH (or none, to name each source after its folder)")
        targets = []
        for index, given in enumerate(paths):
            if is_web_address(given):
                if normalize_url(given) is None:
                    raise ConfigError(f"not a web address: {given}")
                name = names[index] if names else name_for_site(given)
                labels = {"category_rules": category_rules, "version": version}
                targets.append(site_target(name, given, SiteSettings(), settings.cache_dir, **labels))
                continue
            path = Path(given)
            root = path.expanduser().resolve()
            if not root.is_dir():
                raise ConfigError(f"not a folder: {path}")
            name = names[index] if names else root.name
            targets.append(
                SourceTarget(
                    name=name, root=root, category_rules=category_rules, base_url=base_url, version=version,
                    origin=str(root),
                )
            )  # fmt: skip
        return ResolvedSources(targets, [], [])
    configured = {source.name: source for source in settings.sources}
    if not configured:
        raise ConfigError("nothing to index: give a folder (docsctl reindex PATH) or declare sources in docsctl.toml")
    unknown = [name for name in names if name not in configured]
    if unknown:
        raise ConfigError(f"unknown source {', '.join(unknown)}; configured sources: {', '.join(configured)}")
    chosen = [configured[name] for name in names] if names else list(configured.values())

    def git_checkout(name: str, url: str, ref: str | None) -> Checkout:
        return checkout(name, url, ref, settings.cache_dir)

    return resolve_sources(
        chosen,
        git_checkout,
        extra_rules=category_rules,
        base_url=base_url,
        version=version,
        cache_dir=settings.cache_dir,
    )


def reindex(
    paths: Annotated[
        list[str] | None,
        typer.Argument(help="Folders of documentation, or web addresses of sites to crawl, to index.", metavar="PATH"),
    ] = None,
    *,
    source: Annotated[
        list[str] | None,
        typer.Option("--source", "-s", help="Name of the source for PATH; without PATH, a configured source."),
    ] = None,
    category_rule: Annotated[
        list[str] | None,
        typer.Option("--category-rule", "-c", help="GLOB=CATEGORY on paths inside the source, e.g. 'api/*=reference'."),
    ] = None,
    full: Annotated[
        bool,
        typer.Option(
            "--full",
            help="Rebuild the whole index beside the live one, then swap: these sources (this version) are "
            "indexed anew, other sources and versions are copied over.",
        ),
    ] = False,
    base_url: Annotated[str | None, typer.Option(help="Base URL that result links are built from.")] = None,
    version: Annotated[str, typer.Option(help="Version label of these documents, e.g. 1.8.")] = "",
    as_json: Annotated[bool, typer.Option("--json", help="Print the summary as JSON.")] = False,
    config: ConfigOption = None,
    opensearch_url: UrlOption = None,
    backend: BackendOption = None,
    data_dir: DataDirOption = None,
) -> None:
    """Index documentation folders or websites; unchanged files and pages are skipped, so re-running is cheap.

    Example: docsctl reindex ./docs --source mydocs --category-rule 'api/*=reference'
    (or docsctl reindex https://docs.example.org/guide/ for a site, crawled politely under that path)
    """
    with user_errors():
        settings = settings_from(config, opensearch_url, backend, data_dir)
        resolved = targets_for(settings, paths or [], source or [], category_rule or [], base_url, version)
        for name, reason in resolved.failures:
            err_console.print(f"[bold red]source {escape(name)} failed:[/] {escape(reason)}", highlight=False)
        for note in resolved.notes:
            err_console.print(f"[yellow]note:[/] {escape(note)}", highlight=False)
        if not resolved.targets:
            fail("no source could be read")
        targets = resolved.targets
        from docsctl.embedding import EmbeddingCache, embedder_for
        from docsctl.indexer.pipeline import reindex as run_reindex
        from docsctl.store import open_store

        store = open_store(settings)
        embedder = embedder_for(settings)
        cache = EmbeddingCache(settings.embedding_cache_path, settings.model)
        with progress_bars(as_json, lambda name: f"indexing {name}") as bars:
            summary = run_reindex(
                store, embedder, targets, lock_path=settings.lock_path, full=full, cache=cache, progress=bars,
                crawl_progress=bars.crawled,
            )  # fmt: skip
        cache.close()
        embedder.prepare_queries()  # while torch is loaded (if anything was embedded), not in the first query
    failed_sources = [{"source": name, "reason": reason} for name, reason in resolved.failures]
    for name, crawled in summary.crawls.items():
        if not crawled["fetched"] + crawled["not_modified"]:  # not one page: the site, not a page, failed
            reasons = [reason for path, reason in summary.skipped if path.startswith(f"{name}:")]
            failed_sources.append({"source": name, "reason": reasons[0] if reasons else "no page could be fetched"})
    if as_json:
        print_json({"backend": store.backend, **summary.to_dict(), "failed_sources": failed_sources})
    else:
        _print_summary(store.backend, summary)
    if summary.write_failures:
        fail(f"{len(summary.write_failures)} chunks could not be stored (first: {summary.write_failures[0][1]})")
    if failed_sources:
        fail(f"{len(failed_sources)} source(s) could not be read: {', '.join(f['source'] for f in failed_sources)}")


def _print_summary(backend: str, summary: ReindexSummary) -> None:
    table = Table(show_header=False, box=None, pad_edge=False)
    table.add_row("sources", ", ".join(summary.sources))
    table.add_row("backend", backend + (f" (new index: {summary.rebuild_reason})" if summary.rebuilt else ""))
    for source, crawled in summary.crawls.items():
        table.add_row(
            f"crawl {source}",
            f"{crawled['fetched']} fetched, {crawled['not_modified']} unchanged, {crawled['gone']} gone, "
            f"{crawled['disallowed']} disallowed by robots.txt, {crawled['duplicates']} duplicates; "
            f"{crawled['requests']} requests, {crawled['bytes'] / 1e6:.1f} MB, "
            f"{crawled['pages_per_second']:.1f} pages/s",
        )
    table.add_row("files seen", str(summary.files_seen))
    table.add_row(
        "documents",
        f"{summary.added} added, {summary.changed} changed, {summary.removed} removed, {summary.unchanged} unchanged",
    )
    table.add_row(
        "skipped", str(len(summary.skipped)) + (f" ({summary.ignored} other files ignored)" if summary.ignored else "")
    )
    table.add_row("chunks", f"{summary.chunks_written} written, {summary.chunks_embedded} embedded")
    if summary.chunks_carried:
        table.add_row("kept", f"{summary.chunks_carried} chunks of other sources")
    table.add_row("seconds", f"{summary.seconds:.1f}")
    err_console.print(table)
    reasons: dict[str, list[str]] = {}
    for path, reason in summary.skipped:
        reasons.setdefault(reason, []).append(path)
    for reason, paths in sorted(reasons.items(), key=lambda item: -len(item[1])):
        example = paths[0] + (f" and {len(paths) - 1} more" if len(paths) > 1 else "")
        err_console.print(f"  skipped {len(paths)}: {reason} ({example})", highlight=False)
