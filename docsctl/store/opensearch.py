"""OpenSearchStore: chunks and vectors in OpenSearch, reached through an alias.

Physical indices are named `<alias>-v<mapping version>-<timestamp>`; a rebuild fills a new one with
refresh disabled, checks it, and swaps the alias in one atomic `_aliases` call. The index records
how it was built (mapping version, model, dimension) and per-source state in its mapping `_meta`.
Each chunk also carries `content_length` (characters of its content), for Dashboards. Each document's
first chunk carries `doc_embedding`, the document's centroid (docsctl.store.doc_vectors): written with the
chunk when the writer is given whole documents (the indexing pipeline), else summed from the chunks written
and set by partial updates when the writer's block exits (import, re-embedding, copying an older index).

Reindex runs go to a small index of their own, `<alias>-runs` (mappings/runs.json): one document per
source and version per run, with the files seen and skipped, taken from the state `record_source` is
given and written once the writer's block exits cleanly. Its ids are made of source, version and
the time of the run, so recording the same state again (a rebuild carrying a source over, an import)
changes nothing. It is what OpenSearch Dashboards' "skipped at last reindex" panel reads.

A crawled site's per-URL state (about 150 bytes a page) stays out of `_meta`, which lives in the cluster
state: it goes to `<alias>-crawl-<physical index suffix>` (mappings/crawl.json), one document per source and
version, created and deleted with its physical index, so a rebuild swaps it with the chunks.
This is the only module that imports opensearchpy or reads mappings/.
"""

from __future__ import annotations

import json
import os
import re
import uuid
from collections.abc import Collection, Iterable, Iterator
from contextlib import contextmanager
from datetime import UTC, datetime
from importlib import resources
from typing import Any

from opensearchpy import OpenSearch, helpers
from opensearchpy import exceptions as os_errors

from docsctl.config import Settings, redact_url
from docsctl.errors import ConfigError, IndexMissingError, NotFoundError, StoreError
from docsctl.models import Chunk, Filters, Hit, IndexMeta, SourceInfo, Vector
from docsctl.phases import checkpoint
from docsctl.store import opensearch_queries as q
from docsctl.store.base import FACETS, SourceVersion, WriteReport
from docsctl.store.doc_vectors import CentroidAccumulator

BULK_CHUNK = 200
REQUEST_TIMEOUT_SECONDS = 30
CONNECTIONS = 16  # kept open to the cluster per store: concurrent requests reuse them
LONG_REQUEST_SECONDS = 900  # copying a whole index in a rebuild
BULK_RETRIES = 3


def _load_definition(name: str) -> dict[str, Any]:
    text = resources.files("docsctl").joinpath("mappings", name).read_text(encoding="utf-8")
    definition = json.loads(text)
    definition.pop("_comment", None)
    return definition


def load_index_definition() -> dict[str, Any]:
    """mappings/chunks.json, shipped inside the package."""
    return _load_definition("chunks.json")


def load_crawl_definition() -> dict[str, Any]:
    """mappings/crawl.json: a crawled site's per-URL state for one physical index."""
    return _load_definition("crawl.json")


def split_crawl_pages(state: dict[str, Any]) -> tuple[dict[str, Any], dict[str, dict[str, Any]]]:
    """A source's state without its crawled pages, and those pages by version (a site's per-URL state)."""
    versions = state.get("versions")
    if not isinstance(versions, dict):
        return state, {}
    pages = {v: entry["pages"] for v, entry in versions.items() if isinstance(entry, dict) and "pages" in entry}
    if not pages:
        return state, {}
    kept = {
        v: {k: x for k, x in entry.items() if k != "pages"} if v in pages else entry for v, entry in versions.items()
    }
    return {**state, "versions": kept}, pages


def load_runs_definition() -> dict[str, Any]:
    """mappings/runs.json: the index of reindex runs, `<alias>-runs`."""
    return _load_definition("runs.json")


def mapping_version() -> int:
    return int(load_index_definition()["mappings"]["_meta"]["mapping_version"])


def _now() -> str:
    return datetime.now(UTC).isoformat(timespec="seconds")


def _to_source(chunk: Chunk, indexed_at: str) -> dict[str, Any]:
    doc = chunk.to_dict(with_embedding=True)
    doc["name"] = doc.pop("names")
    doc["indexed_at"] = doc["indexed_at"] or indexed_at
    doc["content_length"] = len(chunk.content)
    return doc


