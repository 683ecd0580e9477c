"""reindex(): sources -> extract -> chunk -> embed -> store, incremental by content hash.

Three stages overlap, so the model (the bottleneck on a CPU) is kept busy: a producer thread extracts
and chunks, one embedding thread encodes a batch while the main thread writes the previous one to the
store (batches are written in order). Batches are large so that the model, which sorts each batch by
length, pads little (bench/README.md, "Performance"). A document is identified by (source, version, path); its chunks'
ids include the document's content hash, so new chunks are written before the old ones are
deleted and searches never see a document vanish mid-update.
"""

from __future__ import annotations

import hashlib
import json
import queue
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from docsctl.embedding import Embedder, EmbeddingCache, embed_with_cache
from docsctl.errors import ExtractError
from docsctl.indexer.chunking import Piece, chunk_sections
from docsctl.indexer.extract import extract_file
from docsctl.indexer.lock import reindex_lock
from docsctl.indexer.site import CrawlProgress, crawl_target, previous_pages
from docsctl.indexer.sources import UNSUPPORTED, SourceTarget, walk_source
from docsctl.models import Chunk, ExtractedDoc, IndexMeta, SourceDoc
from docsctl.phases import checkpoint
from docsctl.store.base import SourceVersion, Store, StoreWriter, is_replaced

# Bump when extraction or chunking changes what a file turns into: every document is then redone.
PIPELINE_VERSION = "2"
EMBED_BATCH = 512  # chunks per embedding batch: 128 padded 11% more tokens (bench/README.md)
QUEUE_DOCS = 64
# In a source's state while an incremental run writes it: see reindex().
UNFINISHED = "unfinished"

ProgressCallback = Callable[[str, int, int], None]  # (source, files done, files total)


@dataclass
class ReindexSummary:
    sources: list[str]
    files_seen: int = 0
    added: int = 0
    changed: int = 0
    unchanged: int = 0
    removed: int = 0
    skipped: list[tuple[str, str]] = field(default_factory=list)  # (source:path, reason)
    ignored: int = 0  # files of types docsctl does not index
    chunks_written: int = 0
    chunks_embedded: int = 0
    chunks_carried: int = 0  # chunks of other sources kept through a rebuild
    crawls: dict[str, dict[str, Any]] = field(default_factory=dict)  # per site source: CrawlStats.to_dict()
    write_failures: list[tuple[str, str]] = field(default_factory=list)
    rebuilt: bool = False
    rebuild_reason: str = ""
    seconds: float = 0.0
    timings: dict[str, float] = field(
        default_factory=lambda: dict.fromkeys(("extract", "chunk", "embed", "write"), 0.0)
    )

    @property
    def indexed(self) -> int:
        return self.added + self.changed

    def to_dict(self) -> dict[str, Any]:
        data = asdict(self)
        data["skipped"] = [{"path": path, "reason": reason} for path, reason in self.skipped]
        data["write_failures"] = [{"chunk_id": cid, "reason": reason} for cid, reason in self.write_failures]
        data["indexed"] = self.indexed
        return data


@dataclass
class _Ready:
    doc: SourceDoc
    doc_id: str
    content_hash: str
    chunks: list[Chunk]
    is_new: bool


@dataclass
class _Skip:
    doc: SourceDoc
    reason: str


@dataclass
class _Unchanged:
    doc: SourceDoc


def doc_id_for(source: str, version: str, path: str) -> str:
    return f"{source}:{version}:{path}" if version else f"{source}:{path}"


def content_hash(doc: SourceDoc, raw: bytes) -> str:
    """What the document's chunks are made from: its bytes, and the names (and their anchors) its source
    gives it from outside the file, a site's objects.inv: a new inventory re-indexes an unchanged page."""
    digest = hashlib.sha256(PIPELINE_VERSION.encode() + b"\0" + raw)
    if doc.names or doc.name_anchors:
        digest.update(b"\0" + json.dumps([doc.names, doc.name_anchors]).encode())
    return digest.hexdigest()[:24]


