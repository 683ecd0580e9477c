"""OpenSearch Dashboards: the saved objects in docker/dashboards and `docsctl dashboards import`.

The saved objects are checked against mappings/ (every field they name exists, with a type that can
do what they ask of it), their visualizations are run as OpenSearch aggregations on a real index,
and the import command is checked against a local HTTP server standing in for Dashboards.
"""

from __future__ import annotations

import json
import os
import shutil
import threading
import time
from collections.abc import Iterator
from email import policy
from email.parser import BytesParser
from http.server import BaseHTTPRequestHandler, HTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlsplit

import pytest
from corpus_fixtures import backend_settings, index_folder
from typer.testing import CliRunner

from docsctl.cli.app import app
from docsctl.cli.dashboards import retarget
from docsctl.store import open_store

REPO = Path(__file__).resolve().parent.parent
NDJSON = REPO / "docker" / "dashboards" / "docsctl.ndjson"
SEARCH_SOURCE_REF = "kibanaSavedObjectMeta.searchSourceJSON.index"
# The newest migration of each type in OpenSearch Dashboards 3.x: an object claiming a newer one is
# refused on import, an older one is migrated (and may be rewritten on the way).
MIGRATIONS = {"index-pattern": "7.6.0", "search": "7.9.3", "visualization": "7.10.0", "dashboard": "7.9.3"}
# The attributes each type's saved-object mapping knows: Dashboards' mappings are strict.
ATTRIBUTES = {
    "index-pattern": {"title", "timeFieldName", "fields", "sourceFilters", "fieldFormatMap", "typeMeta", "type"},
    "search": {"title", "description", "columns", "sort", "hits", "version", "kibanaSavedObjectMeta"},
    "visualization": {"title", "description", "visState", "uiStateJSON", "version", "kibanaSavedObjectMeta"},
    "dashboard": {
        "title", "description", "hits", "panelsJSON", "optionsJSON", "version", "timeRestore", "timeFrom", "timeTo",
        "refreshInterval", "kibanaSavedObjectMeta",
    },
}  # fmt: skip
META_FIELDS = {"_id", "_index", "_score", "_source"}
VECTOR_FIELDS = {"embedding", "doc_embedding"}  # hidden from Discover: 384 numbers each
# Keys under which visualization states name fields.
FIELD_KEYS = {"field", "sortField", "fieldName", "time_field", "timeField"}
BUCKET_AGGS = {"terms", "histogram", "date_histogram"}


# -- the saved objects ------------------------------------------------------------------------------


def load_objects(path: Path = NDJSON) -> list[dict[str, Any]]:
    lines = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]
    return [line for line in lines if "exportedCount" not in line]  # the export's closing summary line


@pytest.fixture(scope="module")
def objects() -> list[dict[str, Any]]:
    return load_objects()


