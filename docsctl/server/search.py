"""Search: store.bm25 + store.knn (+ store.knn_documents for questions), brief candidates -> fusion -> one hit
per document -> store.page fetches the page's chunks whole, with highlights."""

from __future__ import annotations

import re
import time
from collections.abc import Iterable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field, replace
from typing import Any

from docsctl.embedding import Embedder
from docsctl.errors import ConfigError
from docsctl.models import Filters, Hit, Vector
from docsctl.server.fusion import RRF_K, Fused, min_max_fusion, reciprocal_rank_fusion
from docsctl.server.sections import relabel
from docsctl.store.base import Store

MODES = ("hybrid", "bm25", "knn")
MAX_LIMIT = 50
# Candidates per retriever: 100 ranked better than 50 on every corpus half of both judged sets and both
# backends (more pages reach fusion from both lists); 200 no better (bench/README.md, "Search quality").
MIN_CANDIDATES = 100
VERSIONS_TTL_SECONDS = 30.0
# Weights per retriever in reciprocal rank fusion: plain fuse() weighs both alike; hybrid search weighs
# them by the kind of query (see Ranking). Each tuned weight was chosen on one corpus half of the dev
# queries and judged on the other, beside the naive baseline (bench/README.md, "Search quality").
FUSION_WEIGHTS = {"bm25": 1.0, "knn": 1.0}
# "document": the candidates' documents ranked by their centroid (the meaning of the whole page, see
# docsctl.store.doc_vectors). Questions only: for a name, the exact page loses to pages about the name.
QUESTION_WEIGHTS = {"bm25": 0.5, "knn": 1.0, "document": 0.5}  # plain words: meaning first
KEYWORD_WEIGHTS = {"bm25": 1.0, "knn": 1.0}  # names, identifiers, a few words: plain RRF
KEYWORD_MAX_WORDS = 3
MAX_REWORDINGS = 4  # an assistant's own phrasings searched beside its query (each costs one more search)


@dataclass
class SearchResult:
    query: str
    mode: str
    hits: list[Hit]
    total: int  # distinct documents (or chunks, when not collapsing) among the candidates
    took_ms: float
    filters: Filters = field(default_factory=Filters)

    def to_dict(self) -> dict[str, Any]:
        return {
            "query": self.query,
            "mode": self.mode,
            "total": self.total,
            "took_ms": round(self.took_ms, 1),
            "hits": [hit.to_dict() for hit in self.hits],
        }


def version_key(label: str) -> tuple:
    """Natural order of version labels: 1.10 after 1.9, any label after none."""
    return tuple((0, int(part), "") if part.isdigit() else (1, 0, part) for part in re.findall(r"\d+|[^\d.]+", label))


def validate(mode: str, limit: int, offset: int) -> None:
    if mode not in MODES:
        raise ConfigError(f"mode must be one of {', '.join(MODES)}, not {mode!r}")
    if not 1 <= limit <= MAX_LIMIT:
        raise ConfigError(f"limit must be between 1 and {MAX_LIMIT}, not {limit}")
    if offset < 0:
        raise ConfigError(f"offset must be 0 or more, not {offset}")


def fuse_rewordings(rankings: Sequence[list[Hit]], per_document: bool = True) -> list[Hit]:
    """Several phrasings' rankings as one (reciprocal rank fusion, equal weights), by document or by chunk;
    each item keeps the hit of the phrasing that ranked it highest (the first phrasing on a tie)."""
    key_of = (lambda hit: hit.chunk.doc_id) if per_document else (lambda hit: hit.chunk.chunk_id)
    best: dict[str, tuple[int, Hit]] = {}
    for ranking in rankings:
        for rank, hit in enumerate(ranking):
            key = key_of(hit)
            if key not in best or rank < best[key][0]:
                best[key] = (rank, hit)
    fused = reciprocal_rank_fusion({str(i): [key_of(hit) for hit in ranking] for i, ranking in enumerate(rankings)})
    return [(hit := best[item.key][1]).rescored(item.score, hit.ranks) for item in fused]


def collapse_by_document(hits: Iterable[Hit]) -> list[Hit]:
    """Keep each document's best chunk (the first seen, since hits come best first)."""
    seen: set[str] = set()
    best = []
    for hit in hits:
        if hit.chunk.doc_id not in seen:
            seen.add(hit.chunk.doc_id)
            best.append(hit)
    return best


