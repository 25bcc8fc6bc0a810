"""Step anatomy from the recorded files: per step, the phases of every worker group, idle time, critical path.

Clocks: the driver stamps the steps, and Ray's owner of a call (the driver, for the calls it makes) stamps
its `SUBMITTED_TO_WORKER` and `FINISHED`, with the driver's wall clock; the worker that runs the call stamps
its `RUNNING` and its spans (`task::...`, `task:execute`) with the wall clock of its node.  The driver's
clock is the reference.  Per node, over the calls the driver submitted there: `out` = the smallest
`RUNNING - SUBMITTED` (= offset + forward latency) and `back` = the smallest `FINISHED - end of the task`
(= return latency - offset).  Latencies are not negative, so the node's offset (its clock minus the
driver's) lies in [-back, out]: the model takes the middle, `(out - back) / 2`, and reports the half
width, `(out + back) / 2`, as its bound (`clock_offset_bounds_ms`); the true offset is within it whatever
the latencies are.  The worker-stamped times of that node are moved by the offset.  The driver's node has
offset 0; a node the driver sent no call to keeps its own clock (offset 0, no bound).
"""

from __future__ import annotations

import os
from collections import defaultdict
from pathlib import Path

from nrlprof.anatomy.files import ACTORS_FILE, META_FILE, STEPS_FILE, TASKS_FILE, latest_run, read_lines

NS_PER_MS = 1_000_000
RAY_INTERNAL_PREFIX = "__ray_"


def anatomy_summary(directory: str | os.PathLike) -> dict:
    """`{"steps": {"<n>": {"wall_ms", "phases", "idle_ms", "critical_path"}}, ...}` of the latest run."""
    return build_model(load_run(latest_run(directory)))


def load_run(run: Path) -> dict:
    return {
        "run": str(run),
        "meta": (read_lines(run / META_FILE) or [{}])[0],
        "steps": read_lines(run / STEPS_FILE),
        "actors": read_lines(run / ACTORS_FILE),
        "tasks": read_lines(run / TASKS_FILE),
    }


def build_model(run: dict) -> dict:
    meta = run["meta"]
    tasks = run["tasks"]
    offsets, bounds = clock_offsets(tasks, meta.get("driver_node_id", ""), meta.get("job_id", ""))
    names = worker_names(run["actors"], tasks)
    calls = [call_record(t, names, offsets) for t in tasks if t.get("kind") == "call"]
    calls = [c for c in calls if not c["method"].startswith(RAY_INTERNAL_PREFIX)]
    calls.sort(key=lambda c: c["start"])
    windows = step_windows(run["steps"], calls)
    groups = sorted({name for name, _ in names.values()} | {c["worker"] for c in calls})
    steps = {}
    starts = [w[1] for w in windows]
    by_step: dict[int, list[dict]] = defaultdict(list)
    for call in calls:
        index = _window_index(starts, call["start"])
        if index is not None and call["start"] < windows[index][2]:
            by_step[index].append(call)
    carried: list[dict] = []
    for index, (step, begin, end) in enumerate(windows):
        step_calls = by_step.get(index, [])
        phases = _phases(step_calls, begin)
        overlapping = [c for c in carried if c["end"] > begin] + step_calls
        carried = [c for c in overlapping if c["end"] > end]
        steps[str(step)] = {
            "wall_ms": (end - begin) / NS_PER_MS,
            "phases": [_public(p) for p in phases],
            "idle_ms": _idle_ms(overlapping, groups, begin, end),
            "critical_path": [{"worker": p["worker"], "method": p["method"]} for p in critical_path(phases)],
        }
        own = profiler_time(run["steps"], begin, end)
        if own is not None:
            steps[str(step)]["profiler"] = own
    return {
        "run": run.get("run"),
        "steps": steps,
        "workers": {g: sorted({r for n, r in names.values() if n == g}) for g in groups},
        "clock_offsets_ms": {node: off / NS_PER_MS for node, off in sorted(offsets.items())},
        "clock_offset_bounds_ms": {node: bound / NS_PER_MS for node, bound in sorted(bounds.items())},
    }


