"""Fixtures shared by the whole suite, one section per resource; add yours under a section of its own.

Expensive things (the OpenSearch node, its client) are session fixtures; anything a test writes
(an index name, a SQLite file) belongs to that test and lives under its tmp_path.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import socket
import subprocess
import time
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import pytest

from docsctl.config import Settings

# Session fixtures kept in modules of their own: the real model and the corpora indexed once per
# backend (corpus_fixtures), and both corpora indexed for the evaluation (eval_fixtures).
pytest_plugins = ["corpus_fixtures", "eval_fixtures"]

# ---------------------------------------------------------------------------------------------------
# Paths
# ---------------------------------------------------------------------------------------------------


@pytest.fixture(scope="session")
def repo_root() -> Path:
    return Path(__file__).resolve().parent.parent


@pytest.fixture(scope="session")
def shared_dir(repo_root: Path) -> Path:
    """The project's shared/ folder, which every checkout has beside it (../shared)."""
    shared = repo_root.parent / "shared"
    if not (shared / "corpora").is_dir():
        pytest.fail(
            f"{shared} with corpora/ is missing: the tests read the project's shared/ folder, which must "
            "sit beside the repository (../shared)",
            pytrace=False,
        )
    return shared


@pytest.fixture(scope="session")
def corpora_dir(shared_dir: Path) -> Path:
    return shared_dir / "corpora"


# ---------------------------------------------------------------------------------------------------
# Network
# ---------------------------------------------------------------------------------------------------


@pytest.fixture
def unused_tcp_port() -> int:
    """A TCP port on 127.0.0.1 that nothing listens on right now."""
    return _free_port()


# ---------------------------------------------------------------------------------------------------
# OpenSearch: one node for the whole session, found in this order
#   1. DOCSCTL_TEST_OPENSEARCH_URL (with DOCSCTL_TEST_OPENSEARCH_DATA_DIR when docsctl started it);
#   2. a testcontainers OpenSearch, when testcontainers is installed and a Docker engine answers;
#   3. a node started here with `docsctl.opensearch_node.up`, stopped at the end of the session.
# A node that cannot be had fails the tests that need it: never a skip, so no backend rots unseen.
# ---------------------------------------------------------------------------------------------------

OPENSEARCH_IMAGE = "opensearchproject/opensearch:3.6.0"


@dataclass(frozen=True)
class OpenSearchUnderTest:
    url: str
    origin: str  # env | container | local
    # Settings naming the docsctl-managed node (its port and data dir, hence its PID file and log),
    # when docsctl started it; None for a container or a node started some other way.
    settings: Settings | None


@pytest.fixture(scope="session")
def opensearch_node(tmp_path_factory: pytest.TempPathFactory) -> Iterator[OpenSearchUnderTest]:
    url = os.environ.get("DOCSCTL_TEST_OPENSEARCH_URL", "").rstrip("/")
    if url:
        _wait_for_health(url, seconds=60)
        data_dir, port = os.environ.get("DOCSCTL_TEST_OPENSEARCH_DATA_DIR"), urlsplit(url).port
        settings = replace(_node_settings(Path(data_dir)), opensearch_port=port) if data_dir and port else None
        yield OpenSearchUnderTest(url, "env", settings)
        return
    if _testcontainers_usable():
        yield from _container_node()
        return
    yield from _local_node(tmp_path_factory.mktemp("opensearch-node"))


@pytest.fixture(scope="session")
def opensearch_url(opensearch_node: OpenSearchUnderTest) -> str:
    return opensearch_node.url


@pytest.fixture(scope="session")
def opensearch_client(opensearch_url: str) -> Iterator[Any]:
    from opensearchpy import OpenSearch

    client = OpenSearch(hosts=[opensearch_url], timeout=60)
    yield client
    client.close()


def _node_settings(data_dir: Path) -> Settings:
    """Settings for a test node: defaults, a private data dir, and the real cache (the download is
    reused) unless DOCSCTL_CACHE_DIR says otherwise; DOCSCTL_JAVA_HOME is honoured."""
    settings = replace(Settings(), data_dir=data_dir, java_home=os.environ.get("DOCSCTL_JAVA_HOME") or None)
    if os.environ.get("DOCSCTL_CACHE_DIR"):
        settings = replace(settings, cache_dir=Path(os.environ["DOCSCTL_CACHE_DIR"]).expanduser())
    return settings


def _local_node(data_dir: Path) -> Iterator[OpenSearchUnderTest]:
    from docsctl import opensearch_node
    from docsctl.errors import NodeError

    settings = replace(_node_settings(data_dir), opensearch_port=_free_port())
    try:
        node = opensearch_node.up(settings, wait_seconds=180, fast_start=True)
    except NodeError as exc:
        with contextlib.suppress(NodeError):
            opensearch_node.down(settings)
        pytest.fail(f"could not start a local OpenSearch node for the tests: {exc}", pytrace=False)
    try:
        yield OpenSearchUnderTest(node.url, "local", settings)
    finally:
        opensearch_node.down(settings)


def _testcontainers_usable() -> bool:
    try:
        import testcontainers.opensearch  # noqa: F401
    except ImportError:
        return False
    if shutil.which("docker") is None:
        return False
    try:
        return subprocess.run(["docker", "info"], capture_output=True, timeout=5).returncode == 0
    except (OSError, subprocess.TimeoutExpired):
        return False


def _container_node() -> Iterator[OpenSearchUnderTest]:
    from testcontainers.opensearch import OpenSearchContainer

    container = OpenSearchContainer(OPENSEARCH_IMAGE, security_enabled=False)
    container.with_env("OPENSEARCH_JAVA_OPTS", "-Xms512m -Xmx1g")
    try:
        container.start()
    except Exception as exc:  # the container's own errors are many and undocumented
        with contextlib.suppress(Exception):
            container.stop()
        pytest.fail(f"could not start the {OPENSEARCH_IMAGE} container: {exc}", pytrace=False)
    try:
        host, port = container.get_container_host_ip(), container.get_exposed_port(container.port)
        yield OpenSearchUnderTest(f"http://{host}:{port}", "container", None)
    finally:
        container.stop()


def _wait_for_health(url: str, seconds: float) -> None:
    """Return once the cluster is yellow or green; fail the session when it never gets there."""
    deadline = time.monotonic() + seconds
    problem = "no answer"
    opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
    while time.monotonic() < deadline:
        try:
            with opener.open(f"{url}/_cluster/health?wait_for_status=yellow&timeout=5s", timeout=10) as reply:
                health = json.loads(reply.read()).get("status")
            if health in ("green", "yellow"):
                return
            problem = f"health {health}"
        except (OSError, ValueError) as exc:
            problem = str(exc)
        time.sleep(1)
    pytest.fail(f"DOCSCTL_TEST_OPENSEARCH_URL={url} is not a usable OpenSearch ({problem})", pytrace=False)


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]
