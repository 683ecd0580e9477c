"""Ranking metrics at document level. Pure functions of a ranking and a set of relevant documents.

A *ranking* is a sequence of distinct document paths, best first (duplicates count once, at their
best position). *relevant* is the set of judged paths. Ranks are 1-based. With R = |relevant|:

- ``reciprocal_rank(ranking, relevant, k)``: 1 / rank of the first relevant document when that rank
  is <= k, else 0. Its mean over queries is MRR@k.
- ``recall_at(ranking, relevant, k)``: |relevant ∩ top k| / R, the *fraction* of the relevant
  documents found in the top k. A query with three relevant documents and one of them in the top 5
  has Recall@5 = 1/3. This is the "Recall@k" of the harness and of the targets in bench/README.md.
- ``success_at(ranking, relevant, k)``: 1 when any relevant document is in the top k, else 0 (also
  called hit rate). Equals recall_at for a query with one relevant document; never below it.
- ``ndcg_at(ranking, relevant, k)``: binary-gain nDCG, DCG@k / IDCG@k with DCG = sum over relevant
  documents in the top k of 1 / log2(rank + 1), and IDCG the DCG of a ranking that puts all
  min(R, k) relevant documents first.

Every function returns 0.0 for an empty `relevant` set, so a bad judgement never divides by zero.
"""

from __future__ import annotations

import math
from collections.abc import Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass

CUTOFFS = (1, 5, 10)
MRR_DEPTH = 10
NDCG_DEPTH = 10
MISS_DEPTH = 5  # a query whose first relevant document is below this rank is listed as a miss


def distinct(ranking: Iterable[str]) -> list[str]:
    """The ranking with repeats removed, each path kept at its best position."""
    return list(dict.fromkeys(ranking))


def first_relevant_rank(ranking: Sequence[str], relevant: Collection[str]) -> int | None:
    """1-based rank of the first relevant document, or None when no relevant document is ranked."""
    for rank, path in enumerate(distinct(ranking), start=1):
        if path in relevant:
            return rank
    return None


def reciprocal_rank(ranking: Sequence[str], relevant: Collection[str], k: int = MRR_DEPTH) -> float:
    rank = first_relevant_rank(ranking, relevant)
    return 1.0 / rank if rank is not None and rank <= k else 0.0


def recall_at(ranking: Sequence[str], relevant: Collection[str], k: int) -> float:
    if not relevant:
        return 0.0
    found = sum(1 for path in distinct(ranking)[:k] if path in relevant)
    return found / len(set(relevant))


def success_at(ranking: Sequence[str], relevant: Collection[str], k: int) -> float:
    return 1.0 if any(path in relevant for path in distinct(ranking)[:k]) else 0.0


def ndcg_at(ranking: Sequence[str], relevant: Collection[str], k: int = NDCG_DEPTH) -> float:
    if not relevant:
        return 0.0
    dcg = sum(1.0 / math.log2(rank + 1) for rank, path in enumerate(distinct(ranking)[:k], start=1) if path in relevant)
    ideal = sum(1.0 / math.log2(rank + 1) for rank in range(1, min(len(set(relevant)), k) + 1))
    return dcg / ideal


def metric_names() -> list[str]:
    """The metrics `query_metrics` returns, in the order reports show them."""
    return [
        f"MRR@{MRR_DEPTH}",
        *(f"Recall@{k}" for k in CUTOFFS),
        *(f"Success@{k}" for k in CUTOFFS),
        f"nDCG@{NDCG_DEPTH}",
    ]


def query_metrics(ranking: Sequence[str], relevant: Collection[str]) -> dict[str, float]:
    """Every metric of one query, keyed as in `metric_names()`."""
    values = {f"MRR@{MRR_DEPTH}": reciprocal_rank(ranking, relevant, MRR_DEPTH)}
    values.update({f"Recall@{k}": recall_at(ranking, relevant, k) for k in CUTOFFS})
    values.update({f"Success@{k}": success_at(ranking, relevant, k) for k in CUTOFFS})
    values[f"nDCG@{NDCG_DEPTH}"] = ndcg_at(ranking, relevant, NDCG_DEPTH)
    return values


@dataclass(frozen=True)
class Summary:
    """Mean of each metric over `count` queries."""

    count: int
    means: dict[str, float]


def mean_metrics(per_query: Iterable[Mapping[str, float]]) -> Summary:
    """The mean of each metric over queries (0.0 for every metric when there is none)."""
    rows = list(per_query)
    names = metric_names()
    if not rows:
        return Summary(0, dict.fromkeys(names, 0.0))
    return Summary(len(rows), {name: sum(row[name] for row in rows) / len(rows) for name in names})
