"""What the MCP tools answer: typed responses, their readable text, documents rebuilt from chunks,
and the character budget. Pure: no I/O; the tools in mcp.py fetch, these functions shape.

Every response comes twice, as structured content (the pydantic models below, which give each tool
its outputSchema) and as readable text for clients that ignore structured content. The budget
(`max_chars`) bounds the text; the structured content carries the same, equally cut, content.
Content that does not fit is cut at a paragraph, line or word boundary and ends with a marker
naming the call that returns the rest (TRUNCATED), never silently.

Documents are rebuilt from their chunks in order. The chunker starts a chunk after the first of a
run with the tail of the previous one (whole paragraphs or sentences, then a blank line);
`strip_overlap` drops that repeat, and `document_pieces` restores the section headings.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from typing import Any
from urllib.parse import quote

from pydantic import BaseModel, Field

from docsctl.models import Chunk, Hit, IndexMeta, SourceInfo
from docsctl.server.search import SearchResult

DEFAULT_MAX_CHARS = 12_000  # about 3k tokens: a typical answer stays well under 10k tokens
MIN_MAX_CHARS = 1_000
MAX_MAX_CHARS = 200_000
TRUNCATED = "[… truncated: call {call}]"
HIGHLIGHTS_SHOWN = 2
HIGHLIGHT_CHARS = 200
_BLANK_LINE = re.compile(r"\n[ \t]*\n")
_HEADING = re.compile(r"#{1,6} \S")
_FENCE_LINE = re.compile(r"^\s*(```|~~~)", re.MULTILINE)


# -- documents rebuilt from chunks --------------------------------------------------------------


def _words(text: str) -> str:
    return " ".join(text.split())


def strip_overlap(previous: str, current: str) -> str:
    """`current` without its opening paragraphs when they repeat the end of `previous`.

    Drops the longest prefix of `current` that ends at a blank line and equals, whitespace aside, a
    suffix of `previous` starting at a word boundary; `current` is returned unchanged otherwise.
    """
    before = _words(previous)
    if not before:
        return current
    cut = None
    for blank in _BLANK_LINE.finditer(current):
        prefix = _words(current[: blank.start()])
        if len(prefix) > len(before):
            break
        if prefix and (before == prefix or before.endswith(" " + prefix)):
            cut = blank.end()
    return current if cut is None else current[cut:].lstrip("\n")


def _starts_with_heading(text: str) -> bool:
    return bool(_HEADING.match(text.lstrip()))


def document_pieces(chunks: Sequence[Chunk]) -> list[str]:
    """What each chunk adds to the document text: its content without the overlap it repeats, headed
    by a Markdown heading where a new section starts (unless the content already opens with one)."""
    pieces: list[str] = []
    previous: Chunk | None = None
    for chunk in chunks:
        text = chunk.content
        continued = False
        # An overlap repeats lines of the previous chunk, so it starts at or before where that one ends.
        if previous is not None and chunk.start_line <= previous.end_line:
            stripped = strip_overlap(previous.content, text)
            continued = stripped != text
            text = stripped
        new_section = previous is None or chunk.breadcrumb != previous.breadcrumb
        if chunk.breadcrumb and new_section and not continued and not _starts_with_heading(text):
            text = f"{'#' * min(len(chunk.breadcrumb) + 1, 6)} {chunk.section or chunk.breadcrumb[-1]}\n\n{text}"
        pieces.append(text.strip("\n"))
        previous = chunk
    return pieces


def join_chunks(chunks: Sequence[Chunk]) -> str:
    """The text of a document (or of consecutive chunks of one), in order, without repeated overlap."""
    return "\n\n".join(piece for piece in document_pieces(chunks) if piece)


# -- the budget ---------------------------------------------------------------------------------


def cut_text(text: str, limit: int, marker: str, *, more: bool = False) -> str:
    """`text` if it fits in `limit` characters; else its start, cut at a paragraph, line or word
    boundary, then `marker` on a line of its own: never longer than `limit`, unless the marker is.
    With `more` (something follows `text` that is not shown), the marker is added in any case."""
    if len(text) <= limit and not more:
        return text
    room = limit - len(marker) - 5  # "\n" before the marker, "\n```" to close a code block cut open
    if room <= 0:
        return marker
    head = text
    if len(text) > room:
        head = text[:room]
        for boundary in ("\n\n", "\n", " "):
            at = head.rfind(boundary)
            if at > room // 2:
                head = head[:at]
                break
    head = head.rstrip()
    if len(_FENCE_LINE.findall(head)) % 2:
        head += "\n```"
    return f"{head}\n{marker}" if head else marker


def fit_document(chunks: Sequence[Chunk], limit: int, marker_for: Callable[[int], str]) -> tuple[str, int | None, int]:
    """The text of `chunks` (consecutive, in order) in at most `limit` characters.

    Returns the text, the chunk_index to continue from when it was cut (else None), and how many
    chunks were shown whole. A cut chunk is shown up to a boundary and continued from its start.
    """
    pieces = document_pieces(chunks)
    parts: list[str] = []
    used = 0
    reserve = len(marker_for(chunks[-1].chunk_index)) + 2 if chunks else 0  # room to say where the rest is
    for position, (chunk, piece) in enumerate(zip(chunks, pieces, strict=True)):
        if not piece:
            continue
        cost = len(piece) + (2 if parts else 0)
        last = position == len(chunks) - 1
        if used + cost + (0 if last else reserve) <= limit:
            parts.append(piece)
            used += cost
            continue
        # It does not fit with room to say where the rest is: what fits of it, then the marker.
        marker = marker_for(chunk.chunk_index)
        room = limit - used - (2 if parts else 0)
        parts.append(cut_text(piece, room, marker, more=True) if room > len(marker) else marker)
        return "\n\n".join(parts), chunk.chunk_index, position
    return "\n\n".join(parts), None, len(chunks)


def _quote(value: str) -> str:
    return "'" + value.replace("\\", "\\\\").replace("'", "\\'") + "'"


def document_call(chunk: Chunk, from_chunk: int = 0) -> str:
    """The get_document call that returns `chunk`'s document, from chunk `from_chunk` on."""
    args = f"path={_quote(chunk.path)}, source={_quote(chunk.source)}"
    if chunk.version:
        args += f", version={_quote(chunk.version)}"
    if from_chunk:
        args += f", from_chunk={from_chunk}"
    return f"get_document({args})"


