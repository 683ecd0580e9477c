"""Two reindexes of one index at once: the second refuses with one line; a dead run's lock is taken over."""

from __future__ import annotations

import json
import subprocess
import sys

from conftest import docsctl, env_for, kill, leftovers, one_line_error, snapshot, start_paused


def test_a_second_reindex_refuses_while_one_runs_and_takes_over_once_it_is_killed(settings, corpus_versions):
    v1, v2 = corpus_versions
    holder = start_paused(settings, "extract", "reindex", str(v1), "--source", "docs")
    try:
        second = docsctl(settings, "reindex", str(v2), "--source", "docs")
        error = one_line_error(second)
        assert f"another reindex is running (pid {holder.pid}" in error
    finally:
        kill(holder)
    assert settings.lock_path.exists()  # SIGKILL: its lock file stays, but nothing holds it any more
    result = docsctl(settings, "reindex", str(v2), "--source", "docs", "--json")
    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout)["added"] == len(list(v2.iterdir()))
    assert leftovers(settings) == []


def test_reindexes_started_together_run_one_at_a_time(settings, corpus_versions):
    """Four at once: each either runs or refuses with one line, and the index is what one run makes."""
    v1, _ = corpus_versions
    command = [sys.executable, "-m", "docsctl.cli", "reindex", str(v1), "--source", "docs", "--full"]
    procs = [
        subprocess.Popen(command, env=env_for(settings), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        for _ in range(4)
    ]
    outcomes = [(proc.wait(300), proc.stderr.read()) for proc in procs]
    for proc in procs:
        proc.stdout.close()
        proc.stderr.close()
    assert any(code == 0 for code, _ in outcomes), outcomes
    for code, stderr in outcomes:
        assert "Traceback" not in stderr
        if code:
            assert "another reindex is running" in stderr, stderr
    files = len(list(v1.iterdir()))
    chunks = snapshot(settings)
    assert len({doc for doc, _, _ in chunks.values()}) == files
    assert leftovers(settings) == []