def clock_offsets(tasks: list[dict], driver_node: str, job_id: str) -> tuple[dict[str, int], dict[str, int]]:
    """Per node, its wall clock minus the driver's (ns) and the bound on that estimate's error (ns)."""
    driver_task = "ff" * 20 + job_id
    out: dict[str, int] = {}
    back: dict[str, int] = {}
    for task in tasks:
        node = task.get("node_id", "")
        if task.get("parent_task_id") != driver_task or not node:
            continue  # not the driver's call, or its worker's node unknown (an actor's creation can lack it)
        submitted, running = task.get("submitted_ns") or 0, task.get("running_ns") or 0
        finished, ended = task.get("finished_ns") or 0, task.get("task_end_ns") or 0
        if submitted and running:
            out[node] = min(out.get(node, running - submitted), running - submitted)
        if finished and ended:
            back[node] = min(back.get(node, finished - ended), finished - ended)
    offsets = {node: 0 for node in out.keys() | back.keys()}
    bounds: dict[str, int] = {}
    for node in out.keys() & back.keys():
        if node != driver_node:
            offsets[node] = (out[node] - back[node]) // 2
            bounds[node] = (out[node] + back[node] + 1) // 2
        else:
            bounds[node] = 0
    return offsets, bounds


def worker_names(actors: list[dict], tasks: list[dict]) -> dict[str, tuple[str, int]]:
    """actor id -> (worker, rank): the driver's names; actors created inside workers under `<parent>.<child>`."""
    from nrlprof.workers.identity import snake_case

    names: dict[str, tuple[str, int]] = {a["actor_id"]: (a["worker"], int(a["rank"])) for a in actors}
    creations = sorted((t for t in tasks if t.get("kind") == "create"), key=lambda t: t["start_ns"])
    taken: dict[str, set[int]] = defaultdict(set)
    for worker, rank in names.values():
        taken[worker].add(rank)
    by_id = {t["actor_id"]: t for t in creations}

    def resolve(actor_id: str, depth: int = 0) -> tuple[str, int]:
        if actor_id in names:
            return names[actor_id]
        task = by_id.get(actor_id)
        class_name = task["class"] if task else "unknown"
        parent_actor = (task or {}).get("parent_task_id", "")[-32:]
        if task and depth < 16 and parent_actor in by_id.keys() | names.keys():
            # As nrlprof names a profiled worker's children: under the parent, ranked within that parent.
            name = f"{resolve(parent_actor, depth + 1)[0]}.{snake_case(class_name)}"
            counter = f"{name}@{parent_actor}"
        else:
            name = counter = snake_case(class_name)
        rank = 0
        while rank in taken[counter]:
            rank += 1
        taken[counter].add(rank)
        names[actor_id] = (name, rank)
        return names[actor_id]

    for task in creations:
        resolve(task["actor_id"])
    for task in tasks:
        if task["actor_id"] not in names:
            resolve(task["actor_id"])
    return names


def step_windows(marks: list[dict], calls: list[dict]) -> list[tuple[int, int, int]]:
    """(step, start ns, end ns): from one `nrlprof.step(n)` to the next; the last to `finish()`."""
    ordered = sorted((m for m in marks if "step" in m), key=lambda m: m["t_ns"])
    finish = next((m["t_ns"] for m in marks if m.get("finish")), None)
    distinct: list[tuple[int, int]] = []
    for mark in ordered:
        if not distinct or distinct[-1][0] != mark["step"]:
            distinct.append((int(mark["step"]), int(mark["t_ns"])))
    windows = []
    for index, (step, start) in enumerate(distinct):
        if index + 1 < len(distinct):
            end = distinct[index + 1][1]
        elif finish is not None:
            end = int(finish)
        else:
            end = max((c["end"] for c in calls if c["start"] >= start), default=start)
        windows.append((step, start, end))
    return windows


