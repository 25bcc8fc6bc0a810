"""Findings from the step anatomy's phases: which phase bounds the steps, the controller's own time, slow steps,
and idle worker groups with what they wait on."""

from __future__ import annotations

import statistics

from nrlprof.tools.advice.evidence import Evidence
from nrlprof.tools.advice.finding import Finding, Look
from nrlprof.tools.advice.phases import OTHER, PHASE_LABELS, PHASES
from nrlprof.tools.advice.step_facts import CONTROLLER, NS_PER_MS, PROFILER, StepFacts

CONTROLLER_SHARE = 0.10
SLOW_FACTOR = 1.5
MIN_STEPS_FOR_SLOW = 5
IDLE_SHARE = 0.30
MIN_BUSY_SHARE = 0.10  # a group busy less than this is a helper (a cheap reward function), not a resource left idle
BOUND_ADVICE = {
    "rollout": "raise generation throughput (more or larger inference replicas, larger batches, shorter responses), "
    "or overlap it with training (one-step off-policy or async rollout)",
    "training": "look at its GPU busy share and exposed communication (`explain` on a torch or nsys window); larger "
    "micro-batches, fewer gradient-accumulation steps, or more training GPUs",
    "logprob": "raise the forward-only micro-batch size of these passes, colocate or drop the reference, or take "
    "the old log-probs from the rollout engine",
    "weight_sync": "sync in buckets over NCCL instead of through CPU or IPC copies, skip offload and reload where "
    "memory allows, or sync less often (async RL)",
    "reward": "batch or parallelise the reward (more reward workers, an async reward loop), or take it off the "
    "critical path",
}


def bound_finding(evidence: Evidence) -> Finding | None:
    """The phase that holds most of the steps' critical path."""
    facts = evidence.facts
    assert facts is not None
    totals, by_label = _summed(facts.held), _summed(facts.held_by_label)
    wall = facts.total_wall
    unnamed = {label: ns for label, ns in by_label.items() if facts.method_phases[label] == OTHER}
    if unnamed and sum(unnamed.values()) > max((totals.get(p, 0) for p in PHASES), default=0):
        top = max(sorted(unnamed), key=lambda label: unnamed[label])
        why = " (AReaL's RPC servers take every engine method through `call`)" if top.endswith(".call") else ""
        evidence.cannot_tell.append(
            f"the critical path is mostly methods no phase names ({top}: {100 * unnamed[top] / wall:.0f}% of it"
            f"{why}): say which phase they are with NRL_PHASES or --phases ('rollout=*generate*;training=*train*')"
        )
    named = {phase: totals.get(phase, 0) for phase in PHASES if totals.get(phase, 0) > 0}
    if not named or wall <= 0:
        return None
    phase = max(sorted(named), key=lambda p: named[p])
    share = named[phase] / wall
    steps = [step for i, step in enumerate(facts.steps) if facts.bound(i) == phase]
    labels = {label: ns for label, ns in by_label.items() if facts.method_phases[label] == phase}
    top = max(sorted(labels), key=lambda label: labels[label])
    index, row = _longest_row(facts, top)
    others = {p: round(100 * ns / wall, 1) for p, ns in sorted(totals.items()) if p != phase and ns > 0}
    figures = {
        "share_pct": round(100 * share, 1),
        "ms_per_step": round(named[phase] / len(facts.steps) / NS_PER_MS, 1),
        "method": top,
        "method_share_pct": round(100 * labels[top] / wall, 1),
        "other_shares_pct": others,
    }
    worker = top.rpartition(".")[0]
    return Finding(
        kind=f"{phase}_bound",
        impact_pct=100 * share,
        summary=f"{PHASE_LABELS[phase]} holds {100 * share:.0f}% of the steps' critical path "
        f"({figures['ms_per_step']:.0f} ms a step; most of it {top})",
        advice=BOUND_ADVICE[phase],
        steps=steps,
        worker=worker,
        rank=int(facts.tables.phases.slowest_rank[row]),
        figures=figures,
        look=evidence.look_at_phase(row, facts.windows[index]),
    )


def controller_finding(evidence: Evidence) -> Finding | None:
    facts = evidence.facts
    assert facts is not None
    wall = facts.total_wall
    held = [h.get(CONTROLLER, 0) for h in facts.held]
    if wall <= 0 or sum(held) / wall < CONTROLLER_SHARE:
        return None
    share = sum(held) / wall
    steps = [step for i, step in enumerate(facts.steps) if held[i] >= CONTROLLER_SHARE * facts.walls[i]]
    worst = max(range(len(held)), key=lambda i: held[i] / max(facts.walls[i], 1))
    window = facts.windows[worst]
    before, between, after = _controller_gaps(facts, worst)
    meta = facts.tables.calls.meta
    who = f"the controller (pid {meta.get('pid', '?')})"
    figures = {
        "share_pct": round(100 * share, 1),
        "ms_per_step": round(sum(held) / len(held) / NS_PER_MS, 1),
        "worst_step": facts.steps[worst],
        "worst_step_ms": {"before_first_call": round(before / NS_PER_MS, 1),
                          "between_calls": round(between / NS_PER_MS, 1),
                          "after_last_call": round(after / NS_PER_MS, 1)},
    }  # fmt: skip
    begin, end = int(facts.tables.begins[window]), int(facts.tables.ends[window])
    return Finding(
        kind="controller_bound",
        impact_pct=100 * share,
        summary=f"{who} holds {100 * share:.0f}% of the steps outside every worker call "
        f"({figures['ms_per_step']:.0f} ms a step: data loading, rewards or Python in the controller)",
        advice="move the controller's own work into workers, or overlap it with their calls (prefetch the next "
        "batch, compute rewards and advantages in a worker, submit calls before waiting on results)",
        steps=steps,
        worker="controller",
        figures=figures,
        look=Look(
            f"{facts.tables.calls.run} (nrlprof merge draws it)",
            facts.steps[worst],
            0.0,
            (end - begin) / NS_PER_MS,
            begin,
            end,
        ),
    )


