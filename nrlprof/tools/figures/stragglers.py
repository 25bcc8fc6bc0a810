"""Across workers: per step, the slowest rank of each worker kind and how far it is from the median."""

from __future__ import annotations

from nrlprof.tools.figures.model import Straggler, WorkerSummary


def stragglers(workers: list[WorkerSummary]) -> dict[int, list[Straggler]]:
    """Per step: one entry per worker kind (name and source), the slowest rank first, slowest kinds first."""
    import statistics  # not at the top: it costs `nrlprof summary` a visible part of its start-up

    result: dict[int, list[Straggler]] = {}
    for step in sorted({step for w in workers for step in w.step_wall_ms}):
        kinds: dict[tuple[str, str], list] = {}
        for worker in workers:
            if step in worker.step_wall_ms:
                kinds.setdefault((worker.worker, worker.source), []).append(worker)
        rows = []
        for (name, _), ranks in kinds.items():
            slowest = max(ranks, key=lambda w: w.step_wall_ms[step])
            median = statistics.median(w.step_wall_ms[step] for w in ranks)
            gpu = slowest.step_gpu.get(step)
            busy = round(gpu.to_json()["gpu_busy_pct"], 2) if gpu is not None else None
            rows.append(Straggler(name, slowest.rank, slowest.step_wall_ms[step], median, len(ranks), busy))
        result[step] = sorted(rows, key=lambda r: -r.wall_ms)
    return result
