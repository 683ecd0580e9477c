"""Named points of a reindex run where a test can hold the process, to kill it exactly there.

With DOCSCTL_PAUSE_AT=<phase> in its environment, a run that reaches <phase> writes
`docsctl: paused at <phase> (pid N)` on stderr and waits until it is killed, or, with
DOCSCTL_RESUME_FILE=<path> as well, until that file exists (then it goes on). tests/reliability/ kill
`docsctl reindex` in each phase this way rather than after a guessed sleep, which on a busy machine
lands in whichever phase happens to be running, and stop the backend under a held run. Unset (always,
outside those tests), a checkpoint costs one environment lookup.

    extract   a document has been extracted, nothing of it embedded or written
    embed     a batch has been embedded, not yet written
    write     a batch has been written (a rebuild: into the new index; else: into the live one)
    swap      a rebuild is complete and checked, not yet made live
    swapped   a rebuild is live, the old index (OpenSearch) or build file (SQLite) not yet removed
"""

from __future__ import annotations

import os
import sys
import threading
import time

PHASES = ("extract", "embed", "write", "swap", "swapped")
PAUSE_ENV = "DOCSCTL_PAUSE_AT"
RESUME_ENV = "DOCSCTL_RESUME_FILE"
_held = threading.Lock()
_passed: set[str] = set()  # phases held once already: a resumed run does not stop at the next batch


def checkpoint(phase: str) -> None:
    """Hold the whole run here if DOCSCTL_PAUSE_AT names `phase` (see the module docstring); once only."""
    if os.environ.get(PAUSE_ENV) != phase:
        return
    with _held:
        if phase in _passed:
            return
        _passed.add(phase)
    sys.stderr.write(f"docsctl: paused at {phase} (pid {os.getpid()})\n")
    sys.stderr.flush()
    resume = os.environ.get(RESUME_ENV)
    if not resume:
        threading.Event().wait()  # for good: other threads block on this one's output soon after
    while not os.path.exists(resume):
        time.sleep(0.05)