def slow_steps_finding(evidence: Evidence) -> Finding | None:
    facts = evidence.facts
    assert facts is not None
    walls = facts.walls
    if len(walls) < MIN_STEPS_FOR_SLOW:
        evidence.cannot_tell.append(
            f"slow steps: {len(walls)} step(s) read, {MIN_STEPS_FOR_SLOW} needed to compare a step with the median"
        )
        return None
    median = statistics.median(walls)
    slow = [i for i, wall in enumerate(walls) if median > 0 and wall >= SLOW_FACTOR * median]
    label_medians = _label_medians(facts)
    grown = {i: _what_grew(facts, i, label_medians) for i in slow}
    slow = [i for i in slow if grown[i][0] != PROFILER]  # nrlprof's own work: profiler_distortion says so
    if not slow:
        return None
    details = []
    for i in slow:
        label, grew = grown[i]
        details.append({
            "step": facts.steps[i],
            "wall_ms": round(walls[i] / NS_PER_MS, 1),
            "factor": round(walls[i] / median, 2),
            "slowest": label,
            "slowest_ms": round(facts.held_by_label[i].get(label, facts.held[i].get(label, 0)) / NS_PER_MS, 1),
            "slowest_median_ms": round(label_medians.get(label, 0) / NS_PER_MS, 1),
            "slowest_rank": _rank_of(facts, i, label),
            "grew_ms": round(grew / NS_PER_MS, 1),
        })  # fmt: skip
    caught = {c.step: c for c in evidence.summary.caught}
    for detail in details:
        if detail["step"] in caught:  # a job armed for slow steps caught it: where its traces are
            detail["caught"] = caught[detail["step"]].what()
    excess = sum(walls[i] - median for i in slow)
    worst = max(range(len(slow)), key=lambda k: walls[slow[k]])
    top = details[worst]
    who = top["slowest"] if top["slowest_rank"] is None else f"{top['slowest']} (rank {top['slowest_rank']})"
    summary = (f"{len(slow)} step(s) at least {SLOW_FACTOR}x the median step ({median / NS_PER_MS:.0f} ms): "
               f"step {top['step']} {top['factor']}x, {who} {top['slowest_ms']:.0f} ms against "
               f"{top['slowest_median_ms']:.0f} ms")  # fmt: skip
    caught_here = [caught[d["step"]] for d in details if d["step"] in caught]
    if caught_here:
        summary += "; caught by nrlprof: " + "; ".join(f"step {c.step} ({c.what()})" for c in caught_here)
    row = _row_of(facts, slow[worst], top["slowest"])
    look = evidence.look_at_phase(row, facts.windows[slow[worst]]) if row is not None else None
    kept = [c for c in caught_here if c.kept and c.files]
    if kept:  # the slow step's own trace says more than the anatomy's phase
        look = Look(kept[0].files[0], kept[0].step)
    return Finding(
        kind="slow_steps",
        impact_pct=100 * excess / facts.total_wall,
        summary=summary,
        advice="look at what else ran then (checkpointing, evaluation, garbage collection, a node's hiccup)"
        + (
            ""
            if caught_here
            else "; `NRL_TORCH_PROFILE_STEP_RANGE=slow:keep` keeps the traces of the slow steps "
            "themselves, `slow` profiles the step after each"
        ),
        steps=[d["step"] for d in details],
        worker=top["slowest"] if top["slowest"] in (CONTROLLER, PROFILER) else top["slowest"].rpartition(".")[0],
        rank=top["slowest_rank"],
        figures={"median_ms": round(median / NS_PER_MS, 1), "slow": details},
        look=look,
    )