def build_chunks(doc: SourceDoc, extracted: ExtractedDoc, doc_hash: str) -> list[Chunk]:
    """The chunks of one extracted document, with ids that change when the document changes."""
    doc_id = doc_id_for(doc.source, doc.version, doc.path)
    stem = Path(doc.path).stem.lower()
    names = list(dict.fromkeys([*(name.lower() for name in (*extracted.names, *doc.names)), stem]))
    pieces = chunk_sections(extracted)
    name_anchors = place_name_anchors(doc.name_anchors, pieces)
    chunks = []
    for index, piece in enumerate(pieces):
        chunk_id = hashlib.blake2b(f"{doc_id}\0{doc_hash}\0{index}".encode(), digest_size=10).hexdigest()
        chunks.append(
            Chunk(
                chunk_id=chunk_id,
                doc_id=doc_id,
                source=doc.source,
                path=doc.path,
                title=extracted.title,
                breadcrumb=list(piece.breadcrumb),
                section=piece.section,
                category=doc.category,
                doc_type=extracted.doc_type,
                chunk_index=index,
                content=piece.content,
                content_hash=doc_hash,
                start_line=piece.start_line,
                end_line=piece.end_line,
                names=names,
                url=doc.url,
                anchor=piece.anchor,
                merged_anchors=[list(pair) for pair in piece.merged_anchors],
                name_anchors=name_anchors.get(index, []),
                version=doc.version,
            )
        )
    return chunks


def place_name_anchors(name_anchors: Sequence[tuple[str, str]], pieces: Sequence[Piece]) -> dict[int, list[list[str]]]:
    """By piece index, the [name, anchor] pairs whose element starts in that piece (the first one, if several
    do); a name whose anchor the page lacks (or whose page came as Markdown) stays a name of the page alone."""
    first_piece: dict[str, int] = {}
    for index, piece in enumerate(pieces):
        for anchor in (piece.anchor, *piece.anchors):  # the first piece labelled with a section starts it
            if anchor:
                first_piece.setdefault(anchor, index)
    placed: dict[int, list[list[str]]] = {}
    for name, anchor in dict.fromkeys((name.lower(), anchor) for name, anchor in name_anchors):
        if anchor in first_piece:
            placed.setdefault(first_piece[anchor], []).append([name, anchor])
    return placed


def needs_rebuild(full: bool, live: IndexMeta | None, wanted: IndexMeta) -> str:
    """Why a new index must be built ("" when an incremental update will do)."""
    if live is None:
        return "no index yet"
    if full:
        return "--full"
    if live.model != wanted.model or live.dimension != wanted.dimension:
        return f"model changed ({live.model}/{live.dimension} -> {wanted.model}/{wanted.dimension})"
    if live.mapping_version != wanted.mapping_version:
        return f"index definition changed (v{live.mapping_version} -> v{wanted.mapping_version})"
    return ""


class _Run:
    """One reindex run: shared state of the producer, the embedding thread and the write loop."""

    def __init__(
        self,
        writer: StoreWriter,
        embedder: Embedder,
        cache: EmbeddingCache | None,
        summary: ReindexSummary,
        embedding: ThreadPoolExecutor,
    ):
        self.writer = writer
        self.embedder = embedder
        self.cache = cache
        self.summary = summary
        self.lock = threading.Lock()  # timings are added from several threads
        self.embedding = embedding  # one worker: batches are embedded, and so written, in order
        self._unwritten: tuple[Future[int], list[_Ready], list[Chunk]] | None = None

    def add_time(self, phase: str, seconds: float) -> None:
        with self.lock:
            self.summary.timings[phase] += seconds

    def prepare(self, files: Sequence[tuple[SourceDoc, str | None]], old: dict[str, str]) -> Iterator[Any]:
        for doc, reason in files:
            if reason:
                yield _Skip(doc, reason)
                continue
            try:
                raw = doc.abs_path.read_bytes()
            except OSError as exc:
                yield _Skip(doc, f"unreadable: {exc.strerror or exc}")
                continue
            doc_hash = content_hash(doc, raw)
            if old.get(doc.path) == doc_hash:
                yield _Unchanged(doc)
                continue
            started = time.perf_counter()
            try:
                extracted = extract_file(doc.abs_path, raw)
            except ExtractError as exc:
                yield _Skip(doc, str(exc))
                continue
            finally:
                self.add_time("extract", time.perf_counter() - started)
            checkpoint("extract")
            started = time.perf_counter()
            chunks = build_chunks(doc, extracted, doc_hash)
            self.add_time("chunk", time.perf_counter() - started)
            if not chunks:
                yield _Skip(doc, "no text content")
                continue
            doc_id = doc_id_for(doc.source, doc.version, doc.path)
            yield _Ready(doc, doc_id, doc_hash, chunks, is_new=doc.path not in old)

    def _embed(self, chunks: list[Chunk]) -> int:
        started = time.perf_counter()
        vectors, computed = embed_with_cache(self.embedder, self.cache, [chunk.embed_text() for chunk in chunks])
        for chunk, vector in zip(chunks, vectors, strict=True):
            chunk.embedding = vector.tolist()
        self.add_time("embed", time.perf_counter() - started)
        checkpoint("embed")
        return computed

    def flush(self, ready: list[_Ready]) -> None:
        """Start embedding `ready` and write the batch before it meanwhile."""
        chunks = [chunk for item in ready for chunk in item.chunks]
        if not chunks:
            return
        embedding = self.embedding.submit(self._embed, chunks)
        self.drain()
        self._unwritten = (embedding, ready, chunks)

    def drain(self) -> None:
        """Write the batch being embedded, once it is: new chunks first, then the replaced documents' old ones."""
        if self._unwritten is None:
            return
        embedding, ready, chunks = self._unwritten
        self._unwritten = None
        computed = embedding.result()
        started = time.perf_counter()
        report = self.writer.write(chunks, whole_documents=True)  # a batch holds whole documents
        checkpoint("write")
        replaced = [item for item in ready if not item.is_new]
        for item in replaced:
            self.writer.delete_documents([item.doc_id], keep_hash=item.content_hash)
        self.add_time("write", time.perf_counter() - started)
        self.summary.chunks_embedded += computed
        self.summary.chunks_written += report.written
        self.summary.write_failures.extend(report.failed)


