"""Memory per worker x rank x step, from the memory backend's files: the model, growth, and two runs compared.

The model (`memory_summary`), JSON-ready:
  {"workers": {"<worker>": {"<rank>": {"host": ..., "pids": [...], "windows": [{"window", "pid", "steps"}],
                                       "steps": {"<n>": figures}}}},
   "snapshots": [{"worker", "rank", "window", "pid", "path", "oom", "top": [...]} (or "error" instead of "top")],
   "skipped": [{"path", "reason"}]}
`<rank>` is the rank as a string, `-` for a process with no rank (the controller). Figures of a step, in MB,
taken at the step's end: host_rss_mb, host_peak_mb (highest RSS during the step), and where the process had
initialised CUDA: cuda_allocated_mb, cuda_reserved_mb, cuda_peak_mb summed over its devices (the peak is the
sum of each device's own peak during the step) and cuda_devices {"<device>": {allocated_mb, reserved_mb,
peak_mb}}; wall_ms and pid.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from nrlprof.tools.figures.model import figure_changes
from nrlprof.tools.read.inputs import Inputs
from nrlprof.tools.read.memory import MemoryFile, read_memory_files
from nrlprof.tools.read.memory_snapshot import parse_snapshot_name, snapshot_top_allocations

MEMORY_FIGURES = ("host_rss_mb", "host_peak_mb", "cuda_allocated_mb", "cuda_reserved_mb", "cuda_peak_mb")
GROWTH_SERIES = (("host_rss_mb", "host RSS"), ("cuda_allocated_mb", "CUDA allocated"))
MIN_GROWTH_MB = 4.0  # per step: below this a rising series reads as noise
MIN_STEP_SHARE = 0.25  # every step must add at least this share of the average growth
NO_RANK = "-"


def rank_key(rank: int | None) -> str:
    return NO_RANK if rank is None else str(rank)


def _step_figures(file: MemoryFile) -> dict[int, dict[str, Any]]:
    result = {}
    for sample in file.steps:
        figures: dict[str, Any] = {"pid": file.pid, **{k: round(v, 3) for k, v in sample.host.items()}}
        if sample.wall_ms is not None:
            figures["wall_ms"] = round(sample.wall_ms, 3)
        if sample.cuda:
            for name in ("allocated_mb", "reserved_mb", "peak_mb"):
                figures[f"cuda_{name}"] = round(sum(d[name] for d in sample.cuda.values()), 3)
            figures["cuda_devices"] = {
                device: {k: round(v, 3) for k, v in values.items()} for device, values in sample.cuda.items()
            }
        result[sample.step] = figures
    return result


def memory_model(files: list[MemoryFile]) -> dict[str, dict[str, dict[str, Any]]]:
    """worker -> rank -> {host, pids, windows, steps} of the figures files given."""
    workers: dict[str, dict[str, dict[str, Any]]] = {}
    for file in sorted(files, key=lambda f: (f.worker, f.rank if f.rank is not None else -1, f.pid or 0, f.window)):
        entry = workers.setdefault(file.worker, {}).setdefault(
            rank_key(file.rank), {"host": file.host, "pids": [], "windows": [], "steps": {}}
        )
        if file.pid not in entry["pids"]:
            entry["pids"].append(file.pid)
        steps = _step_figures(file)
        entry["windows"].append({"window": file.window, "pid": file.pid, "steps": sorted(steps)})
        entry["steps"].update({str(step): figures for step, figures in sorted(steps.items())})
    return workers


def _snapshot_owner(path: Path, files: list[MemoryFile]) -> dict[str, Any]:
    """worker, rank, window, pid of a snapshot: from the figures file beside it, else from its name."""
    name = parse_snapshot_name(path.name)
    label = name.label if name else ""
    pid = name.pid if name else None
    for file in files:
        if file.path.parent == path.parent and file.pid == pid:
            window = label.removeprefix("steps") if label.startswith("steps") else label
            return {"worker": file.worker, "rank": file.rank, "window": window, "pid": pid}
    if name is None:
        return {"worker": path.name, "rank": None, "window": "", "pid": None}
    return {"worker": name.worker, "rank": name.rank, "window": label.removeprefix("steps"), "pid": pid}


@dataclass
class MemoryReading:
    """The memory backend's files as read, before the model: where they are read (here, or on their node)."""

    files: list[MemoryFile] = field(default_factory=list)
    skipped: list[tuple[Path, str]] = field(default_factory=list)  # figures files that could not be read
    snapshots: list[dict[str, Any]] = field(default_factory=list)  # path (a Path), oom, and top or error


