"""Fixtures of the reliability suite: `docsctl` as real subprocesses of this checkout, both backends.

Every test here is marked `reliability` (pytest -m reliability runs them alone). Subprocesses run this
checkout's code (PYTHONPATH) with the DOCSCTL_* variables of one test's settings, and share the real
embedding cache (DOCSCTL_CACHE_DIR or ~/.cache/docsctl), so a reindex of text embedded before does not
even load torch.
"""

from __future__ import annotations

import contextlib
import os
import selectors
import shutil
import socket
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from corpus_fixtures import BACKENDS, settings_env
from processes import stop

from docsctl.config import Settings, default_cache_dir, load_settings
from docsctl.store import open_store

REPO = Path(__file__).resolve().parents[2]
PAGES_V1 = [
    "color.html", "cartoon.html", "transparency.html", "dssp.html", "hbonds.html", "angle.html",
    "align.html", "bond.html", "camera.html", "clip.html", "close.html", "cofr.html",
]  # fmt: skip
CHANGED, DELETED, ADDED = "cartoon.html", "clip.html", "crossfade.html"
# Its content hash sorts after the old page's: a killed incremental run on OpenSearch then left both
# versions' chunks, and the next run took the page for unchanged (fixed: docsctl/indexer/pipeline.py).
NEW_WORDS = "Reliability marker: the quokka paragraph, only in the second version."


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    here = Path(__file__).parent
    for item in items:
        if here in Path(str(item.fspath)).parents:
            item.add_marker(pytest.mark.reliability)


# -- subprocesses -------------------------------------------------------------------------------------


def env_for(settings: Settings, **extra: str) -> dict[str, str]:
    """Environment of a `docsctl` subprocess of this checkout that uses exactly `settings`."""
    env = settings_env(settings)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(REPO), os.environ.get("PYTHONPATH")]))
    env["COLUMNS"] = "200"  # one error line stays one line
    env.update(extra)
    return env


def docsctl(settings: Settings, *args: str, timeout: float = 300, **extra: str) -> subprocess.CompletedProcess:
    """Run `docsctl ARGS` to the end; the result has text stdout and stderr."""
    return subprocess.run(
        [sys.executable, "-m", "docsctl.cli", *args],
        env=env_for(settings, **extra),
        capture_output=True,
        text=True,
        timeout=timeout,
        cwd=settings.data_dir.parent,
    )


def start_paused(settings: Settings, phase: str, *args: str, timeout: float = 240) -> subprocess.Popen:
    """Start `docsctl ARGS` with DOCSCTL_PAUSE_AT=phase and return once it reports being held there."""
    proc = subprocess.Popen(
        [sys.executable, "-m", "docsctl.cli", *args],
        env=env_for(settings, DOCSCTL_PAUSE_AT=phase),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        cwd=settings.data_dir.parent,
    )
    wait_for_line(proc, f"paused at {phase}", timeout)
    return proc


def wait_for_line(proc: subprocess.Popen, needle: str, timeout: float) -> list[str]:
    """Read `proc`'s stderr until a line holds `needle`; fail with what it said if it ends or time runs out."""
    seen: list[str] = []
    deadline = time.monotonic() + timeout
    with selectors.DefaultSelector() as selector:
        selector.register(proc.stderr, selectors.EVENT_READ)
        while time.monotonic() < deadline:
            if not selector.select(timeout=1):
                continue
            line = proc.stderr.readline()
            if not line:
                proc.wait(10)
                pytest.fail(f"the process ended (exit {proc.returncode}) before {needle!r}: {b''.join(seen)!r}")
            seen.append(line)
            if needle.encode() in line:
                return [raw.decode(errors="replace") for raw in seen]
    proc.kill()
    pytest.fail(f"no {needle!r} within {timeout:.0f} s: {b''.join(seen)!r}")


def kill(proc: subprocess.Popen) -> None:
    proc.kill()  # SIGKILL: no handler, no cleanup
    proc.wait(30)
    if proc.stderr:
        proc.stderr.close()


def one_line_error(result: subprocess.CompletedProcess) -> str:
    """The single `error: ...` line of a failed command (asserting there is no traceback)."""
    assert result.returncode != 0, result
    assert "Traceback" not in result.stderr, result.stderr
    errors = [line for line in result.stderr.splitlines() if line.startswith("error:")]
    assert len(errors) == 1, result.stderr
    return errors[0]


# -- settings and corpora ---------------------------------------------------------------------------


def shared_cache_dir() -> Path:
    return (
        Path(os.environ["DOCSCTL_CACHE_DIR"]).expanduser()
        if os.environ.get("DOCSCTL_CACHE_DIR")
        else default_cache_dir()
    )


@pytest.fixture(params=BACKENDS)
def backend(request: pytest.FixtureRequest) -> str:
    return request.param


