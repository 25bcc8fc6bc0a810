"""Across workers: per step, the slowest rank of each worker kind and how far it is from the median."""

from __future__ import annotations

import statistics
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from nrlprof.tools.summary import Summary


@dataclass
class Straggler:
    """The slowest rank of one worker kind in one step; spread is its wall time over the median rank's."""

    worker: str
    rank: int | None
    wall_ms: float
    median_ms: float
    ranks: int
    gpu_busy_pct: float | None = None

    @property
    def spread(self) -> float:
        return self.wall_ms / self.median_ms if self.median_ms > 0 else 1.0

    def to_json(self) -> dict[str, Any]:
        return {"worker": self.worker, "slowest_rank": self.rank, "wall_ms": round(self.wall_ms, 3),
                "median_ms": round(self.median_ms, 3), "spread": round(self.spread, 3), "ranks": self.ranks,
                "gpu_busy_pct": self.gpu_busy_pct}  # fmt: skip

    def line(self) -> str:
        busy = f", GPU busy {self.gpu_busy_pct:.0f}%" if self.gpu_busy_pct is not None else ""
        who = f"{self.worker} rank {self.rank}" if self.rank is not None else self.worker
        return f"{who} {self.wall_ms:,.1f} ms = {self.spread:.2f}x median of {self.ranks} rank(s){busy}"


def stragglers(summary: Summary) -> dict[int, list[Straggler]]:
    """Per step: one entry per worker kind (name and source), the slowest rank first, slowest kinds first."""
    result: dict[int, list[Straggler]] = {}
    for step in summary.steps:
        kinds: dict[tuple[str, str], list] = {}
        for worker in summary.workers:
            if step in worker.step_wall_ms:
                kinds.setdefault((worker.worker, worker.source), []).append(worker)
        rows = []
        for (name, _), workers in kinds.items():
            slowest = max(workers, key=lambda w: w.step_wall_ms[step])
            median = statistics.median(w.step_wall_ms[step] for w in workers)
            gpu = slowest.step_gpu.get(step)
            busy = round(gpu.to_json()["gpu_busy_pct"], 2) if gpu is not None else None
            rows.append(Straggler(name, slowest.rank, slowest.step_wall_ms[step], median, len(workers), busy))
        result[step] = sorted(rows, key=lambda r: -r.wall_ms)
    return result


def step_lines(summary: Summary) -> list[str]:
    """One line per step: every worker kind's slowest rank and its spread."""
    return [f"step {step}: " + "; ".join(r.line() for r in rows) for step, rows in stragglers(summary).items()]
