"""The evaluation run: judged queries -> (incremental) index of their corpora -> searches -> metrics.

    queries = load_queries(path)                       # JSON Lines: id, corpus, query, relevant, kind
    index_corpora(store, embedder, corpora_dir, corpora_of(queries, corpora_dir), ...)
    report = evaluate(searcher, queries, modes=("bm25", "knn", "hybrid"))

Each corpus is the folder `corpora_dir/<corpus>`, indexed as a source named `<corpus>`; every
query is searched with a filter on that source, and judged at document level: the ranking is the
distinct document paths of the results (one hit per document), compared with `relevant`. The
metrics are defined in docsctl.evaluation.metrics.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from docsctl.embedding import Embedder, EmbeddingCache
from docsctl.errors import ConfigError
from docsctl.evaluation.metrics import MISS_DEPTH, Summary, first_relevant_rank, mean_metrics, query_metrics
from docsctl.indexer.pipeline import ReindexSummary, reindex
from docsctl.indexer.sources import SourceTarget
from docsctl.jsonlines import json_object
from docsctl.models import Filters
from docsctl.server.search import Searcher
from docsctl.store.base import Store

MODES = ("bm25", "knn", "hybrid")
DEPTH = 10  # documents ranked per query: every metric looks at the top 10 at most
KINDS_ORDER = ("howto", "identifier", "name", "concept")

ProgressCallback = Callable[[str, int, int], None]  # (what, done, total)


@dataclass(frozen=True)
class EvalQuery:
    id: str
    corpus: str
    query: str
    relevant: tuple[str, ...]
    kind: str
    note: str = ""


def _parse_line(line: str, where: str) -> EvalQuery:
    data = json_object(line, where)
    for key in ("id", "corpus", "query", "kind"):
        if not isinstance(data.get(key), str) or not data[key].strip():
            raise ConfigError(f"{where}: '{key}' must be a non-empty string")
    relevant = data.get("relevant")
    if not isinstance(relevant, list) or not relevant or not all(isinstance(p, str) and p for p in relevant):
        raise ConfigError(f"{where}: 'relevant' must be a non-empty list of paths")
    corpus = data["corpus"].strip()
    if "/" in corpus or "\\" in corpus or corpus in {".", ".."}:
        raise ConfigError(f"{where}: corpus {corpus!r} must be a folder name, not a path")
    return EvalQuery(
        id=data["id"].strip(),
        corpus=corpus,
        query=data["query"],
        relevant=tuple(dict.fromkeys(path.strip().lstrip("/") for path in relevant)),
        kind=data["kind"].strip(),
        note=str(data.get("note", "")),
    )


def load_queries(path: Path) -> list[EvalQuery]:
    """Judged queries from a JSON Lines file; blank lines are skipped. Raises ConfigError naming the
    file and line of the first problem (missing file, bad JSON, missing field, repeated id)."""
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise ConfigError(f"queries file not found: {path}") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise ConfigError(f"cannot read queries file {path}: {exc}") from None
    queries: list[EvalQuery] = []
    seen: set[str] = set()
    for number, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            continue
        query = _parse_line(line, f"{path}:{number}")
        if query.id in seen:
            raise ConfigError(f"{path}:{number}: id {query.id!r} appears twice")
        seen.add(query.id)
        queries.append(query)
    if not queries:
        raise ConfigError(f"{path} holds no queries")
    return queries


def corpora_of(queries: Iterable[EvalQuery], corpora_dir: Path) -> list[str]:
    """The corpora the queries use, in first-seen order. Raises ConfigError when a corpus has no folder
    under `corpora_dir` or a judged path is not a file in it (a typo would silently score 0)."""
    if not corpora_dir.is_dir():
        raise ConfigError(f"corpora folder not found: {corpora_dir}")
    names: list[str] = []
    for query in queries:
        root = corpora_dir / query.corpus
        if query.corpus not in names:
            if not root.is_dir():
                raise ConfigError(f"query {query.id}: no corpus folder {root}")
            names.append(query.corpus)
        missing = [path for path in query.relevant if not (root / path).is_file()]
        if missing:
            raise ConfigError(f"query {query.id}: judged document {missing[0]!r} is not in {root}")
    return names


def index_corpora(
    store: Store,
    embedder: Embedder,
    corpora_dir: Path,
    corpora: Sequence[str],
    *,
    lock_path: Path,
    cache: EmbeddingCache | None = None,
    progress: ProgressCallback | None = None,
) -> ReindexSummary:
    """The normal incremental reindex of each `corpora_dir/<corpus>` as source `<corpus>`."""
    targets = [SourceTarget(name=name, root=(corpora_dir / name).resolve()) for name in corpora]

    def report(source: str, done: int, total: int) -> None:
        if progress:
            progress(f"index {source}", done, total)

    return reindex(store, embedder, targets, lock_path=lock_path, cache=cache, progress=report)


@dataclass
class QueryResult:
    query: EvalQuery
    ranking: list[str]  # distinct document paths, best first
    metrics: dict[str, float]
    first_relevant: int | None  # rank of the first relevant document, None when not in the top DEPTH

    def to_dict(self) -> dict[str, Any]:
        return {
            "id": self.query.id,
            "corpus": self.query.corpus,
            "kind": self.query.kind,
            "query": self.query.query,
            "first_relevant": self.first_relevant,
            "metrics": self.metrics,
            "ranking": self.ranking,
        }


@dataclass
class ModeReport:
    """The results of one search mode over every query."""

    mode: str
    results: list[QueryResult]
    overall: Summary = field(init=False)
    by_kind: dict[str, Summary] = field(init=False)
    # Each corpus is half of the judged set: a ranking choice tuned on one half is judged on the other.
    by_corpus: dict[str, Summary] = field(init=False)

    def __post_init__(self) -> None:
        self.overall = mean_metrics(result.metrics for result in self.results)
        kinds = sorted({r.query.kind for r in self.results}, key=lambda k: (_kind_order(k), k))
        self.by_kind = {kind: mean_metrics(r.metrics for r in self.results if r.query.kind == kind) for kind in kinds}
        corpora = dict.fromkeys(r.query.corpus for r in self.results)
        self.by_corpus = {
            corpus: mean_metrics(r.metrics for r in self.results if r.query.corpus == corpus) for corpus in corpora
        }

    @property
    def misses(self) -> list[QueryResult]:
        """Queries whose first relevant document is not in the top MISS_DEPTH."""
        return [r for r in self.results if r.first_relevant is None or r.first_relevant > MISS_DEPTH]

    def to_dict(self, with_rankings: bool = True) -> dict[str, Any]:
        return {
            "mode": self.mode,
            "queries": self.overall.count,
            "overall": self.overall.means,
            "by_kind": {kind: {"queries": s.count, **s.means} for kind, s in self.by_kind.items()},
            "by_corpus": {corpus: {"queries": s.count, **s.means} for corpus, s in self.by_corpus.items()},
            "misses": [
                {"id": r.query.id, "query": r.query.query, "first_relevant": r.first_relevant, "top": r.ranking[:3]}
                for r in self.misses
            ],
            **({"results": [r.to_dict() for r in self.results]} if with_rankings else {}),
        }


def _kind_order(kind: str) -> int:
    return KINDS_ORDER.index(kind) if kind in KINDS_ORDER else len(KINDS_ORDER)


@dataclass
class EvalReport:
    modes: dict[str, ModeReport]
    index: ReindexSummary | None = None

    def to_dict(self, with_rankings: bool = True) -> dict[str, Any]:
        data: dict[str, Any] = {"modes": {name: r.to_dict(with_rankings) for name, r in self.modes.items()}}
        if self.index is not None:
            data["index"] = {
                "sources": self.index.sources,
                "indexed": self.index.indexed,
                "unchanged": self.index.unchanged,
                "removed": self.index.removed,
                "chunks_embedded": self.index.chunks_embedded,
                "seconds": round(self.index.seconds, 1),
            }
        return data


def rank_documents(searcher: Searcher, query: EvalQuery, mode: str, depth: int = DEPTH) -> list[str]:
    """The distinct document paths `searcher` returns for `query` in its corpus, best first."""
    result = searcher.search(
        query.query, limit=depth, mode=mode, filters=Filters(sources=(query.corpus,)), per_document=True
    )
    return list(dict.fromkeys(hit.chunk.path for hit in result.hits))


def judge(query: EvalQuery, ranking: list[str]) -> QueryResult:
    """A ranking of document paths scored against the query's judged documents."""
    relevant = set(query.relevant)
    return QueryResult(query, ranking, query_metrics(ranking, relevant), first_relevant_rank(ranking, relevant))


