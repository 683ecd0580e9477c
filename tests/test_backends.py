"""Backend selection, status, and moving an index between backends without re-embedding."""

from __future__ import annotations

import json

from corpus_fixtures import backend_settings, index_folder, settings_env
from typer.testing import CliRunner

from docsctl.cli.app import app
from docsctl.config import load_settings
from docsctl.store import open_store


def test_the_embedded_backend_is_the_default_and_an_url_selects_opensearch(tmp_path, monkeypatch):
    for name in ("DOCSCTL_BACKEND", "DOCSCTL_OPENSEARCH_URL", "DOCSCTL_CONFIG"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.chdir(tmp_path)
    assert load_settings().backend_name == "sqlite"
    assert open_store(load_settings()).backend == "sqlite"
    assert open_store(load_settings(opensearch_url="http://127.0.0.1:1")).backend == "opensearch"
    assert load_settings(opensearch_url="http://x:9200", backend="sqlite").backend_name == "sqlite"


def test_status_names_the_backend_and_where_its_data_lives(tmp_path):
    env = {"DOCSCTL_DATA_DIR": str(tmp_path), "DOCSCTL_BACKEND": "sqlite", "DOCSCTL_OPENSEARCH_URL": ""}
    result = CliRunner().invoke(app, ["status", "--json"], env=env)
    assert result.exit_code == 0, result.output
    status = json.loads(result.stdout)
    assert status["backend"] == "sqlite" and status["index_exists"] is False
    assert status["location"] == str(tmp_path / "docsctl-chunks.sqlite")


def test_a_foreign_file_at_the_index_path_is_a_clear_error_and_left_alone(tmp_path):
    index = tmp_path / "docsctl-chunks.sqlite"
    index.write_text("my precious notes, not an index")
    env = {"DOCSCTL_DATA_DIR": str(tmp_path), "DOCSCTL_BACKEND": "sqlite", "DOCSCTL_OPENSEARCH_URL": ""}
    for args in (["query", "x"], ["status"], ["reindex", str(tmp_path / "nothing")]):
        result = CliRunner().invoke(app, args, env=env)
        assert result.exit_code == 1
        assert "Traceback" not in result.output
    result = CliRunner().invoke(app, ["query", "x"], env=env)
    assert str(index) in result.output and "docsctl reindex --full" in result.output
    assert index.read_text() == "my precious notes, not an index"


def test_export_from_one_backend_import_into_the_other(request, tmp_path, embedder, embedding_cache_dir, corpora_dir):
    sqlite = backend_settings(request, "sqlite", tmp_path / "a", embedding_cache_dir)
    opensearch = backend_settings(request, "opensearch", tmp_path / "b", embedding_cache_dir)
    docs = corpora_dir / "chimerax" / "user" / "tools"
    index_folder(sqlite, embedder, docs, "tools")
    dump = tmp_path / "index.jsonl"
    runner = CliRunner()
    try:
        result = runner.invoke(app, ["export", str(dump)], env=settings_env(sqlite, inherit=False))
        assert result.exit_code == 0, result.output
        header = json.loads(dump.read_text().splitlines()[0])
        assert header["model"] == embedder.model_name and header["dimension"] == embedder.dimension

        result = runner.invoke(app, ["import", str(dump)], env=settings_env(opensearch, inherit=False))
        assert result.exit_code == 0, result.output
        source, target = open_store(sqlite), open_store(opensearch)
        assert [(s.source, s.documents, s.chunks) for s in target.list_sources()] == [
            (s.source, s.documents, s.chunks) for s in source.list_sources()
        ]
        vector = embedder.encode_query("split the window into several views")
        assert [h.chunk.chunk_id for h in target.knn(vector, 3)] == [h.chunk.chunk_id for h in source.knn(vector, 3)]
        # Unchanged after the move: a reindex on the new backend embeds and writes nothing.
        again = index_folder(opensearch, embedder, docs, "tools")
        assert again.chunks_embedded == 0 and again.chunks_written == 0 and again.unchanged == again.files_seen
        result = runner.invoke(app, ["import", str(tmp_path / "a")], env=settings_env(opensearch, inherit=False))
        assert result.exit_code != 0
    finally:
        open_store(opensearch).drop()