def by_id(objects: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    return {item["id"]: item for item in objects}


def mapping_fields(name: str) -> dict[str, str]:
    """Every field of mappings/<name> with its type, multi-fields as `parent.sub`; not a disabled object
    (kept in _source only: Dashboards lists no field for it)."""
    properties = json.loads((REPO / "mappings" / name).read_text(encoding="utf-8"))["mappings"]["properties"]
    fields = {}
    for field, spec in properties.items():
        if spec["type"] == "object" and spec.get("enabled") is False:
            continue
        fields[field] = spec["type"]
        for sub, sub_spec in spec.get("fields", {}).items():
            fields[f"{field}.{sub}"] = sub_spec["type"]
    return fields


PATTERN_MAPPINGS = {"docsctl-chunks": "chunks.json", "docsctl-chunks-runs": "runs.json"}


def pattern_of(item: dict[str, Any]) -> str | None:
    if item["type"] == "index-pattern":
        return item["id"]
    refs = [ref["id"] for ref in item.get("references", []) if ref["name"] == SEARCH_SOURCE_REF]
    return refs[0] if refs else None


def _walk(value: Any, keys: set[str]) -> Iterator[str]:
    if isinstance(value, dict):
        for key, inner in value.items():
            if key in keys and isinstance(inner, str) and inner:
                yield inner
            else:
                yield from _walk(inner, keys)
    elif isinstance(value, list):
        for inner in value:
            yield from _walk(inner, keys)


def referenced_fields(item: dict[str, Any]) -> dict[str, set[str]]:
    """The fields a saved object names, by use: "shown" (listed, displayed, filtered) or "aggregated"
    (aggregated or sorted on, so it needs doc values: not a text field)."""
    attributes = item["attributes"]
    shown: set[str] = set()
    aggregated: set[str] = set()
    source = json.loads(attributes.get("kibanaSavedObjectMeta", {}).get("searchSourceJSON") or "{}")
    for search_filter in source.get("filter", []):
        shown.update(key for key in [search_filter.get("meta", {}).get("key")] if key)
        shown.update(_walk(search_filter.get("query", {}), FIELD_KEYS))
    if source.get("query", {}).get("query"):
        raise AssertionError(f"{item['id']}: a saved query string hides its fields from this check")
    if item["type"] == "index-pattern":
        aggregated.add(attributes["timeFieldName"])
        shown.update(spec["name"] for spec in json.loads(attributes["fields"]) if spec["name"] not in META_FIELDS)
        shown.update(entry["value"] for entry in json.loads(attributes.get("sourceFilters") or "[]"))
        shown.update(json.loads(attributes.get("fieldFormatMap") or "{}"))
    elif item["type"] == "search":
        shown.update(attributes["columns"])
        aggregated.update(field for field, _direction in attributes.get("sort", []))
    elif item["type"] == "visualization":
        state = json.loads(attributes["visState"])
        aggregated.update(_walk(state.get("aggs", []), FIELD_KEYS))
        shown.update(_walk(state.get("params", {}), FIELD_KEYS))
    return {"shown": shown, "aggregated": aggregated}


def field_problems(objects: list[dict[str, Any]]) -> list[str]:
    problems = []
    for item in objects:
        pattern = pattern_of(item)
        used = referenced_fields(item)
        if not (used["shown"] or used["aggregated"]):
            continue
        if pattern not in PATTERN_MAPPINGS:
            problems.append(f"{item['id']} names fields but no known index pattern ({pattern})")
            continue
        fields = mapping_fields(PATTERN_MAPPINGS[pattern])
        for field in sorted(used["shown"] | used["aggregated"]):
            if field not in fields:
                problems.append(f"{item['id']}: {field} is not in mappings/{PATTERN_MAPPINGS[pattern]}")
            elif field in used["aggregated"] and fields[field] == "text":
                problems.append(f"{item['id']}: {field} is a text field and cannot be aggregated or sorted on")
    return problems


def test_every_line_is_a_saved_object_dashboards_3_can_import(objects):
    assert len(objects) == len(by_id(objects)), "ids repeat"
    for item in objects:
        assert item["type"] in MIGRATIONS, item["id"]
        assert item["migrationVersion"] == {item["type"]: MIGRATIONS[item["type"]]}, item["id"]
        assert set(item["attributes"]) <= ATTRIBUTES[item["type"]], f"{item['id']}: attributes unknown to Dashboards"
        assert "version" not in item, "an exported version would make the import compare versions"
    summary = json.loads(NDJSON.read_text(encoding="utf-8").splitlines()[-1])
    assert summary["exportedCount"] == len(objects) and summary["missingRefCount"] == 0


def test_the_chunk_index_pattern_is_on_the_alias_with_its_time_field(objects):
    chunks, runs = by_id(objects)["docsctl-chunks"], by_id(objects)["docsctl-chunks-runs"]
    assert chunks["attributes"]["title"] == "docsctl-chunks"
    assert chunks["attributes"]["timeFieldName"] == "indexed_at"
    assert json.loads(chunks["attributes"]["sourceFilters"]) == [{"value": "embedding"}, {"value": "doc_embedding"}]
    assert runs["attributes"]["title"] == "docsctl-chunks-runs"
    assert runs["attributes"]["timeFieldName"] == "indexed_at"


@pytest.mark.parametrize(("pattern", "mapping"), sorted(PATTERN_MAPPINGS.items()))
def test_index_patterns_list_every_mapped_field_with_the_right_capabilities(objects, pattern, mapping):
    specs = {spec["name"]: spec for spec in json.loads(by_id(objects)[pattern]["attributes"]["fields"])}
    fields = mapping_fields(mapping)
    assert set(specs) - META_FIELDS == set(fields) - VECTOR_FIELDS
    for name, es_type in fields.items():
        if name in VECTOR_FIELDS:
            continue
        assert specs[name]["esTypes"] == [es_type]
        assert specs[name]["aggregatable"] is (es_type != "text"), name
        if "." in name:
            assert specs[name]["subType"] == {"multi": {"parent": name.rsplit(".", 1)[0]}}


def test_the_saved_search_shows_where_each_chunk_comes_from(objects):
    search = [item for item in objects if item["type"] == "search"]
    assert [item["attributes"]["title"] for item in search] == ["Chunks"]
    (chunks,) = search
    assert chunks["attributes"]["columns"] == ["source", "category", "title", "breadcrumb", "path", "chunk_index"]
    assert pattern_of(chunks) == "docsctl-chunks"


def test_every_reference_resolves_and_the_dashboard_shows_everything(objects):
    known = by_id(objects)
    for item in objects:
        for ref in item.get("references", []):
            assert ref["id"] in known, f"{item['id']} refers to a missing {ref['id']}"
            assert known[ref["id"]]["type"] == ref["type"], f"{item['id']}: {ref['id']} is not a {ref['type']}"
    (dashboard,) = [item for item in objects if item["type"] == "dashboard"]
    panels = json.loads(dashboard["attributes"]["panelsJSON"])
    names = {ref["name"]: ref["id"] for ref in dashboard["references"]}
    assert {panel["panelRefName"] for panel in panels} == set(names)
    shown = set(names.values())
    assert shown == {item["id"] for item in objects if item["type"] in ("visualization", "search")}
    titles = " | ".join(known[id_]["attributes"]["title"] for id_ in shown)
    for topic in ("per source and category", "chunk length", "indexed over time", "skipped at last reindex"):
        assert topic in titles


def test_every_field_the_saved_objects_name_exists_in_mappings(objects):
    assert field_problems(objects) == []
    named = set()
    for item in objects:
        used = referenced_fields(item)
        named |= used["shown"] | used["aggregated"]
    # The walk really reaches what the panels use (an empty walk would pass the check above).
    assert {"source", "category", "doc_id", "content_length", "indexed_at", "skipped", "files", "chunk_index"} <= named


def test_the_field_check_catches_a_misspelt_or_text_field(objects):
    doctored = json.loads(json.dumps(objects))
    vis = by_id(doctored)["docsctl-chunk-length"]
    state = json.loads(vis["attributes"]["visState"])
    state["aggs"][1]["params"]["field"] = "content_len"
    vis["attributes"]["visState"] = json.dumps(state)
    search = by_id(doctored)["docsctl-chunks-search"]
    search["attributes"]["sort"] = [["title", "asc"]]
    problems = field_problems(doctored)
    assert any("content_len is not in mappings/chunks.json" in problem for problem in problems)
    assert any("title is a text field" in problem for problem in problems)


# -- the visualizations on a real index -------------------------------------------------------------


def aggregation(state: dict[str, Any]) -> dict[str, Any]:
    """The search Dashboards sends for a standard visualization: bucket aggregations nested in their
    order, every metric at every level (what terms ordered by a metric need)."""
    aggs = [agg for agg in state["aggs"] if agg.get("enabled", True)]
    buckets = [agg for agg in aggs if agg["type"] in BUCKET_AGGS]
    metrics = {}
    for agg in aggs:
        params = agg["params"]
        if agg["type"] == "top_hits":
            sort = [{params["sortField"]: {"order": params["sortOrder"]}}]
            metrics[agg["id"]] = {"top_hits": {"size": params["size"], "sort": sort, "_source": [params["field"]]}}
        elif agg["type"] in {"cardinality", "max", "min", "sum", "avg"}:
            metrics[agg["id"]] = {agg["type"]: {"field": params["field"]}}
    counted = {agg["id"] for agg in aggs if agg["type"] == "count"}
    inner: dict[str, Any] = dict(metrics)
    for agg in reversed(buckets):
        params = agg["params"]
        if agg["type"] == "terms":
            by = params["orderBy"]
            order = {"_key" if by == "_key" else "_count" if by in counted else by: params["order"]}
            body: dict[str, Any] = {"terms": {"field": params["field"], "size": params["size"], "order": order}}
        elif agg["type"] == "histogram":
            body = {"histogram": {"field": params["field"], "interval": params["interval"], "min_doc_count": 1}}
        else:
            body = {"date_histogram": {"field": params["field"], "fixed_interval": "1d", "min_doc_count": 1}}
        body["aggs"] = inner
        inner = {agg["id"]: body, **metrics}
    return {"size": 0, "aggs": inner}


def rows(state: dict[str, Any], response: dict[str, Any]) -> list[dict[str, Any]]:
    """The table a visualization draws: one row per innermost bucket, keyed by aggregation id."""
    aggs = {agg["id"]: agg for agg in state["aggs"]}
    buckets = [agg["id"] for agg in state["aggs"] if agg["type"] in BUCKET_AGGS]

    def values(bucket: dict[str, Any]) -> dict[str, Any]:
        row = {"count": bucket["doc_count"]}
        for id_, agg in aggs.items():
            if id_ in bucket and agg["type"] == "top_hits":
                hits = bucket[id_]["hits"]["hits"]
                row[id_] = hits[0]["_source"][agg["params"]["field"]] if hits else None
            elif id_ in bucket and "value" in bucket[id_]:
                row[id_] = bucket[id_]["value"]
        return row

    def walk(level: dict[str, Any], depth: int, keys: dict[str, Any]) -> Iterator[dict[str, Any]]:
        if depth == len(buckets):
            yield {**keys, **values(level)}
            return
        for bucket in level[buckets[depth]]["buckets"]:
            yield from walk(bucket, depth + 1, {**keys, buckets[depth]: bucket["key"]})

    return list(walk(response["aggregations"], 0, {}))


@pytest.fixture
def small_index(request, tmp_path, corpora_dir, embedder, embedding_cache_dir):
    """A few real pages in two categories, and one file the indexer skips, indexed into OpenSearch."""
    root = tmp_path / "docs"
    for folder, pages in {
        "user/commands": ["color.html", "cartoon.html", "dssp.html"],
        "user/tools": ["log.html"],
    }.items():
        (root / folder).mkdir(parents=True)
        for page in pages:
            shutil.copy(corpora_dir / "chimerax" / folder / page, root / folder / page)
    (root / "latin1.md").write_bytes("# Caf\xe9\n\ncr\xe8me".encode("latin-1"))
    settings = backend_settings(request, "opensearch", tmp_path / "data", embedding_cache_dir)
    summary = index_folder(settings, embedder, root, "docs")
    assert len(summary.skipped) == 1
    yield settings, root
    open_store(settings).drop()


def run_visualization(objects, vis_id: str, settings) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    vis = by_id(objects)[vis_id]
    state = json.loads(vis["attributes"]["visState"])
    alias = settings.index_alias
    index = {"docsctl-chunks": alias, "docsctl-chunks-runs": f"{alias}-runs"}[pattern_of(vis)]
    response = open_store(settings).client.search(index=index, body=aggregation(state))
    return state, rows(state, response)


def test_chunks_carry_their_content_length(small_index):
    settings, _ = small_index
    store = open_store(settings)
    hits = store.client.search(
        index=settings.index_alias, body={"size": 1000, "_source": ["content", "content_length"]}
    )
    docs = [hit["_source"] for hit in hits["hits"]["hits"]]
    assert docs and all(doc["content_length"] == len(doc["content"]) for doc in docs)
    assert store.index_meta().mapping_version == store.schema_version


def test_the_visualizations_answer_on_a_real_index(objects, small_index):
    settings, _ = small_index
    store = open_store(settings)
    counts = {(row["source"], row["category"]): (row["documents"], row["chunks"]) for row in store.category_counts()}
    (info,) = store.list_sources()

    _, table = run_visualization(objects, "docsctl-per-source-category", settings)
    assert {(row["3"], row["4"]): (row["2"], row["count"]) for row in table} == counts
    assert {category for _, category in counts} == {"commands", "tools"}

    _, per_source = run_visualization(objects, "docsctl-documents-per-source", settings)
    assert sum(row["1"] for row in per_source) == info.documents == 4

    _, lengths = run_visualization(objects, "docsctl-chunk-length", settings)
    assert sum(row["count"] for row in lengths) == info.chunks
    assert all(row["2"] % 100 == 0 for row in lengths) and len({row["2"] for row in lengths}) > 1

    _, over_time = run_visualization(objects, "docsctl-indexed-over-time", settings)
    assert sum(row["1"] for row in over_time) == info.documents  # a document's chunks are written at once

    _, skipped = run_visualization(objects, "docsctl-skipped-last-reindex", settings)
    assert [(row["4"], row["5"], row["1"], row["2"]) for row in skipped] == [("docs", "", 1, 5)]

    _, runs = run_visualization(objects, "docsctl-skipped-over-time", settings)
    assert sum(row["1"] for row in runs) == 1


def test_the_skipped_panel_follows_the_latest_reindex(objects, small_index, embedder):
    settings, root = small_index
    (root / "latin1.md").unlink()
    time.sleep(1.1)  # runs are told apart by their time, recorded to the second
    summary = index_folder(settings, embedder, root, "docs")
    assert summary.skipped == [] and summary.unchanged == 4

    _, skipped = run_visualization(objects, "docsctl-skipped-last-reindex", settings)
    assert [(row["4"], row["1"], row["2"]) for row in skipped] == [("docs", 0, 4)]
    _, runs = run_visualization(objects, "docsctl-skipped-over-time", settings)
    assert sum(row["1"] for row in runs) == 1  # the history keeps the earlier run
    store = open_store(settings)
    assert store.client.count(index=store.runs_index)["count"] == 2

    store.drop()
    assert not store.client.indices.exists(index=store.runs_index)


# -- docsctl dashboards import ----------------------------------------------------------------------


class FakeDashboards(HTTPServer):
    """Records every request; answers with `answer` (status, JSON body)."""

    def __init__(self) -> None:
        super().__init__(("127.0.0.1", 0), _Handler)
        self.requests: list[dict[str, Any]] = []
        self.answer: tuple[int, dict[str, Any]] = (200, {"success": True, "successCount": 10})

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server_address[1]}"