def idle_findings(evidence: Evidence) -> list[Finding]:
    """Worker groups that run no call while other groups work, for a large share of the steps, and on what they
    wait. Time when no worker runs at all is the controller's (controller_bound), not a group's idleness."""
    facts = evidence.facts
    assert facts is not None
    tables = facts.tables
    wall = facts.total_wall
    findings = []
    phase_masks = {phase: facts.phase_mask(phase) for phase in (*PHASES, OTHER)}
    for group, name in enumerate(tables.calls.workers):
        own = tables.group_mask(group)
        if not own.any() or wall <= 0:
            continue
        busy = facts.group_busy(group)
        waiting = [a - b for a, b in zip(facts.busy(None), busy, strict=True)]  # others run, this group does not
        if sum(waiting) / wall < IDLE_SHARE or sum(busy) / wall < MIN_BUSY_SHARE:
            continue
        waits = {}
        for phase, mask in phase_masks.items():
            others = mask & ~own
            if others.any():
                waits[phase] = sum(facts.busy(own | others)) - sum(busy)
        if not waits:
            continue
        phase = max(sorted(waits), key=lambda p: waits[p])
        on = f"{PHASE_LABELS[phase]} ({_main_label(facts, phase, exclude=name)})"
        saved = min(sum(busy), sum(waiting))
        figures = {
            "idle_pct": round(100 * (wall - sum(busy)) / wall, 1),
            "waiting_on_workers_pct": round(100 * sum(waiting) / wall, 1),
            "busy_pct": round(100 * sum(busy) / wall, 1),
            "waits_on_pct": {p: round(100 * ns / sum(waiting), 1) for p, ns in sorted(waits.items()) if ns > 0},
        }
        findings.append(
            Finding(
                kind="idle",
                impact_pct=100 * saved / wall,
                summary=f"{name} is idle {100 * sum(waiting) / wall:.0f}% of the steps while other groups work, "
                f"waiting on {on}",
                advice="overlap its work with what it waits on (async rollout, one-step off-policy), or colocate "
                "the two on the same devices",
                steps=[s for s, w, t in zip(facts.steps, waiting, facts.walls, strict=True) if w >= IDLE_SHARE * t],
                worker=name,
                figures=figures,
            )
        )
    return findings


def _summed(per_step: list[dict[str, int]]) -> dict[str, int]:
    """ns on the critical path over the steps read, by key: by phase (and the controller's, nrlprof's own) for
    `facts.held`, by `<worker>.<method>` for `facts.held_by_label`."""
    totals: dict[str, int] = {}
    for held in per_step:
        for key, ns in held.items():
            totals[key] = totals.get(key, 0) + ns
    return totals


def _longest_row(facts: StepFacts, label: str) -> tuple[int, int]:
    """(index of the step, phase row) where `label` held the path longest."""
    best = (-1, 0, 0)
    for i, path in enumerate(facts.path_rows):
        for row, ns in path:
            if ns > best[0] and facts.label(row) == label:
                best = (ns, i, row)
    return best[1], best[2]


def _row_of(facts: StepFacts, index: int, label: str) -> int | None:
    lo, hi = (int(v) for v in facts.tables.phase_offsets[facts.windows[index] : facts.windows[index] + 2])
    rows = [row for row in range(lo, hi) if facts.label(row) == label]
    return max(rows, key=lambda row: int(facts.tables.phases.end[row] - facts.tables.phases.start[row]), default=None)


def _rank_of(facts: StepFacts, index: int, label: str) -> int | None:
    row = _row_of(facts, index, label)
    return None if row is None else int(facts.tables.phases.slowest_rank[row])


def _label_medians(facts: StepFacts) -> dict[str, float]:
    labels = {label for held in facts.held_by_label for label in held}
    medians = {label: statistics.median(h.get(label, 0) for h in facts.held_by_label) for label in labels}
    for outside in (CONTROLLER, PROFILER):
        medians[outside] = statistics.median(h.get(outside, 0) for h in facts.held)
    return medians


def _what_grew(facts: StepFacts, index: int, medians: dict[str, float]) -> tuple[str, float]:
    """The method (or the controller) whose time on the path grew most over its median, and by how much."""
    held = dict(facts.held_by_label[index])
    for outside in (CONTROLLER, PROFILER):
        held[outside] = facts.held[index].get(outside, 0)
    growth = {label: ns - medians.get(label, 0) for label, ns in held.items()}
    label = max(sorted(growth), key=lambda name: growth[name])
    return label, growth[label]


def _main_label(facts: StepFacts, phase: str, exclude: str) -> str:
    totals = {label: ns for label, ns in _summed(facts.held_by_label).items()
              if facts.method_phases[label] == phase and label.rpartition(".")[0] != exclude}  # fmt: skip
    if not totals:
        names = sorted(label for label, p in facts.method_phases.items() if p == phase)
        return names[0] if names else phase
    return max(sorted(totals), key=lambda label: totals[label])


def _controller_gaps(facts: StepFacts, index: int) -> tuple[int, int, int]:
    """The controller's time in one step: before the first call, between calls, after the last (ns)."""
    window = facts.windows[index]
    tables = facts.tables
    begin, end = int(tables.begins[window]), int(tables.ends[window])
    path = facts.path_rows[index]
    if not path:
        return end - begin, 0, 0
    first_start = int(tables.phases.start[path[0][0]])
    last_end = int(tables.phases.end[path[-1][0]])
    outside = facts.held[index].get(CONTROLLER, 0)
    before = min(outside, max(0, first_start - begin))
    after = min(outside - before, max(0, end - last_end))
    return before, outside - before - after, after
