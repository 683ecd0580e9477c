"""Removing a source, or one version of it, from the index.

A removal is a rebuild beside the live index that copies every other source (and every other version of
this one), swapped in when complete, as `docsctl reindex --full` does: searches see the source whole until
the swap and gone after it, never half-removed, and a removal that fails leaves the live index as it was.
It takes the reindex lock, so it never races a reindex.
"""

from __future__ import annotations

import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from docsctl.errors import ConfigError, IndexMissingError
from docsctl.indexer.lock import reindex_lock
from docsctl.store.base import Store


@dataclass
class RemovalSummary:
    source: str
    version: str | None  # None: every version
    documents: int  # removed
    chunks: int  # removed
    kept: int  # chunks of everything else, copied into the new index
    seconds: float

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def remove_source(store: Store, source: str, version: str | None = None, *, lock_path: Path) -> RemovalSummary:
    """Remove `source` (only its `version`, when given; "" is an unversioned source's) from the index.

    ConfigError naming what the index holds when it holds no such source or version."""
    started = time.perf_counter()
    with reindex_lock(lock_path, f"removing source {source}"):
        live = store.index_meta()
        if live is None:
            raise IndexMissingError("nothing has been indexed yet: there is no source to remove")
        if live.mapping_version != store.schema_version:
            # copying chunks needs both indexes in one layout; a full reindex upgrades the live one
            raise ConfigError("this index was built by an older docsctl: run docsctl reindex --full first")
        infos = {info.source: info for info in store.list_sources()}
        states = store.source_states()
        known = set(infos) | set(states)
        if source not in known:
            raise ConfigError(f"no source {source!r} in the index; sources: {', '.join(sorted(known)) or '(none)'}")
        info = infos.get(source)
        versions = info.versions if info else {}
        if version is not None and version not in versions:
            labels = ", ".join(repr(label) for label in sorted(versions)) or "(none)"
            raise ConfigError(f"source {source!r} has no version {version!r}; its versions: {labels}")
        if version is None:
            documents, chunks = (info.documents, info.chunks) if info else (0, 0)
        else:
            documents, chunks = len(store.doc_hashes(source, version)), versions[version]
        state = states.get(source)
        with store.writer(live, rebuild=True) as writer:
            kept = writer.copy_sources(exclude={(source, version)})
            if version is not None and state is not None:
                # What the source remembers of the removed version goes too: a site's per-URL validators
                # would make its next crawl skip pages as unchanged that the index no longer holds.
                others = {label: entry for label, entry in (state.get("versions") or {}).items() if label != version}
                writer.record_source(source, {**state, "versions": others})
    return RemovalSummary(source, version, documents, chunks, kept, time.perf_counter() - started)
