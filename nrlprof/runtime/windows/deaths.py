"""A peer found gone during a window, or before a window's files it was finishing were known to be final: the record
that says which window and how it ended.

The peer cannot say it (SIGKILL, the OOM killer); the process that reaches it writes the record, in its own manifest:
for a tracked worker, with what Ray says of the death (`ActorDiedError`: the pid, the node, the exit detail); for a
worker's child process, whose channel closed, with its pid.
"""

from __future__ import annotations

import re
import socket
from dataclasses import dataclass

from nrlprof.manifest import Status, WindowRecord
from nrlprof.runtime.windows.fanout import OpenWindow

DIED = Status.DIED
MAX_CAUSE_CHARS = 400
_FIELD = re.compile(r"^\s*(pid|ip|class_name|actor_id|name|namespace):\s*(\S*)\s*$")


@dataclass(frozen=True)
class DeathCause:
    pid: int | None
    ip: str
    cause: str


def death_cause(error: BaseException) -> DeathCause:
    """The pid, node and exit detail Ray gives for a dead actor (RayActorError's message), as far as it gives them."""
    text = str(getattr(error, "error_msg", "") or error)
    fields: dict[str, str] = {}
    lines = []
    for line in text.splitlines():
        found = _FIELD.match(line)
        if found:
            fields[found.group(1)] = found.group(2)
        elif line.strip() and "died unexpectedly before finishing this task" not in line:
            lines.append(line.strip())
    pid = fields.get("pid", "")
    cause = " ".join(lines) or type(error).__name__
    if len(cause) > MAX_CAUSE_CHARS:
        cause = cause[: MAX_CAUSE_CHARS - 3] + "..."
    return DeathCause(int(pid) if pid.isdigit() else None, fields.get("ip", ""), cause)


def died_record(
    kind: str,
    worker: str,
    rank: int | None,
    window: OpenWindow,
    death: DeathCause,
    found_at: int | None,
    node_ip: str,
    stopped: bool = False,
) -> WindowRecord:
    """`stopped`: the window had stopped, and its files were being finished beside the worker's next call."""
    if stopped:
        where = "when the job ended" if found_at is None else f"at step {found_at}"
        message = (
            f"the worker died after window {window.window} stopped (found dead {where}): its files are final once "
            "its first call after the stop returns; if it died before, they were not written (a record of its own "
            f"says if they were): {death.cause}"
        )
    else:
        where = "when the window closed" if found_at is None else f"at step {found_at}"
        last = f"; its last step sent was {window.steps[-1]}" if window.steps else ""
        message = f"the worker died during window {window.window} (found dead {where}{last}): {death.cause}"
    host = death.ip if death.ip and death.ip != node_ip else socket.gethostname()
    return _record(kind, worker, rank, window, DIED, message, death.ip or node_ip, host, death.pid)


def child_gone_record(
    kind: str, worker: str, rank: int, window: OpenWindow, pid: int, found_at: int | None, node_ip: str, stopped: bool
) -> WindowRecord:
    """A worker's child process whose channel closed: it exited or was killed in the window (`exited`), or after the
    window stopped and before its files were known to be final (`died`)."""
    if not stopped:
        message = f"the process (pid {pid}) exited or was killed during the window: its file of this window is lost"
        return _record(kind, worker, rank, window, Status.EXITED, message, node_ip, socket.gethostname(), pid)
    where = "when the job ended" if found_at is None else f"at step {found_at}"
    message = (
        f"the process (pid {pid}) died after window {window.window} stopped (found gone {where}), before its files "
        "were known to be final: if they were not, they are lost (a record of its own says if they were)"
    )
    return _record(kind, worker, rank, window, DIED, message, node_ip, socket.gethostname(), pid)


def _record(kind: str, worker: str, rank: int | None, window: OpenWindow, status: Status, message: str, node_ip: str,
            host: str, pid: int | None) -> WindowRecord:  # fmt: skip
    record = WindowRecord(kind, worker, rank, tuple(window.steps), window.window, (), status, message, host, node_ip,
                          started_at=window.started_at)  # fmt: skip
    return record if pid is None else record.replaced(pid=pid)
