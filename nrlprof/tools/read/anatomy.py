"""Reading a step-anatomy run: where its directories are, and its calls, named and on the driver's clock.

Clocks: the driver stamps the steps, and Ray's owner of a call (the driver, for the calls it makes) stamps
its `SUBMITTED_TO_WORKER` and `FINISHED`, with the driver's wall clock; the worker that runs the call stamps
its `RUNNING` and its spans (`task::...`, `task:execute`) with the wall clock of its node.  The driver's
clock is the reference.  Per node, over the calls the driver submitted there: `out` = the smallest
`RUNNING - SUBMITTED` (= offset + forward latency) and `back` = the smallest `FINISHED - end of the task`
(= return latency - offset).  Latencies are not negative, so the node's offset (its clock minus the
driver's) lies in [-back, out]: the reading takes the middle, `(out - back) / 2`, and reports the half
width, `(out + back) / 2`, as its bound (`clock_offset_bounds_ms`); the true offset is within it whatever
the latencies are.  The worker-stamped times of that node are moved by the offset.  The driver's node has
offset 0; a node the driver sent no call to keeps its own clock (offset 0, no bound).
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Mapping
from pathlib import Path

from nrlprof.anatomy.files import (
    ACTORS_FILE,
    GAPS_FILE,
    META_FILE,
    STEPS_FILE,
    TASKS_FILE,
    read_lines,
    run_directories,
)
from nrlprof.errors import ToolError

NS_PER_MS = 1_000_000
RAY_INTERNAL_PREFIX = "__ray_"


def anatomy_runs(directory: Path, anatomy_dirs: list[Path]) -> list[Path]:
    """Step-anatomy runs directly in `directory`, in its `step_anatomy/`, or in any `step_anatomy/` below it.

    `anatomy_dirs`: the directories named `step_anatomy` found under the inputs (tools.read.inputs).
    """
    try:
        runs = run_directories(directory)
    except ToolError:
        return []
    if runs:
        return runs
    for child in (d for d in anatomy_dirs if d.is_relative_to(directory)):
        runs = run_directories(child)
        if runs:
            return runs
    return []


def load_run(run: Path) -> dict:
    return {
        "run": str(run),
        "meta": (read_lines(run / META_FILE) or [{}])[0],
        "steps": read_lines(run / STEPS_FILE),
        "actors": read_lines(run / ACTORS_FILE),
        "tasks": read_lines(run / TASKS_FILE),
        "gaps": read_lines(run / GAPS_FILE),
    }


def clock_offsets(tasks: list[dict], driver_node: str, job_id: str) -> tuple[dict[str, int], dict[str, int]]:
    """Per node, its wall clock minus the driver's (ns) and the bound on that estimate's error (ns)."""
    driver_task = "ff" * 20 + job_id
    out: dict[str, int] = {}
    back: dict[str, int] = {}
    for task in tasks:
        node = task.get("node_id", "")
        if task.get("parent_task_id", driver_task) != driver_task or not node:  # written only when not the driver
            continue  # not the driver's call, or its worker's node unknown (an actor's creation can lack it)
        submitted, running = task.get("submitted_ns") or 0, task.get("running_ns") or 0
        finished, ended = task.get("finished_ns") or 0, task.get("task_end_ns") or 0
        if submitted and running:
            out[node] = min(out.get(node, running - submitted), running - submitted)
        if finished and ended:
            back[node] = min(back.get(node, finished - ended), finished - ended)
    return offsets_from_latencies(out, back, driver_node)


def offsets_from_latencies(
    out: dict[str, int], back: dict[str, int], driver_node: str
) -> tuple[dict[str, int], dict[str, int]]:
    """Per node, its offset (the middle of [-back, out]) and the bound on its error, from the least latencies the
    driver's calls there showed (out: RUNNING - SUBMITTED; back: FINISHED - end of the task)."""
    offsets = {node: 0 for node in out.keys() | back.keys()}
    bounds: dict[str, int] = {}
    for node in out.keys() & back.keys():
        if node != driver_node:
            offsets[node] = (out[node] - back[node]) // 2
            bounds[node] = (out[node] + back[node] + 1) // 2
        else:
            bounds[node] = 0
    return offsets, bounds


# pid -> (worker, rank) of the processes that wrote profiler files (manifests, traces, reports)
ProfiledNames = Mapping[int, tuple[str, "int | None"]]
ProfiledProcess = tuple["str | None", "int | None", str, "int | None"]  # host, pid, worker, rank


