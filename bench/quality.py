"""Search quality out of sample: each fusion knob is chosen on one corpus half and judged on the other.

    python bench/quality.py [--backend sqlite|opensearch|both] [--opensearch-url URL]
                            [--queries FILE ...] [--out FILE]

The judged queries split into two halves by corpus (chimerax, holoviz). The corpora are indexed as
`docsctl eval` indexes them (one source per corpus, vectors from the embedding cache) into a throw-away
index; every query's candidates are fetched once (as many as hybrid search fetches for a page of 10: chunks from
BM25 and from k-NN, documents by centroid) and fused under every setting of a small grid:

- bm25: the weight of the BM25 ranking against k-NN's 1 (for every query),
- keyword_bm25: a different BM25 weight for keyword-like queries (docsctl.server.search.is_keyword_query),
- document: the weight of the centroid ranking, document_for: applied to questions only or to every query,
- rrf_k: reciprocal rank fusion's k.

For each half, the setting with the best mean of MRR@10 and Recall@5 on the *other* half is reported on it
("cross-half": tuned on chimerax, judged on holoviz, and the other way round), once with only the knobs the
shipped ranking tunes free (TUNED) and once with every knob free, beside the shipped setting
(docsctl.server.search.Ranking()), plain RRF (every weight 1, k 60) and each knob moved alone from the
shipped setting. Prints a table; writes every setting's figures per half as JSON to --out.
"""

from __future__ import annotations

import itertools
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from common import CORPORA, DEV_QUERIES, RESULTS, backends_of, bench_parser, bench_settings, log, machine

from docsctl.embedding import EmbeddingCache, embedder_for
from docsctl.evaluation.run import EvalQuery, ModeReport, corpora_of, index_corpora, judge, load_queries
from docsctl.models import Filters, Hit
from docsctl.server.search import MIN_CANDIDATES, Ranking, Searcher
from docsctl.store import open_store

CANDIDATES = MIN_CANDIDATES
DEPTH = 10
GRID = {
    "bm25": (0.25, 0.5, 0.75, 1.0, 1.5),
    "keyword_bm25": (None, 1.0, 1.5),  # None: keyword-like queries weigh BM25 as questions do
    "document": (0.0, 0.25, 0.5, 1.0),
    "document_for": ("questions", "all"),
    "rrf_k": (20, 60, 100),
}
TUNED = ("bm25", "document")  # the knobs the shipped ranking sets away from plain RRF
PLAIN = {"bm25": 1.0, "keyword_bm25": None, "document": 0.0, "document_for": "questions", "rrf_k": 60}


@dataclass(frozen=True)
class Candidates:
    bm25: list[Hit]
    knn: list[Hit]
    documents: list[str]


def ranking_of(setting: Mapping[str, Any]) -> Ranking:
    """The Ranking a grid setting stands for."""
    weights = {"bm25": setting["bm25"], "knn": 1.0, "document": setting["document"]}
    keyword = {**weights, "document": setting["document"] if setting["document_for"] == "all" else 0.0}
    if setting["keyword_bm25"] is not None:
        keyword["bm25"] = setting["keyword_bm25"]
    return Ranking(weights=weights, keyword_weights=keyword, rrf_k=setting["rrf_k"])


def setting_of(ranking: Ranking) -> dict[str, Any]:
    """The grid setting of a Ranking (the shipped one), for the table."""
    keyword_bm25 = ranking.keyword_weights.get("bm25", 1.0)
    return {
        "bm25": ranking.weights.get("bm25", 1.0),
        "keyword_bm25": None if keyword_bm25 == ranking.weights.get("bm25", 1.0) else keyword_bm25,
        "document": ranking.weights.get("document", 0.0),
        "document_for": "all" if ranking.keyword_weights.get("document", 0.0) else "questions",
        "rrf_k": ranking.rrf_k,
    }


def label(setting: Mapping[str, Any]) -> str:
    return " ".join(f"{key}={value}" for key, value in setting.items())


def fetch(searcher: Searcher, queries: Sequence[EvalQuery]) -> dict[str, Candidates]:
    found = {}
    for query in queries:
        filters = searcher.effective_filters(Filters(sources=(query.corpus,)))
        vector = searcher.embedder.encode_query(query.query)
        found[query.id] = Candidates(
            searcher.retrieve("bm25", query.query, CANDIDATES, filters),
            searcher.retrieve("knn", query.query, CANDIDATES, filters, vector),
            searcher.document_ranking(vector, CANDIDATES, filters),
        )
    return found


def paths_of(hits: Sequence[Hit]) -> list[str]:
    return list(dict.fromkeys(hit.chunk.path for hit in hits))[:DEPTH]


def judged(searcher: Searcher, queries: Sequence[EvalQuery], found: Mapping[str, Candidates]) -> ModeReport:
    results = []
    for query in queries:
        c = found[query.id]
        documents = c.documents if searcher.uses_document_ranking(query.query) else []
        results.append(judge(query, paths_of(searcher.fuse_ranked(query.query, c.bm25, c.knn, True, documents))))
    return ModeReport("hybrid", results)


def figures(report: ModeReport) -> dict[str, Any]:
    def pair(summary: Any) -> dict[str, float]:
        return {"MRR@10": round(summary.means["MRR@10"], 3), "Recall@5": round(summary.means["Recall@5"], 3)}

    return {
        "all": pair(report.overall),
        **{corpus: pair(summary) for corpus, summary in report.by_corpus.items()},
        "by_kind": {kind: pair(summary) for kind, summary in report.by_kind.items()},
    }


