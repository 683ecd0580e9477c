import os
import time

import pytest

from docsctl.errors import ConfigError, LockedError
from docsctl.indexer.lock import reindex_lock
from docsctl.indexer.sources import SourceTarget, category_for, parse_category_rule, walk_source


@pytest.mark.parametrize(
    ("path", "category"),
    [
        ("user/commands/color.html", "commands"),
        ("user/tools/log.html", "tools"),
        ("user/tutorials/intro.html", "tutorials"),
        ("user/markers.html", "concepts"),
        ("user/formats/pdb.html", "concepts"),
        ("devel/tutorials/tutorial_tool_qt.rst", "devel"),
        ("panel/examples/reference/widgets/Tabulator.ipynb", "reference"),
        ("README.md", "docs"),
    ],
)
def test_default_category_rules(path, category):
    assert category_for(path, ()) == category


def test_user_rules_come_first_and_plain_folders_match_below():
    rules = (parse_category_rule("user/commands=cmds"),)
    assert category_for("user/commands/color.html", rules) == "cmds"
    assert category_for("user/tools/log.html", rules) == "tools"


@pytest.mark.parametrize("rule", ["nocategory", "=x", "glob=", ""])
def test_bad_category_rule(rule):
    with pytest.raises(ConfigError):
        parse_category_rule(rule)


def test_walk_skips_hidden_and_flags_huge_files(tmp_path):
    (tmp_path / ".git").mkdir()
    (tmp_path / ".git" / "config").write_text("x")
    (tmp_path / "a.md").write_text("# A")
    (tmp_path / "big.txt").write_bytes(b"x" * (6 * 1024 * 1024))
    found = {doc.path: reason for doc, reason in walk_source(SourceTarget(name="s", root=tmp_path))}
    assert found["a.md"] is None
    assert "larger than" in found["big.txt"]
    assert ".git/config" not in found


def test_walk_of_a_missing_folder_is_a_config_error(tmp_path):
    with pytest.raises(ConfigError):
        list(walk_source(SourceTarget(name="s", root=tmp_path / "nope")))


def test_second_lock_is_refused_and_stale_lock_cleared(tmp_path):
    lock = tmp_path / "x.lock"
    with (
        reindex_lock(lock, "first"),
        pytest.raises(LockedError, match="another reindex is running"),
        reindex_lock(lock, "second"),
    ):
        pass
    assert not lock.exists()
    # A lock left by a process that no longer exists is cleared.
    child = os.fork()
    if child == 0:
        os._exit(0)
    os.waitpid(child, 0)
    lock.write_text(f'{{"pid": {child}, "started": "{time.time()}"}}')
    with reindex_lock(lock, "third"):
        assert lock.exists()
