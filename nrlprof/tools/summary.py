"""Summarise a run's profiles: per worker and step, wall time and annotated ranges; top operators and kernels.

The model: `summarize()` returns a `Summary` (its `to_json()` is `summary --json`); the terminal and
HTML views of it live in `nrlprof.tools.render`.

Torch traces are streamed batch by batch, each event decoded into the few fields summary reads
(tools.trace_events; a slice with values of other types is read as dicts, then made Events by `_as_events`). A step's
wall time is the duration of its `ProfilerStep#<n>` user annotation; every other user annotation
(nrlprof.annotate, record_function, `<worker>.<method>` remote calls) is summed per label into the step
whose span contains its start ("-" when none does). Operators (`cpu_op`) are ranked by self time
(duration less that of the operators directly inside them on the same thread); kernels
(`cat == "kernel"`) by total time. GPU time per step (nrlprof.tools.gpu_time): a kernel, memcpy or
memset belongs to the step in which the runtime call that launched it started (linked by
`args.correlation`); in a trace without correlation ids, to the step its own start falls in.
Nsight Systems captures give the same per-step figures from their SQLite export (tools.nsys_sqlite), and
whole-report tables from `nsys stats` when nsys is on PATH. A trace or manifest that cannot be read is
listed in `skipped`.
"""

from __future__ import annotations

import argparse
import heapq
import json
import shutil
import sys
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from nrlprof.errors import ToolError
from nrlprof.layout import CONTROLLER
from nrlprof.tools.gpu_time import KERNEL, MEMCPY, MEMSET, LongestSpans, StepAttribution, StepGpu
from nrlprof.tools.kernel_names import short_kernel_name
from nrlprof.tools.manifest_view import Overhead, read_manifests
from nrlprof.tools.nsys_sqlite import NsysCapture, export_stem, read_reports
from nrlprof.tools.nsys_stats import NsysReport, summarize_nsys
from nrlprof.tools.progress import progress_bar
from nrlprof.tools.summary_sections import sections
from nrlprof.tools.trace_events import Args, Event, decode_events
from nrlprof.tools.trace_pool import default_jobs, read_traces
from nrlprof.tools.traces import (
    TraceHeader,
    check_events,
    find_nsys_exports,
    find_nsys_reports,
    find_traces,
    gc_paused,
    iter_event_batches,
)

STEP_PREFIX = "ProfilerStep#"
TOP = 10
MAX_SPANS = 2000
_MAX_STEP_DIGITS = 18
_TIME_LIMIT_US = 1e18  # timestamps and durations beyond this (or not finite) are not a profiler's
GPU_CATEGORIES = {"kernel": KERNEL, "gpu_memcpy": MEMCPY, "gpu_memset": MEMSET}
LAUNCH_CATEGORIES = frozenset({"cuda_runtime", "cuda_driver"})
_NUMBERS = (int, float)


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
class TraceStats:
    """What one trace file says."""

    header: TraceHeader
    events: int = 0
    step_wall_us: dict[int, float] = field(default_factory=dict)
    steps: list[Span] = field(default_factory=list)
    ranges_us: dict[str, dict[int | None, float]] = field(
        default_factory=lambda: defaultdict(lambda: defaultdict(float))
    )
    range_calls: dict[str, int] = field(default_factory=lambda: defaultdict(int))
    ranges: list[Span] = field(default_factory=list)
    ops: dict[str, OpStat] = field(default_factory=dict)
    kernels: dict[str, OpStat] = field(default_factory=dict)
    start_us: float | None = None
    end_us: float | None = None
    # GPU activity as read: (ts, dur, kind, correlation, name); launches: correlation -> start of the call
    gpu: list[tuple[float, float, int, Any, str]] = field(default_factory=list)
    launches: dict[Any, float] = field(default_factory=dict)
    step_gpu: dict[int, StepGpu] = field(default_factory=dict)
    gpu_spans: list[Span] = field(default_factory=list)


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


