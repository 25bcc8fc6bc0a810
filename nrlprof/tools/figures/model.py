"""The summary of a run: per worker rank and step, its figures (`Summary`; `to_json()` is `summary --json`).

Plain data: `summarize()` (figures.summarize) fills it, the renderers (tools.render) and `diff` read it; diff's
rows of a figure's change between two runs (`figure_changes`) are made here for its every section.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from nrlprof.layout import CONTROLLER
from nrlprof.tools.figures.gpu_time import StepGpu
from nrlprof.tools.figures.kernel_names import short_kernel_name

if TYPE_CHECKING:  # only the types: `diff` reads the format without importing the readers
    from nrlprof.tools.figures.anatomy_tables import AnatomyTables
    from nrlprof.tools.read.caught import Caught
    from nrlprof.tools.read.manifests import Overhead
    from nrlprof.tools.read.nsys_stats import NsysReport

TOP = 10
FORMAT = 1  # of `summary --json`, which diff reads back: raised when a key is renamed or changes meaning


@dataclass
class OpStat:
    name: str
    calls: int = 0
    total_us: float = 0.0
    self_us: float = 0.0

    def to_json(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "short_name": short_kernel_name(self.name),
            "calls": self.calls,
            "total_ms": round(self.total_us / 1000, 3),
            "self_ms": round(self.self_us / 1000, 3),
        }


@dataclass
class Span:
    """An interval on the common clock: microseconds since the Unix epoch."""

    label: str
    start_us: float
    end_us: float


@dataclass
class WorkerSummary:
    """One worker rank (or the controller): every trace file it wrote, combined."""

    worker: str
    rank: int | None
    hosts: list[str] = field(default_factory=list)
    files: list[Path] = field(default_factory=list)
    step_wall_ms: dict[int, float] = field(default_factory=dict)
    ranges_ms: dict[str, dict[int | None, float]] = field(default_factory=dict)
    range_calls: dict[str, int] = field(default_factory=dict)
    ops: list[OpStat] = field(default_factory=list)
    kernels: list[OpStat] = field(default_factory=list)
    steps: list[Span] = field(default_factory=list)
    ranges: list[Span] = field(default_factory=list)
    step_gpu: dict[int, StepGpu] = field(default_factory=dict)
    gpu_spans: list[Span] = field(default_factory=list)
    source: str = "torch"
    step_cpu_comm: dict[int, tuple[float, float]] = field(default_factory=dict)  # CPU collectives: union, exposed µs

    @property
    def label(self) -> str:
        if self.worker == CONTROLLER and self.rank is None:
            return CONTROLLER
        return f"{self.worker} rank {self.rank}" if self.rank is not None else self.worker

    def to_json(self) -> dict[str, Any]:
        return {
            "worker": self.worker,
            "rank": self.rank,
            "hosts": self.hosts,
            "files": [str(p) for p in self.files],
            "source": self.source,
            "steps": {
                str(step): {
                    "wall_ms": round(ms, 3),
                    **(self.step_gpu[step].to_json() if step in self.step_gpu else {}),
                    **(_cpu_comm_json(self.step_cpu_comm[step]) if step in self.step_cpu_comm else {}),
                    "ranges_ms": {
                        label: round(per_step[step], 3)
                        for label, per_step in self.ranges_ms.items()
                        if step in per_step
                    },
                }
                for step, ms in sorted(self.step_wall_ms.items())
            },
            "ranges_outside_steps_ms": {
                label: round(per_step[None], 3) for label, per_step in self.ranges_ms.items() if None in per_step
            },
            "range_calls": dict(self.range_calls),
            "top_operators": [op.to_json() for op in self.ops],
            "top_kernels": [k.to_json() for k in self.kernels],
        }


def _cpu_comm_json(figures: tuple[float, float]) -> dict[str, float]:
    union, exposed = figures
    return {"cpu_collective_ms": round(union / 1000, 3), "cpu_exposed_collective_ms": round(exposed / 1000, 3)}


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


@dataclass
class Summary:
    directory: Path | str  # a run directory, or the cluster whose nodes were read
    workers: list[WorkerSummary] = field(default_factory=list)
    nsys_reports: list[NsysReport] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    skipped: list[tuple[Path, str]] = field(default_factory=list)
    overhead: list[Overhead] = field(default_factory=list)
    hta: list[dict[str, Any]] | None = None  # HolisticTraceAnalysis figures, when asked for
    sections: dict[str, Any] = field(default_factory=dict)  # "memory", "anatomy" where their files exist
    stragglers: dict[int, list[Straggler]] = field(default_factory=dict)  # per step, slowest kinds first
    anatomy_tables: AnatomyTables | None = None  # the step anatomy as read (`explain` reasons from it); not in JSON
    caught: list[Caught] = field(default_factory=list)  # slow steps a job armed for them caught (NRL_*=slow)

    @property
    def anatomy_steps(self) -> dict | None:
        """The step anatomy's steps (wall time, phases) by label, where it was read."""
        return (self.sections.get("anatomy") or {}).get("steps") or None

    @property
    def steps(self) -> list[int]:
        return sorted({step for w in self.workers for step in w.step_wall_ms})

    def to_json(self) -> dict[str, Any]:
        return {
            "format": FORMAT,
            "directory": str(self.directory),
            "steps": self.steps,
            "workers": [w.to_json() for w in self.workers],
            "stragglers": {str(step): [s.to_json() for s in rows] for step, rows in self.stragglers.items()},
            "profiler_overhead": [o.to_json() for o in self.overhead],
            "slow_steps": [c.to_json(self.anatomy_steps) for c in self.caught],
            **({"hta": self.hta} if self.hta is not None else {}),
            **self.sections,
            "nsys_reports": [r.to_json() for r in self.nsys_reports],
            "notes": self.notes,
            "skipped": [{"path": str(p), "reason": reason} for p, reason in self.skipped],
        }


def change(old: float, new: float) -> dict[str, Any]:
    """A figure in both runs: a, b, change and change_pct (None where a is 0)."""
    change_pct = round(100 * (new - old) / old, 1) if old else None
    return {"a": old, "b": new, "change": round(new - old, 3), "change_pct": change_pct}


def figure_changes(
    a: dict[tuple, dict[str, Any]], b: dict[tuple, dict[str, Any]], names: tuple[str, ...], order: Any = None
) -> dict[str, Any]:
    """Rows of the (worker, rank, step) keys in both, each named figure numeric in both with its change; keys in
    one only, listed apart. `order`: the sort key of the keys."""
    rows = []
    for key in sorted(a.keys() & b.keys(), key=order):
        pairs = ((name, a[key].get(name), b[key].get(name)) for name in names)
        figures = {name: change(old, new) for name, old, new in pairs if _numbers(old, new)}
        rows.append({"worker": key[0], "rank": key[1], "step": key[2], "figures": figures})

    def listed(keys: set[tuple]) -> list[dict[str, Any]]:
        return [{"worker": w, "rank": r, "step": s} for w, r, s in sorted(keys, key=order)]

    return {"rows": rows, "only_in_a": listed(a.keys() - b.keys()), "only_in_b": listed(b.keys() - a.keys())}


def _numbers(*values: Any) -> bool:
    return all(isinstance(v, (int, float)) for v in values)
