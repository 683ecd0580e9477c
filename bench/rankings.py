"""Every ranking search makes for the dev queries, dumped as JSON Lines: to show that a speed change left them alone.

    python bench/rankings.py --out before.jsonl [--index PATH.sqlite]
    (change the code)
    python bench/rankings.py --out after.jsonl [--index PATH.sqlite] && cmp before.jsonl after.jsonl

Per dev query, with its corpus as the filter and with none: each retriever's candidates (Store.bm25 and
Store.knn, brief and whole, Store.knn_documents), Searcher.rank in every mode (by document and by chunk),
the first page of Searcher.search in every mode (ids, scores, ranks, the section shown and its highlights),
and the explanation of the first hybrid result. Scores are written with repr(): the same ranking with scores
rounded otherwise is a difference too. Without --index the dev corpora are indexed as `docsctl eval` does
(vectors from the embedding cache) into a throw-away index; with it, the SQLite file given is read.
"""

from __future__ import annotations

import argparse
import json
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from common import DEV_QUERIES, bench_settings, dev_corpora_index, log

from docsctl.embedding import Embedder, embedder_for
from docsctl.evaluation.run import EvalQuery, load_queries
from docsctl.models import Filters, Hit
from docsctl.server.explain import explain
from docsctl.server.search import MIN_CANDIDATES, MODES, Searcher
from docsctl.store.base import Store
from docsctl.store.sqlite import SqliteStore

PAGE = 10


def listed(hits: list[Hit], *, whole: bool = False) -> list[list[Any]]:
    """Each hit as [chunk id, document, repr(score), ranks] (+ section, anchor, highlights when `whole`)."""
    rows = []
    for hit in hits:
        row: list[Any] = [hit.chunk.chunk_id, hit.chunk.doc_id, repr(hit.score), sorted(hit.ranks.items())]
        if whole:
            row += [hit.chunk.section, hit.chunk.anchor, hit.highlights]
        rows.append(row)
    return rows


def rankings_of(searcher: Searcher, query: EvalQuery, filters: Filters) -> dict[str, Any]:
    store, text = searcher.store, query.query
    vector = searcher.embedder.encode_query(text)
    found: dict[str, Any] = {
        "bm25_brief": listed(store.bm25(text, MIN_CANDIDATES, filters, brief=True)),
        "bm25_whole": listed(store.bm25(text, 50, filters)),
        "knn_brief": listed(store.knn(vector, MIN_CANDIDATES, filters, brief=True)),
        "knn_whole": listed(store.knn(vector, 50, filters)),
        "knn_documents": [[doc, repr(score)] for doc, score in store.knn_documents(vector, MIN_CANDIDATES, filters)],
    }
    effective = searcher.effective_filters(filters)
    for mode in MODES:
        for per_document in (True, False):
            ranked = searcher.rank(text, mode, MIN_CANDIDATES, effective, per_document)
            found[f"rank_{mode}_{'documents' if per_document else 'chunks'}"] = listed(ranked)
        page = searcher.search(text, limit=PAGE, mode=mode, filters=filters)
        found[f"search_{mode}"] = [page.total, listed(page.hits, whole=True)]
        if mode == "hybrid" and page.hits:
            first = page.hits[0].chunk
            found["explain_first"] = explain(searcher, text, first.path, first.source).to_dict()
    return found


def dump(store: Store, embedder: Embedder, queries: list[EvalQuery], out: Path) -> None:
    searcher = Searcher(store, embedder)
    with out.open("w", encoding="utf-8") as lines:
        for query in queries:
            for name, filters in (("corpus", Filters(sources=(query.corpus,))), ("none", Filters())):
                row = {"id": query.id, "filter": name, **rankings_of(searcher, query, filters)}
                lines.write(json.dumps(row, sort_keys=True) + "\n")
    log(f"{len(queries)} queries x 2 filters: {out}")


@contextmanager
def dev_index(index: Path | None) -> Iterator[tuple[Store, Embedder, list[EvalQuery]]]:
    if index is None:
        with dev_corpora_index("sqlite", None) as opened:
            yield opened
        return
    work = Path(tempfile.mkdtemp(prefix="docsctl-bench-rankings-"))
    yield SqliteStore(index), embedder_for(bench_settings("sqlite", None, work)), load_queries(DEV_QUERIES)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", type=Path, required=True, help="the JSON Lines file to write")
    parser.add_argument("--index", type=Path, help="an SQLite index of the dev corpora (default: build one)")
    args = parser.parse_args()
    with dev_index(args.index) as (store, embedder, queries):
        dump(store, embedder, queries, args.out)


if __name__ == "__main__":
    main()
