"""Findings about the run as a whole: profiling windows that slowed their steps, and memory that keeps growing."""

from __future__ import annotations

import statistics

from nrlprof.tools.advice.evidence import Evidence, window_steps
from nrlprof.tools.advice.finding import Finding, step_list
from nrlprof.tools.advice.step_facts import NS_PER_MS, PROFILER

DISTORTION = 0.20  # nsys costs 5-15%; a window over 20% slower overstates what it shows
OWN_SHARE = 0.05  # a step where nrlprof's own work took this share is a profiled step (a warm-up, a stop)
STEPS_PER_PROJECTION = 100  # memory_growth's impact: the growth over this many steps, as a share of the start


def profiler_distortion_finding(evidence: Evidence) -> Finding | None:
    """Steps in windows (the manifests) or holding nrlprof's own work (the anatomy's marks: a warm-up, a stop)
    against the job's other steps; and nrlprof's own time on the controller's thread, measured directly."""
    facts = evidence.facts
    if facts is None:
        return None
    backends: dict[int, set[str]] = {}
    # Windows a slow step opened, and slow steps' kept traces: their steps were slow before any profiler ran.
    caught = {(c.backend, c.window) for c in evidence.summary.caught}
    for row in evidence.summary.overhead:
        for step in window_steps(row.window) if (row.backend, row.window) not in caught else ():
            backends.setdefault(step, set()).add(row.backend)
    caught_steps = {s for c in evidence.summary.caught for s in window_steps(c.window)}
    for entry in evidence.summary.workers:  # traces and captures hold their windows' steps (no manifest needed)
        for step in entry.step_wall_ms:
            if step not in caught_steps:
                backends.setdefault(step, set()).add(entry.source)
    memory = evidence.summary.sections.get("memory") or {}
    for ranks in memory.get("workers", {}).values():
        for entry in ranks.values():
            for step in entry.get("steps", {}):
                backends.setdefault(int(step), set()).add("memory")
    walls = dict(zip(facts.steps, facts.walls, strict=True))
    own = {step: held.get(PROFILER, 0) for step, held in zip(facts.steps, facts.held, strict=True)}
    touched = {s for s in walls if s in backends or own[s] >= OWN_SHARE * walls[s]}
    if not touched:
        return None
    outside = [s for s in walls if s not in touched]
    inside = sorted(touched)
    windows = [s for s in inside if s in backends] or inside
    median_in = statistics.median(walls[s] for s in windows)
    median_out = statistics.median(walls[s] for s in outside) if len(outside) >= 2 else None
    slower = median_in / median_out - 1 if median_out else None
    own_share = sum(own[s] for s in inside) / max(1, sum(walls[s] for s in inside))
    if median_out is None:
        evidence.cannot_tell.append(
            "profiler distortion: fewer than 2 steps outside the windows to compare with; nrlprof's own time in the "
            f"controller is measured: {100 * own_share:.0f}% of the profiled steps"
        )
    if (slower is None or slower <= DISTORTION) and own_share <= DISTORTION:
        return None
    excess = sum(max(0, walls[s] - median_out) for s in windows) if median_out else 0
    excess = max(excess, sum(own[s] for s in inside))
    tools = sorted(set().union(*(backends.get(s, set()) for s in inside))) or ["profiler"]
    what = f"steps {step_list(inside)} ({', '.join(tools)} windows and their warm-up and stop)"
    if slower is not None and slower > DISTORTION:
        summary = (f"{what} ran {100 * slower:.0f}% slower than the job's other steps ({median_in / NS_PER_MS:.0f} "
                   f"against {median_out / NS_PER_MS:.0f} ms): their figures overstate")  # fmt: skip
    else:
        summary = f"nrlprof's own work held {100 * own_share:.0f}% of {what}: their figures overstate"
    figures = {"window_median_ms": round(median_in / NS_PER_MS, 1), "own_pct": round(100 * own_share, 1),
               "backends": tools}  # fmt: skip
    if median_out is not None and slower is not None:
        figures |= {"other_median_ms": round(median_out / NS_PER_MS, 1), "slower_pct": round(100 * slower, 1)}
    return Finding(
        kind="profiler_distortion",
        impact_pct=100 * excess / facts.total_wall,
        summary=summary,
        advice="profile with fewer switches (no record_shapes, with_stack or memory; nsys `-s none --cpuctxsw=none`), "
        "longer steps or shorter windows, and read the steps between windows for the job's own pace",
        steps=inside,
        worker=PROFILER,
        figures=figures,
    )


def memory_growth_findings(evidence: Evidence) -> list[Finding]:
    from nrlprof.tools.figures.memory import NO_RANK, memory_growth

    model = evidence.summary.sections.get("memory")
    if not model:
        return []
    findings = []
    for growth in memory_growth(model):
        if not any(evidence.wanted(s) for s in growth.steps):
            continue
        start = max(growth.first_mb, 1.0)
        rank = None if growth.rank == NO_RANK else int(growth.rank)
        who = growth.worker if rank is None else f"{growth.worker} rank {rank}"
        findings.append(
            Finding(
                kind="memory_growth",
                impact_pct=min(100.0, 100 * growth.mb_per_step * STEPS_PER_PROJECTION / start),
                summary=f"{who}'s {growth.label} grows ~{growth.mb_per_step:.0f} MB every step "
                f"({growth.first_mb:.0f} -> {growth.last_mb:.0f} MB over steps {step_list(growth.steps)})",
                advice="look for tensors kept across steps (losses kept with their graphs, growing caches or lists); "
                "compare two steps' allocator snapshots (NRL_MEMORY_PROFILE_*, pytorch.org/memory_viz)",
                steps=growth.steps,
                worker=growth.worker,
                rank=rank,
                figures={
                    "figure": growth.figure,
                    "mb_per_step": round(growth.mb_per_step, 1),
                    "first_mb": round(growth.first_mb, 1),
                    "last_mb": round(growth.last_mb, 1),
                },
            )
        )
    return findings
