"""Session fixture: both shared corpora indexed once, for search-quality tests.

Imported by conftest.py. `eval_index` indexes ../shared/corpora/chimerax and ../shared/corpora/holoviz
as sources `chimerax` and `holoviz` (the way `docsctl eval` does) into one OpenSearch index, once per
session; tests search it through `eval_index.searcher()` and must not write to it.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from corpus_fixtures import backend_settings, settings_env

from docsctl.config import Settings
from docsctl.embedding import Embedder, EmbeddingCache
from docsctl.evaluation.run import index_corpora
from docsctl.indexer.pipeline import ReindexSummary
from docsctl.server.search import Searcher
from docsctl.store import open_store
from docsctl.store.base import Store

EVAL_CORPORA = ("chimerax", "holoviz")
EVAL_BACKEND = "opensearch"


@dataclass
class EvalIndex:
    """Both corpora, indexed by the real pipeline into one backend."""

    backend: str
    settings: Settings
    store: Store
    embedder: Embedder
    corpora_dir: Path
    summary: ReindexSummary

    def searcher(self, **kwargs) -> Searcher:
        return Searcher(self.store, self.embedder, **kwargs)

    def env(self) -> dict[str, str]:
        """Environment for a `docsctl` command (CliRunner or subprocess) that should use this index."""
        return settings_env(self.settings)


@pytest.fixture(scope="session")
def eval_index(
    request: pytest.FixtureRequest,
    corpora_dir: Path,
    embedder: Embedder,
    embedding_cache_dir: Path,
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[EvalIndex]:
    settings = backend_settings(request, EVAL_BACKEND, tmp_path_factory.mktemp("eval-index"), embedding_cache_dir)
    store = open_store(settings)
    cache = EmbeddingCache(settings.embedding_cache_path, settings.model)
    try:
        summary = index_corpora(store, embedder, corpora_dir, EVAL_CORPORA, lock_path=settings.lock_path, cache=cache)
    finally:
        cache.close()
    yield EvalIndex(EVAL_BACKEND, settings, store, embedder, corpora_dir, summary)
    store.drop()
