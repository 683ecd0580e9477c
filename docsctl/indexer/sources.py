"""Folders of documentation -> SourceDoc, with categories from path rules."""

from __future__ import annotations

import fnmatch
import os
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from docsctl.config import SiteSettings, SourceConfig
from docsctl.errors import ConfigError
from docsctl.indexer.extract import SUPPORTED_SUFFIXES
from docsctl.indexer.git import Checkout, slug
from docsctl.models import SourceDoc

# First match wins. These fit the ChimeraX layout and the usual names of documentation folders.
DEFAULT_CATEGORY_RULES: tuple[tuple[str, str], ...] = (
    ("user/commands/*", "commands"),
    ("user/tools/*", "tools"),
    ("user/tutorials/*", "tutorials"),
    ("user/*", "concepts"),
    ("devel/*", "devel"),
    ("commands/*", "commands"),
    ("*/commands/*", "commands"),
    ("guides/*", "guides"),
    ("*/reference/*", "reference"),
    ("*/how_to/*", "howto"),
    ("*/user_guide/*", "guide"),
    ("*tutorial*", "tutorials"),
    ("*/explanation/*", "concepts"),
)
FALLBACK_CATEGORY = "docs"
MAX_FILE_BYTES = 5 * 1024 * 1024
# Files of other types (images, stylesheets, build files) are counted as ignored, not as skipped.
INDEXED_SUFFIXES = frozenset(SUPPORTED_SUFFIXES) - {""}
UNSUPPORTED = "unsupported file type"


@dataclass(frozen=True)
class SourceTarget:
    """One source to index: where its files are and how to label them."""

    name: str
    root: Path
    category_rules: tuple[tuple[str, str], ...] = ()
    include: tuple[str, ...] = ()
    exclude: tuple[str, ...] = ()
    base_url: str | None = None
    version: str = ""
    origin: str = ""  # the folder or repository the files came from
    commit: str = ""
    ref: str = ""
    suffixes: frozenset[str] = INDEXED_SUFFIXES
    # A website: `origin` is its start URL, `root` the folder its pages are mirrored to. The crawl
    # (docsctl.indexer.site) fills `pages`, which then stand for the walk of `root`, and `crawl_state`.
    site: SiteSettings | None = None
    pages: tuple[tuple[SourceDoc, str | None], ...] | None = None
    crawl_state: dict[str, Any] | None = None


def site_target(
    name: str, url: str, site: SiteSettings, cache_dir: Path, *, version: str = "", **labels: Any
) -> SourceTarget:
    """The target of a website source; its pages are mirrored under `cache_dir`/site/NAME/VERSION."""
    root = cache_dir / "site" / slug(name) / slug(version or "_")
    return SourceTarget(name=name, root=root, origin=url, site=site, version=version, **labels)


def parse_category_rule(rule: str) -> tuple[str, str]:
    """'GLOB=CATEGORY' -> (GLOB, CATEGORY); a glob without wildcards matches a folder and all below it."""
    glob, sep, category = rule.partition("=")
    if not sep or not glob.strip() or not category.strip():
        raise ConfigError(f"category rule {rule!r} is not GLOB=CATEGORY (e.g. 'api/*=reference')")
    glob = glob.strip().strip("/")
    if not any(char in glob for char in "*?["):
        glob = f"{glob}/*"
    return glob, category.strip()


def category_for(path: str, rules: Sequence[tuple[str, str]]) -> str:
    for glob, category in (*rules, *DEFAULT_CATEGORY_RULES):
        if fnmatch.fnmatchcase(path, glob):
            return category
    return FALLBACK_CATEGORY


def _matches(path: str, globs: Sequence[str]) -> bool:
    return any(fnmatch.fnmatchcase(path, glob) for glob in globs)


