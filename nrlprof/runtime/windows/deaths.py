"""A tracked worker found dead during a window, or before a window's files it was finishing were known to be final:
the record that says which window and how it died.

The worker cannot say it (SIGKILL, the OOM killer); the process that tracks it writes the record, in its own
manifest, with what Ray says of the death (`ActorDiedError`: the pid, the node, the exit detail).
"""

from __future__ import annotations

import re
import socket
from dataclasses import dataclass

from nrlprof.manifest import WindowRecord

DIED = "died"
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


@dataclass
class OpenWindow:
    """A window as the actions sent to a worker opened it: its label, the steps sent, when it began."""

    window: str
    steps: list[int]
    started_at: float


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
    record = WindowRecord(
        backend=kind,
        worker=worker,
        rank=rank,
        steps=list(window.steps),
        window=window.window,
        status=DIED,
        message=message,
        node_ip=death.ip or node_ip,
        started_at=window.started_at,
    )
    if death.pid is not None:
        record.pid = death.pid
    if death.ip and death.ip != node_ip:
        record.host = death.ip
    else:
        record.host = socket.gethostname()
    return record
