"""Filters as SQL (FTS5 matches) and as row masks over codes (k-NN, BM25 from the postings)."""

from __future__ import annotations

from collections.abc import Iterable

import numpy as np

from docsctl.models import Filters
from docsctl.store.sqlite.schema import _marks


def _filter_sql(filters: Filters | None, alias: str = "c") -> tuple[str, list[str]]:
    """`AND ...` restricting chunks to the filters, with its parameters."""
    if filters is None:
        return "", []
    clauses, params = [], []
    for column, values in _filter_fields(filters):
        if values:
            clauses.append(f"{alias}.{column} IN ({_marks(len(values))})")
            params.extend(values)
    if filters.pinned_versions:
        pinned = [source for source, _ in filters.pinned_versions]
        pairs = " OR ".join(f"({alias}.source = ? AND {alias}.version = ?)" for _ in filters.pinned_versions)
        clauses.append(f"({alias}.source NOT IN ({_marks(len(pinned))}) OR {pairs})")
        params.extend(pinned)
        params.extend(value for pair in filters.pinned_versions for value in pair)
    return "".join(f" AND {clause}" for clause in clauses), params


def _filter_fields(filters: Filters) -> list[tuple[str, tuple[str, ...]]]:
    return [("category", filters.categories), ("source", filters.sources), ("version", filters.versions)]


def _codes(values: Iterable[str], count: int) -> tuple[np.ndarray, dict[str, int]]:
    """`count` values as codes (0 for the first value seen, 1 for the next new one...), and each value's code:
    what _filter_mask reads."""
    table: dict[str, int] = {}
    codes = np.fromiter((table.setdefault(value, len(table)) for value in values), dtype=np.int32, count=count)
    return codes, table


def _filter_mask(
    filters: Filters | None, codes: dict[str, np.ndarray], values: dict[str, dict[str, int]]
) -> np.ndarray | None:
    """Which rows match the filters, given each row's category, source and version as codes into `values`
    (a code no value has, e.g. -1, matches no wanted value); None: all rows do."""
    if filters is None or filters.is_empty():
        return None
    mask = np.ones(len(codes["source"]), dtype=bool)
    for field, wanted in _filter_fields(filters):
        if wanted:
            known = [values[field][value] for value in wanted if value in values[field]]
            mask &= np.isin(codes[field], known)
    if filters.pinned_versions:
        source_codes, version_codes = codes["source"], codes["version"]
        pinned = [values["source"][s] for s, _ in filters.pinned_versions if s in values["source"]]
        allowed = ~np.isin(source_codes, pinned)
        for source, version in filters.pinned_versions:
            if source in values["source"] and version in values["version"]:
                allowed |= (source_codes == values["source"][source]) & (version_codes == values["version"][version])
        mask &= allowed
    return mask
