"""Named points of a reindex run where a test can hold the process, to kill it exactly there.

With DOCSCTL_PAUSE_AT=<phase> in its environment, a run that reaches <phase> writes
`docsctl: paused at <phase> (pid N)` on stderr and waits until it is killed. tests/reliability/ kill
`docsctl reindex` in each phase this way rather than after a guessed sleep, which on a busy machine
lands in whichever phase happens to be running. Unset (always, outside those tests), a checkpoint
costs one environment lookup.

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

PHASES = ("extract", "embed", "write", "swap", "swapped")
PAUSE_ENV = "DOCSCTL_PAUSE_AT"


def checkpoint(phase: str) -> None:
    """Hold the whole run here, for good, if DOCSCTL_PAUSE_AT names `phase` (see the module docstring)."""
    if os.environ.get(PAUSE_ENV) != phase:
        return
    sys.stderr.write(f"docsctl: paused at {phase} (pid {os.getpid()})\n")
    sys.stderr.flush()
    threading.Event().wait()  # other threads block on this one's output soon after
