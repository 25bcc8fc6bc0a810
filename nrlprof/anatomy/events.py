"""Ray's task events, read from the GCS without the dashboard, as plain records of actor calls.

What Ray gives and keeps, how a read skips what it already recorded, and how a call's two halves of events are
joined (`PROFILE_GRACE_S`, `timed_by: "owner"`): docs/design.md, "Reading Ray's task events".
"""

from __future__ import annotations

import functools
import time
from collections.abc import Callable
from dataclasses import dataclass, field

ACTOR_CREATION_TASK = 1
ACTOR_TASK = 2
SUBMITTED_TO_WORKER = 5
RUNNING = 8
FINISHED = 11
FAILED = 12
TASK_ID_PREFIX = b"\x0a\x18"
TASK_ID_BYTES = 24
DRIVER_TASK_PREFIX = b"\xff" * 20  # a driver's own task id: this, then its job id
# Seconds a call seen with only one process's half of its events is waited for (Ray sends every second).
PROFILE_GRACE_S = 3.0


def fetch_raw_task_events() -> list[bytes]:
    """Every task event the GCS holds, serialized; needs `ray.init()` (no dashboard)."""
    from nrlprof import rayapi

    return rayapi.raw_task_events()


@functools.cache
def _task_events_message():
    """Ray's TaskEvents protobuf class, imported once: an import statement per call cost ~10 us of each."""
    from nrlprof import rayapi

    return rayapi.task_events_message()


def task_key(raw: bytes) -> bytes:
    """The task id of a serialized TaskEvents (its first field), or the whole message if laid out otherwise."""
    if raw[:2] == TASK_ID_PREFIX:
        return raw[2:26]
    return raw


@dataclass
class TaskEventReader:
    """Turns successive GCS reads into records of finished actor calls and actor creations of one job."""

    job_id: bytes
    clock: Callable[[], float] = time.monotonic
    done: set[bytes] = field(default_factory=set)
    waiting: dict[bytes, float] = field(default_factory=dict)  # task id -> when first seen with one half
    pending: int = 0
    fresh: int = 0
    tasks_seen: int = 0  # distinct tasks of this job the reads have seen, since the job began
    owner_timed: int = 0
    held: set[bytes] = field(default_factory=set)
    last_recorded: set[bytes] = field(default_factory=set)  # the calls of the last read that recorded any
    kept_recorded: bool = False  # whether the GCS still holds one of them

    def read(self, raws: list[bytes], final: bool = False) -> list[dict]:
        """Records of the calls that finished since the last read; `pending` counts those still running.

        `final`: the last read, where a call is kept with whatever of its events reached the GCS."""
        records = []
        pending = 0
        seen = set()
        done = self.done
        recorded_now = set()
        for raw in raws:
            key = task_key(raw)
            seen.add(key)
            if key in done:
                continue
            if key[-4:] != self.job_id and len(key) == TASK_ID_BYTES:
                done.add(key)  # another job's task: the task id ends with the job id
                continue
            record, complete = self._parse(raw, key, final)
            if complete:
                done.add(key)
                self.waiting.pop(key, None)
                if record is not None:
                    records.append(record)
                    recorded_now.add(key)
            else:
                pending += 1
        self.pending = pending
        # Keys the GCS no longer holds cannot come back: forget them so a long job's set stays bounded.
        self.done = done & seen
        for key in self.waiting.keys() - seen:
            del self.waiting[key]
        # The GCS lets the least recently updated finished calls go first: while one of the last recorded is
        # held, no call that finished after them was let go.
        self.kept_recorded = not self.last_recorded.isdisjoint(seen)
        if recorded_now:
            self.last_recorded = recorded_now
        # Tasks that reached the GCS since the last read: the rate at which it fills up.
        fresh = seen - self.held
        self.fresh = len(fresh)
        self.tasks_seen += sum(1 for key in fresh if key[-4:] == self.job_id and len(key) == TASK_ID_BYTES)
        self.held = seen
        return records

    def _waited(self, key: bytes, final: bool) -> bool:
        """Whether a call seen with only part of its events has been waited for long enough."""
        now = self.clock()
        first = self.waiting.setdefault(key, now)
        return final or now - first >= PROFILE_GRACE_S

    def _parse(self, raw: bytes, key: bytes, final: bool = False) -> tuple[dict | None, bool]:
        event = _task_events_message().FromString(raw)
        if event.job_id != self.job_id:
            return None, True
        info = event.task_info
        if not event.HasField("task_info"):
            # The worker's events reached the GCS before the owner's (which carry the task info); or the GCS
            # evicted the task and then received its profile events again: kept as it is once waited for.
            if not self._waited(key, final):
                return None, False
            return _from_profile_only(event)
        if info.type not in (ACTOR_TASK, ACTOR_CREATION_TASK):
            return None, True
        states = event.state_updates.state_ts_ns
        ended = FINISHED in states or FAILED in states
        if not ended and not final:
            return None, False  # parsed again at the next read: its span comes with its end
        span, whole = _profile_spans(event)
        if whole is not None and not event.state_updates.node_id and not self._waited(key, final):
            return None, False  # the worker's RUNNING (with its node) comes apart from its spans
        timed_by = "worker"
        if whole is None:
            if not ended or not self._waited(key, final):
                return None, False
            if RUNNING in states:
                span = whole = (states[RUNNING], states.get(FINISHED) or states[FAILED])
            elif FINISHED in states:
                # Only the owner's half came: from submission to the owner seeing the end, on the owner's clock.
                span = whole = (states.get(SUBMITTED_TO_WORKER) or min(states.values()), states[FINISHED])
                timed_by = "owner"
                self.owner_timed += 1
            else:
                return None, True  # failed before any worker ran it: not a call that ran
        class_name, _, method = info.func_or_class_name.rpartition(".")
        record = {
            "actor_id": info.actor_id.hex(),
            "kind": "create" if info.type == ACTOR_CREATION_TASK else "call",
            "class": class_name or info.func_or_class_name,
            "method": method,
            "start_ns": span[0],
            "end_ns": span[1],
            "task_start_ns": whole[0],
            "task_end_ns": whole[1],
            "node_id": event.state_updates.node_id.hex(),
            "pid": event.state_updates.worker_pid,
            "submitted_ns": states.get(SUBMITTED_TO_WORKER, 0),
            "running_ns": states.get(RUNNING, 0),
            "finished_ns": states.get(FINISHED) or states.get(FAILED, 0),
        }
        # Written only where they say something (a long job's tasks.jsonl holds millions of lines): the parent when
        # it is not the driver's own task, a failure, a call timed by its caller.
        if info.parent_task_id != DRIVER_TASK_PREFIX + self.job_id:
            record["parent_task_id"] = info.parent_task_id.hex()
        if FAILED in states:
            record["failed"] = True
        if timed_by != "worker":
            record["timed_by"] = timed_by
        return record, True