def _from_source(source: dict[str, Any]) -> Chunk:
    data = dict(source)
    names = data.pop("name", [])
    data["names"] = [names] if isinstance(names, str) else list(names or [])
    return Chunk.from_dict(data)


def _brief_chunk(hit: dict[str, Any]) -> Chunk:
    fields = hit["fields"]
    return Chunk.brief(fields["chunk_id"][0], fields["doc_id"][0])


def _highlights(hit: dict[str, Any]) -> list[str]:
    return list(hit.get("highlight", {}).get("content", []))


def run_documents(source: str, state: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """The `<alias>-runs` documents for one source's state, by id: one per version that records when it
    was last indexed, with the files seen and skipped then."""
    runs = {}
    for version, entry in (state.get("versions") or {}).items():
        if not isinstance(entry, dict) or not entry.get("last_indexed"):
            continue
        runs[f"{source}|{version}|{entry['last_indexed']}"] = {
            "source": source,
            "version": version,
            "indexed_at": entry["last_indexed"],
            "files": int(entry.get("files") or 0),
            "skipped": int(entry.get("skipped") or 0),
            "origin": state.get("origin"),
            "commit": entry.get("commit"),
            "ref": entry.get("ref"),
        }
    return runs


# Leaves of an explanation tree that name what matched: `weight(content:depth in 12) [...]`, with
# `Synonym(content.code:a content.code:b)` inside for several terms at one position, and
# `ConstantScore(name:surface)^4.0` for a term on a field without frequencies (keywords).
_LEAF = re.compile(r"^(?:weight\((.*) in \d+\) \[|ConstantScore\((.*)\)(?:\^[\d.]+)?$)")


def matched_fields(explanation: dict[str, Any]) -> dict[str, list[str]]:
    """Field -> analyzed terms that scored, from an `_explain` answer's explanation tree (its leaves
    with a positive value)."""
    fields: dict[str, list[str]] = {}
    stack = [explanation]
    while stack:
        node = stack.pop()
        match = _LEAF.match(node.get("description", ""))
        if match is None:
            stack.extend(reversed(node.get("details", [])))
            continue
        if float(node.get("value", 0)) <= 0:
            continue
        clause = match.group(1) or match.group(2)
        parts = clause[len("Synonym(") : -1].split(" ") if clause.startswith("Synonym(") else [clause]
        for part in parts:
            field, _, term = part.partition(":")
            if term and term not in fields.setdefault(field, []):
                fields[field].append(term)
    return fields


# Root causes of a search OpenSearch refuses for its size: about 100 distinct words of query text.
TOO_MANY_CLAUSES = {"too_many_nested_clauses", "too_many_clauses"}


def _root_cause(exc: os_errors.TransportError) -> str:
    """The type of the first root cause OpenSearch gives for a failed request ("" when there is none)."""
    error = exc.info.get("error") if isinstance(exc.info, dict) else None
    causes = error.get("root_cause") if isinstance(error, dict) else None
    first = causes[0] if isinstance(causes, list) and causes and isinstance(causes[0], dict) else {}
    return str(first.get("type", ""))


def _tls_problem(exc: Exception) -> str:
    """The SSL library's words from a wrapped TLS failure, e.g. `[SSL: CERTIFICATE_VERIFY_FAILED] ...`."""
    text = str(getattr(exc, "info", None) or exc)
    found = re.search(r"\[(?:SSL|X509)[^\]]*\][^'\")(]*", text)
    return found.group().strip() if found else text


class OpenSearchStore:
    backend = "opensearch"

    def __init__(self, settings: Settings, alias: str | None = None) -> None:
        self.settings = settings
        self.alias = alias or settings.index_alias
        self._client: OpenSearch | None = None

    @property
    def schema_version(self) -> int:
        return mapping_version()

    # -- connection and error translation -------------------------------------------------------

    @property
    def url(self) -> str:
        return self.settings.opensearch_url or "http://127.0.0.1:9200"

    @property
    def shown_url(self) -> str:
        """The URL for messages and status: without a password it may hold."""
        return redact_url(self.url)

    @property
    def runs_index(self) -> str:
        """The index of reindex runs that goes with the alias (see the module docstring)."""
        return f"{self.alias}-runs"

    @property
    def client(self) -> OpenSearch:
        if self._client is None:
            s = self.settings
            if s.opensearch_ca_file and not os.path.isfile(s.opensearch_ca_file):
                raise StoreError(
                    f"opensearch_ca_file {s.opensearch_ca_file} does not exist or is not a file: "
                    "point it at the PEM file of the cluster's certificate authority"
                )
            auth = (s.opensearch_user, s.opensearch_password or "") if s.opensearch_user else None
            self._client = OpenSearch(
                hosts=[self.url],
                http_auth=auth,
                verify_certs=s.opensearch_verify,
                ca_certs=s.opensearch_ca_file,
                ssl_show_warn=False,
                # Bounded so that an unresponsive cluster turns into an error within a minute, not a hang.
                timeout=REQUEST_TIMEOUT_SECONDS,
                max_retries=1,
                retry_on_timeout=True,
                # One search sends up to three requests at once (BM25, k-NN, the document ranking), and a
                # server runs several searches: urllib3's default pool of one connection closed the others
                # after each request, so every search opened new TCP connections.
                pool_maxsize=CONNECTIONS,
            )
        return self._client

    def _missing(self) -> IndexMissingError:
        return IndexMissingError(f"no index '{self.alias}' at {self.shown_url} yet: run `docsctl reindex PATH` first")

    @contextmanager
    def _errors(self, missing_ok: bool = False) -> Iterator[None]:
        try:
            yield
        except os_errors.SSLError as exc:
            raise StoreError(
                f"TLS with OpenSearch at {self.shown_url} failed: {_tls_problem(exc)} (check opensearch_ca_file "
                "and opensearch_verify)"
            ) from None
        except os_errors.ConnectionError:
            raise StoreError(
                f"cannot reach OpenSearch at {self.shown_url}: start a node with `docsctl opensearch up` "
                "or set DOCSCTL_OPENSEARCH_URL"
            ) from None
        except os_errors.AuthenticationException:
            raise StoreError(
                f"OpenSearch at {self.shown_url} refused the credentials (check opensearch_user)"
            ) from None
        except os_errors.NotFoundError as exc:
            if missing_ok:
                return
            if "index_not_found" in str(exc.error):
                raise self._missing() from None
            raise NotFoundError(f"not found: {exc.info}") from None
        except os_errors.TransportError as exc:
            if _root_cause(exc) in TOO_MANY_CLAUSES:  # the query's fault, not the cluster's
                raise ConfigError(
                    "the query has too many distinct words for OpenSearch (its limit of 1,024 clauses): "
                    "search with its key terms"
                ) from None
            reason = exc.info.get("error", {}).get("reason") if isinstance(exc.info, dict) else None
            raise StoreError(
                f"OpenSearch at {self.shown_url} answered {exc.status_code}: {reason or exc.error}"
            ) from None

    # -- index management -------------------------------------------------------------------------

    def _live_index(self) -> str | None:
        with self._errors():
            if not self.client.indices.exists_alias(name=self.alias):
                return None
            found = self.client.indices.get_alias(name=self.alias)
        return sorted(found)[-1]

    def _mapping_of(self, index: str) -> dict[str, Any]:
        with self._errors():
            return self.client.indices.get_mapping(index=index)[index]["mappings"]

    def _meta_of(self, index: str) -> dict[str, Any]:
        return self._mapping_of(index).get("_meta", {})

    def index_meta(self) -> IndexMeta | None:
        live = self._live_index()
        if live is None:
            return None
        meta = self._meta_of(live)
        return IndexMeta(
            mapping_version=int(meta.get("mapping_version", 0)),
            model=str(meta.get("model", "")),
            dimension=int(meta.get("dimension", 0)),
        )

    def _physical_indices(self) -> list[str]:
        with self._errors():
            found = self.client.indices.get(index=f"{self.alias}-v*", ignore_unavailable=True, allow_no_indices=True)
        return sorted(found)

    def _create_index(self, meta: IndexMeta) -> str:
        definition = load_index_definition()
        name = f"{self.alias}-v{meta.mapping_version}-{datetime.now(UTC):%Y%m%d%H%M%S}-{uuid.uuid4().hex[:6]}"
        index_settings = definition["settings"]["index"]
        index_settings["number_of_shards"] = self.settings.shards
        # Replicas and refreshes are switched on after the bulk load: much faster, same result.
        index_settings["number_of_replicas"] = 0
        index_settings["refresh_interval"] = "-1"
        for field in ("embedding", "doc_embedding"):
            definition["mappings"]["properties"][field]["dimension"] = meta.dimension
        definition["mappings"]["_meta"].update(
            mapping_version=meta.mapping_version,
            model=meta.model,
            dimension=meta.dimension,
            created_at=_now(),
            sources={},
        )
        with self._errors():
            self.client.indices.create(index=name, body=definition)
        return name

    def _create_side_index(self, name: str, definition: dict[str, Any]) -> None:
        """A small index beside the chunks (runs, crawled pages) with the configured replicas; one that
        another writer created meanwhile is taken as it is. Call inside _errors()."""
        definition["settings"]["index"]["number_of_replicas"] = self.settings.replicas
        try:
            self.client.indices.create(index=name, body=definition)
        except os_errors.RequestError as exc:
            if "resource_already_exists" not in str(exc.error):
                raise

    def _delete_index(self, index: str) -> None:
        with self._errors(missing_ok=True):
            self.client.indices.delete(index=index)

    def _delete_physical(self, index: str) -> None:
        """A physical chunks index and the crawl state that goes with it."""
        self._delete_index(index)
        self._delete_index(self.crawl_index_of(index))

    def crawl_index_of(self, index: str) -> str:
        """The index of crawled pages that goes with physical index `index` (see the module docstring)."""
        return f"{self.alias}-crawl-{index.removeprefix(self.alias + '-')}"

    def _crawl_indices(self) -> list[str]:
        with self._errors():
            found = self.client.indices.get(
                index=f"{self.alias}-crawl-*", ignore_unavailable=True, allow_no_indices=True
            )
        return sorted(found)

    def _crawl_pages(self, index: str) -> list[dict[str, Any]]:
        """The crawl documents (source, version, pages) of physical index `index`."""
        crawl = self.crawl_index_of(index)
        with self._errors():
            if not self.client.indices.exists(index=crawl):
                return []
            return [
                hit["_source"] for hit in helpers.scan(self.client, index=crawl, query={"query": {"match_all": {}}})
            ]

    def _write_crawl_pages(self, index: str, source: str, pages: dict[str, dict[str, Any]]) -> None:
        """Replace `source`'s crawled pages (by version) in the crawl index of physical index `index`."""
        crawl = self.crawl_index_of(index)
        with self._errors():
            exists = self.client.indices.exists(index=crawl)
            if not exists and not pages:
                return
            if not exists:
                self._create_side_index(crawl, load_crawl_definition())
            else:
                query = {"query": {"term": {"source": source}}}
                self.client.delete_by_query(index=crawl, body=query, refresh=True, conflicts="proceed")
            for version, by_url in pages.items():
                document = {"source": source, "version": version, "pages": by_url}
                self.client.index(index=crawl, id=f"{source}|{version}", body=document, refresh=True)

    def _states_of(self, index: str, *, with_pages: bool) -> dict[str, dict[str, Any]]:
        """What record_source stored in physical index `index`, per source; `with_pages`: with crawled pages."""
        states = self._meta_of(index).get("sources", {})
        if with_pages:
            for found in self._crawl_pages(index):
                entry = states.get(found["source"], {}).get("versions", {}).get(found["version"])
                if isinstance(entry, dict):
                    entry["pages"] = found["pages"]
        return states

    def _finish_build(self, index: str, expected: int) -> None:
        with self._errors():
            self.client.indices.put_settings(
                index=index,
                body={"index": {"refresh_interval": "1s", "number_of_replicas": self.settings.replicas}},
            )
            self.client.indices.refresh(index=index)
            count = int(self.client.count(index=index)["count"])
        if count != expected:
            raise StoreError(f"new index {index} holds {count} chunks, expected {expected}; the old index stays live")
        if count:
            with self._errors():
                probe = self.client.search(index=index, body={"size": 1, "query": {"match_all": {}}})
            if not probe["hits"]["hits"]:
                raise StoreError(f"new index {index} answers no probe query; the old index stays live")

    def _swap_alias(self, new: str, old: str | None) -> None:
        actions: list[dict[str, Any]] = [{"add": {"index": new, "alias": self.alias}}]
        if old:
            actions.insert(0, {"remove": {"index": old, "alias": self.alias}})
        with self._errors():
            self.client.indices.update_aliases(body={"actions": actions})

    @contextmanager
    def writer(self, meta: IndexMeta, *, rebuild: bool) -> Iterator[_Writer]:
        live = self._live_index()
        for leftover in self._physical_indices():
            if leftover != live:  # of a rebuild that was killed or lost the node; the reindex lock says none runs
                self._delete_physical(leftover)
        for crawl in self._crawl_indices():
            if live is None or crawl != self.crawl_index_of(live):
                self._delete_index(crawl)
        if live is not None and not rebuild:
            writer = _Writer(self, live, live_index=None, dimension=meta.dimension)
            try:
                yield writer
            finally:  # the chunks written so far are live: so must their documents' centroids be
                writer.write_centroids()
                with self._errors():
                    self.client.indices.refresh(index=live)
            self._record_runs(writer.runs)
            return
        new = self._create_index(meta)
        writer = _Writer(self, new, live_index=live, dimension=meta.dimension)
        try:
            yield writer
            writer.write_centroids()
            self._finish_build(new, writer.stored)
            checkpoint("swap")
            self._swap_alias(new, live)
        except BaseException:
            self._delete_physical(new)
            raise
        checkpoint("swapped")
        if live:
            self._delete_physical(live)
        self._record_runs(writer.runs)

    def _record_runs(self, runs: dict[str, dict[str, Any]]) -> None:
        """Upsert run documents into `<alias>-runs`, creating it on first use."""
        if not runs:
            return
        with self._errors():
            if not self.client.indices.exists(index=self.runs_index):
                self._create_side_index(self.runs_index, load_runs_definition())
            actions = ({"_index": self.runs_index, "_id": key, "_source": doc} for key, doc in runs.items())
            _, errors = helpers.bulk(self.client, actions, refresh=True, raise_on_error=False, stats_only=False)
        if errors:
            raise StoreError(f"cannot record the reindex run in {self.runs_index}: {errors[0]}")

    def describe(self) -> dict[str, Any]:
        live = self._live_index()
        size = 0
        if live:
            with self._errors():
                stats = self.client.indices.stats(index=live, metric="store")
            size = int(stats["indices"][live]["total"]["store"]["size_in_bytes"])
        return {
            "backend": self.backend,
            "location": self.shown_url,
            "alias": self.alias,
            "index": live,
            "size_bytes": size,
        }

    def drop(self) -> None:
        for index in self._physical_indices():
            self._delete_physical(index)
        for crawl in self._crawl_indices():  # of a physical index lost without them
            self._delete_index(crawl)
        self._delete_index(self.runs_index)

    # -- search -----------------------------------------------------------------------------------

    def _search(self, body: dict[str, Any]) -> dict[str, Any]:
        with self._errors():
            return self.client.search(index=self.alias, body=body)

    def _hits(self, response: dict[str, Any], brief: bool = False) -> list[Hit]:
        return [
            Hit(
                chunk=_brief_chunk(hit) if brief else _from_source(hit["_source"]),
                score=float(hit["_score"] or 0.0),
                highlights=_highlights(hit),
            )
            for hit in response["hits"]["hits"]
        ]

    def bm25(self, text: str, k: int, filters: Filters | None = None, *, brief: bool = False) -> list[Hit]:
        if not q.clean_query_text(text):
            self._require_index()
            return []
        return self._hits(self._search(q.bm25_body(text, k, filters, brief=brief)), brief)

    def knn(self, vector: Vector, k: int, filters: Filters | None = None, *, brief: bool = False) -> list[Hit]:
        return self._hits(self._search(q.knn_body(vector, k, filters, brief=brief)), brief)

    def knn_documents(self, vector: Vector, k: int, filters: Filters | None = None) -> list[tuple[str, float]]:
        with self._errors():
            try:
                response = self.client.search(index=self.alias, body=q.knn_documents_body(vector, k, filters))
            except os_errors.RequestError as exc:
                if "doc_embedding" in json.dumps(exc.info):  # an index from before document vectors (mapping
                    return []  # version 2): search goes on without them until the next reindex rebuilds it
                raise
        return [(hit["fields"]["doc_id"][0], float(hit["_score"] or 0.0)) for hit in response["hits"]["hits"]]

    def page(self, text: str, chunk_ids: list[str]) -> dict[str, Hit]:
        if not chunk_ids:
            return {}
        response = self._search(q.page_body(text, chunk_ids))
        hits = response["hits"]["hits"]
        return {hit["_id"]: Hit(_from_source(hit["_source"]), 0.0, _highlights(hit)) for hit in hits}

    def explain_bm25(self, text: str, chunk_id: str) -> dict[str, Any]:
        """How bm25(text) scores one chunk, from the `_explain` API: its score, and the fields (with the analyzed
        terms) that matched, from a second explanation field by field (q.fields_query)."""
        self._require_index()
        if not q.clean_query_text(text):
            self.get_chunk(chunk_id)
            return {"chunk_id": chunk_id, "score": 0.0, "matched": False, "fields": {}}
        with self._errors():
            try:
                scored = self.client.explain(index=self.alias, id=chunk_id, body={"query": q.text_query(text)})
                by_field = self.client.explain(index=self.alias, id=chunk_id, body={"query": q.fields_query(text)})
            except os_errors.NotFoundError as exc:
                if "index_not_found" in str(exc.error):
                    raise
                raise NotFoundError(f"no chunk with id {chunk_id!r}") from None
        matched = bool(scored.get("matched"))
        return {
            "chunk_id": chunk_id,
            "score": float((scored.get("explanation") or {}).get("value", 0.0)) if matched else 0.0,
            "matched": matched,
            "fields": matched_fields(by_field.get("explanation") or {}) if matched else {},
        }

    def _require_index(self) -> None:
        if self._live_index() is None:
            raise self._missing()

    # -- documents --------------------------------------------------------------------------------

    def get_chunk(self, chunk_id: str) -> Chunk:
        self._require_index()
        response = self._search({"size": 1, "query": {"ids": {"values": [chunk_id]}}, "_source": q.SOURCE_EXCLUDES})
        hits = response["hits"]["hits"]
        if not hits:
            raise NotFoundError(f"no chunk with id {chunk_id!r}")
        return _from_source(hits[0]["_source"])

    def get_document(self, path: str, source: str | None = None, version: str | None = None) -> list[Chunk]:
        self._require_index()
        chunks = [
            _from_source(hit["_source"]) for hit in self._search(q.document_body(path, source, version))["hits"]["hits"]
        ]
        if not chunks:
            raise NotFoundError(f"no document with path {path!r}" + (f" in source {source!r}" if source else ""))
        sources = sorted({chunk.source for chunk in chunks})
        if len(sources) > 1:
            raise NotFoundError(f"path {path!r} exists in several sources ({', '.join(sources)}): name one")
        newest = chunks[0].version  # sorted by version descending
        return [chunk for chunk in chunks if chunk.version == newest]

    def lookup(self, name: str, sources: Iterable[str] = ()) -> list[Chunk]:
        self._require_index()
        response = self._search(q.lookup_body(name, list(sources)))
        doc_ids = [bucket["key"] for bucket in response["aggregations"]["docs"]["buckets"]]
        if not doc_ids:
            return []
        body = {
            "size": 10_000,
            "query": {"terms": {"doc_id": doc_ids}},
            "sort": [{"doc_id": "asc"}, {"chunk_index": "asc"}],
            "_source": q.SOURCE_EXCLUDES,
        }
        return [_from_source(hit["_source"]) for hit in self._search(body)["hits"]["hits"]]

    def doc_hashes(self, source: str, version: str = "") -> dict[str, str]:
        self._require_index()
        hashes: dict[str, str] = {}
        after: dict[str, Any] | None = None
        while True:
            composite: dict[str, Any] = {
                "size": 1000,
                "sources": [
                    {"path": {"terms": {"field": "path"}}},
                    {"hash": {"terms": {"field": "content_hash"}}},
                ],
            }
            if after:
                composite["after"] = after
            body = {
                "size": 0,
                "query": {"bool": {"filter": [{"term": {"source": source}}, {"term": {"version": version}}]}},
                "aggs": {"docs": {"composite": composite}},
            }
            agg = self._search(body)["aggregations"]["docs"]
            for bucket in agg["buckets"]:
                hashes[bucket["key"]["path"]] = bucket["key"]["hash"]
            after = agg.get("after_key")
            if not agg["buckets"] or not after:
                return hashes

    def source_states(self) -> dict[str, dict[str, Any]]:
        live = self._live_index()
        if live is None:
            raise self._missing()
        return self._states_of(live, with_pages=True)

    def list_sources(self) -> list[SourceInfo]:
        live = self._live_index()
        if live is None:
            raise self._missing()
        states = self._states_of(live, with_pages=False)
        buckets = self._search(q.sources_body())["aggregations"]["sources"]["buckets"]
        infos = []
        for bucket in buckets:
            state = states.get(bucket["key"], {})
            infos.append(
                SourceInfo(
                    source=bucket["key"],
                    documents=int(bucket["documents"]["value"]),
                    chunks=int(bucket["doc_count"]),
                    categories={b["key"]: b["doc_count"] for b in bucket["categories"]["buckets"]},
                    versions={b["key"]: b["doc_count"] for b in bucket["versions"]["buckets"]},
                    last_indexed=state.get("last_indexed") or bucket["last_indexed"].get("value_as_string"),
                    origin=state.get("origin"),
                )
            )
        return infos

    def category_counts(self) -> list[dict[str, Any]]:
        response = self._search(_category_counts_body())
        return [
            {
                "source": source["key"],
                "category": category["key"],
                "documents": int(category["documents"]["value"]),
                "chunks": int(category["doc_count"]),
            }
            for source in response["aggregations"]["sources"]["buckets"]
            for category in source["categories"]["buckets"]
        ]

    def facet_counts(self, filters: Filters | None = None) -> dict[str, dict[str, int]]:
        aggregations = self._search(_facet_counts_body(filters))["aggregations"]
        counts = {}
        for field in FACETS:
            buckets = [(b["key"], int(b["documents"]["value"])) for b in aggregations[field]["buckets"]]
            counts[field] = dict(sorted(buckets, key=lambda item: (-item[1], item[0])))
        return counts

    def iter_chunks(self, with_embedding: bool = True) -> Iterator[Chunk]:
        self._require_index()
        body: dict[str, Any] = {"query": {"match_all": {}}}
        if not with_embedding:
            body["_source"] = q.SOURCE_EXCLUDES
        with self._errors():
            for hit in helpers.scan(self.client, index=self.alias, query=body, size=500):
                yield _from_source(hit["_source"])


def _facet_counts_body(filters: Filters | None) -> dict[str, Any]:
    """Distinct documents per source, version and category among the chunks matching `filters`."""
    documents = {"documents": {"cardinality": {"field": "doc_id", "precision_threshold": 40000}}}
    return {
        "size": 0,
        "query": {"bool": {"filter": q.filter_clauses(filters)}},
        "aggs": {field: {"terms": {"field": field, "size": 1000}, "aggs": documents} for field in FACETS},
    }


def _category_counts_body() -> dict[str, Any]:
    """Chunks and distinct documents per source and category (cardinality is exact below 40,000)."""
    documents = {"documents": {"cardinality": {"field": "doc_id", "precision_threshold": 40000}}}
    categories = {"terms": {"field": "category", "size": 1000, "order": {"_key": "asc"}}, "aggs": documents}
    return {
        "size": 0,
        "aggs": {
            "sources": {
                "terms": {"field": "source", "size": 1000, "order": {"_key": "asc"}},
                "aggs": {"categories": categories},
            }
        },
    }


class _Writer:
    """Writes into one physical index; in a rebuild, `live_index` is the one still serving."""

    def __init__(self, store: OpenSearchStore, index: str, live_index: str | None, dimension: int) -> None:
        self._store = store
        self.index = index
        self.live_index = live_index
        self.stored = 0  # chunks this writer added to a new index (checked before the swap)
        self.runs: dict[str, dict[str, Any]] = {}  # for <alias>-runs, written when the block exits cleanly
        self.centroids = CentroidAccumulator(dimension)  # of documents written in parts: see write_centroids()

    def _action(self, chunk: Chunk, indexed_at: str, centroid: list[float] | None = None) -> dict[str, Any]:
        source = _to_source(chunk, indexed_at)
        if centroid is not None:
            source["doc_embedding"] = centroid
        return {"_op_type": "index", "_index": self.index, "_id": chunk.chunk_id, "_source": source}

    def _actions(self, chunks: Iterable[Chunk], whole_documents: bool) -> Iterator[dict[str, Any]]:
        """Index actions; the first chunk of a whole document carries its centroid from the start (an update
        later would leave a deleted copy behind, which counts in BM25 statistics until segments merge)."""
        indexed_at = _now()
        if not whole_documents:
            for chunk in chunks:
                if chunk.embedding:
                    self.centroids.add(chunk.doc_id, chunk.chunk_id, chunk.chunk_index, chunk.embedding)
                yield self._action(chunk, indexed_at)
            return
        batch = list(chunks)
        here = CentroidAccumulator(self.centroids.dimension)
        for chunk in batch:
            if chunk.embedding:
                here.add(chunk.doc_id, chunk.chunk_id, chunk.chunk_index, chunk.embedding)
        centroids = {chunk_id: centroid for _, chunk_id, centroid in here.drain()}
        for chunk in batch:
            yield self._action(chunk, indexed_at, centroids.get(chunk.chunk_id))

    def _bulk(self, actions: Iterable[dict[str, Any]]) -> Iterator[tuple[bool, dict[str, Any]]]:
        """Bulk requests with retries on overload; per-item failures are yielded, not raised."""
        with self._store._errors():
            yield from helpers.streaming_bulk(
                self._store.client,
                actions,
                chunk_size=BULK_CHUNK,
                max_retries=BULK_RETRIES,
                initial_backoff=1,
                raise_on_error=False,
                raise_on_exception=False,
            )

    def write(self, chunks: Iterable[Chunk], *, whole_documents: bool = False) -> WriteReport:
        report = WriteReport()
        for ok, item in self._bulk(self._actions(chunks, whole_documents)):
            result = item.get("index", {})
            if ok:
                report.written += 1
                if result.get("result") == "created":
                    self.stored += 1
            else:
                error = result.get("error", "unknown error")
                reason = error.get("reason", str(error)) if isinstance(error, dict) else str(error)
                report.failed.append((str(result.get("_id")), reason))
        return report

    def write_centroids(self) -> int:
        """Set `doc_embedding` on the first chunk of every document written so far in parts (not as whole
        documents); returns how many. A document deleted since (its first chunk gone) is skipped."""
        actions = (
            {"_op_type": "update", "_index": self.index, "_id": chunk_id, "doc": {"doc_embedding": centroid}}
            for _, chunk_id, centroid in self.centroids.drain()
        )
        return sum(ok for ok, _ in self._bulk(actions))

    def delete_documents(self, doc_ids: Iterable[str], keep_hash: str | None = None) -> int:
        ids = list(doc_ids)
        if not ids:
            return 0
        query: dict[str, Any] = {"bool": {"filter": [{"terms": {"doc_id": ids}}]}}
        if keep_hash:
            query["bool"]["must_not"] = [{"term": {"content_hash": keep_hash}}]
        with self._store._errors():
            response = self._store.client.delete_by_query(
                index=self.index,
                body={"query": query},
                conflicts="proceed",
                refresh=True,
                request_timeout=LONG_REQUEST_SECONDS,
            )
        deleted = int(response.get("deleted", 0))
        self.stored -= deleted
        return deleted

    def copy_sources(self, exclude: Collection[SourceVersion]) -> int:
        if not self.live_index:
            return 0
        body = {
            "source": {"index": self.live_index, "query": q.other_than(exclude)},
            "dest": {"index": self.index},
        }
        with self._store._errors():
            response = self._store.client.reindex(
                body=body, wait_for_completion=True, refresh=False, request_timeout=LONG_REQUEST_SECONDS
            )
        copied = int(response.get("created", 0))
        self.stored += copied
        if copied and not self._has_centroids(self.live_index):
            self._add_centroids_of_copied(exclude)
        states = self._store._states_of(self.live_index, with_pages=True)
        for source, state in states.items():
            if (source, None) not in exclude:
                self.record_source(source, state)
        return copied

    def _has_centroids(self, index: str) -> bool:
        return "doc_embedding" in self._store._mapping_of(index).get("properties", {})

    def _add_centroids_of_copied(self, exclude: Collection[SourceVersion]) -> None:
        """An index built before document vectors existed: derive them for the chunks just copied."""
        fields = ["doc_id", "chunk_id", "chunk_index", "embedding"]
        body = {"query": q.other_than(exclude), "_source": fields}
        with self._store._errors():
            for hit in helpers.scan(self._store.client, index=self.live_index, query=body, size=500):
                chunk = hit["_source"]
                self.centroids.add(chunk["doc_id"], chunk["chunk_id"], chunk["chunk_index"], chunk["embedding"])

    def record_source(self, source: str, state: dict[str, Any]) -> None:
        self.runs.update(run_documents(source, state))
        state, pages = split_crawl_pages(state)
        self._store._write_crawl_pages(self.index, source, pages)
        meta = self._store._meta_of(self.index)
        meta.setdefault("sources", {})[source] = state
        with self._store._errors():
            self._store.client.indices.put_mapping(index=self.index, body={"_meta": meta})
