"""An armed worker's own nsys session (`nsys launch --session-new=nrlprof-<12 hex>`: named as nrlprof's, so a sweep
can tell it from its own), and whether another process has ended it or stopped its collection. A teardown sweep
that stops every session on a node does both (NeMo RL's vLLM backend lists `nsys sessions list` and stops each one:
the review on NeMo RL #4090): the record of the window it cut says so, and the next window's `nsys start` failing
names it."""

from __future__ import annotations

import os
import shutil
import subprocess

from nrlprof.manifest import Status, WindowRecord

LIST_TIMEOUT_S = 30.0
# A report written this long before the window's stop was written by a stop of another process.
EARLY_S = 0.5
SWEEP = (
    "another process stopped it (a teardown sweep that stops every nsys session on the node does: NeMo RL's vLLM "
    "backend, NeMo RL #4090); sessions nrlprof launched are named nrlprof-<hex>, for such a sweep to leave alone"
)


def session_listed(session: str) -> bool | None:
    """Whether `nsys sessions list` still lists `session`; None where nsys cannot say."""
    nsys = shutil.which("nsys")
    if nsys is None:
        return None
    try:
        done = subprocess.run([nsys, "sessions", "list", "--show-header=false"], capture_output=True, text=True,
                              timeout=LIST_TIMEOUT_S, check=False)  # fmt: skip
    except (OSError, subprocess.SubprocessError):
        return None
    if done.returncode != 0:
        return None
    return any(session in line.split() for line in done.stdout.splitlines())


def gone_message(session: str) -> str:
    return f"the nsys session {session} this worker was launched in is gone: {SWEEP}"


def disturbed(record: WindowRecord, session: str, stopped_at: float) -> WindowRecord:
    """The record of a window of an armed worker, once its stop is done: what another process did to its session, if
    anything (the session gone, or its collection stopped before the window's end)."""
    if record.status not in (Status.OK, Status.MISSING, Status.LATE):
        return record
    listed = session_listed(session)
    if listed is False:
        gone = gone_message(session)
        status = Status.TRUNCATED if record.files else Status.MISSING
        return record.replaced(status=status, message=f"{gone}; {record.message}" if record.message else gone)
    early = [path for path in record.files if _written_before(path, stopped_at - EARLY_S)]
    if early:
        message = (f"the collection in nsys session {session} was stopped before the window's end, its report "
                   f"written then: {SWEEP}")  # fmt: skip
        return record.replaced(status=Status.TRUNCATED, message=message)
    if record.status == Status.MISSING and listed:
        message = (f"{record.message}; the collection in nsys session {session} may have been stopped before the "
                   f"window's capture range began: {SWEEP}")  # fmt: skip
        return record.replaced(message=message)
    return record


def _written_before(path: str, moment: float) -> bool:
    try:
        return os.stat(path).st_mtime < moment
    except OSError:
        return False