def evaluate(
    searcher: Searcher,
    queries: Sequence[EvalQuery],
    modes: Sequence[str] = MODES,
    *,
    progress: ProgressCallback | None = None,
) -> EvalReport:
    """Search every query in every mode and score the rankings."""
    unknown = [mode for mode in modes if mode not in MODES]
    if unknown:
        raise ConfigError(f"mode must be one of {', '.join(MODES)} or all, not {unknown[0]!r}")
    reports: dict[str, ModeReport] = {}
    total = len(queries) * len(modes)
    done = 0
    for mode in modes:
        results = []
        for query in queries:
            results.append(judge(query, rank_documents(searcher, query, mode)))
            done += 1
            if progress:
                progress(f"search {', '.join(modes)}", done, total)
        reports[mode] = ModeReport(mode, results)
    return EvalReport(reports)


def parse_modes(mode: str) -> tuple[str, ...]:
    """'all' -> every mode; else the one mode named."""
    if mode == "all":
        return MODES
    if mode not in MODES:
        raise ConfigError(f"mode must be one of {', '.join(MODES)} or all, not {mode!r}")
    return (mode,)


def run_eval(
    store: Store,
    embedder: Embedder,
    queries_path: Path,
    corpora_dir: Path,
    *,
    modes: Sequence[str] = MODES,
    lock_path: Path,
    cache: EmbeddingCache | None = None,
    progress: ProgressCallback | None = None,
) -> EvalReport:
    """Read the queries, bring their corpora's index up to date, and evaluate every mode."""
    queries = load_queries(queries_path)
    corpora = corpora_of(queries, corpora_dir)
    summary = index_corpora(store, embedder, corpora_dir, corpora, lock_path=lock_path, cache=cache, progress=progress)
    report = evaluate(Searcher(store, embedder), queries, modes, progress=progress)
    report.index = summary
    return report