@dataclass
class Summary:
    directory: Path
    workers: list[WorkerSummary] = field(default_factory=list)
    nsys_reports: list[NsysReport] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    skipped: list[tuple[Path, str]] = field(default_factory=list)
    overhead: list[Overhead] = field(default_factory=list)
    hta: list[dict[str, Any]] | None = None  # HolisticTraceAnalysis figures, when asked for
    sections: dict[str, Any] = field(default_factory=dict)  # "memory", "anatomy" where their files exist

    @property
    def steps(self) -> list[int]:
        return sorted({step for w in self.workers for step in w.step_wall_ms})

    def to_json(self) -> dict[str, Any]:
        from nrlprof.tools.stragglers import stragglers

        return {
            "directory": str(self.directory),
            "steps": self.steps,
            "workers": [w.to_json() for w in self.workers],
            "stragglers": {str(step): [s.to_json() for s in rows] for step, rows in stragglers(self).items()},
            "profiler_overhead": [o.to_json() for o in self.overhead],
            **({"hta": self.hta} if self.hta is not None else {}),
            **self.sections,
            "nsys_reports": [r.to_json() for r in self.nsys_reports],
            "notes": self.notes,
            "skipped": [{"path": str(p), "reason": reason} for p, reason in self.skipped],
        }


def summarize(directory: Path, nsys: str | None = None, progress: Any = None, jobs: int | None = None) -> Summary:
    """Summarise every torch trace and Nsight Systems report under `directory`.

    Unreadable traces are listed in `Summary.skipped`; a missing directory, or one with neither traces
    nor reports, raises ToolError. `nsys` is the nsys executable (default: found on PATH). `jobs`:
    processes reading traces at once (default: trace_pool.default_jobs).
    """
    directory = Path(directory)
    headers, skipped = find_traces([directory])
    reports = find_nsys_reports([directory])
    exports = find_nsys_exports([directory])
    found = sections(directory) if directory.is_dir() else {}
    if not headers and not reports and not exports and not found:
        nothing = "no torch trace or Nsight Systems report found (nor memory or step-anatomy files)"
        reason = "; ".join(r for _, r in skipped) or nothing
        raise ToolError(reason, directory)
    summary = Summary(directory, skipped=list(skipped), sections=found)
    summary.skipped.extend((Path(s["path"]), s["reason"]) for s in found.get("memory", {}).get("skipped", []))
    stats: list[TraceStats] = []
    ordered = sorted(headers, key=TraceHeader.sort_key)
    with gc_paused():
        for header, outcome in read_traces(ordered, default_jobs(ordered) if jobs is None else jobs, progress):
            if isinstance(outcome, TraceStats):
                stats.append(outcome)
            else:
                summary.skipped.append((header.path, outcome))
    summary.workers = combine(stats)
    nsys = nsys if nsys is not None else shutil.which("nsys")
    summary.nsys_reports, notes = summarize_nsys(reports, nsys)
    summary.notes.extend(notes)
    manifests = read_manifests(directory)
    captures, notes = read_reports(reports, exports, nsys or None)
    summary.workers.extend(capture_summary(c, manifests.rank_of_file) for c in captures)
    summary.notes.extend(notes)
    summary.notes.extend(manifests.notes)
    summary.skipped.extend(manifests.unreadable)
    summary.overhead = manifests.overhead
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


