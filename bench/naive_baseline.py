"""The naive baseline of issue 18: the floor every search-quality table is read against.

Each page's whole text (BeautifulSoup get_text for HTML, cell sources for notebooks, raw text otherwise),
whitespace collapsed, cut into 1,000-character windows every 900 characters, the page title prepended to
each window; all-MiniLM-L6-v2 vectors of the windows; rank_bm25's BM25Okapi over lower-cased \\w+ tokens;
reciprocal rank fusion (k = 60, equal weights) of the top 200 windows of each; a document ranks by its
best window. No tuning. Judged with docsctl's own harness (docsctl.evaluation), per corpus and per kind.

    python bench/naive_baseline.py ../shared/eval/dev.jsonl --out bench/results/naive_dev.json
    python bench/naive_baseline.py bench/queries/own.jsonl --out bench/results/naive_own.json
"""

from __future__ import annotations

import argparse
import json
import re
from pathlib import Path

import numpy as np
from bs4 import BeautifulSoup
from common import CORPORA, log  # common puts this checkout first on sys.path
from rank_bm25 import BM25Okapi

from docsctl.cli.eval import print_report
from docsctl.config import load_settings
from docsctl.embedding import EmbeddingCache, embed_with_cache, embedder_for
from docsctl.evaluation.run import EvalReport, ModeReport, corpora_of, judge, load_queries

WINDOW, STEP, DEPTH, RRF_K = 1000, 900, 200, 60
SUFFIXES = {".html", ".htm", ".md", ".rst", ".txt", ".ipynb"}


def page_text(path: Path) -> tuple[str, str]:
    """(title, whole text) of one page."""
    raw = path.read_text(encoding="utf-8", errors="replace")
    title, text = path.stem, raw
    if path.suffix in {".html", ".htm"}:
        soup = BeautifulSoup(raw, "html.parser")
        title = soup.title.get_text() if soup.title else title
        text = soup.get_text(" ")
    elif path.suffix == ".ipynb":
        cells = json.loads(raw).get("cells", [])
        text = "\n".join("".join(cell.get("source", "")) for cell in cells)
    heading = re.search(r"^#+ (.+)$", text, re.M) if path.suffix in {".md", ".ipynb"} else None
    title = heading.group(1) if heading else title
    return " ".join(title.split()), " ".join(text.split())


def windows_of(root: Path) -> tuple[list[str], list[str]]:
    """(document path of each window, window text)."""
    paths, texts = [], []
    for path in sorted(p for p in root.rglob("*") if p.suffix in SUFFIXES and p.is_file()):
        title, text = page_text(path)
        for start in range(0, max(len(text) - (WINDOW - STEP), 1), STEP):
            paths.append(path.relative_to(root).as_posix())
            texts.append(f"{title}\n{text[start : start + WINDOW]}")
    return paths, texts


def tokens(text: str) -> list[str]:
    return re.findall(r"\w+", text.lower())


def best_documents(window_order: list[int], paths: list[str]) -> list[str]:
    return list(dict.fromkeys(paths[i] for i in window_order))[:10]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("queries", type=Path, help="judged queries (JSON Lines)")
    parser.add_argument("--corpora", type=Path, default=CORPORA)
    parser.add_argument("--out", type=Path, help="write the report here as JSON")
    args = parser.parse_args()
    queries = load_queries(args.queries)
    settings = load_settings()
    embedder = embedder_for(settings)
    cache = EmbeddingCache(settings.embedding_cache_path, settings.model)
    rankings: dict[str, dict[str, list[str]]] = {"bm25": {}, "knn": {}, "hybrid": {}}
    for corpus in corpora_of(queries, args.corpora):
        paths, texts = windows_of(args.corpora / corpus)
        log(f"{corpus}: {len(texts)} windows")
        bm25 = BM25Okapi([tokens(text) for text in texts])
        vectors, _ = embed_with_cache(embedder, cache, texts)
        for query in (q for q in queries if q.corpus == corpus):
            by_bm25 = list(np.argsort(-bm25.get_scores(tokens(query.query)), kind="stable")[:DEPTH])
            by_knn = list(np.argsort(-(vectors @ embedder.encode([query.query])[0]), kind="stable")[:DEPTH])
            fused: dict[int, float] = {}
            for order in (by_bm25, by_knn):
                for rank, window in enumerate(order, start=1):
                    fused[window] = fused.get(window, 0.0) + 1.0 / (RRF_K + rank)
            by_rrf = sorted(fused, key=lambda window: -fused[window])
            for mode, order in (("bm25", by_bm25), ("knn", by_knn), ("hybrid", by_rrf)):
                rankings[mode][query.id] = best_documents(order, paths)
    cache.close()
    report = EvalReport(
        {mode: ModeReport(mode, [judge(q, ranked[q.id]) for q in queries]) for mode, ranked in rankings.items()}
    )
    if args.out:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        data = {"system": "naive baseline", "queries": str(args.queries), **report.to_dict()}
        args.out.write_text(json.dumps(data, indent=1) + "\n")
    print_report(report, f"naive baseline · {args.queries.name} · {len(queries)} queries")


if __name__ == "__main__":
    main()
