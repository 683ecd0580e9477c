"""SIGKILL of `docsctl reindex` in each phase (held there by DOCSCTL_PAUSE_AT, see docsctl/phases.py).

While the run is held and after it is killed, the live index answers with the old content; `status`
works; the next run converges to exactly the index a clean build makes (chunk ids, documents, text,
vectors) and leaves no build file, build index or lock behind.
"""

from __future__ import annotations

import json

import pytest
from conftest import docsctl, drop, kill, leftovers, snapshot, start_paused, with_alias

# (phase, --full): an incremental run writes into the live index, a --full one beside it.
CASES = [
    ("extract", False),
    ("embed", False),
    ("write", False),
    ("extract", True),
    ("embed", True),
    ("write", True),
    ("swap", True),
    ("swapped", True),
]


def _reindex(settings, root, full=False):
    result = docsctl(settings, "reindex", str(root), "--source", "docs", "--json", *(["--full"] if full else []))
    assert result.returncode == 0, result.stderr
    return json.loads(result.stdout)


@pytest.mark.parametrize(("phase", "full"), CASES, ids=[f"{p}-{'full' if f else 'incremental'}" for p, f in CASES])
def test_killed_reindex_keeps_the_live_index_and_the_next_run_converges(
    settings, corpus_versions, clean_builds, phase, full
):
    v1, v2 = corpus_versions
    if settings.backend_name not in clean_builds:  # what a clean build of v2 holds, once per backend
        reference = with_alias(settings, "clean")
        _reindex(reference, v2)
        clean_builds[settings.backend_name] = snapshot(reference)
        drop(reference)
    clean = clean_builds[settings.backend_name]
    _reindex(settings, v1)
    before = snapshot(settings)
    documents_before = {doc for doc, _, _ in before.values()}

    args = ["reindex", str(v2), "--source", "docs", *(["--full"] if full else [])]
    proc = start_paused(settings, phase, *args)
    try:
        during = snapshot(settings)
        query = docsctl(settings, "query", "cartoon", "--json")
        status = docsctl(settings, "status", "--json")
    finally:
        kill(proc)
    after_kill = snapshot(settings)

    assert query.returncode == 0 and json.loads(query.stdout)["hits"], query.stderr
    assert status.returncode == 0, status.stderr
    assert json.loads(status.stdout)["chunks"] == len(after_kill)
    if phase == "swapped":  # the new index is live; only the clean-up of the old one was cut short
        assert during == after_kill == clean
    elif settings.backend_name == "opensearch" and not full and phase == "write":
        # Incremental writes on OpenSearch are live as they go: new chunks first, so no document vanishes.
        assert documents_before <= {doc for doc, _, _ in during.values()}
        assert during == after_kill
    else:
        assert during == after_kill == before

    summary = _reindex(settings, v2, full)
    assert summary["write_failures"] == []
    assert snapshot(settings) == clean
    assert leftovers(settings) == []
    status = docsctl(settings, "status", "--json")
    assert status.returncode == 0 and json.loads(status.stdout)["chunks"] == len(clean), status.stderr


@pytest.fixture(scope="module")
def clean_builds():
    return {}
