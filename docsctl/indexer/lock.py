"""One reindex at a time per index: a lock file naming the running process, stale locks detected."""

from __future__ import annotations

import json
import os
import socket
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, datetime
from pathlib import Path

from docsctl.errors import LockedError
from docsctl.process import pid_alive


@contextmanager
def reindex_lock(path: Path, what: str) -> Iterator[None]:
    """Hold `path` while the block runs; refuse if a live process holds it, clear it if its owner died."""
    path.parent.mkdir(parents=True, exist_ok=True)
    record = {
        "pid": os.getpid(),
        "host": socket.gethostname(),
        "started": datetime.now(UTC).isoformat(timespec="seconds"),
        "what": what,
    }
    for _ in range(2):
        try:
            fd = os.open(path, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o644)
        except FileExistsError:
            try:
                holder = json.loads(path.read_text(encoding="utf-8") or "{}")
            except (OSError, ValueError):
                holder = {}
            pid = int(holder.get("pid", 0) or 0)
            same_host = holder.get("host", record["host"]) == record["host"]
            if pid and same_host and pid_alive(pid):
                raise LockedError(
                    f"another reindex is running (pid {pid}, started {holder.get('started')}, "
                    f"{holder.get('what')}); wait for it, or remove {path} if that process is gone"
                ) from None
            path.unlink(missing_ok=True)  # stale: its process is gone
            continue
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            json.dump(record, handle)
        break
    else:
        raise LockedError(f"could not take the reindex lock {path}")
    try:
        yield
    finally:
        path.unlink(missing_ok=True)
