"""Plain data passed between the indexer, the stores and the server."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

Vector = list[float]


@dataclass(frozen=True)
class Section:
    """One headed part of a document, as extraction finds it.

    `text` is Markdown-like: paragraphs separated by blank lines, code in ``` fences.
    Lines are 1-based and refer to the source file. `anchors` places the ids of elements inside the
    text (HTML): (id, index of the line of `text` at which the element's text starts).
    """

    heading: str
    level: int
    text: str
    anchor: str | None = None
    start_line: int = 1
    end_line: int = 1
    anchors: tuple[tuple[str, int], ...] = ()


@dataclass(frozen=True)
class ExtractedDoc:
    """What a format extractor returns for one file."""

    title: str
    sections: list[Section]
    doc_type: str  # html | markdown | notebook | rst | text
    names: list[str] = field(default_factory=list)  # names the page documents (commands, classes ...)


@dataclass(frozen=True)
class SourceDoc:
    """One file of one source, before extraction."""

    source: str
    path: str  # posix path relative to the source root
    abs_path: Path
    category: str
    version: str = ""
    url: str | None = None
    names: tuple[str, ...] = ()  # names the source says the file documents (a site's objects.inv)
    # (name, id of the element documenting it) for the names the source places on the page (objects.inv)
    name_anchors: tuple[tuple[str, str], ...] = ()


@dataclass
class Chunk:
    """One searchable piece of a document; `embedding` is filled by the indexer."""

    chunk_id: str
    doc_id: str
    source: str
    path: str
    title: str
    breadcrumb: list[str]
    section: str
    category: str
    doc_type: str
    chunk_index: int
    content: str
    content_hash: str  # hash of the whole document the chunk came from
    start_line: int = 1
    end_line: int = 1
    names: list[str] = field(default_factory=list)
    url: str | None = None
    anchor: str | None = None
    # [heading, anchor or ""] of each section merged into this chunk (its heading lines in `content`)
    merged_anchors: list[list[str]] = field(default_factory=list)
    # [name, anchor] of each name whose documentation starts in this chunk, at that anchor of the page
    # (a site's objects.inv); the page-level `names` hold these names too
    name_anchors: list[list[str]] = field(default_factory=list)
    version: str = ""
    indexed_at: str = ""
    embedding: Vector | None = None

    def trail(self) -> list[str]:
        """Title then headings down to this section, without repeating a top heading equal to the title."""
        parts = [self.title, *self.breadcrumb] if self.title else list(self.breadcrumb)
        return [part for i, part in enumerate(parts) if part and (i == 0 or part != parts[i - 1])]

    def embed_text(self) -> str:
        """The text given to the model: title and breadcrumb give a section its context."""
        context = " > ".join(self.trail())
        return f"{context}\n\n{self.content}" if context else self.content

    def to_dict(self, with_embedding: bool = False) -> dict[str, Any]:
        # Shallow on purpose: asdict() deep-copies the vector, 100x slower on the bulk-write path.
        data = {name: getattr(self, name) for name in self.__dataclass_fields__}
        data["breadcrumb"], data["names"] = list(self.breadcrumb), list(self.names)
        data["merged_anchors"] = [list(pair) for pair in self.merged_anchors]
        data["name_anchors"] = [list(pair) for pair in self.name_anchors]
        if not with_embedding:
            data.pop("embedding")
        return data

    @classmethod
    def brief(cls, chunk_id: str, doc_id: str) -> Chunk:
        """A stand-in holding what ranking needs (identity, document); every other field is empty until the
        chunk is fetched whole (Store.page)."""
        return cls(chunk_id, doc_id, "", "", "", [], "", "", "", 0, "", "")

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Chunk:
        known = {name: data[name] for name in cls.__dataclass_fields__ if name in data}
        return cls(**known)


@dataclass(frozen=True)
class Filters:
    """Restrictions every search mode applies inside the query, never after it."""

    categories: tuple[str, ...] = ()
    sources: tuple[str, ...] = ()
    versions: tuple[str, ...] = ()
    # (source, version): each source named here is searched in that version only; others in all.
    pinned_versions: tuple[tuple[str, str], ...] = ()

    def is_empty(self) -> bool:
        return not (self.categories or self.sources or self.versions or self.pinned_versions)


@dataclass
class Hit:
    """A chunk found by a search, with its score in that search and highlighted fragments."""

    chunk: Chunk
    score: float
    highlights: list[str] = field(default_factory=list)
    ranks: dict[str, int] = field(default_factory=dict)  # rank per retriever, e.g. {"bm25": 1, "knn": 4}

    def rescored(self, score: float, ranks: dict[str, int]) -> Hit:
        """A copy with another score and ranks, as dataclasses.replace would make it: that looks the fields up
        on every call (2-3 us), and a search makes several hundred of these (its candidates, fused)."""
        return Hit(self.chunk, score, self.highlights, ranks)

    def to_dict(self) -> dict[str, Any]:
        data = self.chunk.to_dict()
        data.update(score=self.score, highlights=self.highlights, ranks=self.ranks)
        return data


@dataclass(frozen=True)
class SourceInfo:
    """What an index holds for one source."""

    source: str
    documents: int
    chunks: int
    categories: dict[str, int]
    versions: dict[str, int]
    last_indexed: str | None = None
    origin: str | None = None  # folder or repository + commit it was indexed from


@dataclass(frozen=True)
class IndexMeta:
    """What an index records about how it was built; a mismatch forces a full rebuild."""

    mapping_version: int
    model: str
    dimension: int