def profiler_time(marks: list[dict], begin: int, end: int) -> dict | None:
    """nrlprof's own window work in the driver that began within [begin, end): `{"start_ms", "ms", "actions"}`."""
    own = sorted((m for m in marks if "profiler" in m and begin <= m["start_ns"] < end), key=lambda m: m["start_ns"])
    if not own:
        return None
    return {
        "start_ms": (own[0]["start_ns"] - begin) / NS_PER_MS,
        "ms": sum(m["end_ns"] - m["start_ns"] for m in own) / NS_PER_MS,
        "actions": ", ".join(m["profiler"] for m in own),
    }


def _window_index(starts: list[int], t: int) -> int | None:
    import bisect

    index = bisect.bisect_right(starts, t) - 1
    return index if index >= 0 else None


def call_record(task: dict, names: dict[str, tuple[str, int]], offsets: dict[str, int]) -> dict:
    offset = offsets.get(task.get("node_id", ""), 0)
    worker, rank = names[task["actor_id"]]
    return {
        "worker": worker,
        "rank": rank,
        "actor_id": task["actor_id"],
        "method": task["method"],
        "start": int(task["start_ns"]) - offset,
        "end": int(task["end_ns"]) - offset,
        "node_id": task.get("node_id", ""),
        "pid": task.get("pid"),
        "failed": bool(task.get("failed")),
    }


def _phases(calls: list[dict], step_start: int) -> list[dict]:
    grouped: dict[tuple[str, str], list[dict]] = defaultdict(list)
    for call in calls:
        grouped[(call["worker"], call["method"])].append(call)
    phases = []
    for (worker, method), members in grouped.items():
        first, last = min(c["start"] for c in members), max(c["end"] for c in members)
        per_rank: dict[int, list[int]] = {}
        for call in members:
            span = per_rank.setdefault(call["rank"], [call["start"], call["end"]])
            span[0], span[1] = min(span[0], call["start"]), max(span[1], call["end"])
        durations = {rank: end - start for rank, (start, end) in per_rank.items()}
        slowest = max(sorted(durations), key=lambda r: durations[r])
        phases.append(
            {
                "worker": worker,
                "method": method,
                "start_ms": (first - step_start) / NS_PER_MS,
                "dur_ms": (last - first) / NS_PER_MS,
                "calls": len(members),
                "ranks": sorted(per_rank),
                "slowest_rank": slowest,
                "spread_ms": (durations[slowest] - min(durations.values())) / NS_PER_MS,
                "_start": first,
                "_end": last,
            }
        )
    phases.sort(key=lambda p: (p["_start"], p["worker"], p["method"]))
    return phases


def _public(phase: dict) -> dict:
    return {k: v for k, v in phase.items() if not k.startswith("_")}


def critical_path(phases: list[dict]) -> list[dict]:
    """From the phase that ends last, back through the phase that ended last before each one started."""
    if not phases:
        return []
    current = max(phases, key=lambda p: (p["_end"], -p["_start"]))
    path = [current]
    while True:
        before = [p for p in phases if p["_end"] <= current["_start"]]
        if not before:
            break
        current = max(before, key=lambda p: (p["_end"], -p["_start"]))
        path.append(current)
    return path[::-1]


def _idle_ms(calls: list[dict], groups: list[str], begin: int, end: int) -> dict[str, float]:
    """Per worker group, the step's time in which none of its actors ran a method."""
    spans: dict[str, list[tuple[int, int]]] = defaultdict(list)
    for call in calls:
        spans[call["worker"]].append((max(call["start"], begin), min(call["end"], end)))
    idle = {}
    for group in groups:
        busy = 0
        covered_to = begin
        for start, stop in sorted(spans.get(group, ())):
            if stop <= covered_to:
                continue
            busy += stop - max(start, covered_to)
            covered_to = stop
        idle[group] = (end - begin - busy) / NS_PER_MS
    return idle
