"""The recorded calls as Chrome-trace spans, one process per worker group and one thread per rank, for merge."""

from __future__ import annotations

import os
from pathlib import Path

from nrlprof.anatomy.files import latest_run
from nrlprof.tools.read.anatomy import (
    NS_PER_MS,
    RAY_INTERNAL_PREFIX,
    ProfiledNames,
    anatomy_runs,
    call_record,
    clock_offsets,
    load_run,
    step_windows,
    worker_names,
)

PROCESS_PREFIX = "anatomy: "
STEPS_PROCESS = "anatomy: driver steps"


def anatomy_trace_events(directory: str | os.PathLike, profiled: ProfiledNames | None = None) -> list[dict]:
    """`ph: X` spans in µs since the epoch (driver clock): each call, and each step on a driver track.

    `profiled`: the names of the processes that wrote profiler files (read.anatomy.profiled_names)."""
    run = load_run(latest_run(directory))
    meta = run["meta"]
    offsets, _ = clock_offsets(run["tasks"], meta.get("driver_node_id", ""), meta.get("job_id", ""))
    names = worker_names(run["actors"], run["tasks"], profiled)
    calls = [call_record(t, names, offsets) for t in run["tasks"] if t.get("kind") == "call"]
    calls = [c for c in calls if not c["method"].startswith(RAY_INTERNAL_PREFIX)]
    windows = step_windows(run["steps"], calls)
    groups = sorted({c["worker"] for c in calls})
    pids = {group: index + 1 for index, group in enumerate(groups)}
    steps_pid = len(groups) + 1
    events: list[dict] = []
    for group, pid in pids.items():
        events.append(
            {"ph": "M", "name": "process_name", "pid": pid, "tid": 0, "args": {"name": PROCESS_PREFIX + group}}
        )
    for worker, rank in sorted({(c["worker"], c["rank"]) for c in calls}):
        label = {"name": f"rank {rank}"}
        events.append({"ph": "M", "name": "thread_name", "pid": pids[worker], "tid": rank, "args": label})
    events.append({"ph": "M", "name": "process_name", "pid": steps_pid, "tid": 0, "args": {"name": STEPS_PROCESS}})
    starts = [w[1] for w in windows]
    for call in calls:
        step = _step_of(starts, windows, call["start"])
        name = f"{call['worker']}.{call['method']}" + (f" [step {step}]" if step is not None else "")
        args = {"worker": call["worker"], "rank": call["rank"], "step": step, "pid": call["pid"]}
        events.append(_span(name, pids[call["worker"]], call["rank"], call["start"], call["end"], args))
    for step, begin, end in windows:
        args = {"step": step, "wall_ms": (end - begin) / NS_PER_MS}
        events.append(_span(f"step {step}", steps_pid, 0, begin, end, args))
    for mark in run["steps"]:
        if "profiler" in mark:  # nrlprof's own window work in the driver, under the steps
            name, args = f"nrlprof: {mark['profiler']}", {"at_step": mark.get("at_step")}
            events.append(_span(name, steps_pid, 1, mark["start_ns"], mark["end_ns"], args))
    return events


def _span(name: str, pid: int, tid: int, start_ns: int, end_ns: int, args: dict) -> dict:
    """A complete event of the anatomy, its times in µs."""
    times = {"ts": start_ns / 1000, "dur": (end_ns - start_ns) / 1000}
    return {"ph": "X", "cat": "step_anatomy", "name": name, "pid": pid, "tid": tid, **times, "args": args}


def _step_of(starts: list[int], windows: list[tuple[int, int, int]], t: int) -> int | None:
    import bisect

    index = bisect.bisect_right(starts, t) - 1
    if index < 0 or t >= windows[index][2]:
        return None
    return windows[index][0]


def find_anatomy_run(inputs: list[Path], anatomy_dirs: list[Path]) -> Path | None:
    """The latest step-anatomy run under the inputs (the first input directory that holds one).

    `anatomy_dirs`: the directories named `step_anatomy` found under the inputs (tools.read.inputs).
    """
    for directory in (Path(p) for p in inputs if Path(p).is_dir()):
        runs = anatomy_runs(directory, anatomy_dirs)
        if runs:
            return runs[-1]
    return None