# What a URL fragment may hold as it is (RFC 3986 pchar, "/" and "?"); anchors are stored as the page's
# element ids, raw, so anything else (a space, a %, non-ASCII) is percent-encoded.
_FRAGMENT_SAFE = "-._~!$&'()*+,;=:@/?"


def with_anchor(url: str | None, anchor: str | None) -> str | None:
    """`url` pointing at `anchor`, unless it has no anchor to give or already points somewhere."""
    if url and anchor and "#" not in url:
        return f"{url}#{quote(anchor, safe=_FRAGMENT_SAFE)}"
    return url


def section_url(chunk: Chunk) -> str | None:
    """The link to a chunk's section: its document's URL with the section anchor, if the URL has none."""
    return with_anchor(chunk.url, chunk.anchor)


def _trail(chunk: Chunk) -> str:
    return " › ".join(part for part in [chunk.title, *chunk.breadcrumb] if part)


def _where(chunk: Chunk) -> str:
    version = f"@{chunk.version}" if chunk.version else ""
    return f"{chunk.source}{version}:{chunk.path}"


# -- search_docs ----------------------------------------------------------------------------------


class SearchHit(BaseModel):
    """One result: the best section of a matching document."""

    rank: int = Field(description="1-based position in the whole result list (offset included).")
    title: str = Field(description="Title of the document.")
    breadcrumb: list[str] = Field(description="Headings from the top of the document down to this section.")
    section: str = Field(description="Heading of the section this chunk belongs to.")
    category: str
    source: str
    version: str
    path: str = Field(description="Path of the document inside its source; pass it to get_document.")
    url: str | None = Field(description="Link to the section (document URL with the section anchor), if known.")
    score: float = Field(description="Relevance; compare only within one response.")
    highlights: list[str] = Field(description="Fragments around the matched terms, matches in <em>…</em>.")
    content: str | None = Field(
        description="The section (content='chunk') or whole document (content='document'), cut to the budget; "
        "null for content='none'."
    )
    content_truncated: bool = Field(description="Whether content was cut; it then ends with a marker naming the call.")
    chunk_id: str = Field(description="Pass to get_chunk for this exact section.")
    start_line: int = Field(description="First line of the section in the source file.")
    end_line: int