def make_settings(request: pytest.FixtureRequest, backend: str, data_dir: Path, **more: Any) -> Settings:
    """Settings of a fresh, uniquely named index on `backend` with the shared embedding cache."""
    alias = f"rel-{uuid.uuid4().hex[:10]}"
    url = more.pop("opensearch_url", None)
    if backend == "opensearch" and url is None:
        url = request.getfixturevalue("opensearch_url")  # the session node
    data_dir.mkdir(parents=True, exist_ok=True)
    return load_settings(
        backend=backend,
        opensearch_url=url,
        index_alias=alias,
        data_dir=data_dir,
        cache_dir=shared_cache_dir(),
        **more,
    )


@pytest.fixture
def settings(request: pytest.FixtureRequest, backend: str, tmp_path: Path) -> Iterator[Settings]:
    settings = make_settings(request, backend, tmp_path / "data")
    yield settings
    drop(settings)


def drop(settings: Settings) -> None:
    with contextlib.suppress(Exception):  # a test that broke the index on purpose; its tmp_path goes anyway
        open_store(settings).drop()


@pytest.fixture(scope="session")
def corpus_versions(corpora_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """Two versions of a small folder of real pages: v2 changes one page, deletes one, adds one."""
    base = tmp_path_factory.mktemp("corpus")
    pages = corpora_dir / "chimerax" / "user" / "commands"
    v1, v2 = base / "v1", base / "v2"
    for root in (v1, v2):
        root.mkdir()
    for page in PAGES_V1:
        shutil.copy(pages / page, v1 / page)
        if page != DELETED:
            shutil.copy(pages / page, v2 / page)
    shutil.copy(pages / ADDED, v2 / ADDED)
    html = (v2 / CHANGED).read_text(encoding="utf-8")
    (v2 / CHANGED).write_text(html.replace("</body>", f"<p>{NEW_WORDS}</p></body>", 1), encoding="utf-8")
    return v1, v2


# -- what an index holds ----------------------------------------------------------------------------


class Vector(tuple):
    """A stored vector that equals another within float32 rounding (backends store float32)."""

    def __eq__(self, other: object) -> bool:
        return isinstance(other, tuple) and len(self) == len(other) and np.allclose(self, other, atol=1e-6)

    __hash__ = tuple.__hash__


def snapshot(settings: Settings) -> dict[str, tuple[str, str, Vector]]:
    """Every chunk of the index: id -> (document, content, vector)."""
    store = open_store(settings)
    if settings.backend_name == "opensearch":  # what was written is searchable within a second: now
        store.client.indices.refresh(index=settings.index_alias)
    chunks = {}
    for chunk in store.iter_chunks(with_embedding=True):
        chunks[chunk.chunk_id] = (chunk.doc_id, chunk.content, Vector(chunk.embedding))
    if hasattr(store, "close"):
        store.close()
    return chunks


def leftovers(settings: Settings) -> list[str]:
    """Build files, build indices and locks a finished run should not leave behind."""
    found = [str(path) for path in settings.data_dir.glob("*.building-*")]
    if settings.lock_path.exists():
        found.append(str(settings.lock_path))
    if settings.backend_name == "opensearch":
        store = open_store(settings)
        live = store._live_index()
        found += [index for index in store._physical_indices() if index != live]
    return found


def with_alias(settings: Settings, suffix: str) -> Settings:
    return replace(settings, index_alias=f"{settings.index_alias}-{suffix}")


# -- a small index and a server over it -------------------------------------------------------------


@pytest.fixture(scope="session")
def sample_indexes(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict]:
    """samples/docs indexed once per backend on first use: backend -> Settings."""
    built: dict[str, Settings] = {}

    def get(backend: str) -> Settings:
        if backend not in built:
            settings = make_settings(request, backend, tmp_path_factory.mktemp(f"samples-{backend}") / "data")
            result = docsctl(settings, "reindex", str(REPO / "samples" / "docs"), "--source", "docs")
            assert result.returncode == 0, result.stderr
            built[backend] = settings
        return built[backend]

    yield get
    for settings in built.values():
        drop(settings)


@pytest.fixture
def sample_index(sample_indexes, backend: str) -> Settings:
    return sample_indexes(backend)


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


@contextlib.contextmanager
def http_server(
    settings: Settings, log: Path, *args: str, port: int | None = None, **env: str
) -> Iterator[tuple[str, subprocess.Popen]]:
    """`docsctl serve --transport http` on a free port: yields its MCP URL and process, stops it after."""
    port = port or free_port()
    command = [sys.executable, "-m", "docsctl.cli", "serve", "--transport", "http", "--port", str(port), *args]
    with log.open("w") as err:
        proc = subprocess.Popen(command, env=env_for(settings, **env), stdout=subprocess.DEVNULL, stderr=err)
    try:
        deadline = time.monotonic() + 120
        while True:
            if proc.poll() is not None:
                pytest.fail(f"docsctl serve exited with {proc.returncode}: {log.read_text()[-2000:]}")
            with socket.socket() as probe:
                if probe.connect_ex(("127.0.0.1", port)) == 0:
                    break
            if time.monotonic() > deadline:
                pytest.fail(f"docsctl serve did not listen on {port}: {log.read_text()[-2000:]}")
            time.sleep(0.2)
        yield f"http://127.0.0.1:{port}/mcp", proc
    finally:
        stop(proc)