def _from_profile_only(event) -> tuple[dict | None, bool]:
    """A record from the `task::Class.method` profile event alone; the actor id is the task id's last 16 bytes."""
    span, whole = _profile_spans(event)
    qualified = next(
        (e.event_name[len("task::") :] for e in event.profile_events.events if e.event_name.startswith("task::")), ""
    )
    if span is None or whole is None or "." not in qualified:
        return None, False
    class_name, _, method = qualified.rpartition(".")
    task_id = event.task_id.hex()
    record = {
        "actor_id": actor_id_of_task(task_id),
        "kind": "create" if task_id.startswith("ff" * 8) else "call",
        "class": class_name,
        "method": method,
        "start_ns": span[0],
        "end_ns": span[1],
        "task_start_ns": whole[0],
        "task_end_ns": whole[1],
        "node_id": "",
        "pid": 0,
        "parent_task_id": "",
        "submitted_ns": 0,
        "running_ns": 0,
        "finished_ns": 0,
    }
    return record, True


def _profile_spans(event) -> tuple[tuple[int, int] | None, tuple[int, int] | None]:
    """(the method body, the whole task): `task:execute` and `task::Class.method`, both stamped by the worker.

    The whole task also holds Ray's argument deserialization before the body and storing the result after;
    the body alone is what an annotated method range inside the worker covers.  (None, None) before they arrive.
    """
    execute = whole = None
    for entry in event.profile_events.events:
        name = entry.event_name
        if name == "task:execute":
            execute = (entry.start_time, entry.end_time)
        elif name.startswith("task::"):
            whole = (entry.start_time, entry.end_time)
    if whole is None:
        return None, None
    return execute or whole, whole


def actor_id_of_task(task_id_hex: str) -> str:
    """The actor id inside a task id: its last 16 bytes."""
    return task_id_hex[-32:]
