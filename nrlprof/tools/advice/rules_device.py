"""Exposed communication: collective time that no compute on the same device overlaps, from a trace's intervals.

Per step and worker kind, the rank that waits least in the collectives is read: its collective time is the
transfer itself, while its peers' also hold the wait for a late rank (which counts against the straggler).
"""

from __future__ import annotations

from nrlprof.tools.advice.evidence import Evidence
from nrlprof.tools.advice.finding import Finding
from nrlprof.tools.advice.rules_ranks import collective_time
from nrlprof.tools.figures.model import WorkerSummary

EXPOSED_SHARE = 0.10  # of the device's busy time (warn, as traceml does)


def exposed_comm_findings(evidence: Evidence) -> list[Finding]:
    return evidence.per_worker(_exposed)


def _exposed(evidence: Evidence, worker: str, ranks: list[WorkerSummary]) -> Finding | None:
    rows = []  # step, rank entry, exposed µs, busy µs, wall µs, device
    for step in sorted({s for e in ranks for s in e.step_wall_ms if evidence.wanted(s)}):
        present = [(e, collective_time(e, step)) for e in ranks if step in e.step_wall_ms]
        present = [(e, t) for e, t in present if t is not None]
        if not present:
            continue
        entry, (_, device) = min(present, key=lambda item: (item[1][0], item[0].rank or 0))
        wall = entry.step_wall_ms[step] * 1000
        if device == "gpu":
            gpu = entry.step_gpu[step]
            rows.append((step, entry, gpu.exposed_comm_us, gpu.busy_us, wall, device))
        else:
            exposed = entry.step_cpu_comm[step][1]
            rows.append((step, entry, exposed, wall, wall, device))
    if not rows:
        return None
    exposed, busy, wall = (sum(r[column] for r in rows) for column in (2, 3, 4))
    if busy <= 0 or exposed / busy < EXPOSED_SHARE:
        return None
    device = rows[0][5]
    step, entry, *_ = max(rows, key=lambda r: r[2])
    where = "GPU busy time" if device == "gpu" else "the step (a CPU process: gloo)"
    figures = {
        "exposed_ms_per_step": round(exposed / len(rows) / 1000, 3),
        "exposed_pct_of_busy": round(100 * exposed / busy, 1),
        "device": device,
        "rank_read": sorted({r[1].rank for r in rows}, key=lambda r: -1 if r is None else r),
    }
    if len({e.rank for e in ranks}) < 2:
        evidence.cannot_tell.append(
            f"{worker}: one rank traced, so its exposed collective time may hold a wait for a late peer: trace every "
            "rank to tell the two apart"
        )
    return Finding(
        kind="exposed_comm",
        impact_pct=100 * exposed / wall,
        summary=f"{worker}'s collectives are exposed {100 * exposed / busy:.0f}% of {where} "
        f"({exposed / len(rows) / 1000:.1f} ms a step with no compute under them)",
        advice="overlap communication with compute (bucketed all-reduce, FSDP prefetch, async tensor parallelism), "
        "or communicate less (larger buckets, fewer collectives, a faster interconnect)",
        steps=[r[0] for r in rows],
        worker=worker,
        rank=entry.rank,
        figures=figures,
        look=evidence.look_at_step(entry, step),
    )
