"""Findings about one rank of a group: a straggler the others wait for, a rollout replica that finishes last.

Under data parallelism every rank's call ends together (the collectives make each wait for the slowest), so
phase lengths cannot name a late rank; the collectives can: the rank that arrives late waits least in them,
and its peers' collectives are long because they wait for it. So a straggler is named from the collectives of
a torch or nsys window where there are some, and from call ends only where ranks end apart; a waiting rank is
never named, and a slowdown of every rank is a slow step, not a straggler.
"""

from __future__ import annotations

import statistics
from collections import Counter

from nrlprof.tools.advice.evidence import Evidence
from nrlprof.tools.advice.finding import Finding
from nrlprof.tools.advice.phases import ROLLOUT
from nrlprof.tools.advice.step_facts import NS_PER_MS
from nrlprof.tools.figures.model import WorkerSummary

LATE_STEP_SHARE = 0.05  # a rank late by this share of the step holds its group back
MOST = 0.5  # "in most steps": more than half of them
TOGETHER_SHARE = 0.02  # ranks whose ends differ by less than this share of the phase ended together
TAIL_SHARE = 0.10  # of the rollout phase, the others' wait for the last replica


def collective_stragglers(evidence: Evidence) -> list[Finding]:
    """Per worker kind with two or more ranks traced: the rank that waits least in the collectives, step after step."""
    return evidence.per_worker(_collective_straggler, ranked=True)


def collective_time(entry: WorkerSummary, step: int) -> tuple[float, str] | None:
    """(µs in collectives, "gpu" or "cpu") of one rank in one step: NCCL kernels' union, else gloo's ranges."""
    gpu = entry.step_gpu.get(step)
    if gpu is not None and gpu.comm_union_us > 0:
        return gpu.comm_union_us, "gpu"
    cpu = entry.step_cpu_comm.get(step)
    if cpu is not None and cpu[0] > 0:
        return cpu[0], "cpu"
    return None


def _collective_straggler(evidence: Evidence, worker: str, ranks: list[WorkerSummary]) -> Finding | None:
    steps = sorted({s for e in ranks for s in e.step_wall_ms if evidence.wanted(s)})
    late: list[tuple[int, int, float, float, float]] = []  # step, culprit, its µs, the others' median µs, wall µs
    counted = 0
    for step in steps:
        times = {e.rank: collective_time(e, step) for e in ranks if step in e.step_wall_ms}
        times = {rank: t[0] for rank, t in times.items() if t is not None}
        if len(times) < 2:
            continue
        counted += 1
        culprit = min(sorted(times), key=lambda r: times[r])
        others = statistics.median(t for r, t in times.items() if r != culprit)
        wall = statistics.median(e.step_wall_ms[step] * 1000 for e in ranks if step in e.step_wall_ms)
        if others - times[culprit] >= LATE_STEP_SHARE * wall:
            late.append((step, culprit, times[culprit], others, wall))
    tally = Counter(culprit for _, culprit, _, _, _ in late)  # empty where no step was compared
    if not tally:
        return None
    rank, count = tally.most_common(1)[0]
    if count <= MOST * counted:
        return None
    mine = [item for item in late if item[1] == rank]
    waited = statistics.median(others - own for _, _, own, others, _ in mine)
    wall = statistics.median(w for _, _, _, _, w in mine)
    entry = next(e for e in ranks if e.rank == rank)
    device = collective_time(entry, mine[0][0])
    kind = "collective kernels" if device and device[1] == "gpu" else "collectives (gloo)"
    return Finding(
        kind="straggler",
        impact_pct=100 * waited / wall,
        summary=f"{worker} rank {rank} is late to the {kind} in {count} of {counted} step(s): its peers wait "
        f"{waited / 1000:.0f} ms a step for it ({100 * waited / wall:.0f}% of the step)",
        advice=f"look at rank {rank}'s node and inputs: GPU clocks or throttling, other processes, its data loading, "
        "longer sequences than its peers'",
        steps=[step for step, *_ in mine],
        worker=worker,
        rank=rank,
        figures={
            "late_steps": count,
            "steps_compared": counted,
            "its_collective_ms": round(statistics.median(own for _, _, own, _, _ in mine) / 1000, 3),
            "peers_collective_ms": round(statistics.median(o for _, _, _, o, _ in mine) / 1000, 3),
            "peers_wait_ms": round(waited / 1000, 3),
            "source": "trace",
        },
        look=evidence.look_at_step(entry, mine[0][0]),
    )