def _produce(items: Iterator[Any], out: queue.Queue) -> None:
    try:
        for item in items:
            out.put(item)
        out.put(None)
    except BaseException as exc:  # handed to the consumer, which re-raises it
        out.put(exc)


def _index_source(
    run: _Run, store: Store, target: SourceTarget, rebuild: bool, progress: ProgressCallback | None, *, redo: bool
) -> None:
    summary = run.summary
    old = {} if rebuild else store.doc_hashes(target.name, target.version)
    if redo:  # no stored hash can be trusted: every document is written again, and its other chunks deleted
        old = dict.fromkeys(old, "")
    walked = list(walk_source(target))
    files = [(doc, reason) for doc, reason in walked if reason != UNSUPPORTED]
    summary.ignored += len(walked) - len(files)
    summary.files_seen += len(files)
    items: queue.Queue = queue.Queue(maxsize=QUEUE_DOCS)
    producer = threading.Thread(target=_produce, args=(run.prepare(files, old), items), daemon=True)
    producer.start()
    pending: list[_Ready] = []
    done = 0
    while True:
        item = items.get()
        if item is None:
            break
        if isinstance(item, BaseException):
            raise item
        done += 1
        if isinstance(item, _Skip):
            summary.skipped.append((f"{target.name}:{item.doc.path}", item.reason))
        elif isinstance(item, _Unchanged):
            summary.unchanged += 1
        else:
            if item.is_new:
                summary.added += 1
            else:
                summary.changed += 1
            pending.append(item)
            if sum(len(p.chunks) for p in pending) >= EMBED_BATCH:
                run.flush(pending)
                pending = []
        if progress:
            progress(target.name, done, len(files))
    run.flush(pending)
    run.drain()
    producer.join()
    seen = {doc.path for doc, _ in files}
    gone = [doc_id_for(target.name, target.version, path) for path in old if path not in seen]
    if gone:
        run.writer.delete_documents(gone)
        summary.removed += len(gone)


def _carry_over(store: Store, run: _Run, exclude: set[SourceVersion]) -> int:
    """Keep other sources (and other versions of these) through a rebuild that changed the model:
    re-embed their stored chunks."""
    carried = 0
    batch: list[Chunk] = []
    for chunk in store.iter_chunks(with_embedding=False):
        if is_replaced(exclude, chunk.source, chunk.version):
            continue
        batch.append(chunk)
        if len(batch) >= EMBED_BATCH:
            carried += _embed_and_write(run, batch)
            batch = []
    return carried + _embed_and_write(run, batch)