class _Handler(BaseHTTPRequestHandler):
    def do_POST(self) -> None:  # noqa: N802 - the name http.server looks for
        body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
        self.server.requests.append({"method": self.command, "path": self.path, "headers": self.headers, "body": body})
        status, answer = self.server.answer
        payload = json.dumps(answer).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(payload)))
        self.end_headers()
        self.wfile.write(payload)

    def log_message(self, *args: Any) -> None:
        pass


@pytest.fixture
def dashboards() -> Iterator[FakeDashboards]:
    server = FakeDashboards()
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield server
    server.shutdown()
    server.server_close()


@pytest.fixture
def cli_env(tmp_path, monkeypatch) -> dict[str, str]:
    """No docsctl.toml around and no DOCSCTL_* settings from the caller's environment."""
    monkeypatch.chdir(tmp_path)
    for name in [name for name in os.environ if name.startswith("DOCSCTL_") and not name.startswith("DOCSCTL_TEST_")]:
        monkeypatch.delenv(name)
    return {}


def form_parts(request: dict[str, Any]) -> dict[str, tuple[str | None, bytes]]:
    """The multipart/form-data fields of a recorded request, read by the standard library's parser."""
    head = f"Content-Type: {request['headers']['Content-Type']}\r\n\r\n".encode()
    message = BytesParser(policy=policy.HTTP).parsebytes(head + request["body"])
    assert message.is_multipart()
    parts = {}
    for part in message.iter_parts():
        assert part.get_content_disposition() == "form-data"
        parts[part.get_param("name", header="content-disposition")] = (
            part.get_filename(),
            part.get_payload(decode=True),
        )
    return parts