def read_trace_stats(header: TraceHeader, progress: Any = None) -> TraceStats:
    stats = TraceStats(header)
    base_us = header.base_time_ns / 1000
    threads: dict[tuple[Any, Any], list[tuple[float, float, str]]] = defaultdict(list)
    annotations: list[tuple[str, float, float]] = []
    bounds = [float("inf"), float("-inf")]
    for batch in iter_event_batches(header.path, progress, decode_events):
        stats.events += len(batch)
        try:
            events = batch if batch and batch[0].__class__ is Event else _as_events(batch)
            _read_events(events, threads, annotations, stats, bounds)
        except (TypeError, AttributeError):
            check_events(batch, header.path)
            raise
    start, end = bounds
    if start <= end:
        stats.start_us, stats.end_us = start + base_us, end + base_us
    _steps_and_ranges(stats, annotations, base_us, header.path)
    stats.ops = _operator_stats(threads)
    _step_gpu(stats, base_us)
    stats.ranges_us = {label: dict(per_step) for label, per_step in stats.ranges_us.items()}  # picklable
    stats.range_calls = dict(stats.range_calls)
    return stats


def _step_gpu(stats: TraceStats, base_us: float) -> None:
    """Per-step GPU figures: by the launching call's correlation when the trace links them, else by time."""
    kernels = stats.kernels
    for _, dur, kind, _, name in stats.gpu:
        if kind == KERNEL:
            stat = kernels.get(name) or kernels.setdefault(name, OpStat(name))
            stat.calls += 1
            stat.total_us += dur
            stat.self_us += dur
    if not stats.gpu:
        return
    windows = [(s.start_us - base_us, s.end_us - base_us, int(s.label)) for s in stats.steps]
    attribution = StepAttribution(windows)
    longest = LongestSpans()
    launches = stats.launches
    add, keep = attribution.add, longest.add
    for ts, dur, kind, correlation, name in stats.gpu:
        if add(ts, ts + dur, kind, name, launches.get(correlation)) is not None:
            keep(ts + base_us, ts + dur + base_us, name)
    stats.step_gpu = attribution.finish()
    stats.gpu_spans = [Span(name, start, end) for start, end, name in longest.spans()]
    stats.gpu, stats.launches = [], {}


def _as_events(batch: list[dict[str, Any]]) -> list[Event]:
    """A slice read as dicts (values of types a profiler does not write) as the Events `_read_events` takes.

    Complete events with numeric times only; names made strings; `args` looked at only for the categories
    whose correlation is read (where a value that is no object raises, as it is a trace nrlprof cannot read).
    """
    events = []
    limit = _TIME_LIMIT_US
    for event in batch:
        if event.get("ph") != "X":
            continue
        ts, dur = event.get("ts"), event.get("dur")
        if (
            ts.__class__ not in _NUMBERS
            or dur.__class__ not in _NUMBERS
            or not (-limit < ts < limit and 0 <= dur < limit)
        ):
            continue
        cat, name, args = event.get("cat"), event.get("name", ""), event.get("args")
        linked = cat != "cpu_op" and (cat in LAUNCH_CATEGORIES or cat in GPU_CATEGORIES)
        correlation = Args(args.get("correlation") if args else None) if linked else None
        name = name if name.__class__ is str else str(name)
        events.append(Event("X", cat, name, ts, dur, event.get("pid"), event.get("tid"), correlation))
    return events


def _read_events(
    events: list[Event],
    threads: dict[tuple[Any, Any], list[tuple[float, float, str]]],
    annotations: list[tuple[str, float, float]],
    stats: TraceStats,
    bounds: list[float],
) -> None:
    """Operators, launches, GPU activities and annotations of `events`, and the trace's time bounds."""
    gpu, launches = stats.gpu, stats.launches
    start, end = bounds
    limit = _TIME_LIMIT_US
    for event in events:
        if event.ph != "X":
            continue
        ts, dur = event.ts, event.dur
        if ts is None or dur is None or not (-limit < ts < limit and 0 <= dur < limit):
            continue
        if ts < start:
            start = ts
        if ts + dur > end:
            end = ts + dur
        cat = event.cat
        if cat == "cpu_op":
            threads[(event.pid, event.tid)].append((ts, dur, event.name))
        elif cat in LAUNCH_CATEGORIES:
            args = event.args
            if args is not None and (correlation := args.correlation) is not None:
                launches[correlation] = ts
        elif cat in GPU_CATEGORIES:
            args = event.args
            gpu.append((ts, dur, GPU_CATEGORIES[cat], None if args is None else args.correlation, event.name))
        elif cat == "user_annotation":
            annotations.append((event.name, ts, dur))
    bounds[:] = start, end


