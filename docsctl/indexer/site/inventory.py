"""Sphinx `objects.inv`: the API names a site documents and the page + anchor of each (read by sphobjinv)."""

from __future__ import annotations

from dataclasses import dataclass
from urllib.parse import unquote, urlsplit

import sphobjinv


@dataclass(frozen=True)
class InventoryEntry:
    name: str  # e.g. panel.widgets.Select
    role: str  # e.g. py:class
    uri: str  # relative to the inventory's folder, with the anchor: api/panel.widgets.html#panel.widgets.Select

    @property
    def anchor(self) -> str:
        """The id of the element that documents the name on its page ("" for the page as a whole)."""
        return unquote(urlsplit(self.uri).fragment)


def parse_inventory(raw: bytes) -> list[InventoryEntry]:
    """The entries of a compressed (version 2) inventory; [] for anything that is not one."""
    try:
        inventory = sphobjinv.Inventory(zlib=raw)
    except Exception:  # sphobjinv raises a variety (VersionError, zlib.error, TypeError ...) for bad input
        return []
    entries = []
    for obj in inventory.objects:
        if obj.role in {"label", "doc", "term"}:  # page titles and labels, not API names
            continue
        uri = obj.uri.replace("$", obj.name) if obj.uri.endswith("$") else obj.uri
        entries.append(InventoryEntry(obj.name, f"{obj.domain}:{obj.role}", uri))
    return entries
