"""Hostile files in a source folder are skipped with a reason and counted, and the run goes on; symlinks
never lead out of the folder. Hostile export files are refused before anything is replaced."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from conftest import REPO, docsctl, one_line_error, snapshot

GOOD = "# Good page\n\nThe marmalade paragraph proves the run went on.\n"


def _hostile_folder(root: Path, outside: Path) -> dict[str, str]:
    """Write the hostile tree; returns {path: what its skip reason must say} for the files to be skipped."""
    root.mkdir()
    (root / "good.md").write_text(GOOD)
    (root / "binary.md").write_bytes(b"\x00\x01\x02\xff" * 500)
    (root / "invalid-utf8.txt").write_bytes(b"caf\xe9 cr\xe8me " * 50)
    with (root / "huge.html").open("w") as page:  # 50 MB
        page.write("<html><body>")
        chunk = "<p>" + "filler words " * 80 + "</p>\n"
        for _ in range(50 * 1024 * 1024 // len(chunk) + 1):
            page.write(chunk)
        page.write("</body></html>")
    (root / "nested.html").write_text("<html><body>" + "<div>" * 10_000 + "deep" + "</div>" * 10_000 + "</body></html>")
    (root / "broken.ipynb").write_text('{"cells": [ {"cell_type": ')
    (root / "cells-not-a-list.ipynb").write_text('{"cells": 5, "nbformat": 4}')
    (root / "cell-source-a-number.ipynb").write_text(
        '{"cells": [{"cell_type": "markdown", "source": 7}], "nbformat": 4}'
    )
    (root / "notebook-a-list.ipynb").write_text("[1, 2, 3]")
    (root / "empty.md").write_text("")
    (root / "empty-folder").mkdir()
    (root / "loop").symlink_to(root, target_is_directory=True)
    (root / "self-loop.md").symlink_to(root / "self-loop.md")
    (root / "dangling.md").symlink_to(root / "nowhere.md")
    (root / "outside.md").symlink_to(outside / "secret.md")
    (root / "outside-folder").symlink_to(outside, target_is_directory=True)
    return {
        "binary.md": "binary",
        "invalid-utf8.txt": "UTF-8",
        "huge.html": "larger than",
        "broken.ipynb": "notebook",
        "cells-not-a-list.ipynb": "notebook",
        "cell-source-a-number.ipynb": "",  # any reason ("no text content")
        "notebook-a-list.ipynb": "notebook",
        "empty.md": "empty",
        "self-loop.md": "unreadable",
        "dangling.md": "unreadable",
        "outside.md": "outside the source folder",
        # lxml stops at depth 256 and drops what is deeper: here, all of the text
        "nested.html": "no text content",
    }


def test_hostile_files_are_skipped_with_a_reason_and_the_run_goes_on(settings, tmp_path):
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "secret.md").write_text("# Secret\n\nThe password is swordfish.\n")
    root = tmp_path / "hostile"
    expected = _hostile_folder(root, outside)
    result = docsctl(settings, "reindex", str(root), "--source", "hostile", "--json", timeout=600)
    assert result.returncode == 0, result.stderr
    assert "Traceback" not in result.stderr
    summary = json.loads(result.stdout)
    reasons = {item["path"].split(":", 1)[1]: item["reason"] for item in summary["skipped"]}
    for path, says in expected.items():
        assert path in reasons and says in reasons[path], (path, reasons.get(path))
    assert summary["added"] == 1, reasons
    assert len(summary["skipped"]) == len(expected)
    documents = {doc for doc, _, _ in snapshot(settings).values()}
    assert documents == {"hostile:good.md"}
    query = docsctl(settings, "query", "swordfish password", "--json")
    assert "swordfish" not in json.dumps(json.loads(query.stdout)["hits"])


def test_a_folder_of_nothing_indexes_nothing_without_failing(settings, tmp_path):
    root = tmp_path / "nothing"
    (root / "a" / "b").mkdir(parents=True)
    result = docsctl(settings, "reindex", str(root), "--source", "nothing", "--json")
    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout)["files_seen"] == 0


# -- export / import ---------------------------------------------------------------------------------


def _cut(lines: list[str]) -> dict[str, str]:
    body = "".join(lines)
    return {
        "empty": "",
        "header only": lines[0],
        "cut mid-line": body[: len(body) - len(lines[-1]) // 2],
        "cut at a line end": "".join(lines[:-3]),
        "garbage line": "".join([*lines[:5], "{this is not json\n", *lines[5:]]),
        "a list for a chunk": "".join([*lines[:5], "[1, 2, 3]\n", *lines[5:]]),
        "a string for a chunk": "".join([*lines[:5], '"chunk"\n', *lines[5:]]),
        "null for a chunk": "".join([*lines[:5], "null\n", *lines[5:]]),
        "a chunk without fields": "".join([*lines[:5], '{"chunk_id": 5}\n', *lines[5:]]),
        "words for a vector": "".join([*lines[:-2], _with(lines[-2], embedding=["a"] * 384), lines[-1]]),
        "a short vector": "".join([*lines[:-2], _with(lines[-2], embedding=[0.1] * 3), lines[-1]]),
        "a number for content": "".join([*lines[:-2], _with(lines[-2], content=12345), lines[-1]]),
        "a miscount at the end": "".join([*lines[:-2], lines[-1]]),
        "lines after the end": "".join([*lines, lines[-2]]),
        "a header of another kind": '{"docsctl_export": 99}\n' + "".join(lines[1:]),
        "binary": "\x00\xff" * 100,
    }


def _with(line: str, **fields) -> str:
    row = json.loads(line)
    row.update(fields)
    return json.dumps(row) + "\n"


def test_a_broken_export_is_refused_before_anything_is_replaced(settings, tmp_path):
    built = docsctl(settings, "reindex", str(REPO / "samples" / "docs"), "--source", "docs")
    assert built.returncode == 0, built.stderr
    export = tmp_path / "export.jsonl"
    assert docsctl(settings, "export", str(export)).returncode == 0
    lines = export.read_text(encoding="utf-8").splitlines(keepends=True)
    before = snapshot(settings)
    refused = []
    for name, text in _cut(lines).items():
        broken = tmp_path / f"{name.replace(' ', '-')}.jsonl"
        broken.write_bytes(text.encode("utf-8", errors="surrogateescape") if isinstance(text, str) else text)
        result = docsctl(settings, "import", str(broken))
        error = one_line_error(result)
        refused.append((name, error))
        assert snapshot(settings) == before, name
    assert len(refused) == len(_cut(lines))
    assert docsctl(settings, "import", str(export)).returncode == 0  # the whole file still imports
    assert snapshot(settings) == before
    assert not [path for path in os.listdir(settings.data_dir) if ".building-" in path]


@pytest.fixture
def settings(request, backend, tmp_path):
    from conftest import drop, make_settings

    settings = make_settings(request, backend, tmp_path / "data")
    yield settings
    drop(settings)
