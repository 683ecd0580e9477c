"""One reindex at a time per index: a lock file naming the running process, stale locks taken over.

The lock is the kernel's (flock) on the lock file, so it ends with its process however that ends
(SIGKILL included) and two processes can never both hold it: checking a recorded pid and then
removing a "stale" file let two runs that started together both go ahead, or one remove the lock
the other had just taken. The JSON in the file only says who holds it.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import socket
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, datetime
from pathlib import Path

from docsctl.errors import LockedError


def _holder(path: Path) -> dict:
    try:
        holder = json.loads(path.read_text(encoding="utf-8") or "{}")
    except (OSError, ValueError):
        return {}
    return holder if isinstance(holder, dict) else {}


@contextmanager
def reindex_lock(path: Path, what: str) -> Iterator[None]:
    """Hold `path` while the block runs; refuse (LockedError) while another process holds it."""
    path.parent.mkdir(parents=True, exist_ok=True)
    record = {
        "pid": os.getpid(),
        "host": socket.gethostname(),
        "started": datetime.now(UTC).isoformat(timespec="seconds"),
        "what": what,
    }
    for _ in range(10):
        fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(fd)
            holder = _holder(path)
            raise LockedError(
                f"another reindex is running (pid {holder.get('pid', '?')}, started {holder.get('started', '?')}, "
                f"{holder.get('what', 'unknown')}); wait for it to finish"
            ) from None
        try:
            same_file = os.fstat(fd).st_ino == os.stat(path).st_ino
        except FileNotFoundError:
            same_file = False
        if same_file:
            break
        os.close(fd)  # its holder removed the file as we opened it: lock the one there now
    else:
        raise LockedError(f"could not take the reindex lock {path}")
    try:
        os.ftruncate(fd, 0)
        os.write(fd, json.dumps(record).encode())
        yield
    finally:
        with contextlib.suppress(OSError):
            path.unlink()  # while still held: the next process locks a new file, never this removed one
        os.close(fd)
