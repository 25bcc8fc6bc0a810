"""A matched worker ends a process it started: the child's open windows close first, so its files are written.

`multiprocessing`'s `terminate()` and `kill()`, `subprocess.Popen`'s, and psutil's all signal through `os.kill`:
one patch, in the worker only, sees them all. Signals that do not end a process pass untouched.
"""

from __future__ import annotations

import os
import signal
from collections.abc import Callable
from typing import TYPE_CHECKING

from nrlprof.log import logger
from nrlprof.process import patches, state
from nrlprof.runtime.windows.dispatch import written_child_records

if TYPE_CHECKING:
    from nrlprof.runtime.profiled import ProfiledProcess

PATCH_NAME = "os.kill (a child's windows closed first)"
ENDING_SIGNALS = frozenset(
    {signal.SIGTERM, signal.SIGKILL, signal.SIGINT, signal.SIGQUIT, signal.SIGHUP, signal.SIGABRT}
)


def install(session: ProfiledProcess) -> None:
    patches.install(PATCH_NAME, os, "kill", lambda original: _closing_first(original, session))


def _closing_first(original: Callable[[int, int], None], session: ProfiledProcess) -> Callable[[int, int], None]:
    def kill(pid: int, signal_number: int, /) -> None:
        if signal_number in ENDING_SIGNALS and state.session is session and session.children is not None:
            try:
                close_child_windows(session, pid)
            except Exception as err:  # the worker's own call goes on whatever happens here
                logger.error("closing the windows of process %d before it is ended failed: %s", pid, err)
        return original(pid, signal_number)

    return kill


def close_child_windows(session: ProfiledProcess, pid: int) -> None:
    released = session.children.release(pid)
    if released is None:
        return
    records = released.records + written_child_records(session, released.unwritten)
    if records:
        logger.info(
            "child process '%s' (pid %d) of worker '%s': its window closed before the worker ended it; files: %s",
            records[0].worker,
            pid,
            session.children.worker_name,
            ", ".join(f for r in records for f in r.files) or "none",
        )