def step_number(name: str) -> int | None:
    """n of `ProfilerStep#<n>`; None for other names. Raises ToolError for a step name with no number."""
    if not name.startswith(STEP_PREFIX):
        return None
    digits = name[len(STEP_PREFIX) :]
    if not (digits.isascii() and digits.isdigit() and len(digits) <= _MAX_STEP_DIGITS):
        raise ToolError(f"a step annotation is named {name[:60]!r}, expected {STEP_PREFIX}<n>")
    return int(digits)


def _steps_and_ranges(
    stats: TraceStats, annotations: list[tuple[str, float, float]], base_us: float, path: Path
) -> None:
    windows: list[tuple[float, float, int]] = []
    for name, ts, dur in annotations:
        try:
            step = step_number(name)
        except ToolError as exc:
            raise ToolError(exc.reason, path) from None
        if step is not None:
            stats.step_wall_us[step] = stats.step_wall_us.get(step, 0.0) + dur
            windows.append((ts, ts + dur, step))
            stats.steps.append(Span(str(step), ts + base_us, ts + dur + base_us))
    windows.sort()
    longest: list[tuple[float, int, Span]] = []
    for index, (name, ts, dur) in enumerate(annotations):
        if name.startswith(STEP_PREFIX):
            continue
        step = next((s for lo, hi, s in windows if lo <= ts <= hi), None)
        stats.ranges_us[name][step] += dur
        stats.range_calls[name] += 1
        item = (dur, -index, Span(name, ts + base_us, ts + dur + base_us))
        if len(longest) < MAX_SPANS:
            heapq.heappush(longest, item)
        elif dur > longest[0][0]:
            heapq.heapreplace(longest, item)
    stats.ranges = sorted((span for _, _, span in longest), key=lambda s: s.start_us)


def _operator_stats(threads: dict[tuple[Any, Any], list[tuple[float, float, str]]]) -> dict[str, OpStat]:
    ops: dict[str, OpStat] = {}
    for spans in threads.values():
        spans.sort(key=lambda s: (s[0], -s[1]))
        stack: list[tuple[float, OpStat]] = []  # (end, stat) of the open operators
        for ts, dur, name in spans:
            while stack and stack[-1][0] <= ts:
                stack.pop()
            stat = ops.get(name) or ops.setdefault(name, OpStat(name))
            stat.calls += 1
            stat.total_us += dur
            stat.self_us += dur
            if stack:
                stack[-1][1].self_us -= dur
            stack.append((ts + dur, stat))
    return ops


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


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("directory", type=Path, help="directory holding traces and reports (searched recursively)")
    parser.add_argument("--json", action="store_true", help="print the summary as JSON")
    hta = "add HolisticTraceAnalysis's temporal breakdown and comm/compute overlap per rank (slow)"
    parser.add_argument("--hta", action="store_true", help=hta)


def run(args: argparse.Namespace) -> int:
    """0: everything summarised; 1: some traces skipped. Bad input raises ToolError (the CLI's exit code 2)."""
    with progress_bar("reading traces") as progress:
        summary = summarize(args.directory, progress=progress)
    if getattr(args, "hta", False):
        from nrlprof.tools.hta_figures import hta_figures

        summary.hta, notes = hta_figures(summary)
        summary.notes.extend(notes)
    if args.json:
        sys.stdout.write(json.dumps(summary.to_json(), indent=2) + "\n")
        for path, reason in summary.skipped:
            print(f"nrlprof summary: warning: skipped {path}: {reason}", file=sys.stderr)
    else:
        from nrlprof.tools.render.console import render_summary

        render_summary(summary)
    return 1 if summary.skipped else 0
