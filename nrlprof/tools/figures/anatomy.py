"""The step anatomy's figures: per step, the phases of every worker group, idle time, critical path; growth, diff.

The calls come from tools.read.anatomy, on the driver's clock.
"""

from __future__ import annotations

import os
import re

from nrlprof.anatomy.files import latest_run
from nrlprof.config.steps import StepSelection
from nrlprof.tools.figures.anatomy_tables import AnatomyTables, PhaseRows, anatomy_tables
from nrlprof.tools.figures.model import change
from nrlprof.tools.read.anatomy import NS_PER_MS, ProfiledNames
from nrlprof.tools.read.anatomy_calls import read_run_calls

# The gate's words for a window a slow step opened, or a slow step's kept traces (runtime.windows.gate.action_text).
CAUGHT = re.compile(r"\((slow step|straggler at step) (\d+): ([\d.]+)x(: kept)?\)")
GROWTH_MIN_STEPS = 3  # steps a phase must run in for its growth to be judged


def anatomy_summary(directory: str | os.PathLike, profiled: ProfiledNames | None = None) -> dict:
    """`{"steps": {"<n>": {"wall_ms", "phases", "idle_ms", "critical_path"}}, ...}` of the latest run.

    `profiled`: the names of the processes that wrote profiler files (read.anatomy.profiled_names), which the
    workers of those processes take here too."""
    return public_model(anatomy_tables(read_run_calls(latest_run(directory), profiled)))


def public_model(tables: AnatomyTables) -> dict:
    """The step anatomy as `summary --json` holds it (ARCHITECTURE.md, `anatomy`)."""
    calls = tables.calls
    phases = tables.phases
    workers, methods = calls.workers, calls.methods
    walls = tables.walls
    busy = {g: tables.group_busy(index) for index, g in enumerate(workers)}
    steps: dict[str, dict] = {}
    caught_steps: dict[str, dict] = {}
    for window, step in enumerate(tables.steps.tolist()):
        begin, end = int(tables.begins[window]), int(tables.ends[window])
        lo, hi = int(tables.phase_offsets[window]), int(tables.phase_offsets[window + 1])
        rows = [_phase(phases, i, begin, workers, methods) for i in range(lo, hi)]
        path = tables.critical_path(window)
        steps[str(step)] = {
            "wall_ms": (end - begin) / NS_PER_MS,
            "phases": rows,
            "idle_ms": {g: (int(walls[window]) - int(busy[g][window])) / NS_PER_MS for g in workers},
            "critical_path": [
                {"worker": workers[phases.worker[i]], "method": methods[phases.method[i]]} for i, _ in path
            ],
        }
        own = profiler_time(calls.marks, begin, end)
        if own is not None:
            steps[str(step)]["profiler"] = own
            for cause, slow_step, factor, kept in CAUGHT.findall(own["actions"]):
                caught_steps[slow_step] = {"factor": float(factor), "cause": cause, "kept": bool(kept)}
    for label, slow in caught_steps.items():
        if label in steps:
            steps[label]["caught"] = slow
    windows = list(zip(tables.steps.tolist(), tables.begins.tolist(), tables.ends.tolist(), strict=True))
    return {
        "run": str(calls.run),
        "steps": steps,
        "incomplete_steps": incomplete_steps(windows, calls.gaps),
        "lost_calls": lost_calls(calls.gaps),
        "workers": calls.group_ranks,
        "clock_offsets_ms": {node: off / NS_PER_MS for node, off in sorted(calls.offsets.items())},
        "clock_offset_bounds_ms": {node: bound / NS_PER_MS for node, bound in sorted(calls.bounds.items())},
    }


def _phase(phases: PhaseRows, i: int, step_begin: int, workers: list[str], methods: list[str]) -> dict:
    first, last = int(phases.start[i]), int(phases.end[i])
    lo, hi = int(phases.rank_offsets[i]), int(phases.rank_offsets[i + 1])
    return {
        "worker": workers[phases.worker[i]],
        "method": methods[phases.method[i]],
        "start_ms": (first - step_begin) / NS_PER_MS,
        "dur_ms": (last - first) / NS_PER_MS,
        "calls": int(phases.calls[i]),
        "ranks": phases.rank_values[lo:hi].tolist(),
        "slowest_rank": int(phases.slowest_rank[i]),
        "spread_ms": int(phases.spread[i]) / NS_PER_MS,
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
            "wall_ms": change(float(sa.get("wall_ms") or 0.0), float(sb.get("wall_ms") or 0.0)),
            "phases": {name: change(phases_a[name], phases_b[name]) for name in sorted(phases_a.keys() & phases_b)},
            "only_in_a": sorted(phases_a.keys() - phases_b.keys()),
            "only_in_b": sorted(phases_b.keys() - phases_a.keys()),
        }
    return {"steps": steps}