def profiled_names(processes: Iterable[ProfiledProcess]) -> dict[int, tuple[str, int | None]]:
    """pid -> (worker, rank) from (host, pid, worker, rank) of processes that wrote profiler files; a pid two
    hosts share, or that two names claim, is left out (the step anatomy knows a worker's node, not its host)."""
    found: dict[int, set[tuple[str | None, str, int | None]]] = defaultdict(set)
    for host, pid, worker, rank in processes:
        if isinstance(pid, int) and worker:
            found[pid].add((host, worker, rank))
    names = {}
    for pid, claims in found.items():
        if len({(w, r) for _, w, r in claims}) == 1 and len({h for h, _, _ in claims} - {None}) <= 1:
            _, worker, rank = next(iter(claims))
            names[pid] = (worker, rank)
    return names


def worker_names(
    actors: list[dict], tasks: list[dict], profiled: ProfiledNames | None = None
) -> dict[str, tuple[str, int]]:
    """actor id -> (worker, rank): the driver's names; actors created inside workers under `<parent>.<child>`.

    `profiled`: the names of the processes that wrote profiler files (`profiled_names`). An actor whose process
    is one of them takes the name (and rank) its files carry, and so do the others the anatomy grouped with it:
    a child a pattern matched itself keeps its own name, as nrlprof names it when it profiles it.
    """
    names = _anatomy_names(actors, tasks)
    return _as_profiled(names, tasks, profiled) if profiled else names


def _as_profiled(
    names: dict[str, tuple[str, int]], tasks: list[dict], profiled: ProfiledNames
) -> dict[str, tuple[str, int]]:
    pids = {t["actor_id"]: t["pid"] for t in tasks if isinstance(t.get("pid"), int) and t.get("actor_id") in names}
    joined = {actor for actor, pid in pids.items() if pid in profiled}
    renamed: dict[str, str] = {}  # anatomy name -> the files' name
    result = dict(names)
    for actor in sorted(joined):
        worker, rank = profiled[pids[actor]]
        renamed.setdefault(names[actor][0], worker)
        result[actor] = (worker, names[actor][1] if rank is None else rank)
    for actor, (name, rank) in names.items():
        if actor not in joined and name in renamed:
            result[actor] = (renamed[name], rank)
    return result


def _anatomy_names(actors: list[dict], tasks: list[dict]) -> dict[str, tuple[str, int]]:
    from nrlprof.workers.identity import snake_case

    names: dict[str, tuple[str, int]] = {a["actor_id"]: (a["worker"], int(a["rank"])) for a in actors}
    creations = sorted((t for t in tasks if t.get("kind") == "create"), key=lambda t: t["start_ns"])
    taken: dict[str, set[int]] = defaultdict(set)
    for worker, rank in names.values():
        taken[worker].add(rank)
    by_id = {t["actor_id"]: t for t in creations}
    # An actor whose creation the reads never saw (created before a controller actor's recorder began) is named
    # by the class its calls carry.
    classes: dict[str, str] = {}
    for task in tasks:
        if task.get("class"):
            classes.setdefault(task["actor_id"], task["class"])

    def resolve(actor_id: str, depth: int = 0) -> tuple[str, int]:
        if actor_id in names:
            return names[actor_id]
        task = by_id.get(actor_id)
        class_name = task["class"] if task else classes.get(actor_id, "unknown")
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


def step_marks(marks: list[dict]) -> tuple[list[tuple[int, int]], int | None]:
    """(step, wall-clock ns) of each distinct `nrlprof.step(n)` in time order, and the `finish()` mark's ns."""
    ordered = sorted((m for m in marks if "step" in m), key=lambda m: m["t_ns"])
    finish = next((m["t_ns"] for m in marks if m.get("finish")), None)
    distinct: list[tuple[int, int]] = []
    for mark in ordered:
        if not distinct or distinct[-1][0] != mark["step"]:
            distinct.append((int(mark["step"]), int(mark["t_ns"])))
    return distinct, None if finish is None else int(finish)


def step_windows(marks: list[dict], calls: list[dict]) -> list[tuple[int, int, int]]:
    """(step, start ns, end ns): from one `nrlprof.step(n)` to the next; the last to `finish()`."""
    distinct, finish = step_marks(marks)
    windows = []
    for index, (step, start) in enumerate(distinct):
        if index + 1 < len(distinct):
            end = distinct[index + 1][1]
        elif finish is not None:
            end = finish
        else:
            end = max((c["end"] for c in calls if c["start"] >= start), default=start)
        windows.append((step, start, end))
    return windows


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