class SearchResponse(BaseModel):
    """Results of search_docs, best first."""

    query: str
    mode: str
    content: str = Field(description="What each result's content holds: chunk, document or none.")
    total: int = Field(description="How many documents matched (one result per document).")
    offset: int
    returned: int = Field(description="How many results are in this response.")
    next_offset: int | None = Field(description="Offset for the next page, or null when there is none.")
    took_ms: float = Field(description="Search time in milliseconds.")
    truncated: bool = Field(description="Whether any content was cut or results left out to respect max_chars.")
    omitted: int = Field(description="Results of this page left out for max_chars (see next_offset).")
    results: list[SearchHit]


def _highlight_text(fragment: str) -> str:
    text = _words(fragment).replace("<em>", "**").replace("</em>", "**")
    return text if len(text) <= HIGHLIGHT_CHARS else text[: HIGHLIGHT_CHARS - 1] + "…"


def _hit_head(rank: int, hit: Hit) -> str:
    chunk = hit.chunk
    lines = [
        f"[{rank}] {_trail(chunk)}",
        f"    {chunk.category} · {_where(chunk)} · lines {chunk.start_line}-{chunk.end_line} · score {hit.score:.4g}",
        f"    chunk_id: {chunk.chunk_id}" + (f" · url: {section_url(chunk)}" if chunk.url else ""),
    ]
    lines += [f"    match: {_highlight_text(fragment)}" for fragment in hit.highlights[:HIGHLIGHTS_SHOWN]]
    return "\n".join(lines) + "\n"


def _search_marker(chunk: Chunk, content: str) -> str:
    if content == "document":
        return TRUNCATED.format(call=f"{document_call(chunk)} for the whole document")
    return TRUNCATED.format(call=f"get_chunk(chunk_id={_quote(chunk.chunk_id)}) or {document_call(chunk)}")


def _search_footer(total: int, offset: int, shown: int, omitted: int) -> str:
    if offset + shown >= total:
        return ""
    why = f" ({omitted} left out to respect max_chars)" if omitted else ""
    return f"\nMore results{why}: call search_docs again with the same arguments and offset={offset + shown}."


MIN_BODY = 120  # below this, a result shows only the marker, not a few meaningless words


