"""Remote clusters: TLS with a CA file, basic auth, shards and replicas from the settings, and a real
two-node cluster that keeps answering when a node stops."""

from __future__ import annotations

import contextlib
import datetime
import ipaddress
import json
import os
import shutil
import socket
import ssl
import threading
import uuid
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import replace
from http.server import BaseHTTPRequestHandler, HTTPServer
from pathlib import Path
from typing import Any

import pytest
from corpus_fixtures import backend_settings, index_folder
from typer.testing import CliRunner

from docsctl import opensearch_node
from docsctl.cli.app import app
from docsctl.config import Settings, load_settings
from docsctl.errors import NodeError, StoreError
from docsctl.server.search import Searcher
from docsctl.store import open_store
from docsctl.store.opensearch import OpenSearchStore

PAGES = {"user/commands": ["color.html", "cartoon.html", "transparency.html"], "user/tools": ["log.html"]}


@pytest.fixture
def pages(corpora_dir: Path, tmp_path: Path) -> Path:
    root = tmp_path / "docs"
    for folder, names in PAGES.items():
        (root / folder).mkdir(parents=True)
        for name in names:
            shutil.copy(corpora_dir / "chimerax" / folder / name, root / folder / name)
    return root


def connection(store: OpenSearchStore) -> Any:
    (conn,) = store.client.transport.connection_pool.connections
    return conn


# -- settings reach the client ----------------------------------------------------------------------


def test_tls_auth_and_verification_settings_reach_the_client(tmp_path):
    ca = tmp_path / "ca.pem"
    ca.write_text("not read until a connection is made")
    settings = Settings(
        opensearch_url="https://search.example.org:9243",
        opensearch_user="docsctl",
        opensearch_password="s3cret",
        opensearch_ca_file=str(ca),
    )
    store = OpenSearchStore(settings)
    assert store._client is None  # constructing the store does not connect
    conn = connection(store)
    assert (conn.host, conn.use_ssl) == ("https://search.example.org:9243", True)
    assert conn.headers["authorization"] == "Basic ZG9jc2N0bDpzM2NyZXQ="  # docsctl:s3cret
    assert conn.pool.ca_certs == str(ca)
    assert conn.pool.cert_reqs == "CERT_REQUIRED"

    unverified = connection(OpenSearchStore(replace(settings, opensearch_verify=False, opensearch_ca_file=None)))
    assert unverified.pool.cert_reqs == "CERT_NONE"
    anonymous = connection(OpenSearchStore(Settings(opensearch_url="http://127.0.0.1:9200")))
    assert "authorization" not in anonymous.headers and not anonymous.use_ssl


def test_settings_from_the_environment_reach_the_client(tmp_path, monkeypatch):
    ca = tmp_path / "ca.pem"
    ca.write_text("")
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("DOCSCTL_BACKEND", raising=False)
    for name, value in {
        "DOCSCTL_OPENSEARCH_URL": "https://search.example.org:9200",
        "DOCSCTL_OPENSEARCH_USER": "reader",
        "DOCSCTL_OPENSEARCH_PASSWORD": "pw",
        "DOCSCTL_OPENSEARCH_CA_FILE": str(ca),
        "DOCSCTL_OPENSEARCH_VERIFY": "true",
    }.items():
        monkeypatch.setenv(name, value)
    store = open_store(load_settings())
    conn = connection(store)
    assert conn.pool.ca_certs == str(ca) and conn.headers["authorization"] == "Basic cmVhZGVyOnB3"


def test_a_missing_ca_file_is_one_line_and_exit_1(tmp_path):
    missing = tmp_path / "nope" / "ca.pem"
    env = {
        "DOCSCTL_OPENSEARCH_URL": "https://127.0.0.1:9",
        "DOCSCTL_OPENSEARCH_CA_FILE": str(missing),
        "DOCSCTL_BACKEND": "",
        "DOCSCTL_CONFIG": "",
    }
    for args in (["status"], ["stats"], ["sources"]):
        result = CliRunner().invoke(app, args, env=env)
        assert result.exit_code == 1, result.output
        assert "Traceback" not in result.output
        (line,) = result.stderr.strip().splitlines()
        assert line.startswith(f"error: opensearch_ca_file {missing} does not exist")


# -- a real TLS server with its own certificate authority ---------------------------------------------


def _certificate_authority(directory: Path, name: str) -> tuple[Any, Any, Path]:
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import NameOID

    key = ec.generate_private_key(ec.SECP256R1())
    subject = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, name)])
    now = datetime.datetime.now(datetime.UTC)
    cert = (
        x509.CertificateBuilder()
        .subject_name(subject)
        .issuer_name(subject)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(days=1))
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .add_extension(x509.KeyUsage(True, False, False, False, False, True, True, False, False), critical=True)
        .add_extension(x509.SubjectKeyIdentifier.from_public_key(key.public_key()), critical=False)
        .sign(key, hashes.SHA256())
    )
    path = directory / f"{name}.pem"
    path.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    return key, cert, path


