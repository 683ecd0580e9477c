"""Session fixtures: the real model, and real corpora indexed once per backend for the whole run.

Imported by conftest.py. Every test that needs an index of ../shared/corpora/chimerax asks for
`chimerax_index`, which is parametrized over both backends: the same assertions run on each.
"""

from __future__ import annotations

import os
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from docsctl.config import Settings, load_settings
from docsctl.embedding import Embedder, EmbeddingCache
from docsctl.indexer.pipeline import ReindexSummary, reindex
from docsctl.indexer.sources import SourceTarget
from docsctl.store import open_store
from docsctl.store.base import Store

BACKENDS = ["sqlite", "opensearch"]


@dataclass
class IndexedCorpus:
    """A corpus indexed by the real pipeline into one backend."""

    backend: str
    settings: Settings
    store: Store
    root: Path
    summary: ReindexSummary

    def env(self) -> dict[str, str]:
        """Environment for a `docsctl` subprocess that should see this index."""
        return settings_env(self.settings)


def settings_env(settings: Settings, inherit: bool = True) -> dict[str, str]:
    """DOCSCTL_* variables that make a `docsctl` command (CliRunner or subprocess) use exactly `settings`;
    with `inherit`, on top of this process's environment less its own DOCSCTL_* variables."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("DOCSCTL_")} if inherit else {}
    env.update(
        DOCSCTL_BACKEND=settings.backend,
        DOCSCTL_DATA_DIR=str(settings.data_dir),
        DOCSCTL_CACHE_DIR=str(settings.cache_dir),
        DOCSCTL_INDEX_ALIAS=settings.index_alias,
        DOCSCTL_OPENSEARCH_URL=settings.opensearch_url or "",
    )
    return env


@pytest.fixture(scope="session")
def embedder(embedding_cache_dir: Path) -> Embedder:
    """The real model; queries through its ONNX export, made here once per cache folder."""
    model = Embedder(cache_dir=embedding_cache_dir)
    model.encode(["warm up"])
    model.encode_query("warm up")
    return model


@pytest.fixture(scope="session")
def embedding_cache_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """One cache per test session: each text is embedded once by the real model, then reused.

    DOCSCTL_TEST_CACHE_DIR reuses a cache across sessions (for quick local iterations only).
    """
    reuse = os.environ.get("DOCSCTL_TEST_CACHE_DIR")
    return Path(reuse) if reuse else tmp_path_factory.mktemp("cache")


def backend_settings(request: pytest.FixtureRequest, backend: str, data_dir: Path, cache_dir: Path) -> Settings:
    """Settings for a fresh, uniquely named index on `backend`."""
    alias = f"test-{uuid.uuid4().hex[:12]}"
    if backend == "opensearch":
        url = request.getfixturevalue("opensearch_url")
        return load_settings(
            backend="opensearch", opensearch_url=url, index_alias=alias, data_dir=data_dir, cache_dir=cache_dir
        )
    return load_settings(backend="sqlite", index_alias=alias, data_dir=data_dir, cache_dir=cache_dir)


@pytest.fixture(params=BACKENDS)
def fresh_index_settings(
    request: pytest.FixtureRequest, tmp_path: Path, embedding_cache_dir: Path
) -> Iterator[Settings]:
    """Settings for an index of the test's own on each backend, dropped after the test."""
    settings = backend_settings(request, request.param, tmp_path / "data", embedding_cache_dir)
    yield settings
    open_store(settings).drop()


def index_folder(
    settings: Settings, embedder: Embedder, root: Path, name: str, version: str = "", **kwargs
) -> ReindexSummary:
    store = open_store(settings)
    cache = EmbeddingCache(settings.embedding_cache_path, embedder.model_name)
    try:
        target = SourceTarget(name=name, root=root, version=version)
        return reindex(store, embedder, [target], lock_path=settings.lock_path, cache=cache, **kwargs)
    finally:
        cache.close()


@pytest.fixture(scope="session", params=BACKENDS)
def chimerax_index(
    request: pytest.FixtureRequest,
    corpora_dir: Path,
    embedder: Embedder,
    embedding_cache_dir: Path,
    tmp_path_factory: pytest.TempPathFactory,
) -> IndexedCorpus:
    backend = request.param
    root = corpora_dir / "chimerax"
    settings = backend_settings(request, backend, tmp_path_factory.mktemp(f"chimerax-{backend}"), embedding_cache_dir)
    summary = index_folder(settings, embedder, root, "chimerax")
    store = open_store(settings)
    yield IndexedCorpus(backend, settings, store, root, summary)
    store.drop()
