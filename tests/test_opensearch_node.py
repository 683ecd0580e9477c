"""The local node that `docsctl opensearch` manages, tested against the session's real node.

Cheap on purpose: the session node is started once (conftest); nothing here starts another one.
"""

from __future__ import annotations

import json
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Iterator
from dataclasses import replace
from http.server import BaseHTTPRequestHandler, HTTPServer
from pathlib import Path
from urllib.parse import urlsplit

import pytest
from typer.testing import CliRunner

from docsctl import opensearch_node
from docsctl.cli.app import app
from docsctl.config import OPENSEARCH_VERSION, Settings
from docsctl.errors import NodeError

runner = CliRunner()


@pytest.fixture(scope="module")
def node_settings(opensearch_node, tmp_path_factory) -> Settings:
    """Settings naming the session node: the managed one's own, else its port with an empty data dir
    (then there is no PID file: status and up still work over HTTP)."""
    if opensearch_node.settings is not None:
        return opensearch_node.settings
    parts = urlsplit(opensearch_node.url)
    if parts.hostname not in {"127.0.0.1", "localhost"} or parts.port is None:
        pytest.skip(f"{opensearch_node.url} is not on this machine: nothing for `docsctl opensearch` to manage")
    return replace(Settings(), opensearch_port=parts.port, data_dir=tmp_path_factory.mktemp("unmanaged"))


@pytest.fixture
def managed(opensearch_node, node_settings) -> Settings:
    if opensearch_node.settings is None:
        pytest.skip("the session node was not started by docsctl, so it has no PID file or node.log")
    return node_settings


def cli(*args: str) -> tuple[int, str]:
    result = runner.invoke(app, ["opensearch", *args])
    assert "Traceback" not in result.output
    return result.exit_code, result.output


def node_flags(settings: Settings) -> list[str]:
    return ["--port", str(settings.opensearch_port), "--data-dir", str(settings.data_dir)]


# -- the running node -------------------------------------------------------------------------------


def test_status_reports_the_running_node(node_settings):
    node = opensearch_node.status(node_settings)
    assert node.running and node.state == "running"
    assert node.version == OPENSEARCH_VERSION
    assert node.health in {"green", "yellow"}


def test_status_of_the_managed_node_has_its_pid_and_log(managed):
    node = opensearch_node.status(managed)
    assert node.pid is not None
    assert node.log_file.is_file()
    assert "started" in opensearch_node.logs(managed, lines=200)
    assert len(opensearch_node.logs(managed, lines=3).splitlines()) == 3


def test_knn_plugin_is_installed(opensearch_client):
    plugins = opensearch_client.cat.plugins(format="json")
    assert "opensearch-knn" in {plugin["component"] for plugin in plugins}


@pytest.fixture
def index_name(opensearch_client) -> Iterator[str]:
    name = f"test-node-{uuid.uuid4().hex}"
    yield name
    opensearch_client.indices.delete(index=name, ignore_unavailable=True)


def test_lucene_knn_index_answers_filtered_queries(opensearch_client, index_name):
    opensearch_client.indices.create(
        index=index_name,
        body={
            "settings": {"index.knn": True, "number_of_shards": 1, "number_of_replicas": 0},
            "mappings": {
                "properties": {
                    "vector": {
                        "type": "knn_vector",
                        "dimension": 3,
                        "method": {"name": "hnsw", "engine": "lucene", "space_type": "cosinesimil"},
                    },
                    "category": {"type": "keyword"},
                }
            },
        },
    )
    docs = {
        "a1": ([1.0, 0.0, 0.0], "a"),
        "a2": ([0.0, 1.0, 0.0], "a"),
        "b1": ([0.9, 0.1, 0.0], "b"),
        "b2": ([0.0, 0.0, 1.0], "b"),
    }
    for doc_id, (vector, category) in docs.items():
        opensearch_client.index(index=index_name, id=doc_id, body={"vector": vector, "category": category})
    opensearch_client.indices.refresh(index=index_name)

    query = {"vector": [1.0, 0.0, 0.0], "k": 2, "filter": {"term": {"category": "b"}}}
    hits = opensearch_client.search(index=index_name, body={"size": 2, "query": {"knn": {"vector": query}}})
    assert [hit["_id"] for hit in hits["hits"]["hits"]] == ["b1", "b2"]


def test_cli_status_json_reports_the_node(node_settings):
    code, output = cli("status", "--json", *node_flags(node_settings))
    assert code == 0, output
    report = json.loads(output)
    assert report["running"] is True
    assert report["version"] == OPENSEARCH_VERSION
    assert report["url"] == f"http://127.0.0.1:{node_settings.opensearch_port}"


def test_second_up_on_the_same_port_is_idempotent(node_settings):
    before = opensearch_node.status(node_settings)
    started = time.monotonic()
    again = opensearch_node.up(node_settings, wait_seconds=30)
    assert time.monotonic() - started < 15
    assert again.running and again.pid == before.pid

    code, output = cli("up", *node_flags(node_settings))
    assert code == 0, output
    assert "already running" in output


