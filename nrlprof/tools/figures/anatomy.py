"""The step anatomy's figures: per step, the phases of every worker group, idle time, critical path; growth, diff.

The calls come from tools.read.anatomy, on the driver's clock.
"""

from __future__ import annotations

import os
from collections import defaultdict

from nrlprof.anatomy.files import latest_run
from nrlprof.config.steps import StepSelection
from nrlprof.tools.read.anatomy import (
    NS_PER_MS,
    RAY_INTERNAL_PREFIX,
    ProfiledNames,
    call_record,
    clock_offsets,
    load_run,
    step_windows,
    worker_names,
)

GROWTH_MIN_STEPS = 3  # steps a phase must run in for its growth to be judged


def anatomy_summary(directory: str | os.PathLike, profiled: ProfiledNames | None = None) -> dict:
    """`{"steps": {"<n>": {"wall_ms", "phases", "idle_ms", "critical_path"}}, ...}` of the latest run.

    `profiled`: the names of the processes that wrote profiler files (read.anatomy.profiled_names), which the
    workers of those processes take here too."""
    return build_model(load_run(latest_run(directory)), profiled)


def build_model(run: dict, profiled: ProfiledNames | None = None) -> dict:
    meta = run["meta"]
    tasks = run["tasks"]
    offsets, bounds = clock_offsets(tasks, meta.get("driver_node_id", ""), meta.get("job_id", ""))
    names = worker_names(run["actors"], tasks, profiled)
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
        "incomplete_steps": incomplete_steps(windows, run.get("gaps", [])),
        "lost_calls": lost_calls(run.get("gaps", [])),
        "workers": {g: sorted({r for n, r in names.values() if n == g}) for g in groups},
        "clock_offsets_ms": {node: off / NS_PER_MS for node, off in sorted(offsets.items())},
        "clock_offset_bounds_ms": {node: bound / NS_PER_MS for node, bound in sorted(bounds.items())},
    }


def incomplete_steps(windows: list[tuple[int, int, int]], gaps: list[dict]) -> list[int]:
    """The steps that overlap a time in which Ray's GCS, full, may have let calls go before they were read."""
    spans = [(int(g.get("since_ns") or 0), int(g["at_ns"])) for g in gaps if "at_ns" in g]
    return [step for step, begin, end in windows if any(since < end and begin <= at for since, at in spans)]


def lost_calls(gaps: list[dict]) -> int | None:
    """How many calls Ray's GCS let go before a read saw them; None where the GCS did not say (older runs)."""
    counted = [g["lost"] for g in gaps if "lost" in g]
    return sum(counted) if counted else None


def incomplete_note(model: dict) -> str | None:
    """The sentence that says which steps lack calls, and how many calls were lost where Ray counted them."""
    steps = model.get("incomplete_steps") or []
    lost = model.get("lost_calls")
    if not steps and not lost:
        return None
    advice = "raise RAY_task_events_max_num_task_in_gcs before `ray start` / `ray.init`"
    labels = ",".join(window.label for window in StepSelection.from_steps(steps).windows)
    if lost:
        if not steps:
            where = "outside the recorded steps"
        elif len(steps) == 1:
            where = f"step {labels} lacks them"
        else:
            where = f"steps {labels} lack them"
        return f"step anatomy: Ray's GCS let {lost} call(s) go before they were read; {where} ({advice})"
    full = "Ray's GCS was full and let task events go before they were read"
    return f"step anatomy: steps {labels} may lack calls: {full} ({advice})"


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


def phase_growth(steps: dict) -> list[tuple[str, float, float, int]]:
    """Per phase seen in enough steps: (phase, first-third mean ms, last-third mean ms, steps), most grown first."""
    series: dict[str, list[float]] = {}
    for label in sorted(steps, key=int):
        for phase in steps[label]["phases"]:
            series.setdefault(f"{phase['worker']}.{phase['method']}", []).append(phase["dur_ms"])
    rows = []
    for name, durations in series.items():
        if len(durations) < GROWTH_MIN_STEPS:
            continue
        third = max(1, len(durations) // 3)
        early = sum(durations[:third]) / third
        late = sum(durations[-third:]) / third
        rows.append((name, early, late, len(durations)))
    rows.sort(key=lambda row: row[2] - row[1], reverse=True)
    return rows


def anatomy_diff(a: dict, b: dict) -> dict:
    """`{"steps": {"<n>": {"wall_ms": {...}, "phases": {"<worker>.<method>": {a, b, change}}}}}` for steps in both."""
    steps = {}
    for step in sorted(a.get("steps", {}).keys() & b.get("steps", {}).keys(), key=int):
        sa, sb = a["steps"][step], b["steps"][step]
        phases_a = {f"{p['worker']}.{p['method']}": float(p["dur_ms"]) for p in sa.get("phases", [])}
        phases_b = {f"{p['worker']}.{p['method']}": float(p["dur_ms"]) for p in sb.get("phases", [])}
        steps[step] = {
            "wall_ms": _change(float(sa.get("wall_ms") or 0.0), float(sb.get("wall_ms") or 0.0)),
            "phases": {name: _change(phases_a[name], phases_b[name]) for name in sorted(phases_a.keys() & phases_b)},
            "only_in_a": sorted(phases_a.keys() - phases_b.keys()),
            "only_in_b": sorted(phases_b.keys() - phases_a.keys()),
        }
    return {"steps": steps}


def _change(old: float, new: float) -> dict:
    return {
        "a": old,
        "b": new,
        "change": round(new - old, 3),
        "change_pct": round(100 * (new - old) / old, 1) if old else None,
    }
