import math

import pytest

from docsctl.evaluation.metrics import (
    first_relevant_rank,
    mean_metrics,
    metric_names,
    ndcg_at,
    query_metrics,
    recall_at,
    reciprocal_rank,
    success_at,
)

L3, L4, L5 = math.log2(3), math.log2(4), math.log2(5)
TWELVE = [f"d{i}" for i in range(1, 13)]


@pytest.mark.parametrize(
    ("ranking", "relevant", "first", "rr", "r1", "r5", "r10", "s1", "s5", "ndcg"),
    [
        # one relevant document, first
        (["a", "b", "c"], {"a"}, 1, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0),
        # one relevant document at rank 2
        (["a", "b", "c"], {"b"}, 2, 0.5, 0.0, 1.0, 1.0, 0.0, 1.0, 1 / L3),
        # two relevant at ranks 1 and 4: recall counts both, nDCG normalizes by the ideal (ranks 1, 2)
        (["a", "b", "c", "d"], {"a", "d"}, 1, 1.0, 0.5, 1.0, 1.0, 1.0, 1.0, (1 + 1 / L5) / (1 + 1 / L3)),
        # three relevant, one found at rank 3: Recall@5 is a fraction, Success@5 is 1
        (["x", "y", "a"], {"a", "b", "c"}, 3, 1 / 3, 0.0, 1 / 3, 1 / 3, 0.0, 1.0, (1 / L4) / (1 + 1 / L3 + 1 / L4)),
        # nothing relevant is ranked
        (["x", "y"], {"z"}, None, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0),
        # an empty ranking
        ([], {"a"}, None, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0),
        # a repeated path counts once, at its best rank: b is second, not third
        (["a", "a", "b"], {"b"}, 2, 0.5, 0.0, 1.0, 1.0, 0.0, 1.0, 1 / L3),
        # relevant at rank 11: outside every cutoff, though its rank is known
        (TWELVE, {"d11"}, 11, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0),
        # relevant at rank 7: in the top 10 only
        (TWELVE, {"d7"}, 7, 1 / 7, 0.0, 0.0, 1.0, 0.0, 0.0, 1 / math.log2(8)),
        # more relevant documents than the cutoff: a perfect top 10 has nDCG 1 and Recall@10 10/12
        (TWELVE, set(TWELVE), 1, 1.0, 1 / 12, 5 / 12, 10 / 12, 1.0, 1.0, 1.0),
        # no judged documents: every metric is 0 rather than a division by zero
        (["a"], set(), None, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0),
    ],
)
def test_metrics_of_one_ranking(ranking, relevant, first, rr, r1, r5, r10, s1, s5, ndcg):
    assert first_relevant_rank(ranking, relevant) == first
    assert reciprocal_rank(ranking, relevant, 10) == pytest.approx(rr)
    assert recall_at(ranking, relevant, 1) == pytest.approx(r1)
    assert recall_at(ranking, relevant, 5) == pytest.approx(r5)
    assert recall_at(ranking, relevant, 10) == pytest.approx(r10)
    assert success_at(ranking, relevant, 1) == pytest.approx(s1)
    assert success_at(ranking, relevant, 5) == pytest.approx(s5)
    assert ndcg_at(ranking, relevant, 10) == pytest.approx(ndcg)


@pytest.mark.parametrize(("k", "expected"), [(1, 0.0), (2, 0.5), (3, 0.5)])
def test_reciprocal_rank_cutoff(k, expected):
    assert reciprocal_rank(["a", "b"], {"b"}, k) == expected


def test_query_metrics_names_every_metric():
    values = query_metrics(["a", "b"], {"b"})
    assert list(values) == metric_names()
    assert values["MRR@10"] == 0.5
    assert values["Success@1"] == 0.0


def test_mean_metrics_averages_over_queries():
    summary = mean_metrics([query_metrics(["a"], {"a"}), query_metrics(["x", "a"], {"a", "b"})])
    assert summary.count == 2
    assert summary.means["MRR@10"] == pytest.approx((1.0 + 0.5) / 2)
    assert summary.means["Recall@5"] == pytest.approx((1.0 + 0.5) / 2)
    assert summary.means["Success@5"] == pytest.approx(1.0)


def test_mean_metrics_of_nothing_is_zero():
    summary = mean_metrics([])
    assert summary.count == 0
    assert set(summary.means.values()) == {0.0}
