"""Search backends. `open_store` picks one from the settings; nothing above this package knows which."""

from __future__ import annotations

from pathlib import Path

from docsctl.config import Settings
from docsctl.store.base import Store, StoreWriter, WriteReport

__all__ = ["Store", "StoreWriter", "WriteReport", "open_store", "sqlite_index_path"]


def sqlite_index_path(settings: Settings) -> Path:
    return settings.data_dir / f"{settings.index_alias}.sqlite"


def open_store(settings: Settings) -> Store:
    """The configured backend; constructing it does not connect or open anything."""
    if settings.backend_name == "opensearch":
        from docsctl.store.opensearch import OpenSearchStore

        return OpenSearchStore(settings)
    from docsctl.store.sqlite import SqliteStore

    return SqliteStore(sqlite_index_path(settings))
