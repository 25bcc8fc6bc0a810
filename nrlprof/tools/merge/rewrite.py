"""How merge rewrites each input's events: new pids per process, timestamps on one clock, distinct ids.

- processes get new integer pids, one block of PID_BLOCK per (host, pid, rank, worker) group; within
  a block, slots are derived from the original pid alone, so any process rewriting an input agrees;
- flow ids (`id`) and `args.correlation` / `args["External id"]` of the i-th input move up by i * ID_STRIDE;
  ids that are not integers in [0, ID_STRIDE) become strings prefixed `<i>:`.
"""

from __future__ import annotations

import json
import zlib
from typing import Any, Protocol

from nrlprof.layout import PROFILER_STEP_PREFIX, step_number
from nrlprof.tools.read.traces import is_number

ID_STRIDE = 1 << 40
PID_BLOCK = 100_000
_KNOWN_PIDS = {"Spans": 1001, "Traces": 1002, "": 1003}  # the string pids kineto writes


class RewriteTask(Protocol):
    """What a rewriter needs to know about its input."""

    index: int
    group: int
    label: str
    main_pid: int | None
    ts_offset: float
    collect_steps: bool


def pid_slot(original: Any, main_pid: int | None) -> int:
    """Where an original pid goes in its input's block of PID_BLOCK pids: the same in every process."""
    if original == main_pid:
        return 0
    if isinstance(original, int) and 0 <= original < 1000:  # kineto's GPU rows: pid = device index
        return 1 + original
    if isinstance(original, str) and original in _KNOWN_PIDS:
        return _KNOWN_PIDS[original]
    return 1100 + zlib.crc32(repr(original).encode()) % (PID_BLOCK - 1100)


def hashable(value: Any) -> Any:
    return value if isinstance(value, (int, str, float, type(None))) else json.dumps(value, sort_keys=True)


class TraceRewriter:
    """Rewrites one torch trace's events in place: pid, ts, ids; counts them; names the new pids."""

    def __init__(self, task: RewriteTask) -> None:
        self.base_pid = PID_BLOCK * (task.group + 1)
        self.label = task.label
        self.main_pid = task.main_pid
        self.ts_offset = task.ts_offset
        self.id_offset = task.index * ID_STRIDE
        self.id_prefix = f"{task.index}:"
        self.pid_map: dict[Any, int] = {}
        self.names: dict[int, str] = {}
        self.count = 0
        # ProfilerStep#<n> -> (start, end) on the merged clock, kept only when memory counters need them
        self.step_ends: dict[int, tuple[float, float]] | None = {} if task.collect_steps else None

    def _pid(self, original: Any) -> int:
        key = hashable(original)
        if self.main_pid is None and isinstance(key, int):
            self.main_pid = key
        pid = self.base_pid + pid_slot(key, self.main_pid)
        self.names[pid] = self.label if pid == self.base_pid else f"{self.label} [{key if key != '' else 'no pid'}]"
        if key is original:
            self.pid_map[key] = pid
        return pid

    def _shift(self, value: Any) -> Any:
        if value.__class__ is int and 0 <= value < ID_STRIDE:
            return value + self.id_offset
        return value if value is None else self.id_prefix + str(value)

    def rewrite(self, events: list[dict[str, Any]]) -> None:
        # The hot loop of a merge: plain small ints take the inline path, anything else goes through _shift.
        pid_map, ts_offset, offset, shift = self.pid_map, self.ts_offset, self.id_offset, self._shift
        for event in events:
            try:
                event["pid"] = pid_map[event["pid"]]
            except (KeyError, TypeError):
                if "pid" in event:
                    event["pid"] = self._pid(event["pid"])
            if ts_offset:
                ts = event.get("ts")
                if ts.__class__ is float or ts.__class__ is int:
                    event["ts"] = ts + ts_offset
            args = event.get("args")
            if args.__class__ is not dict:
                if "id" in event:
                    value = event["id"]
                    event["id"] = value + offset if value.__class__ is int and 0 <= value < ID_STRIDE else shift(value)
                continue
            value = args.get("External id")
            if value is not None:
                args["External id"] = (
                    value + offset if value.__class__ is int and 0 <= value < ID_STRIDE else shift(value)
                )
            value = args.get("correlation")
            if value is not None:
                args["correlation"] = (
                    value + offset if value.__class__ is int and 0 <= value < ID_STRIDE else shift(value)
                )
            if "id" in event:
                event["id"] = shift(event["id"])
            if event.get("ph") == "M":
                self._metadata(event, args)
        self.count += len(events)
        if self.step_ends is not None:
            self._collect_steps(events)

    def _collect_steps(self, events: list[dict[str, Any]]) -> None:
        for event in events:
            name = event.get("name")
            if name.__class__ is str and name.startswith(PROFILER_STEP_PREFIX) and event.get("ph") == "X":
                step, ts, dur = step_number(name, PROFILER_STEP_PREFIX), event.get("ts"), event.get("dur")
                if step is not None and is_number(ts) and is_number(dur):
                    start, end = self.step_ends.get(step, (ts, ts + dur))
                    self.step_ends[step] = (min(start, ts), max(end, ts + dur))

    def _metadata(self, event: dict[str, Any], args: dict[str, Any]) -> None:
        if "pid" not in event:
            return
        if event.get("name") == "process_name":
            args["name"] = self.names.get(event["pid"], self.label)
        elif event.get("name") == "process_sort_index":
            args["sort_index"] = event["pid"]


class RayRewriter:
    """Ray's timeline: epoch-microsecond timestamps onto the merged origin, its nodes as processes."""

    def __init__(self, ts_offset: float, base_pid: int) -> None:
        self.ts_offset = ts_offset
        self.base_pid = base_pid
        self.names: dict[int, str] = {}
        self.count = 0

    def rewrite(self, events: list[dict[str, Any]]) -> None:
        for event in events:
            if "pid" in event:
                original = hashable(event["pid"])
                pid = event["pid"] = self.base_pid + pid_slot(original, None)
                self.names.setdefault(pid, f"ray [{original}]")
            ts = event.get("ts")
            if isinstance(ts, (int, float)):
                event["ts"] = ts + self.ts_offset
            args = event.get("args")
            if event.get("ph") == "M" and event.get("name") == "process_name" and isinstance(args, dict):
                args["name"] = self.names[event["pid"]] = f"ray: {args.get('name', '')}"
        self.count += len(events)