def anatomy_rank_findings(evidence: Evidence, named: set[str]) -> list[Finding]:
    """From the anatomy's call ends: a rollout replica that finishes last (long_tail), or a rank of another phase
    whose calls end last while its peers' had ended (straggler). Groups in `named` have a straggler already."""
    facts = evidence.facts
    assert facts is not None
    phases = facts.tables.phases
    per_label: dict[str, list[tuple[int, int]]] = {}  # label -> (index of the step, phase row) with 2+ ranks
    for i, window in enumerate(facts.windows):
        lo, hi = int(facts.tables.phase_offsets[window]), int(facts.tables.phase_offsets[window + 1])
        for row in range(lo, hi):
            if int(phases.ranks[row]) >= 2:
                per_label.setdefault(facts.label(row), []).append((i, row))
    findings = []
    for label, rows in sorted(per_label.items()):
        worker = label.rpartition(".")[0]
        rollout = facts.method_phases[label] == ROLLOUT
        if not rollout and worker in named:
            continue
        finding = _tail(evidence, label, rows) if rollout else _late_rank(evidence, label, rows)
        if finding is not None:
            findings.append(finding)
            named.add(worker)
    return findings


def _late_rank(evidence: Evidence, label: str, rows: list[tuple[int, int]]) -> Finding | None:
    facts = evidence.facts
    assert facts is not None
    phases = facts.tables.phases
    durations = [max(1, int(phases.end[row] - phases.start[row])) for _, row in rows]
    together = sum(int(phases.late[row]) < TOGETHER_SHARE * d for (_, row), d in zip(rows, durations, strict=True))
    if together > MOST * len(rows):
        trace = evidence.trace_of(label.rpartition(".")[0], None, None)
        if trace is None or not any(collective_time(trace, s) for s in trace.step_wall_ms):
            evidence.cannot_tell.append(
                f"{label}: its {int(max(phases.ranks[r] for _, r in rows))} ranks end together in most steps "
                "(collectives make each wait for the slowest): a late rank shows only in the collectives of a torch "
                "or nsys window over every rank"
            )
        return None
    late = [(i, row) for i, row in rows if int(phases.late[row]) >= LATE_STEP_SHARE * facts.walls[i]]
    tally = Counter(int(phases.last_rank[row]) for _, row in late)
    if not tally:
        return None
    rank, count = tally.most_common(1)[0]
    if count <= MOST * len(rows):
        return None
    mine = [(i, row) for i, row in late if int(phases.last_rank[row]) == rank]
    waited = statistics.median(int(phases.late[row]) for _, row in mine)
    share = sum(int(phases.late[row]) for _, row in mine) / facts.total_wall
    worker = label.rpartition(".")[0]
    index, row = max(mine, key=lambda item: int(phases.late[item[1]]))
    return Finding(
        kind="straggler",
        impact_pct=100 * share,
        summary=f"{worker} rank {rank} ends {label.rpartition('.')[2]} last in {count} of {len(rows)} step(s), "
        f"{waited / NS_PER_MS:.0f} ms after its peers (their calls had ended)",
        advice=f"look at rank {rank}'s node and inputs: other processes, its data, a slower device, or uneven work",
        steps=[facts.steps[i] for i, _ in mine],
        worker=worker,
        rank=rank,
        figures={
            "late_steps": count,
            "steps_compared": len(rows),
            "late_ms": round(waited / NS_PER_MS, 1),
            "method": label,
            "source": "anatomy",
        },
        look=evidence.look_at_phase(row, facts.windows[index]),
    )


def _tail(evidence: Evidence, label: str, rows: list[tuple[int, int]]) -> Finding | None:
    facts = evidence.facts
    assert facts is not None
    phases = facts.tables.phases
    waits = [(i, row, int(phases.late[row]) / max(1, int(phases.end[row] - phases.start[row]))) for i, row in rows]
    long = [(i, row, share) for i, row, share in waits if share >= TAIL_SHARE]
    if len(long) <= MOST * len(rows):
        return None
    tally = Counter(int(phases.last_rank[row]) for _, row, _ in long)
    rank, count = tally.most_common(1)[0]
    consistent = count > MOST * len(rows)
    chosen = [item for item in long if int(phases.last_rank[item[1]]) == rank] if consistent else long
    share = statistics.median(s for _, _, s in chosen)
    impact = sum(int(phases.late[row]) for _, row, _ in chosen) / facts.total_wall
    worker = label.rpartition(".")[0]
    index, row, _ = max(chosen, key=lambda item: int(phases.late[item[1]]))
    if consistent:
        summary = (f"{worker} rank {rank} finishes {label.rpartition('.')[2]} last in {count} of {len(rows)} step(s): "
                   f"the others wait {100 * share:.0f}% of the rollout phase for it")  # fmt: skip
        advice = "balance prompts across replicas (by length), or look at that replica's node and engine settings"
    else:
        summary = (f"a different {worker} replica finishes last in each step: the others wait {100 * share:.0f}% "
                   "of the rollout phase for the longest responses")  # fmt: skip
        advice = "cap or balance response lengths, use partial rollout or over-provisioning, or dispatch dynamically"
    return Finding(
        kind="long_tail",
        impact_pct=100 * impact,
        summary=summary,
        advice=advice,
        steps=[facts.steps[i] for i, _, _ in chosen],
        worker=worker,
        rank=rank if consistent else None,
        figures={
            "last_steps": count if consistent else len(chosen),
            "steps_compared": len(rows),
            "others_wait_pct_of_phase": round(100 * share, 1),
            "method": label,
        },
        look=evidence.look_at_phase(row, facts.windows[index]),
    )
