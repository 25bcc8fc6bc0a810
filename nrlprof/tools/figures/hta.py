"""Optional figures from HolisticTraceAnalysis for torch traces: temporal breakdown and comm/compute overlap.

HTA computes these per rank over a whole trace (not per step), loading one worker kind and window at a
time (it keys traces by rank, and every RL role has its own rank 0). It is slow (about 1 MB/s) and optional:
`nrlprof summary --hta`. Figures are HTA's own, its times in ms. `hta_folder` makes a folder HTA loads as is from
a worker's traces of one window.
"""

from __future__ import annotations

import contextlib
import logging
import os
import shutil
import tempfile
import warnings
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from nrlprof.errors import ToolError
from nrlprof.layout import TRACE_SUFFIXES
from nrlprof.tools.figures.model import WorkerSummary
from nrlprof.tools.read.traces import TraceHeader, find_traces, read_header

# HTA's column -> ours; its times are in µs, ours in ms like every other time of the summary
TEMPORAL_MS = {
    "idle_time(us)": "idle_ms",
    "compute_time(us)": "compute_ms",
    "non_compute_time(us)": "non_compute_ms",
    "kernel_time(us)": "kernel_ms",
}
TEMPORAL_PCT = {
    "idle_time_pctg": "idle_pct",
    "compute_time_pctg": "compute_pct",
    "non_compute_time_pctg": "non_compute_pct",
}


def hta_figures(workers: Sequence[WorkerSummary]) -> tuple[list[dict[str, Any]], list[str]]:
    """Per worker kind, window and rank: HTA's temporal breakdown and overlap; notes for what failed."""
    try:
        from hta.trace_analysis import TraceAnalysis
    except ImportError:
        return [], ["HolisticTraceAnalysis is not installed (pip install HolisticTraceAnalysis): no HTA figures"]
    groups: dict[tuple[str, str], dict[int, Path]] = {}
    with_kernels: set[str] = set()
    for worker in workers:
        if worker.source != "torch" or worker.rank is None:
            continue
        if worker.kernels or worker.step_gpu:
            with_kernels.add(worker.worker)
        for path in worker.files:
            groups.setdefault((worker.worker, read_header(path).window), {})[worker.rank] = path
    rows: list[dict[str, Any]] = []
    notes: list[str] = []
    for (name, window), files in sorted(groups.items()):
        if name not in with_kernels:
            notes.append(f"HTA was not run on {name} window {window}: no GPU kernels in these traces (a CPU-only "
                         "run?); HTA's breakdown is of GPU time")  # fmt: skip
            continue
        with tempfile.TemporaryDirectory(prefix="nrlprof-hta-") as folder:
            for rank, path in files.items():
                _link(path, Path(folder), rank)
            try:
                rows += _analyse(TraceAnalysis, folder, name, window)
            except Exception as exc:  # HTA raises anything on traces it does not expect
                notes.append(f"HTA could not analyse {name} window {window}: {_why(exc)}")
    return rows, notes


def _why(exc: Exception) -> str:
    """HTA's failure as a reason: pandas' lookups failing mean it found none of the events it needs."""
    detail = f"{type(exc).__name__}: {exc}"
    if isinstance(exc, (IndexError, KeyError)):
        return f"it found none of the GPU or communication events its analysis needs in these traces ({detail})"
    return detail


def _analyse(analysis_class: Any, folder: str, worker: str, window: str) -> list[dict[str, Any]]:
    with warnings.catch_warnings(), _quiet():
        warnings.simplefilter("ignore")
        analysis = analysis_class(trace_dir=folder)
        temporal = analysis.get_temporal_breakdown(visualize=False).to_dict("records")
        overlap = {r["rank"]: r["comp_comm_overlap_pctg"] for r in
                   analysis.get_comm_comp_overlap(visualize=False).to_dict("records")}  # fmt: skip
    rows = []
    for record in temporal:
        rank = int(record["rank"])
        row: dict[str, Any] = {"worker": worker, "window": window, "rank": rank}
        row.update(
            {ours: round(float(record[theirs]) / 1000, 3) for theirs, ours in TEMPORAL_MS.items() if theirs in record}
        )
        row.update({ours: float(record[theirs]) for theirs, ours in TEMPORAL_PCT.items() if theirs in record})
        row["comm_comp_overlap_pct"] = float(overlap[rank]) if rank in overlap else None
        rows.append(row)
    return rows


@contextlib.contextmanager
def _quiet():
    previous = logging.root.manager.disable
    logging.disable(logging.WARNING)
    try:
        yield
    finally:
        logging.disable(previous)


def hta_folder(worker_dir: Path, window: str | None = None, dest: Path | None = None) -> Path:
    """A directory of links `rank<r>.pt.trace.json[.gz]` to the traces of `window` under `worker_dir`.

    `window` (such as "3-4") may be left out when the traces hold a single window. The links go into
    `dest`, created if needed, or into a new temporary directory; files are copied where links fail.
    """
    headers, _ = find_traces([Path(worker_dir)])
    headers = [h for h in headers if h.rank is not None]
    if not headers:
        raise ToolError("no torch trace with a rank found", worker_dir)
    windows = sorted({h.window for h in headers})
    if window is None:
        if len(windows) > 1:
            raise ToolError(f"traces of several windows ({', '.join(windows)}): choose one", worker_dir)
        window = windows[0]
    chosen = [h for h in headers if h.window == window]
    if not chosen:
        raise ToolError(f"no trace of window {window!r} (there are: {', '.join(windows)})", worker_dir)
    by_rank: dict[int, TraceHeader] = {}
    for header in chosen:
        if header.rank in by_rank:
            others = f"{by_rank[header.rank].path} and {header.path}"
            raise ToolError(f"two traces of rank {header.rank} in window {window}: {others}", worker_dir)
        by_rank[header.rank] = header
    folder = Path(dest) if dest is not None else Path(tempfile.mkdtemp(prefix="nrlprof-hta-"))
    folder.mkdir(parents=True, exist_ok=True)
    for rank, header in sorted(by_rank.items()):
        _link(header.path, folder, rank)
    return folder


def _link(path: Path, folder: Path, rank: int) -> None:
    """`rank<r>.pt.trace.json[.gz]` in `folder`: a link to the trace `path`, or a copy of it where links fail."""
    suffix = next(s for s in reversed(TRACE_SUFFIXES) if path.name.endswith(s))
    link = folder / f"rank{rank}{suffix}"
    link.unlink(missing_ok=True)
    try:
        os.symlink(path.resolve(), link)
    except OSError:
        shutil.copyfile(path, link)