def test_import_posts_the_saved_objects_to_the_import_api(dashboards, cli_env):
    result = CliRunner().invoke(app, ["dashboards", "import", "--url", dashboards.url], env=cli_env)
    assert result.exit_code == 0, result.output
    assert "imported 10 saved objects" in result.stdout
    assert f"{dashboards.url}/app/dashboards#/view/docsctl-index" in result.stdout
    (request,) = dashboards.requests
    assert request["method"] == "POST"
    url = urlsplit(request["path"])
    assert url.path == "/api/saved_objects/_import"
    assert parse_qs(url.query) == {"overwrite": ["true"]}
    assert request["headers"]["osd-xsrf"] == "true"
    assert request["headers"].get_content_type() == "multipart/form-data"
    assert "Authorization" not in request["headers"]
    parts = form_parts(request)
    assert set(parts) == {"file"}
    filename, content = parts["file"]
    assert filename == "docsctl.ndjson"
    assert content == NDJSON.read_bytes()


def test_importing_again_overwrites(dashboards, cli_env):
    for _ in range(2):
        result = CliRunner().invoke(app, ["dashboards", "import", "--url", dashboards.url, "--json"], env=cli_env)
        assert result.exit_code == 0, result.output
        assert json.loads(result.stdout)["imports"][0]["successCount"] == 10
    first, second = dashboards.requests
    assert first["path"] == second["path"] == "/api/saved_objects/_import?overwrite=true"
    assert form_parts(first)["file"][1] == form_parts(second)["file"][1]