def _server_certificate(directory: Path, ca_key: Any, ca_cert: Any) -> tuple[Path, Path]:
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

    key = ec.generate_private_key(ec.SECP256R1())
    now = datetime.datetime.now(datetime.UTC)
    cert = (
        x509.CertificateBuilder()
        .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "127.0.0.1")]))
        .issuer_name(ca_cert.subject)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(days=1))
        .add_extension(x509.SubjectAlternativeName([x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]), False)
        .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH]), critical=False)
        .add_extension(
            x509.AuthorityKeyIdentifier.from_issuer_public_key(ca_key.public_key()),
            critical=False,
        )
        .sign(ca_key, hashes.SHA256())
    )
    cert_path, key_path = directory / "server.pem", directory / "server.key"
    cert_path.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    key_path.write_bytes(
        key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption())
    )
    return cert_path, key_path


class _FakeCluster(BaseHTTPRequestHandler):
    """Just enough of OpenSearch over TLS: no alias exists; every request's Authorization is kept."""

    def _answer(self, status: int, body: dict[str, Any] | None) -> None:
        self.server.seen.append((self.command, self.path, self.headers.get("Authorization")))
        payload = json.dumps(body).encode() if body is not None else b""
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(payload)))
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(payload)

    def do_HEAD(self) -> None:  # noqa: N802 - the name http.server looks for
        self._answer(404, None)

    def do_GET(self) -> None:  # noqa: N802
        self._answer(404, {"error": {"type": "index_not_found_exception", "reason": "no such index"}, "status": 404})

    def log_message(self, *args: Any) -> None:
        pass


class _TLSServer(HTTPServer):
    def __init__(self, cert: Path, key: Path) -> None:
        super().__init__(("127.0.0.1", 0), _FakeCluster)
        context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        context.load_cert_chain(cert, key)
        self.socket = context.wrap_socket(self.socket, server_side=True)
        self.seen: list[tuple[str, str, str | None]] = []

    def handle_error(self, request: Any, client_address: Any) -> None:
        pass  # the handshakes a test makes fail on purpose


@pytest.fixture
def tls_cluster(tmp_path) -> Iterator[tuple[_TLSServer, Path, Path]]:
    ca_key, ca_cert, ca_file = _certificate_authority(tmp_path, "docsctl-test-ca")
    _, _, stranger = _certificate_authority(tmp_path, "another-ca")
    server = _TLSServer(*_server_certificate(tmp_path, ca_key, ca_cert))
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield server, ca_file, stranger
    server.shutdown()
    server.server_close()


def test_tls_with_the_ca_file_and_basic_auth_against_a_real_tls_server(tls_cluster):
    server, ca_file, stranger = tls_cluster
    url = f"https://127.0.0.1:{server.server_address[1]}"
    settings = Settings(opensearch_url=url, opensearch_user="docsctl", opensearch_password="s3cret")
    store = OpenSearchStore(replace(settings, opensearch_ca_file=str(ca_file)))
    assert store.index_meta() is None  # the handshake succeeded with our CA, and the server said "no alias"
    assert server.seen and all(auth == "Basic ZG9jc2N0bDpzM2NyZXQ=" for _, _, auth in server.seen)

    refused = OpenSearchStore(replace(settings, opensearch_ca_file=str(stranger)))
    with pytest.raises(StoreError, match=r"TLS with OpenSearch at .* failed: \[SSL: CERTIFICATE_VERIFY_FAILED\]"):
        refused.index_meta()
    unverified = OpenSearchStore(replace(settings, opensearch_ca_file=str(stranger), opensearch_verify=False))
    assert unverified.index_meta() is None

    env = {"DOCSCTL_OPENSEARCH_URL": url, "DOCSCTL_OPENSEARCH_CA_FILE": str(stranger), "DOCSCTL_CONFIG": ""}
    result = CliRunner().invoke(app, ["status"], env=env)
    assert result.exit_code == 1
    (line,) = result.stderr.strip().splitlines()
    assert "CERTIFICATE_VERIFY_FAILED" in line and "opensearch_ca_file" in line


# -- shards and replicas ----------------------------------------------------------------------------


def test_new_indices_get_shards_and_replicas_from_the_settings(request, tmp_path, embedder, embedding_cache_dir, pages):
    settings = replace(
        backend_settings(request, "opensearch", tmp_path / "data", embedding_cache_dir), shards=2, replicas=1
    )
    store = open_store(settings)
    try:
        index_folder(settings, embedder, pages, "docs")
        for index in (store.describe()["index"], store.runs_index):
            found = store.client.indices.get_settings(index=index)[index]["settings"]["index"]
            expected_shards = "2" if index != store.runs_index else "1"  # the runs index is tiny: one shard
            assert (found["number_of_shards"], found["number_of_replicas"]) == (expected_shards, "1"), index
        assert store.bm25("transparency", 3)  # searchable with its shards spread (replicas wait for a node)
    finally:
        store.drop()