def objective(figure: Mapping[str, float]) -> float:
    return (figure["MRR@10"] + figure["Recall@5"]) / 2


def cross_half(rows: Sequence[Mapping[str, Any]], corpora: Sequence[str]) -> dict[str, Any]:
    """For each half, the figures of the setting that is best on the other half (the first of equals)."""
    judged = {}
    for judged_on, tuned_on in itertools.permutations(corpora, 2):
        best = max(rows, key=lambda row: objective(row[tuned_on]))
        judged[judged_on] = {"tuned_on": tuned_on, "setting": best["setting"], **best[judged_on]}
    return judged


def measure(backend: str, opensearch_url: str | None, query_files: Sequence[Path], work: Path) -> dict[str, Any]:
    queries_by_file = {path.name: load_queries(path) for path in query_files}
    everything = [q for queries in queries_by_file.values() for q in queries]
    settings = bench_settings(backend, opensearch_url, work / backend)
    store = open_store(settings)
    embedder = embedder_for(settings)
    cache = EmbeddingCache(settings.embedding_cache_path, settings.model)
    try:
        log(f"indexing the corpora into {backend}")
        corpora = corpora_of(everything, CORPORA)
        index_corpora(store, embedder, CORPORA, corpora, lock_path=settings.lock_path, cache=cache)
        searcher = Searcher(store, embedder)
        out: dict[str, Any] = {}
        for name, queries in queries_by_file.items():
            log(f"{backend}: candidates of {name}")
            out[name] = study(searcher, queries, fetch(searcher, queries), corpora)
            print_summary(backend, name, out[name], corpora)
        return out
    finally:
        cache.close()
        store.drop()


def study(
    searcher: Searcher, queries: Sequence[EvalQuery], found: Mapping[str, Candidates], corpora: Sequence[str]
) -> dict[str, Any]:
    """Every grid setting's figures per half, the cross-half choices, the shipped and plain settings."""
    measured: dict[str, dict[str, Any]] = {}

    def row_of(setting: dict[str, Any]) -> dict[str, Any]:
        key = label(setting)
        if key not in measured:
            searcher.ranking = ranking_of(setting)
            measured[key] = {"setting": setting, **figures(judged(searcher, queries, found))}
        return measured[key]

    shipped = setting_of(Ranking())
    table = [row_of(dict(zip(GRID, values, strict=True))) for values in itertools.product(*GRID.values())]
    # The shipped ranking tunes two knobs; every other knob keeps its shipped (or plain) value.
    tuned = [row for row in table if all(row["setting"][k] == shipped[k] for k in GRID if k not in TUNED)]
    cross = {"shipped_knobs": cross_half(tuned, corpora), "every_knob": cross_half(table, corpora)}
    alone = {
        f"{knob}={value}": {corpus: row_of({**shipped, knob: value})[corpus] for corpus in corpora}
        for knob, values in GRID.items()
        for value in values
    }
    searcher.ranking = Ranking()
    return {
        "shipped": row_of(shipped),
        "plain_rrf": row_of(PLAIN),
        "cross_half": cross,
        "one_knob_from_shipped": alone,
        "grid": table,
    }


def print_summary(backend: str, name: str, result: Mapping[str, Any], corpora: Sequence[str]) -> None:
    def cell(figure: Mapping[str, float]) -> str:
        return f"{figure['MRR@10']:.3f} / {figure['Recall@5']:.3f}"

    print(f"\n{backend} · {name} · hybrid MRR@10 / Recall@5 per corpus half")
    naive = RESULTS / f"naive_{Path(name).stem}.json"  # bench/naive_baseline.py --out
    if naive.is_file():
        halves = json.loads(naive.read_text())["modes"]["hybrid"]["by_corpus"]
        print(f"  {'naive baseline (RRF of windows)':42} " + "  ".join(f"{c} {cell(halves[c])}" for c in corpora))
    print(f"  {'shipped':42} " + "  ".join(f"{c} {cell(result['shipped'][c])}" for c in corpora))
    print(f"  {'plain RRF':42} " + "  ".join(f"{c} {cell(result['plain_rrf'][c])}" for c in corpora))
    for knobs, rows in result["cross_half"].items():
        for judged_on, row in rows.items():
            where = f"tuned on {row['tuned_on']:9} judged on {judged_on:9}"
            print(f"  {knobs:13} {where} {cell(row)}  {label(row['setting'])}")
    for knob, row in result["one_knob_from_shipped"].items():
        print(f"    {knob:40} " + "  ".join(f"{c} {cell(row[c])}" for c in corpora))


def main() -> None:
    parser = bench_parser(__doc__, every=False)
    parser.add_argument("--queries", type=Path, action="append", help=f"judged queries (default {DEV_QUERIES})")
    args = parser.parse_args()
    import tempfile

    with tempfile.TemporaryDirectory(prefix="docsctl-bench-quality-") as work:
        runs = {
            backend: measure(backend, args.opensearch_url, args.queries or [DEV_QUERIES], Path(work))
            for backend in backends_of(args)
        }
    if args.out:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        data = {"benchmark": "quality", "machine": machine(), "grid": GRID, "backends": runs}
        args.out.write_text(json.dumps(data, indent=1) + "\n")


if __name__ == "__main__":
    main()
