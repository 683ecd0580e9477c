"""Configured sources: folders and git repositories (local ones made here, never the network), versions."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest
from corpus_fixtures import BACKENDS, backend_settings
from typer.testing import CliRunner

from docsctl.cli.app import app
from docsctl.store import open_store


def git(repo: Path, *args: str) -> str:
    done = subprocess.run(
        ["git", "-c", "user.name=t", "-c", "user.email=t@example.org", *args],
        cwd=repo, check=True, capture_output=True, text=True,
    )  # fmt: skip
    return done.stdout.strip()


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    """A repository with tag v1.9 (otters) and tag v1.10 on main (otters and beavers)."""
    root = tmp_path / "repo"
    (root / "guide").mkdir(parents=True)
    git(root, "init", "-q", "-b", "main")
    (root / "guide" / "animals.md").write_text("# Animals\n\n## Otters\n\nOtters hold hands while they sleep.\n")
    (root / "index.md").write_text("# Home\n\nWelcome to the river guide.\n")
    git(root, "add", ".")
    git(root, "commit", "-q", "-m", "one")
    git(root, "tag", "v1.9")
    (root / "guide" / "beavers.md").write_text("# Beavers\n\nBeavers build dams from branches and mud.\n")
    git(root, "add", ".")
    git(root, "commit", "-q", "-m", "two")
    git(root, "tag", "v1.10")
    return root


@pytest.fixture(params=BACKENDS)
def env(request, tmp_path, embedding_cache_dir):
    settings = backend_settings(request, request.param, tmp_path / "data", embedding_cache_dir)
    env = {
        "DOCSCTL_BACKEND": settings.backend,
        "DOCSCTL_DATA_DIR": str(settings.data_dir),
        "DOCSCTL_CACHE_DIR": str(tmp_path / "cache"),
        "DOCSCTL_INDEX_ALIAS": settings.index_alias,
        "DOCSCTL_OPENSEARCH_URL": settings.opensearch_url or "",
    }
    (tmp_path / "cache").mkdir()
    # Reuse the session's embedding cache: the git checkouts go to this test's own cache dir.
    (tmp_path / "cache" / "embeddings.sqlite").symlink_to(settings.embedding_cache_path)
    yield env
    open_store(settings).drop()


def write_config(tmp_path: Path, body: str) -> Path:
    config = tmp_path / "docsctl.toml"
    config.write_text(body)
    return config


def run(env: dict[str, str], *args: str):
    return CliRunner().invoke(app, list(args), env=env)


def test_git_source_indexes_each_ref_as_a_version(tmp_path, repo, env):
    config = write_config(
        tmp_path, f'[[source]]\nname = "river"\nkind = "git"\npath = "{repo}"\nrefs = ["v1.9", "v1.10"]\n'
    )
    result = run(env, "reindex", "--config", str(config), "--json")
    assert result.exit_code == 0, result.output
    summary = json.loads(result.stdout)
    assert summary["added"] == 2 + 3 and not summary["failed_sources"]

    listed = json.loads(run(env, "sources", "--config", str(config), "--json").stdout)
    (river,) = listed
    assert river["configured"] and river["kind"] == "git"
    assert set(river["versions"]) == {"v1.9", "v1.10"}
    assert river["commit"] == git(repo, "rev-parse", "v1.10")

    # Without a version filter only the newest version answers (1.10 sorts after 1.9), once.
    hits = json.loads(run(env, "query", "index", "--config", str(config), "--json", "-k", "10").stdout)["hits"]
    assert hits and {hit["version"] for hit in hits} == {"v1.10"}
    assert len({hit["path"] for hit in hits}) == len(hits)
    old = json.loads(run(env, "query", "beavers", "--version", "v1.9", "--mode", "bm25", "--json").stdout)
    assert old["hits"] == []
    new = json.loads(run(env, "query", "beavers", "--mode", "bm25", "--json").stdout)
    assert new["hits"][0]["path"] == "guide/beavers.md"


def test_later_runs_fetch_new_commits(tmp_path, repo, env):
    config = write_config(tmp_path, f'[[source]]\nname = "river"\nkind = "git"\npath = "{repo}"\nref = "main"\n')
    assert run(env, "reindex", "--config", str(config)).exit_code == 0
    (repo / "index.md").write_text("# Home\n\nWelcome to the river guide, now with herons.\n")
    git(repo, "commit", "-q", "-am", "three")
    result = run(env, "reindex", "--config", str(config), "--json")
    summary = json.loads(result.stdout)
    assert (summary["added"], summary["changed"], summary["unchanged"]) == (0, 1, 2)
    hits = json.loads(run(env, "query", "herons", "--mode", "bm25", "--json").stdout)["hits"]
    assert hits[0]["path"] == "index.md"


def test_a_failing_source_does_not_stop_the_others(tmp_path, repo, env):
    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "a.md").write_text("# A\n\nAardvarks eat ants.\n")
    (repo / "index.md").write_text("# Home\n\nUncommitted edit.\n")  # a dirty working copy
    config = write_config(
        tmp_path,
        f'[[source]]\nname = "broken"\nkind = "git"\npath = "{tmp_path / "not-a-repo"}"\n\n'
        f'[[source]]\nname = "river"\nkind = "git"\npath = "{repo}"\n\n'
        f'[[source]]\nname = "docs"\npath = "{docs}"\n',
    )
    result = run(env, "reindex", "--config", str(config), "--json")
    assert result.exit_code == 1
    summary = json.loads(result.stdout)
    assert [failure["source"] for failure in summary["failed_sources"]] == ["broken@HEAD"]
    assert summary["sources"] == ["river", "docs"]
    assert "uncommitted changes" in result.stderr
    assert "source broken@HEAD failed" in result.stderr


def test_only_named_sources_and_unknown_names(tmp_path, repo, env):
    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "a.md").write_text("# A\n\nAardvarks eat ants.\n")
    config = write_config(
        tmp_path,
        f'[[source]]\nname = "river"\nkind = "git"\npath = "{repo}"\n\n[[source]]\nname = "docs"\npath = "{docs}"\n',
    )
    result = run(env, "reindex", "--config", str(config), "--source", "docs", "--json")
    assert json.loads(result.stdout)["sources"] == ["docs"]
    result = run(env, "reindex", "--config", str(config), "--source", "nope")
    assert result.exit_code == 1
    assert "unknown source nope; configured sources: river, docs" in result.output