def _embed_and_write(run: _Run, chunks: list[Chunk]) -> int:
    if not chunks:
        return 0
    vectors, computed = embed_with_cache(run.embedder, run.cache, [chunk.embed_text() for chunk in chunks])
    for chunk, vector in zip(chunks, vectors, strict=True):
        chunk.embedding = vector.tolist()
    report = run.writer.write(chunks)
    run.summary.chunks_embedded += computed
    run.summary.write_failures.extend(report.failed)
    return report.written


SKIPPED_REMEMBERED = 100  # files skipped by a run whose path and reason the index keeps (all are counted)


def source_state(
    previous: dict[str, Any], target: SourceTarget, *, files: int, skipped: Sequence[tuple[str, str]]
) -> dict[str, Any]:
    """What the index remembers about a source: where and when each of its versions was indexed from, and
    which files the last run of each version skipped and why (the first SKIPPED_REMEMBERED of them)."""
    now = datetime.now(UTC).isoformat(timespec="seconds")
    indexed = {
        "last_indexed": now,
        "commit": target.commit,
        "ref": target.ref,
        "files": files,
        "skipped": len(skipped),
        "skipped_files": [{"path": path, "reason": reason} for path, reason in skipped[:SKIPPED_REMEMBERED]],
    }
    if target.crawl_state is not None:
        indexed["pages"] = target.crawl_state  # per URL: ETag, Last-Modified, hash, last fetch (a site)
    previous = {key: value for key, value in previous.items() if key != UNFINISHED}
    return {
        **previous,
        "origin": target.origin or str(target.root),
        "last_indexed": now,
        "commit": target.commit,
        "versions": {**previous.get("versions", {}), target.version: indexed},
    }


def reindex(
    store: Store,
    embedder: Embedder,
    targets: Sequence[SourceTarget],
    *,
    lock_path: Path,
    full: bool = False,
    cache: EmbeddingCache | None = None,
    progress: ProgressCallback | None = None,
    crawl_progress: CrawlProgress | None = None,
) -> ReindexSummary:
    """Bring the index up to date with `targets`; other sources in the index are kept as they are.

    Site targets are crawled first, each just before it is indexed; with `full` every page is fetched
    again, else the last crawl's ETags and dates make the requests conditional.
    """
    started = time.perf_counter()
    names = [target.name for target in targets]
    summary = ReindexSummary(sources=names)
    with reindex_lock(lock_path, f"sources {', '.join(names)}"):
        live = store.index_meta()
        # The dimension follows from the model: trust the live index's, so that a run with nothing
        # to embed never loads the model.
        same_model = live is not None and live.model == embedder.model_name
        dimension = live.dimension if same_model else embedder.dimension
        wanted = IndexMeta(store.schema_version, embedder.model_name, dimension)
        reason = needs_rebuild(full, live, wanted)
        summary.rebuilt, summary.rebuild_reason = bool(reason), reason
        with (
            store.writer(wanted, rebuild=bool(reason)) as writer,
            ThreadPoolExecutor(max_workers=1, thread_name_prefix="docsctl-embed") as embedding,
        ):
            run = _Run(writer, embedder, cache, summary, embedding)
            # A rebuild replaces the versions named here; other versions of these sources are kept.
            replaced = {(target.name, target.version) for target in targets}
            if reason and live is not None:
                if live == wanted:
                    summary.chunks_carried = writer.copy_sources(exclude=replaced)
                else:
                    summary.chunks_carried = _carry_over(store, run, replaced)
            states = store.source_states() if live is not None else {}
            for target in targets:
                seen_before, skipped_before = summary.files_seen, len(summary.skipped)
                previous = states.get(target.name, {})
                if target.site is not None:
                    pages = {} if full else previous_pages(previous, target.version)
                    target, crawled = crawl_target(target, pages, crawl_progress)
                    summary.crawls[target.name] = crawled.stats.to_dict()
                if not reason:
                    # An incremental run on OpenSearch is live as it writes: a run killed half-way leaves a
                    # document partly written, or with its old chunks beside its new ones, and then its
                    # stored hash looks current. Marked until done, such a source is redone in full next time.
                    writer.record_source(target.name, {**previous, UNFINISHED: True})
                _index_source(run, store, target, bool(reason), progress, redo=bool(previous.get(UNFINISHED)))
                state = source_state(
                    previous,
                    target,
                    files=summary.files_seen - seen_before,
                    skipped=summary.skipped[skipped_before:],
                )
                states[target.name] = state
                writer.record_source(target.name, state)
    summary.seconds = time.perf_counter() - started
    return summary