def search_response(
    result: SearchResult,
    *,
    offset: int,
    content: str,
    max_chars: int,
    document_text: Callable[[Chunk], str],
) -> tuple[SearchResponse, str]:
    """The page of `result` within `max_chars`: results in rank order, each with its metadata and as
    much content as still fits. `document_text` is called only for results whose content is shown."""
    header = (
        f"{result.total} documents match {result.query!r} ({result.mode}, {result.took_ms:.0f} ms)"
        + (f"; results {offset + 1}-{offset + len(result.hits)}:" if result.hits else ".")
        + "\n"
    )
    reserve = len(_search_footer(10**7, 10**6, 0, 10**3))  # the longest footer this page can need
    left = max_chars - len(header) - reserve
    hits: list[SearchHit] = []
    blocks: list[str] = []
    cut_any = False
    for rank, hit in enumerate(result.hits, start=offset + 1):
        chunk = hit.chunk
        head = "\n" + _hit_head(rank, hit)
        marker = _search_marker(chunk, content)
        needed = len(head) + (len(marker) + 1 if content != "none" else 0)
        if hits and needed > left:
            break
        left -= len(head)
        body: str | None = None
        truncated = False
        if content != "none":
            room = left - 1
            if room >= len(marker) + MIN_BODY:
                full = chunk.content if content == "chunk" else document_text(chunk)
                body = cut_text(full, room, marker)
                truncated = body != full
            else:
                body, truncated = marker, True
            left -= len(body) + 1
        cut_any = cut_any or truncated
        blocks.append(head + (body + "\n" if body is not None else ""))
        hits.append(
            SearchHit(
                rank=rank,
                score=hit.score,
                highlights=list(hit.highlights),
                content=body,
                content_truncated=truncated,
                **_identity(chunk),
            )
        )
    omitted = len(result.hits) - len(hits)
    shown_until = offset + len(hits)
    response = SearchResponse(
        query=result.query,
        mode=result.mode,
        content=content,
        total=result.total,
        offset=offset,
        returned=len(hits),
        next_offset=shown_until if shown_until < result.total else None,
        took_ms=round(result.took_ms, 1),
        truncated=cut_any or omitted > 0,
        omitted=omitted,
        results=hits,
    )
    if not result.hits and offset and result.total:
        header += f"\nNo more results: offset={offset} is past the last of {result.total}."
    elif not result.hits:
        header += "\nNo results. Try other words, mode='bm25' for exact names, or fewer filters."
    return response, header + "".join(blocks) + _search_footer(result.total, offset, len(hits), omitted)


# -- get_document and lookup --------------------------------------------------------------------------


class ChunkRef(BaseModel):
    """Where one chunk sits in its document."""

    chunk_id: str
    chunk_index: int
    section: str
    breadcrumb: list[str]
    start_line: int
    end_line: int
    url: str | None


class Document(BaseModel):
    """A document rebuilt from its chunks in order, cut to the budget."""

    title: str
    source: str
    version: str
    path: str
    category: str
    doc_type: str
    url: str | None = Field(
        description="Link to the document, if known; from lookup of a name documented at an anchor of the page, "
        "to that anchor."
    )
    names: list[str] = Field(description="Commands, components or APIs this page documents.")
    chunk_count: int = Field(description="How many chunks the whole document has.")
    from_chunk: int = Field(description="Index of the first chunk in content.")
    next_chunk: int | None = Field(description="When content was cut: pass as from_chunk to get_document for the rest.")
    truncated: bool
    content: str = Field(description="The document text from from_chunk on; ends with a marker when cut.")
    chunks: list[ChunkRef] = Field(description="The chunks content covers, in order.")


def _document_head(chunks: Sequence[Chunk], from_chunk: int, anchor: str | None = None) -> str:
    first = chunks[0]
    span = f"chunks {from_chunk}-{len(chunks) - 1} of {len(chunks)}" if from_chunk else f"{len(chunks)} chunks"
    url = f" · url: {with_anchor(first.url, anchor)}" if first.url else ""
    return f"# {first.title}\n{first.category} · {_where(first)} · {span}{url}\n\n"


def document_result(
    chunks: Sequence[Chunk], *, from_chunk: int, max_chars: int, anchor: str | None = None
) -> tuple[Document, str]:
    """One document (all its chunks, in order) from chunk `from_chunk` on, in at most `max_chars`; its URL
    points at `anchor`, if given."""
    first = chunks[0]
    shown = [chunk for chunk in chunks if chunk.chunk_index >= from_chunk]
    head = _document_head(chunks, from_chunk, anchor)
    if not shown:
        text = f"(the document has {len(chunks)} chunks; from_chunk={from_chunk} is past its end)"
        next_chunk, whole = None, 0
    else:

        def marker(index: int) -> str:
            return TRUNCATED.format(call=f"{document_call(first, index)} for the rest")

        text, next_chunk, whole = fit_document(shown, max(max_chars - len(head), 0), marker)
    covered = shown[: whole + (1 if next_chunk is not None and whole < len(shown) else 0)]
    document = Document(
        title=first.title,
        source=first.source,
        version=first.version,
        path=first.path,
        category=first.category,
        doc_type=first.doc_type,
        url=with_anchor(first.url, anchor),
        names=list(first.names),
        chunk_count=len(chunks),
        from_chunk=from_chunk,
        next_chunk=next_chunk,
        truncated=next_chunk is not None,
        content=text,
        chunks=[_chunk_ref(chunk) for chunk in covered],
    )
    return document, head + text