def _fused(lists: dict[str, list[Hit]], key_of, weights: Mapping[str, float], method: str, k: int) -> list[Fused]:
    if method == "rrf":
        return reciprocal_rank_fusion({name: [key_of(hit) for hit in hits] for name, hits in lists.items()}, weights, k)
    return min_max_fusion({name: [(key_of(hit), hit.score) for hit in hits] for name, hits in lists.items()}, weights)


def _chunk_fusion(
    bm25_hits: list[Hit], knn_hits: list[Hit], weights: Mapping[str, float], method: str, k: int
) -> list[tuple[Hit, Fused]]:
    """Each fused chunk, best first, as its hit (bm25's where both lists have it) and its fusion result."""
    by_id = {hit.chunk.chunk_id: hit for hit in knn_hits}
    by_id.update({hit.chunk.chunk_id: hit for hit in bm25_hits})
    lists = {"bm25": bm25_hits, "knn": knn_hits}
    return [(by_id[item.key], item) for item in _fused(lists, lambda hit: hit.chunk.chunk_id, weights, method, k)]


def fuse(
    bm25_hits: list[Hit],
    knn_hits: list[Hit],
    weights: Mapping[str, float] | None = None,
    *,
    method: str = "rrf",
    k: int = RRF_K,
) -> list[Hit]:
    """Fusion of two chunk lists (reciprocal rank fusion by default); bm25 highlights are kept."""
    fused = _chunk_fusion(bm25_hits, knn_hits, weights or FUSION_WEIGHTS, method, k)
    return [hit.rescored(item.score, item.ranks) for hit, item in fused]


def fuse_documents(
    bm25_hits: list[Hit],
    knn_hits: list[Hit],
    weights: Mapping[str, float] | None = None,
    *,
    method: str = "rrf",
    k: int = RRF_K,
    doc_rankings: Mapping[str, Sequence[str]] | None = None,
) -> list[Hit]:
    """Fusion at document level: one hit per document, best first.

    Each retriever's chunks become a ranking of documents (each at its best chunk's rank and score);
    the two document rankings are fused, so a document is not pushed down because its best bm25
    chunk and its best knn chunk differ. Each document is shown by its chunk that chunk-level fusion
    ranks highest. `ranks` are document ranks per list.

    `doc_rankings` are further rankings of document ids, best first, weighted by `weights[name]` (one the
    weights give no share is left out); only documents among the candidates are ranked
    (bench/quality.py measures the centroid ranking's weight).
    """
    weights = weights or FUSION_WEIGHTS
    best: dict[str, tuple[Hit, Fused]] = {}  # each document's best chunk in chunk-level fusion, in that order
    for hit, item in _chunk_fusion(bm25_hits, knn_hits, weights, method, k):
        best.setdefault(hit.chunk.doc_id, (hit, item))
    lists = {"bm25": collapse_by_document(bm25_hits), "knn": collapse_by_document(knn_hits)}
    for name, doc_ids in (doc_rankings or {}).items():
        if weights.get(name, 0.0) > 0:  # fusion would count a list missing from `weights` at weight 1
            # each at its chunk-level fused score: what min-max fusion reads
            ranked = [best[doc_id] for doc_id in doc_ids if doc_id in best]
            lists[name] = [hit.rescored(item.score, item.ranks) for hit, item in ranked]
    fused = _fused(lists, lambda hit: hit.chunk.doc_id, weights, method, k)
    return [best[item.key][0].rescored(item.score, item.ranks) for item in fused]


_CODE_LIKE = re.compile(r"[._:/()\[\]#<>=]|\w_\w")  # a.b, a_b, a(), a::b, a/b: names, not words
_TRAILING_PUNCTUATION = ".,;:?!"


def is_keyword_query(text: str, max_words: int = KEYWORD_MAX_WORDS) -> bool:
    """Whether `text` reads as a lookup (a name, a command, an identifier) rather than a question.

    True for a few words ("Terminal widget", "surface enclose") and for text holding a code-like
    token ("pn.state.schedule_task", "add_filter RangeSlider"); sentence punctuation is ignored.
    """
    words = [word.rstrip(_TRAILING_PUNCTUATION) for word in text.split()]
    words = [word for word in words if word]
    return len(words) <= max_words or any(_CODE_LIKE.search(word) for word in words)


