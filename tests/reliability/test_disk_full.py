"""Disk full during an SQLite rebuild: one error line, the old index intact and answering, nothing left behind.

The data dir is a small tmpfs (we mount it: the suite runs as root in CI); without the right to mount,
the child's RLIMIT_FSIZE caps the size of any file it writes, which fails the same writes with EFBIG.
"""

from __future__ import annotations

import json
import resource
import shutil
import signal
import subprocess
import sys
import uuid
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path

import pytest
from conftest import docsctl, env_for, leftovers, make_settings, one_line_error, snapshot


@pytest.fixture(params=["tmpfs", "fsize"])
def small_dir(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Path | None]:
    """A 1 MiB tmpfs; None for the file size limit (also where mounting is not allowed)."""
    mount = tmp_path / "small"
    mount.mkdir()
    if request.param == "fsize":
        yield None
        return
    done = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=1m", "tmpfs", str(mount)], capture_output=True)
    if done.returncode != 0:
        yield None
        return
    try:
        yield mount
    finally:
        subprocess.run(["umount", "-l", str(mount)], check=False)


def test_disk_full_in_a_rebuild_keeps_the_old_index(request, tmp_path, corpus_versions, small_dir):
    v1, v2 = corpus_versions
    settings = make_settings(request, "sqlite", tmp_path / "data")
    built = docsctl(settings, "reindex", str(v1), "--source", "docs")
    assert built.returncode == 0, built.stderr
    before = snapshot(settings)
    index_file = settings.data_dir / f"{settings.index_alias}.sqlite"
    size = index_file.stat().st_size
    assert 300_000 < size < 900_000, size  # the live index fits in 1 MiB, a second copy does not
    extra: dict = {}
    if small_dir is not None:
        settings = replace(settings, data_dir=small_dir / f"data-{uuid.uuid4().hex[:6]}")
        settings.data_dir.mkdir()
        shutil.copy(index_file, settings.data_dir / index_file.name)
    else:
        extra["preexec_fn"] = _cap_file_size(size // 2)  # the new index's file cannot grow past half

    command = [sys.executable, "-m", "docsctl.cli", "reindex", str(v2), "--source", "docs", "--full"]
    result = subprocess.run(command, env=env_for(settings), capture_output=True, text=True, timeout=300, **extra)
    error = one_line_error(result)
    if small_dir is not None:  # EFBIG (the file size limit) is only "disk I/O error" to SQLite
        assert "no space left" in error and "the index in use is unchanged" in error, error
    assert snapshot(settings) == before
    assert leftovers(settings) == []
    query = docsctl(settings, "query", "cartoon", "--json")
    assert query.returncode == 0 and json.loads(query.stdout)["hits"], query.stderr


def _cap_file_size(limit: int):
    def cap() -> None:
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # a write past the cap fails with EFBIG instead
        resource.setrlimit(resource.RLIMIT_FSIZE, (limit, limit))

    return cap