def _chunk_ref(chunk: Chunk) -> ChunkRef:
    return ChunkRef(
        chunk_id=chunk.chunk_id,
        chunk_index=chunk.chunk_index,
        section=chunk.section,
        breadcrumb=list(chunk.breadcrumb),
        start_line=chunk.start_line,
        end_line=chunk.end_line,
        url=section_url(chunk),
    )


class LookupResponse(BaseModel):
    """The reference pages documenting one name."""

    name: str
    found: int = Field(description="How many pages document the name.")
    truncated: bool
    documents: list[Document] = Field(
        description="The pages, best match first, each rebuilt from its chunks: from the first, or from the one "
        "documenting the name where the page documents it at an anchor (from_chunk; url points at the anchor)."
    )


def split_documents(chunks: Sequence[Chunk]) -> list[list[Chunk]]:
    """Chunks of several documents (each in order, documents contiguous) -> one list per document."""
    documents: dict[str, list[Chunk]] = {}
    for chunk in chunks:
        documents.setdefault(chunk.doc_id, []).append(chunk)
    return list(documents.values())


def named_at(name: str, chunks: Sequence[Chunk]) -> tuple[Chunk, str] | None:
    """The chunk of a document that documents `name` at an anchor of the page (objects.inv), and that anchor."""
    key = name.strip().lower()
    for chunk in chunks:
        for named, anchor in chunk.name_anchors:
            if named.lower() == key:
                return chunk, anchor
    return None


def rank_pages(name: str, documents: list[list[Chunk]]) -> list[list[Chunk]]:
    """Pages about `name` first: the page the site's objects.inv places it on (an exact address beats a
    guess), then its name in the title, then the fewest other names, then the path."""
    key = name.strip().lower()

    def order(chunks: list[Chunk]) -> tuple[int, int, int, str]:
        first = chunks[0]
        in_title = re.search(rf"(?<!\w){re.escape(key)}(?!\w)", first.title.lower()) is not None
        return (0 if named_at(key, chunks) else 1, 0 if in_title else 1, len(first.names), first.path)

    return sorted(documents, key=order)


def lookup_result(name: str, documents: list[list[Chunk]], *, max_chars: int) -> tuple[LookupResponse, str]:
    """Every page documenting `name`, sharing `max_chars` in order: whole, or, where the page documents the
    name at an anchor (`named_at`), from the chunk holding it on, its URL pointing at the anchor (an API page
    may document hundreds of names, and the budget would end long before the one asked for)."""
    if not documents:
        text = (
            f"No page documents the name {name!r}. Names are matched exactly (case-insensitive); "
            f"try search_docs(query={_quote(name)}) for pages that mention it."
        )
        return LookupResponse(name=name, found=0, truncated=False, documents=[]), text
    header = f"{len(documents)} page(s) document {name!r}:\n\n" if len(documents) > 1 else ""
    left = max_chars - len(header)
    results: list[Document] = []
    texts: list[str] = []
    for chunks in documents:
        found = named_at(name, chunks)
        start, anchor = (found[0].chunk_index, found[1]) if found else (0, None)
        minimum = len(_document_head(chunks, start, anchor)) + len(TRUNCATED) + 200
        budget = max(left, minimum)  # every page gets at least its heading and the call for its text
        document, text = document_result(chunks, from_chunk=start, max_chars=budget, anchor=anchor)
        results.append(document)
        texts.append(text)
        left -= len(text) + 2
    response = LookupResponse(
        name=name, found=len(results), truncated=any(doc.truncated for doc in results), documents=results
    )
    return response, header + "\n\n".join(texts)


# -- get_chunk -------------------------------------------------------------------------------------