def read_memory(found: Inputs, top: int = 5) -> MemoryReading:
    """The figures files found, and the `top` largest live allocations at each snapshot's peak."""
    files, skipped = read_memory_files(found.memory_figures)
    snapshots = []
    for path in found.memory_snapshots:
        entry: dict[str, Any] = {"path": path, "oom": ".oom." in path.name}
        try:
            entry["top"] = snapshot_top_allocations(path, top)
        except ValueError as exc:
            entry["error"] = str(exc)
        snapshots.append(entry)
    return MemoryReading(files, skipped, snapshots)


def memory_model_of(reading: MemoryReading) -> dict[str, Any]:
    """The memory model (see the module's docstring) of what was read."""
    snapshots = [{**_snapshot_owner(entry["path"], reading.files), **entry, "path": str(entry["path"])}
                 for entry in reading.snapshots]  # fmt: skip
    skipped = [*reading.skipped, *((e["path"], e["error"]) for e in reading.snapshots if "error" in e)]
    return {
        "workers": memory_model(reading.files),
        "snapshots": snapshots,
        "skipped": [{"path": str(p), "reason": reason} for p, reason in skipped],
    }


def memory_summary(found: Inputs, top: int = 5) -> dict[str, Any]:
    """The memory model of the figures files and snapshots found (see the module's docstring)."""
    return memory_model_of(read_memory(found, top))


def _growth(values: list[float]) -> float | None:
    """The average growth per step when the series grows at every step beyond noise; None otherwise."""
    if len(values) < 3:
        return None
    slope = (values[-1] - values[0]) / (len(values) - 1)
    if slope < MIN_GROWTH_MB:
        return None
    floor = slope * MIN_STEP_SHARE
    if all(b - a >= floor for a, b in itertools.pairwise(values)):
        return slope
    return None


@dataclass(frozen=True)
class Growth:
    """A process whose memory grew at every step of a window."""

    worker: str
    rank: str  # as the model keys it: "0", or NO_RANK
    steps: list[int]
    figure: str
    label: str
    mb_per_step: float
    first_mb: float
    last_mb: float

    def __str__(self) -> str:
        who = self.worker if self.rank == NO_RANK else f"{self.worker} rank {self.rank}"
        return f"{who} grows ~{self.mb_per_step:.0f} MB/step (steps {self.steps[0]}-{self.steps[-1]}), {self.label}"


def memory_growth(model: dict[str, Any]) -> list[Growth]:
    """Each process and figure growing at every step of a window, beyond noise."""
    found = []
    for worker, ranks in model.get("workers", {}).items():
        for rank, entry in ranks.items():
            for window in entry["windows"]:
                steps = window["steps"]
                figures = [entry["steps"][str(s)] for s in steps]
                for name, label in GROWTH_SERIES:
                    values = [f[name] for f in figures if name in f]
                    slope = _growth(values) if len(values) == len(figures) else None
                    if slope is not None:
                        found.append(Growth(worker, rank, steps, name, label, slope, values[0], values[-1]))
    return found


def memory_findings(model: dict[str, Any]) -> list[str]:
    """`<worker> rank <r> grows ~N MB/step (steps a-b), <figure>` for each process growing at every step of a window."""
    return [str(growth) for growth in memory_growth(model)]


def _step_rows(model: dict[str, Any]) -> dict[tuple[str, str, int], dict[str, Any]]:
    rows = {}
    for worker, ranks in model.get("workers", {}).items():
        for rank, entry in ranks.items():
            for step, figures in entry["steps"].items():
                rows[(worker, rank, int(step))] = figures
    return rows


def memory_diff(a_model: dict[str, Any], b_model: dict[str, Any]) -> dict[str, Any]:
    """Per worker x rank x step in both: each figure's a, b, change (MB) and change_pct; keys in one only, apart."""
    return figure_changes(_step_rows(a_model), _step_rows(b_model), MEMORY_FIGURES)