# -- no node, stale PID file, busy port -------------------------------------------------------------


def test_down_without_a_node_says_so(tmp_path, unused_tcp_port):
    settings = replace(Settings(), opensearch_port=unused_tcp_port, data_dir=tmp_path)
    assert opensearch_node.down(settings) is False
    code, output = cli("down", "--port", str(unused_tcp_port), "--data-dir", str(tmp_path))
    assert code == 0
    assert "no node is running" in output


def test_stale_pid_file_is_ignored_and_removed(tmp_path, unused_tcp_port):
    settings = replace(Settings(), opensearch_port=unused_tcp_port, data_dir=tmp_path)
    finished = subprocess.Popen([sys.executable, "-c", "pass"])
    finished.wait()
    pid_file = opensearch_node.node_dir(settings) / opensearch_node.PID_FILE
    pid_file.parent.mkdir(parents=True)
    pid_file.write_text(f"{finished.pid}\n")

    node = opensearch_node.status(settings)
    assert (node.running, node.pid, node.state) == (False, None, "stopped")
    assert opensearch_node.down(settings) is False
    assert not pid_file.exists()


def test_status_exits_1_when_no_node_runs(tmp_path, unused_tcp_port):
    code, output = cli("status", "--json", "--port", str(unused_tcp_port), "--data-dir", str(tmp_path))
    assert code == 1
    assert json.loads(output)["state"] == "stopped"


class _NotOpenSearch(BaseHTTPRequestHandler):
    def do_GET(self) -> None:
        self.send_response(200)
        self.send_header("Content-Type", "text/plain")
        self.end_headers()
        self.wfile.write(b"hello, I am some other web server\n")

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture
def foreign_port() -> Iterator[int]:
    """A port held by a web server that is not OpenSearch."""
    server = HTTPServer(("127.0.0.1", 0), _NotOpenSearch)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield server.server_address[1]
    server.shutdown()
    server.server_close()


def test_up_refuses_a_port_held_by_another_program(tmp_path, foreign_port):
    settings = replace(Settings(), opensearch_port=foreign_port, data_dir=tmp_path)
    with pytest.raises(NodeError, match="not a plain-HTTP OpenSearch"):
        opensearch_node.up(settings)
    code, output = cli("up", "--port", str(foreign_port), "--data-dir", str(tmp_path))
    assert code == 1
    assert output.startswith("error: port ")


@pytest.mark.parametrize("port", [80, 70000])
def test_up_refuses_ports_it_cannot_use(tmp_path, port):
    with pytest.raises(NodeError, match="1024-65535"):
        opensearch_node.up(replace(Settings(), opensearch_port=port, data_dir=tmp_path))


def test_logs_without_a_node_says_how_to_start_one(tmp_path, unused_tcp_port):
    code, output = cli("logs", "--port", str(unused_tcp_port), "--data-dir", str(tmp_path))
    assert code == 1
    assert "docsctl opensearch up" in output


# -- choosing a JDK ---------------------------------------------------------------------------------


def fake_jdk(root: Path, version: str) -> Path:
    """A folder whose bin/java reports `version` the way real JDKs do (on stderr)."""
    java = root / f"jdk-{version}" / "bin" / "java"
    java.parent.mkdir(parents=True)
    java.write_text(f"#!/bin/sh\necho 'openjdk version \"{version}\" 2025-01-01' >&2\n")
    java.chmod(0o755)
    return java.parent.parent


@pytest.mark.parametrize("version", ["21.0.5", "25"])
def test_java_home_21_or_newer_is_used(tmp_path, version):
    home = fake_jdk(tmp_path, version)
    assert opensearch_node.find_java(replace(Settings(), java_home=str(home))) == home


@pytest.mark.parametrize("version", ["17.0.15", "1.8.0_392"])
def test_java_home_older_than_21_is_refused(tmp_path, version):
    home = fake_jdk(tmp_path, version)
    with pytest.raises(NodeError, match=r"needs Java 21\+"):
        opensearch_node.find_java(replace(Settings(), java_home=str(home)))


def test_java_home_without_java_is_refused(tmp_path):
    with pytest.raises(NodeError, match="no working bin/java"):
        opensearch_node.find_java(replace(Settings(), java_home=str(tmp_path)))


def test_java_from_the_environment_needs_21(tmp_path, monkeypatch):
    old, new = fake_jdk(tmp_path, "17.0.2"), fake_jdk(tmp_path, "21.0.1")
    monkeypatch.setenv("OPENSEARCH_JAVA_HOME", str(old))  # too old: skipped, not fatal
    monkeypatch.setenv("JAVA_HOME", str(new))
    assert opensearch_node.find_java(Settings()) == new
