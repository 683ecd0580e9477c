"""The package as users install it: mappings and web page files inside the wheel, every command documented."""

from __future__ import annotations

import subprocess
import sys
import zipfile
from pathlib import Path

import typer

from docsctl.cli.app import app


def test_the_wheel_ships_the_index_definitions_dashboards_and_web_pages(repo_root: Path, tmp_path: Path):
    subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "--no-build-isolation", "-w", str(tmp_path), "."],
        cwd=repo_root, check=True, capture_output=True,
    )  # fmt: skip
    (wheel,) = tmp_path.glob("docsctl-*.whl")
    with zipfile.ZipFile(wheel) as archive:
        for shipped, source in [
            ("docsctl/mappings/chunks.json", "mappings/chunks.json"),
            ("docsctl/mappings/runs.json", "mappings/runs.json"),
            ("docsctl/dashboards/docsctl.ndjson", "docker/dashboards/docsctl.ndjson"),
        ]:
            assert archive.read(shipped) == (repo_root / source).read_bytes(), shipped
        web = repo_root / "docsctl" / "server" / "web"
        for page_file in [*web.glob("templates/*"), *web.glob("static/*")]:
            shipped = page_file.relative_to(repo_root).as_posix()
            assert archive.read(shipped) == page_file.read_bytes(), shipped


def _commands(group: typer.Typer, prefix: str = "docsctl") -> dict[str, object]:
    found = {}
    for command in group.registered_commands:
        name = command.name or command.callback.__name__.replace("_", "-")
        found[f"{prefix} {name}"] = command.callback
    for sub in group.registered_groups:
        found.update(_commands(sub.typer_instance, f"{prefix} {sub.name}"))
    return found


def test_every_command_has_help_with_an_example_and_is_in_the_readme(repo_root: Path):
    readme = (repo_root / "README.md").read_text(encoding="utf-8")
    commands = _commands(app)
    assert {"docsctl reindex", "docsctl query", "docsctl serve", "docsctl opensearch up"} <= set(commands)
    for name, callback in commands.items():
        doc = callback.__doc__ or ""
        assert "Example" in doc, f"{name} has no example in its help"
        top = " ".join(name.split()[:2])
        assert top in readme, f"{name} is not in README.md"