def walk_source(target: SourceTarget) -> Iterator[tuple[SourceDoc, str | None]]:
    """Every file under the root, sorted, hidden folders skipped; with a reason when it is not indexable.

    The reason is None for files to extract, UNSUPPORTED for types docsctl does not read, else why the
    file is skipped (counted, never fatal). A crawled site yields the pages its crawl found.
    """
    if target.pages is not None:
        yield from target.pages
        return
    root = target.root
    if not root.is_dir():
        raise ConfigError(f"not a folder: {root}")
    real_root = root.resolve()
    for folder, dirs, files in os.walk(root):  # symlinked folders are not entered: no loops, no way out
        dirs[:] = sorted(d for d in dirs if not d.startswith(".") and d not in {"__pycache__", "node_modules"})
        for filename in sorted(files):
            if filename.startswith("."):
                continue
            abs_path = Path(folder) / filename
            rel = abs_path.relative_to(root).as_posix()
            if target.include and not _matches(rel, target.include):
                continue
            if target.exclude and _matches(rel, target.exclude):
                continue
            real, link_problem = _follow(abs_path, real_root)
            doc = SourceDoc(
                source=target.name,
                path=rel,
                abs_path=abs_path,
                category=category_for(rel, target.category_rules),
                version=target.version,
                url=f"{target.base_url.rstrip('/')}/{rel}" if target.base_url else real.as_uri(),
            )
            if abs_path.suffix.lower() not in target.suffixes:
                yield doc, UNSUPPORTED
            else:
                yield doc, link_problem or _unindexable_reason(abs_path)


def _follow(path: Path, real_root: Path) -> tuple[Path, str | None]:
    """Where `path` really is, and why it is not indexed when it is a symlink that loops, dangles or
    leads out of the source folder (which would index, and show, a file the source does not hold)."""
    if not path.is_symlink():
        return path.absolute(), None
    try:
        real = path.resolve(strict=True)
    except (OSError, RuntimeError) as exc:  # RuntimeError: a loop, on some Python versions
        return path.absolute(), f"unreadable: {getattr(exc, 'strerror', None) or exc}"
    if not real.is_relative_to(real_root):
        return path.absolute(), "a symlink to a file outside the source folder"
    return real, None


def _unindexable_reason(path: Path) -> str | None:
    try:
        size = path.stat().st_size
    except OSError as exc:
        return f"unreadable: {exc.strerror or exc}"
    if size > MAX_FILE_BYTES:
        return f"larger than {MAX_FILE_BYTES // (1024 * 1024)} MB"
    if not os.access(path, os.R_OK):
        return "unreadable: permission denied"
    return None


@dataclass
class ResolvedSources:
    targets: list[SourceTarget]
    failures: list[tuple[str, str]]  # (source, reason): reported, and the other sources still run
    notes: list[str]


def resolve_sources(
    sources: Sequence[SourceConfig],
    checkout: Callable[[str, str, str | None], Checkout],
    *,
    extra_rules: tuple[tuple[str, str], ...] = (),
    base_url: str | None = None,
    version: str = "",
    cache_dir: Path | None = None,
) -> ResolvedSources:
    """Configured sources -> targets; git sources are checked out (one target per ref) with `checkout`;
    site sources are crawled later, by the pipeline, into a mirror under `cache_dir`."""
    resolved = ResolvedSources([], [], [])
    for source in sources:
        common = {
            "name": source.name,
            "category_rules": extra_rules + source.category_rules,
            "include": source.include,
            "exclude": source.exclude,
            "base_url": base_url or source.base_url,
        }
        if source.kind == "dir":
            root = Path(source.path).expanduser()
            if not root.is_dir():
                resolved.failures.append((source.name, f"not a folder: {root}"))
                continue
            label = version or source.version
            resolved.targets.append(SourceTarget(root=root, version=label, origin=str(root), **common))
            continue
        if source.kind == "site":
            if cache_dir is None:
                raise ConfigError("site sources need a cache folder")  # a caller's mistake, not the user's
            del common["name"]
            target = site_target(
                source.name, source.path, source.site or SiteSettings(), cache_dir, version=version or source.version,
                **common,
            )  # fmt: skip
            resolved.targets.append(target)
            continue
        for ref in source.refs or (None,):
            try:
                done = checkout(source.name, source.path, ref)
            except ConfigError as exc:
                resolved.failures.append((f"{source.name}@{ref or 'HEAD'}", str(exc)))
                continue
            label = version or source.version or (done.ref if source.version_from_ref else "")
            resolved.targets.append(
                SourceTarget(
                    root=done.root, version=label, origin=source.path, commit=done.commit, ref=done.ref, **common
                )
            )
            if done.note:
                resolved.notes.append(f"{source.name}: {done.note}")
    return resolved
