"""Summarise a run's profiles: per worker and step, wall time and annotated ranges; top operators and kernels.

`summarize()` returns a `Summary` (figures.model; its `to_json()` is `summary --json`); the terminal and
HTML views of it live in `nrlprof.tools.render`. Torch traces are read one by one (figures.trace_stats),
several at once (figures.trace_pool), and combined per worker rank. Nsight Systems captures give the same
per-step figures from their SQLite export (figures.nsys_capture), and whole-report tables from `nsys stats`
when nsys is on PATH. A trace or manifest that cannot be read is listed in `skipped`.
"""

from __future__ import annotations

import shutil
from collections import defaultdict
from pathlib import Path
from typing import Any

from nrlprof.errors import ToolError
from nrlprof.layout import CONTROLLER
from nrlprof.tools.figures.gpu_time import StepGpu
from nrlprof.tools.figures.model import TOP, OpStat, Span, Summary, WorkerSummary
from nrlprof.tools.figures.nsys_capture import NsysCapture, export_stem, read_reports
from nrlprof.tools.figures.sections import sections
from nrlprof.tools.figures.stragglers import stragglers
from nrlprof.tools.figures.trace_pool import default_jobs, read_traces
from nrlprof.tools.figures.trace_stats import TraceStats
from nrlprof.tools.read.inputs import find_inputs
from nrlprof.tools.read.manifests import read_manifests
from nrlprof.tools.read.nsys_stats import summarize_nsys
from nrlprof.tools.read.traces import TraceHeader, read_headers


def summarize(directory: Path, nsys: str | None = None, progress: Any = None, jobs: int | None = None) -> Summary:
    """Summarise every torch trace and Nsight Systems report under `directory`.

    Unreadable traces are listed in `Summary.skipped` (every one may be); a missing directory, or one with
    nothing to summarise, readable or not, raises ToolError. `nsys` is the nsys executable (default: found on
    PATH). `jobs`: processes reading traces at once (default: trace_pool.default_jobs).
    """
    directory = Path(directory)
    found = find_inputs([directory])  # the one walk of the directory
    headers, skipped = read_headers(found.traces)
    reports, exports = found.nsys_reports, found.nsys_exports
    parts = sections(directory, found) if directory.is_dir() else {}
    if not headers and not skipped and not reports and not exports and not parts:
        raise ToolError("no torch trace or Nsight Systems report found (nor memory or step-anatomy files)", directory)
    summary = Summary(directory, skipped=list(skipped), sections=parts)
    summary.skipped.extend((Path(s["path"]), s["reason"]) for s in parts.get("memory", {}).get("skipped", []))
    stats: list[TraceStats] = []
    ordered = sorted(headers, key=TraceHeader.sort_key)
    for header, outcome in read_traces(ordered, default_jobs(ordered) if jobs is None else jobs, progress):
        if isinstance(outcome, TraceStats):
            stats.append(outcome)
        else:
            summary.skipped.append((header.path, outcome))
    summary.workers = combine(stats)
    nsys = nsys if nsys is not None else shutil.which("nsys")
    summary.nsys_reports, notes = summarize_nsys(reports, nsys)
    summary.notes.extend(notes)
    manifests = read_manifests(found)
    captures, notes = read_reports(reports, exports, nsys or None)
    summary.workers.extend(capture_summary(c, manifests.rank_of_file) for c in captures)
    summary.notes.extend(notes)
    summary.notes.extend(manifests.notes)
    summary.skipped.extend(manifests.unreadable)
    summary.overhead = manifests.overhead
    summary.stragglers = stragglers(summary.workers)
    return summary


def capture_summary(capture: NsysCapture, rank_of_file: dict[str, int]) -> WorkerSummary:
    """An Nsight Systems capture as a worker entry: steps from NVTX, GPU figures from its export."""
    stem = export_stem(capture.path)
    rank = next((r for name, r in rank_of_file.items() if export_stem(Path(name)) == stem), None)
    summary = WorkerSummary(capture.worker, rank, files=[capture.path], source="nsys")
    for start, end, step in capture.steps:
        summary.step_wall_ms[step] = summary.step_wall_ms.get(step, 0.0) + (end - start) / 1000
        summary.steps.append(Span(str(step), start, end))
    summary.step_gpu = capture.step_gpu
    windows = sorted((lo, hi, step) for lo, hi, step in capture.steps)
    for label, start, end in capture.ranges:
        step = next((s for lo, hi, s in windows if lo <= start <= hi), None)
        per_step = summary.ranges_ms.setdefault(label, {})
        per_step[step] = per_step.get(step, 0.0) + (end - start) / 1000
        summary.range_calls[label] = summary.range_calls.get(label, 0) + 1
        summary.ranges.append(Span(label, start, end))
    kernels = [OpStat(name, calls, total, total) for name, (calls, total) in capture.kernels.items()]
    summary.kernels = sorted(kernels, key=lambda s: -s.total_us)[:TOP]
    summary.gpu_spans = [Span(name, start, end) for start, end, name in capture.gpu_spans]
    return summary


def combine(stats: list[TraceStats]) -> list[WorkerSummary]:
    """Trace statistics grouped per (worker, rank), in the order the traces were given."""
    groups: dict[tuple[str, int | None], WorkerSummary] = {}
    ops: dict[tuple[str, int | None], dict[str, OpStat]] = defaultdict(dict)
    kernels: dict[tuple[str, int | None], dict[str, OpStat]] = defaultdict(dict)
    for item in stats:
        header = item.header
        worker = CONTROLLER if header.is_controller else header.worker
        key = (worker, None if header.is_controller else header.rank)
        summary = groups.get(key) or groups.setdefault(key, WorkerSummary(worker, key[1]))
        if header.host not in summary.hosts:
            summary.hosts.append(header.host)
        summary.files.append(header.path)
        for step, us in item.step_wall_us.items():
            summary.step_wall_ms[step] = summary.step_wall_ms.get(step, 0.0) + us / 1000
        for label, per_step in item.ranges_us.items():
            target = summary.ranges_ms.setdefault(label, {})
            for step, us in per_step.items():
                target[step] = target.get(step, 0.0) + us / 1000
        for label, calls in item.range_calls.items():
            summary.range_calls[label] = summary.range_calls.get(label, 0) + calls
        _add_stats(ops[key], item.ops)
        _add_stats(kernels[key], item.kernels)
        summary.steps.extend(item.steps)
        summary.ranges.extend(item.ranges)
        summary.gpu_spans.extend(item.gpu_spans)
        for step, figures in item.step_gpu.items():
            summary.step_gpu.setdefault(step, StepGpu()).add(figures)
    for key, summary in groups.items():
        summary.ops = sorted(ops[key].values(), key=lambda s: -s.self_us)[:TOP]
        summary.kernels = sorted(kernels[key].values(), key=lambda s: -s.total_us)[:TOP]
    return list(groups.values())


def _add_stats(into: dict[str, OpStat], stats: dict[str, OpStat]) -> None:
    for name, stat in stats.items():
        total = into.get(name) or into.setdefault(name, OpStat(name))
        total.calls += stat.calls
        total.total_us += stat.total_us
        total.self_us += stat.self_us