class ChunkResponse(BaseModel):
    """One chunk: a section (or part of one) of a document."""

    chunk_id: str
    chunk_index: int = Field(description="Position of the chunk in its document (0-based).")
    title: str
    breadcrumb: list[str]
    section: str
    category: str
    source: str
    version: str
    path: str
    url: str | None
    start_line: int
    end_line: int
    content: str


def _identity(chunk: Chunk) -> dict[str, Any]:
    """The fields every chunk-shaped answer carries: what the chunk is and where it lives."""
    return {
        "chunk_id": chunk.chunk_id,
        "title": chunk.title,
        "breadcrumb": list(chunk.breadcrumb),
        "section": chunk.section,
        "category": chunk.category,
        "source": chunk.source,
        "version": chunk.version,
        "path": chunk.path,
        "url": section_url(chunk),
        "start_line": chunk.start_line,
        "end_line": chunk.end_line,
    }


def chunk_result(chunk: Chunk) -> tuple[ChunkResponse, str]:
    response = ChunkResponse(chunk_index=chunk.chunk_index, content=chunk.content, **_identity(chunk))
    url = f" · url: {response.url}" if response.url else ""
    text = (
        f"{_trail(chunk)}\n{chunk.category} · {_where(chunk)} · chunk {chunk.chunk_index} · "
        f"lines {chunk.start_line}-{chunk.end_line}{url}\n\n{chunk.content}\n\n"
        f"(Whole document: {document_call(chunk)}; read on: {document_call(chunk, chunk.chunk_index + 1)})"
    )
    return response, text


# -- list_sources ----------------------------------------------------------------------------------


class SourceEntry(BaseModel):
    """One indexed documentation source."""

    source: str
    documents: int
    chunks: int
    categories: dict[str, int] = Field(description="Chunks per category: the values search_docs accepts.")
    versions: dict[str, int] = Field(description="Chunks per version label ('' when unversioned).")
    last_indexed: str | None = Field(description="When the source was last indexed (ISO 8601, UTC).")
    origin: str | None = Field(description="The folder, or repository and commit, it was indexed from.")


class SourcesResponse(BaseModel):
    """What the index holds and how it was built."""

    backend: str = Field(description="sqlite or opensearch.")
    model: str = Field(description="Embedding model the index was built with.")
    dimension: int
    server_model: str = Field(description="Embedding model this server encodes queries with.")
    categories: list[str] = Field(description="Every category in the index (for search_docs' category).")
    sources: list[SourceEntry]


def sources_result(
    infos: Sequence[SourceInfo], meta: IndexMeta | None, *, backend: str, server_model: str
) -> tuple[SourcesResponse, str]:
    entries = [
        SourceEntry(
            source=info.source,
            documents=info.documents,
            chunks=info.chunks,
            categories=dict(info.categories),
            versions=dict(info.versions),
            last_indexed=info.last_indexed,
            origin=info.origin,
        )
        for info in infos
    ]
    model = meta.model if meta else ""
    response = SourcesResponse(
        backend=backend,
        model=model,
        dimension=meta.dimension if meta else 0,
        server_model=server_model,
        categories=sorted({category for info in infos for category in info.categories}),
        sources=entries,
    )
    lines = [f"Index on {backend}, embeddings: {model or 'unknown'} ({response.dimension} dimensions)."]
    if model and model != server_model:
        lines.append(f"Warning: this server encodes queries with {server_model}; rebuild the index or restart it.")
    if not entries:
        lines.append("The index holds no sources yet.")
    for entry in entries:
        lines.append(
            f"\n{entry.source}: {entry.documents} documents, {entry.chunks} chunks; "
            f"last indexed {entry.last_indexed or 'unknown'} from {entry.origin or 'unknown'}"
        )
        lines.append("  categories (chunks): " + ", ".join(f"{k} {v}" for k, v in entry.categories.items()))
        labelled = {k: v for k, v in entry.versions.items() if k}
        if labelled:
            lines.append("  versions (chunks): " + ", ".join(f"{k} {v}" for k, v in labelled.items()))
    return response, "\n".join(lines)
