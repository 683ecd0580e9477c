"""Fusing ranked lists into one. Pure functions of ranks (or scores) and weights; inputs are never altered."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

RRF_K = 60


@dataclass(frozen=True)
class Fused:
    key: str
    score: float
    ranks: dict[str, int] = field(default_factory=dict)  # 1-based rank in each list that had the key


def reciprocal_rank_fusion(
    ranked: Mapping[str, Sequence[str]], weights: Mapping[str, float] | None = None, k: int = RRF_K
) -> list[Fused]:
    """score(key) = sum over lists of weight / (k + rank). Ties keep first-seen order (stable)."""
    scores: dict[str, float] = {}
    ranks: dict[str, dict[str, int]] = {}
    for name, keys in ranked.items():
        weight = 1.0 if weights is None else weights.get(name, 1.0)
        for rank, key in enumerate(dict.fromkeys(keys), start=1):
            scores[key] = scores.get(key, 0.0) + weight / (k + rank)
            ranks.setdefault(key, {})[name] = rank
    order = sorted(scores, key=lambda key: -scores[key])
    return [Fused(key, scores[key], ranks[key]) for key in order]


def min_max_fusion(
    scored: Mapping[str, Sequence[tuple[str, float]]], weights: Mapping[str, float] | None = None
) -> list[Fused]:
    """Convex combination of min-max normalized scores; a key missing from a list scores 0 there."""
    combined: dict[str, float] = {}
    ranks: dict[str, dict[str, int]] = {}
    for name, pairs in scored.items():
        weight = 1.0 if weights is None else weights.get(name, 1.0)
        if not pairs:
            continue
        values = [score for _, score in pairs]
        low, high = min(values), max(values)
        span = high - low
        for rank, (key, score) in enumerate(pairs, start=1):
            if name in ranks.get(key, {}):  # a key counts once per list, at its best rank
                continue
            normalized = (score - low) / span if span > 0 else 1.0
            combined[key] = combined.get(key, 0.0) + weight * normalized
            ranks.setdefault(key, {}).setdefault(name, rank)
    order = sorted(combined, key=lambda key: -combined[key])
    return [Fused(key, combined[key], ranks[key]) for key in order]
