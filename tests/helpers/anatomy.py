"""Step-anatomy records written by hand: one job whose driver runs on one node, actor calls timed in ms from T0,
and a second node whose clock is ahead."""

from __future__ import annotations

MS = 1_000_000
T0 = 1_700_000_000_000 * MS // 1000  # an epoch time in ns
JOB = "01000000"
DRIVER_TASK = "ff" * 20 + JOB
DRIVER_NODE, OTHER_NODE = "aa" * 28, "bb" * 28
OTHER_CLOCK_AHEAD_MS = 50


def actor_id(n: int) -> str:
    return f"{n:024x}{JOB}"


def call(actor: int, method: str, start_ms: float, end_ms: float, node: str = DRIVER_NODE) -> dict:
    shift = OTHER_CLOCK_AHEAD_MS * MS if node == OTHER_NODE else 0
    start, end = T0 + int(start_ms * MS) + shift, T0 + int(end_ms * MS) + shift
    return {
        "task_id": f"{actor:016x}" + actor_id(actor),
        "actor_id": actor_id(actor),
        "kind": "call",
        "class": "X",
        "method": method,
        "start_ns": start,
        "end_ns": end,
        "task_start_ns": start,
        "task_end_ns": end,
        "node_id": node,
        "pid": 1,
        "parent_task_id": DRIVER_TASK,
        # Submitted 1 ms before it ran, by the driver's clock.
        "submitted_ns": T0 + int(start_ms * MS) - MS,
        "running_ns": start,
        # Its reply seen 1 ms after it ended, by the driver's clock.
        "finished_ns": T0 + int(end_ms * MS) + MS,
        "failed": False,
    }