# -- a two-node cluster -----------------------------------------------------------------------------


def _free_ports(count: int) -> list[int]:
    with contextlib.ExitStack() as stack:
        probes = [stack.enter_context(socket.socket(socket.AF_INET, socket.SOCK_STREAM)) for _ in range(count)]
        for probe in probes:
            probe.bind(("127.0.0.1", 0))
        return [probe.getsockname()[1] for probe in probes]


def _node(data_dir: Path, port: int) -> Settings:
    """A test node's settings: its own data dir and port, the shared install cache, a small heap."""
    settings = replace(
        Settings(),
        data_dir=data_dir,
        opensearch_port=port,
        opensearch_heap_min="256m",
        opensearch_heap_max="512m",
        java_home=os.environ.get("DOCSCTL_JAVA_HOME") or None,
    )
    if os.environ.get("DOCSCTL_CACHE_DIR"):
        settings = replace(settings, cache_dir=Path(os.environ["DOCSCTL_CACHE_DIR"]).expanduser())
    return settings


@pytest.fixture
def two_nodes(tmp_path) -> Iterator[tuple[Settings, Settings]]:
    """Two local nodes forming one cluster: `first` bootstraps it (and is its cluster manager), `second`
    joins it. Started side by side, stopped at the end whatever happened."""
    http_a, http_b, transport_a, transport_b = _free_ports(4)
    first, second = _node(tmp_path / "nodes", http_a), _node(tmp_path / "nodes", http_b)
    name = f"docsctl-test-{uuid.uuid4().hex[:8]}"
    plans = [
        (
            first,
            opensearch_node.Cluster(
                name, transport_a, (f"127.0.0.1:{transport_b}",), (opensearch_node.node_name(first),)
            ),
        ),
        (second, opensearch_node.Cluster(name, transport_b, (f"127.0.0.1:{transport_a}",))),
    ]
    try:
        with ThreadPoolExecutor(2) as pool:
            started = [pool.submit(opensearch_node.up, node, None, 150, True, plan) for node, plan in plans]
            for future in started:
                future.result()
        yield first, second
    finally:
        for node in (second, first):
            with contextlib.suppress(NodeError):
                opensearch_node.down(node)


def _shards(client: Any, index: str) -> set[tuple[str, str, str | None]]:
    return {(row["prirep"], row["state"], row["node"]) for row in client.cat.shards(index=index, format="json")}


def test_a_replica_keeps_search_answering_when_the_node_with_the_primary_stops(
    two_nodes, tmp_path, embedder, embedding_cache_dir, pages
):
    first, second = two_nodes
    a, b = opensearch_node.node_name(first), opensearch_node.node_name(second)
    settings = load_settings(
        backend="opensearch",
        opensearch_url=opensearch_node.node_url(first),
        index_alias=f"test-{uuid.uuid4().hex[:12]}",
        replicas=1,
        data_dir=tmp_path / "data",
        cache_dir=embedding_cache_dir,
    )
    store = open_store(settings)
    client = store.client
    assert {node["name"] for node in client.cat.nodes(format="json")} == {a, b}
    # Primaries go to the second node, so that stopping it makes the cluster promote the first node's replica.
    client.cluster.put_settings(body={"persistent": {"cluster.routing.allocation.exclude._name": a}})
    summary = index_folder(settings, embedder, pages, "docs")
    client.cluster.put_settings(body={"persistent": {"cluster.routing.allocation.exclude._name": None}})
    health = client.cluster.health(index=settings.index_alias, wait_for_status="green")
    assert health["status"] == "green" and health["number_of_nodes"] == 2
    assert _shards(client, settings.index_alias) == {("p", "STARTED", b), ("r", "STARTED", a)}

    searcher = Searcher(store, embedder)
    before = searcher.search("transparency of surfaces", limit=3)
    assert before.hits
    opensearch_node.down(second)

    after = searcher.search("transparency of surfaces", limit=3)
    assert [hit.chunk.chunk_id for hit in after.hits] == [hit.chunk.chunk_id for hit in before.hits]
    everything = client.search(index=settings.index_alias, body={"size": 0, "track_total_hits": True})
    assert everything["_shards"]["failed"] == 0
    assert everything["hits"]["total"]["value"] == summary.chunks_written
    health = client.cluster.health(index=settings.index_alias, wait_for_status="yellow", wait_for_nodes="1")
    assert health["status"] == "yellow" and health["number_of_nodes"] == 1
    assert _shards(client, settings.index_alias) == {("p", "STARTED", a), ("r", "UNASSIGNED", None)}