def test_import_points_the_index_patterns_at_the_alias_in_use_and_sends_credentials(dashboards, cli_env):
    env = {
        "DOCSCTL_INDEX_ALIAS": "team-docs",
        "DOCSCTL_OPENSEARCH_USER": "admin",
        "DOCSCTL_OPENSEARCH_PASSWORD": "s3cret",
    }
    result = CliRunner().invoke(app, ["dashboards", "import"], env=env | {"DOCSCTL_DASHBOARDS_URL": dashboards.url})
    assert result.exit_code == 0, result.output
    (request,) = dashboards.requests
    assert request["headers"]["Authorization"] == "Basic YWRtaW46czNjcmV0"  # admin:s3cret
    sent = [json.loads(line) for line in form_parts(request)["file"][1].decode().splitlines()]
    patterns = {item["id"]: item["attributes"]["title"] for item in sent if item.get("type") == "index-pattern"}
    assert patterns == {"docsctl-chunks": "team-docs", "docsctl-chunks-runs": "team-docs-runs"}
    original = load_objects()
    assert [item for item in sent if item.get("type") != "index-pattern" and "exportedCount" not in item] == [
        item for item in original if item["type"] != "index-pattern"
    ]


def test_retarget_leaves_the_default_alias_untouched():
    data = NDJSON.read_bytes()
    assert retarget(data, "docsctl-chunks") is data


