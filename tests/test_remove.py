"""Removing a source, or one version of it, from a real index on each backend (docsctl remove)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from corpus_fixtures import index_folder, settings_env
from typer.testing import CliRunner

from docsctl.cli.app import app
from docsctl.errors import ConfigError, IndexMissingError, LockedError
from docsctl.indexer.lock import reindex_lock
from docsctl.indexer.removal import remove_source
from docsctl.store import open_store

PAGES = ["color.html", "cartoon.html", "transparency.html"]


@pytest.fixture
def docs(corpora_dir: Path, tmp_path: Path) -> Path:
    root = tmp_path / "docs"
    root.mkdir()
    for page in PAGES:
        shutil.copy(corpora_dir / "chimerax" / "user" / "commands" / page, root / page)
    return root


@pytest.fixture
def notes(tmp_path: Path) -> Path:
    root = tmp_path / "notes"
    root.mkdir()
    (root / "orchids.md").write_text("# Orchids\n\nOrchids need bright indirect light and weekly watering.\n")
    (root / "ferns.md").write_text("# Ferns\n\nFerns like shade, humid air and soil that never dries out.\n")
    return root


@pytest.fixture
def settings(fresh_index_settings):
    return fresh_index_settings


def test_removing_a_source_keeps_every_other_one_searchable(settings, embedder, docs, notes):
    index_folder(settings, embedder, docs, "docs")
    index_folder(settings, embedder, notes, "notes")
    store = open_store(settings)
    docs_info = next(info for info in store.list_sources() if info.source == "docs")
    summary = remove_source(store, "docs", lock_path=settings.lock_path)
    assert (summary.documents, summary.chunks) == (len(PAGES), docs_info.chunks)
    assert summary.kept == next(info.chunks for info in store.list_sources() if info.source == "notes")
    assert [info.source for info in store.list_sources()] == ["notes"]
    assert set(store.source_states()) == {"notes"}
    assert store.bm25("rainbow coloring", 5) == []
    assert store.bm25("orchids", 1)[0].chunk.source == "notes"
    # Removed means removed: indexing it again starts from nothing, not from its old hashes.
    again = index_folder(settings, embedder, docs, "docs")
    assert again.added == len(PAGES) and again.unchanged == 0


def test_removing_one_version_keeps_the_others(settings, embedder, docs):
    index_folder(settings, embedder, docs, "docs", version="1.0")
    kept = index_folder(settings, embedder, docs, "docs", version="2.0")
    store = open_store(settings)
    summary = remove_source(store, "docs", "1.0", lock_path=settings.lock_path)
    assert summary.version == "1.0" and summary.kept == kept.chunks_written
    (info,) = store.list_sources()
    assert list(info.versions) == ["2.0"]
    assert set(store.source_states()["docs"]["versions"]) == {"2.0"}
    assert {hit.chunk.version for hit in store.bm25("rainbow", 10)} == {"2.0"}


def test_what_is_not_there_cannot_be_removed_and_nothing_changes(settings, embedder, docs):
    store = open_store(settings)
    with pytest.raises(IndexMissingError, match="nothing has been indexed"):
        remove_source(store, "docs", lock_path=settings.lock_path)
    index_folder(settings, embedder, docs, "docs")
    before = store.list_sources()
    with pytest.raises(ConfigError, match=r"no source 'doc' in the index; sources: docs"):
        remove_source(store, "doc", lock_path=settings.lock_path)
    with pytest.raises(ConfigError, match=r"source 'docs' has no version '3.0'; its versions: ''"):
        remove_source(store, "docs", "3.0", lock_path=settings.lock_path)
    with reindex_lock(settings.lock_path, "a reindex"), pytest.raises(LockedError, match="a reindex"):
        remove_source(store, "docs", lock_path=settings.lock_path)
    assert store.list_sources() == before


def test_a_failed_removal_leaves_the_index_serving(settings, embedder, docs, notes, monkeypatch):
    index_folder(settings, embedder, docs, "docs")
    index_folder(settings, embedder, notes, "notes")
    store = open_store(settings)
    before = store.list_sources()
    writer_of = store.writer

    def failing_writer(meta, *, rebuild):
        context = writer_of(meta, rebuild=rebuild)

        def copy_sources(exclude):
            raise RuntimeError("disk full")

        class Failing:
            def __enter__(self):
                writer = context.__enter__()
                writer.copy_sources = copy_sources
                return writer

            def __exit__(self, *exc):
                return context.__exit__(*exc)

        return Failing()

    monkeypatch.setattr(store, "writer", failing_writer)
    with pytest.raises(RuntimeError, match="disk full"):
        remove_source(store, "docs", lock_path=settings.lock_path)
    monkeypatch.undo()
    assert store.list_sources() == before
    assert store.bm25("rainbow", 1)[0].chunk.path == "color.html"


def test_cli_remove(settings, embedder, docs, notes):
    index_folder(settings, embedder, docs, "docs")
    index_folder(settings, embedder, notes, "notes")
    runner, env = CliRunner(), settings_env(settings, inherit=False)
    result = runner.invoke(app, ["remove", "notes", "--json"], env=env)
    assert result.exit_code == 0, result.output
    removed = json.loads(result.stdout)
    assert {key: removed[key] for key in ("source", "version", "documents", "chunks")} == {
        "source": "notes", "version": None, "documents": 2, "chunks": 2,
    }  # fmt: skip
    assert removed["kept"] > 0 and removed["seconds"] >= 0
    result = runner.invoke(app, ["sources", "--json"], env=env)
    assert [row["source"] for row in json.loads(result.stdout)] == ["docs"]
    result = runner.invoke(app, ["remove", "docs"], env=env)
    assert result.exit_code == 0, result.output
    assert result.stdout.startswith(f"removed docs: {len(PAGES)} documents, ")
    result = runner.invoke(app, ["remove", "docs"], env=env)
    assert result.exit_code == 1
    (line,) = result.stderr.strip().splitlines()
    assert line == "error: no source 'docs' in the index; sources: (none)"
