"""Git sources: a shallow checkout per (source, ref) in the cache, fetched again on later runs."""

from __future__ import annotations

import os
import re
import subprocess
from dataclasses import dataclass
from pathlib import Path

from docsctl.errors import ConfigError

GIT_TIMEOUT_SECONDS = 600


@dataclass(frozen=True)
class Checkout:
    root: Path
    commit: str
    ref: str
    note: str = ""  # something the user should know, e.g. uncommitted changes that were not indexed


def _git(*args: str, cwd: Path | None = None) -> str:
    env = {**os.environ, "GIT_TERMINAL_PROMPT": "0", "GIT_ASKPASS": "true"}
    try:
        done = subprocess.run(
            ["git", *args], cwd=cwd, env=env, capture_output=True, text=True, timeout=GIT_TIMEOUT_SECONDS
        )
    except FileNotFoundError:
        raise ConfigError("git sources need the git command, which is not installed") from None
    except subprocess.TimeoutExpired:
        raise ConfigError(f"git {args[0]} took longer than {GIT_TIMEOUT_SECONDS} s") from None
    if done.returncode != 0:
        lines = [line for line in done.stderr.strip().splitlines() if line.strip()]
        raise ConfigError(f"git {args[0]} failed: {lines[-1] if lines else f'exit {done.returncode}'}")
    return done.stdout.strip()


def _remote(url: str) -> str:
    """Local repositories as file:// URLs, so that a shallow fetch stays shallow."""
    path = Path(url).expanduser()
    if "://" not in url and not re.match(r"^[\w.-]+@[\w.-]+:", url) and path.exists():
        return path.resolve().as_uri()
    return url


def slug(text: str) -> str:
    """`text` as one safe file name."""
    return re.sub(r"[^A-Za-z0-9._-]+", "_", text).strip("_") or "_"


def checkout(name: str, url: str, ref: str | None, cache_dir: Path) -> Checkout:
    """The files of `url` at `ref` (branch, tag or commit; default: the remote's HEAD), shallowly."""
    wanted = ref or "HEAD"
    dest = cache_dir / "git" / slug(name) / slug(wanted)
    remote = _remote(url)
    if not (dest / ".git").is_dir():
        dest.mkdir(parents=True, exist_ok=True)
        _git("init", "--quiet", cwd=dest)
        _git("remote", "add", "origin", remote, cwd=dest)
    else:
        _git("remote", "set-url", "origin", remote, cwd=dest)
    _git("fetch", "--quiet", "--depth", "1", "--no-tags", "origin", wanted, cwd=dest)
    _git("checkout", "--quiet", "--force", "--detach", "FETCH_HEAD", cwd=dest)
    _git("clean", "--quiet", "-fdx", cwd=dest)
    commit = _git("rev-parse", "HEAD", cwd=dest)
    note = ""
    local = Path(url).expanduser()
    if local.is_dir() and (local / ".git").exists() and _git("status", "--porcelain", cwd=local):
        note = f"{url} has uncommitted changes; indexed the committed state of {wanted}"
    return Checkout(root=dest, commit=commit, ref=wanted, note=note)
