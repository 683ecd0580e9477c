"""Stopping a server process a test started: terminate, then kill if it does not end in time."""

from __future__ import annotations

import subprocess


def stop(process: subprocess.Popen, timeout: float = 20) -> None:
    process.terminate()
    try:
        process.wait(timeout)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait(10)
