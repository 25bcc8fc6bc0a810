"""Kineto's thread complaint at the first torch profiler start of a process, kept out of the job's log.

torch registers itself with Kineto (`registerClient`) on the thread that loads it, and Kineto, initialised at
the first profiler start, prints "ERROR: External init callback must run in same thread as registerClient"
straight to file descriptor 2 when that start runs on another thread. nrlprof starts its windows on its own
thread in the processes a worker starts (vLLM's EngineCore and VllmWorker-0) and on Ray's threads in threaded
actors, so each such process printed it once. The complaint is harmless: the callback it skips is empty in
torch, and the trace is complete.

The first start of a process off its main thread runs with descriptor 2 sent to a temporary file; what other
threads wrote meanwhile is written back after it, less that one line.
"""

from __future__ import annotations

import contextlib
import os
import sys
import tempfile
import threading
from collections.abc import Iterator
from typing import IO

THREAD_COMPLAINT = b"External init callback must run in same thread as registerClient"
STDERR_FD = 2

_started_once = False


@contextlib.contextmanager
def without_thread_complaint() -> Iterator[None]:
    """Around a torch profiler start: the first one of the process, off the main thread, prints no complaint."""
    global _started_once
    if _started_once or threading.current_thread() is threading.main_thread():
        _started_once = True
        yield
        return
    _started_once = True
    held = _hold_stderr()
    if held is None:
        yield
        return
    file, saved = held
    try:
        yield
    finally:
        with contextlib.suppress(Exception):
            sys.stderr.flush()
        os.dup2(saved, STDERR_FD)
        os.close(saved)
        with file:
            _write_back(file)


def _hold_stderr() -> tuple[IO[bytes], int] | None:
    """Descriptor 2 sent to a new temporary file; the file and a copy of the descriptor it was. None: not done."""
    with contextlib.suppress(Exception):
        sys.stderr.flush()
    try:
        file = tempfile.TemporaryFile()  # noqa: SIM115 (closed by the caller, after the start)
    except OSError:
        return None
    try:
        saved = os.dup(STDERR_FD)
    except OSError:
        file.close()
        return None
    try:
        os.dup2(file.fileno(), STDERR_FD)
    except OSError:
        os.close(saved)
        file.close()
        return None
    return file, saved


def _write_back(held: IO[bytes]) -> None:
    """What the descriptor received meanwhile, back to it, without the complaint."""
    held.seek(0)
    kept = b"".join(line for line in held.read().splitlines(keepends=True) if THREAD_COMPLAINT not in line)
    view = memoryview(kept)
    with contextlib.suppress(OSError):
        while view:
            view = view[os.write(STDERR_FD, view) :]