def test_a_refused_import_is_one_line_and_exit_1(dashboards, cli_env):
    dashboards.answer = (
        200,
        {
            "success": False,
            "successCount": 0,
            "errors": [{"id": "docsctl-index", "type": "dashboard", "error": {"type": "unknown"}}],
        },
    )
    result = CliRunner().invoke(app, ["dashboards", "import", "--url", dashboards.url], env=cli_env)
    assert result.exit_code == 1
    assert "Traceback" not in result.output
    assert len(result.stderr.strip().splitlines()) == 1
    assert "imported nothing" in result.stderr and "docsctl-index" in result.stderr

    dashboards.answer = (400, {"statusCode": 400, "error": "Bad Request", "message": "Invalid file extension .txt"})
    result = CliRunner().invoke(app, ["dashboards", "import", "--url", dashboards.url], env=cli_env)
    assert result.exit_code == 1
    assert result.stderr.strip() == (
        f"error: OpenSearch Dashboards at {dashboards.url} refused the import (400): Invalid file extension .txt"
    )


def test_connection_refused_is_one_line_and_exit_1(unused_tcp_port, cli_env):
    url = f"http://127.0.0.1:{unused_tcp_port}"
    result = CliRunner().invoke(app, ["dashboards", "import", "--url", url], env=cli_env)
    assert result.exit_code == 1
    assert "Traceback" not in result.output
    (line,) = result.stderr.strip().splitlines()
    assert line.startswith(f"error: cannot reach OpenSearch Dashboards at {url}")


def test_a_missing_saved_objects_file_is_one_line_and_exit_1(tmp_path, cli_env):
    result = CliRunner().invoke(
        app,
        ["dashboards", "import", "--url", "http://127.0.0.1:9", "--file", str(tmp_path / "nope.ndjson")],
        env=cli_env,
    )
    assert result.exit_code == 1
    (line,) = result.stderr.strip().splitlines()
    assert "cannot read saved objects" in line