@dataclass(frozen=True)
class Ranking:
    """How hybrid search fuses its two retrievers; the defaults are the tuned ones (bench/README.md).

    A lookup (a name or identifier, see is_keyword_query) fuses BM25 and k-NN alike, `keyword_weights`;
    a question in plain words, `weights`, counts BM25 at half (its common words match everywhere) and adds
    the ranking of whole pages by meaning. The two tuned weights were chosen on one corpus half of the dev
    queries and judged on the other, and on bench/queries/own.jsonl, never tuned on (bench/README.md).
    """

    method: str = "rrf"  # rrf | minmax (see docsctl.server.fusion)
    level: str = "document"  # document: fuse document rankings | chunk: fuse chunks, then one per document
    weights: Mapping[str, float] = field(default_factory=lambda: dict(QUESTION_WEIGHTS))
    keyword_weights: Mapping[str, float] = field(default_factory=lambda: dict(KEYWORD_WEIGHTS))
    rrf_k: int = RRF_K

    def weights_for(self, text: str) -> Mapping[str, float]:
        return self.keyword_weights if is_keyword_query(text) else self.weights


class Searcher:
    """Runs searches on one store with one embedder, both loaded once."""

    def __init__(
        self, store: Store, embedder: Embedder, candidates: int = MIN_CANDIDATES, ranking: Ranking | None = None
    ) -> None:
        self.store = store
        self.embedder = embedder
        self._versions_cache: tuple[float, dict[str, list[str]]] | None = None
        # BM25 and the document ranking run beside the k-NN request: two workers per concurrent search.
        self._pool = ThreadPoolExecutor(max_workers=4, thread_name_prefix="docsctl-search")
        self.candidates = candidates
        self.ranking = ranking or Ranking()

    def search(
        self,
        text: str,
        *,
        limit: int = 5,
        offset: int = 0,
        mode: str = "hybrid",
        filters: Filters | None = None,
        per_document: bool = True,
        rewordings: Sequence[str] = (),
    ) -> SearchResult:
        """The best hits for `text`, paged. `rewordings` are other phrasings of the same need (an assistant's
        own): each is ranked like `text`, and the rankings are fused by reciprocal rank fusion, equal weights."""
        validate(mode, limit, offset)
        if len(rewordings) > MAX_REWORDINGS:
            raise ConfigError(f"at most {MAX_REWORDINGS} rewordings, not {len(rewordings)}")
        started = time.perf_counter()
        filters = self.effective_filters(filters or Filters())
        # Documents have several chunks: ask for enough that collapsing still fills the page.
        depth = max(self.candidates, (offset + limit) * (4 if per_document else 1))
        phrasings = list(dict.fromkeys([text, *(phrase for phrase in rewordings if phrase.strip())]))
        rankings = [self.rank(phrase, mode, depth, filters, per_document) for phrase in phrasings]
        hits = rankings[0] if len(rankings) == 1 else fuse_rewordings(rankings, per_document)
        page = self.complete(text, hits[offset : offset + limit])
        if not hits:
            self.check_filters(filters)
        return SearchResult(text, mode, page, len(hits), (time.perf_counter() - started) * 1000, filters)

    def rank(self, text: str, mode: str, depth: int, filters: Filters, per_document: bool = True) -> list[Hit]:
        """Every candidate for `text` in one `mode`, best first, brief (complete() fetches the shown ones)."""
        if mode == "hybrid":
            # The BM25 request runs while the query is embedded and k-NN runs, the document ranking beside
            # k-NN: they wait on I/O or torch, which release the GIL (bench/README.md, "Performance").
            pending_bm25 = self._pool.submit(self.retrieve, "bm25", text, depth, filters, brief=True)
            vector = self.embedder.encode_query(text)
            pending_documents = (
                self._pool.submit(self.document_ranking, vector, depth, filters)
                if self.uses_document_ranking(text, per_document)
                else None
            )
            knn_hits = self.retrieve("knn", text, depth, filters, vector, brief=True)
            bm25_hits = pending_bm25.result()
            documents = pending_documents.result() if pending_documents else []
            hits = self.fuse_ranked(text, bm25_hits, knn_hits, per_document, documents)
        else:
            hits = self.retrieve(mode, text, depth, filters, brief=True)
        return collapse_by_document(hits) if per_document else hits

    def uses_document_ranking(self, text: str, per_document: bool = True) -> bool:
        """Whether hybrid fusion for `text` gives document_ranking a share (so it is worth asking for)."""
        fuses_documents = per_document and self.ranking.level == "document"
        return fuses_documents and self.ranking.weights_for(text).get("document", 0.0) > 0

    def fuse_ranked(
        self,
        text: str,
        bm25_hits: list[Hit],
        knn_hits: list[Hit],
        per_document: bool,
        documents: Sequence[str] = (),
    ) -> list[Hit]:
        """Hybrid fusion as search() does it for `text` (weights by query shape): two retrievers' chunk lists
        and, at document level, `documents` (document_ranking) when the weights give it a share."""
        r = self.ranking
        weights = r.weights_for(text)
        if per_document and r.level == "document":
            return fuse_documents(
                bm25_hits,
                knn_hits,
                weights,
                method=r.method,
                k=r.rrf_k,
                doc_rankings={"document": documents} if documents else None,
            )
        return fuse(bm25_hits, knn_hits, weights, method=r.method, k=r.rrf_k)

    def retrieve(
        self,
        retriever: str,
        text: str,
        depth: int,
        filters: Filters,
        vector: Vector | None = None,
        *,
        brief: bool = False,
    ) -> list[Hit]:
        """One retriever's (bm25 | knn) top `depth` chunks, each with its rank in `ranks`; knn embeds `text`
        unless given its `vector`. `brief`: the chunks may be stand-ins (Store.bm25), for complete()."""
        if retriever == "bm25":
            hits = self.store.bm25(text, depth, filters, brief=brief)
        else:
            vector = self.embedder.encode_query(text) if vector is None else vector
            hits = self.store.knn(vector, depth, filters, brief=brief)
        return [hit.rescored(hit.score, {retriever: rank}) for rank, hit in enumerate(hits, start=1)]

    def document_ranking(self, vector: Vector, depth: int, filters: Filters) -> list[str]:
        """Document ids by the similarity of their centroid to the query `vector`, best first."""
        return [doc_id for doc_id, _ in self.store.knn_documents(vector, depth, filters)]

    def complete(self, text: str, hits: list[Hit]) -> list[Hit]:
        """The hits with their chunks fetched whole and highlighted for `text`, each labelled with the section
        its highlights are in (a chunk can hold several short sections); scores and ranks kept."""
        if not hits:
            return []
        shown = self.store.page(text, [hit.chunk.chunk_id for hit in hits])
        return [
            replace(hit, chunk=relabel(found.chunk, found.highlights), highlights=found.highlights)
            for hit in hits
            # None: removed between the two requests by a concurrent reindex
            if (found := shown.get(hit.chunk.chunk_id)) is not None
        ]

    def effective_filters(self, filters: Filters) -> Filters:
        """The filters search() applies: without a version filter, a source indexed in several versions is
        searched in its newest only, so that results are not repeated across versions."""
        if filters.versions or filters.pinned_versions:
            return filters
        now = time.monotonic()
        if self._versions_cache is None or now - self._versions_cache[0] > VERSIONS_TTL_SECONDS:
            self._versions_cache = (now, {info.source: list(info.versions) for info in self.store.list_sources()})
        pins = tuple(
            (source, max(versions, key=version_key))
            for source, versions in sorted(self._versions_cache[1].items())
            if len(versions) > 1
        )
        return replace(filters, pinned_versions=pins) if pins else filters

    def check_filters(self, filters: Filters) -> None:
        """Raise ConfigError naming any category, source or version the index does not hold, with the known
        ones; called after an empty answer, so that a typo is not mistaken for "nothing matches"."""
        if not (filters.categories or filters.sources or filters.versions):
            return
        infos = self.store.list_sources()
        known = {
            "category": {category for info in infos for category in info.categories},
            "source": {info.source for info in infos},
            "version": {version for info in infos for version in info.versions if version},
        }
        asked = {"category": filters.categories, "source": filters.sources, "version": filters.versions}
        for kind, wanted in asked.items():
            unknown = [value for value in wanted if value not in known[kind]]
            if unknown:
                listed = ", ".join(sorted(known[kind])) or "(none)"
                raise ConfigError(f"unknown {kind} {', '.join(unknown)}; {kind}s in the index: {listed}")
