"""Summarise a run's profiles: per worker and step, wall time and annotated ranges; top operators and kernels.

The model: `summarize()` returns a `Summary` (its `to_json()` is `summary --json`); the terminal and
HTML views of it live in `nrlprof.tools.render`.

Torch traces are streamed batch by batch. A step's wall time is the duration of its `ProfilerStep#<n>`
user annotation; every other user annotation (nrlprof.annotate, record_function, `<worker>.<method>`
remote calls) is summed per label into the step whose span contains its start ("-" when none does).
Operators (`cpu_op`) are ranked by self time (duration less that of the operators directly inside them on
the same thread); kernels (`cat == "kernel"`) by total time. Nsight Systems reports are summarised with
`nsys stats` when nsys is on PATH. A trace or manifest that cannot be read is listed in `skipped`.
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
from nrlprof.tools.nsys_stats import NsysReport, summarize_nsys
from nrlprof.tools.progress import progress_bar
from nrlprof.tools.traces import (
    TraceHeader,
    check_events,
    find_nsys_reports,
    find_traces,
    gc_paused,
    iter_event_batches,
    unexpected_content,
)

STEP_PREFIX = "ProfilerStep#"
TOP = 10
MAX_SPANS = 2000
_MAX_STEP_DIGITS = 18
_TIME_LIMIT_US = 1e18  # timestamps and durations beyond this (or not finite) are not a profiler's
# Values of types the reader does not expect (a hostile or foreign trace): the trace is skipped.
_CONTENT_ERRORS = (TypeError, AttributeError, ValueError, KeyError, OverflowError, RecursionError)


@dataclass
class OpStat:
    name: str
    calls: int = 0
    total_us: float = 0.0
    self_us: float = 0.0

    def to_json(self) -> dict[str, Any]:
        return {
            "name": self.name,
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
            "steps": {
                str(step): {
                    "wall_ms": round(ms, 3),
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

    @property
    def steps(self) -> list[int]:
        return sorted({step for w in self.workers for step in w.step_wall_ms})

    def to_json(self) -> dict[str, Any]:
        return {
            "directory": str(self.directory),
            "steps": self.steps,
            "workers": [w.to_json() for w in self.workers],
            "nsys_reports": [r.to_json() for r in self.nsys_reports],
            "notes": self.notes,
            "skipped": [{"path": str(p), "reason": reason} for p, reason in self.skipped],
        }


def summarize(directory: Path, nsys: str | None = None, progress: Any = None) -> Summary:
    """Summarise every torch trace and Nsight Systems report under `directory`.

    Unreadable traces are listed in `Summary.skipped`; a missing directory, or one with neither traces
    nor reports, raises ToolError. `nsys` is the nsys executable (default: found on PATH).
    """
    directory = Path(directory)
    headers, skipped = find_traces([directory])
    reports = find_nsys_reports([directory])
    if not headers and not reports:
        reason = "; ".join(r for _, r in skipped) or "no torch trace or Nsight Systems report found"
        raise ToolError(reason, directory)
    summary = Summary(directory, skipped=list(skipped))
    stats: list[TraceStats] = []
    total = sum(h.path.stat().st_size for h in headers)
    done = 0
    with gc_paused():
        for header in sorted(headers, key=TraceHeader.sort_key):
            tick = None if progress is None else (lambda consumed, base=done: progress(base + consumed, total))
            try:
                stats.append(read_trace_stats(header, tick))
            except ToolError as exc:
                summary.skipped.append((header.path, exc.reason))
            except _CONTENT_ERRORS as exc:
                summary.skipped.append((header.path, unexpected_content(exc)))
            done += header.path.stat().st_size
    summary.workers = combine(stats)
    summary.nsys_reports, notes = summarize_nsys(reports, nsys if nsys is not None else shutil.which("nsys"))
    summary.notes.extend(notes)
    notes, bad_manifests = manifest_notes(directory)
    summary.notes.extend(notes)
    summary.skipped.extend(bad_manifests)
    return summary


def manifest_notes(directory: Path) -> tuple[list[str], list[tuple[Path, str]]]:
    """Windows the manifests under `directory` record as not ok, and listed files missing from it.

    A backend none of whose listed files is here (say nsys reports, when `directory` holds only the torch
    traces) is not reported as missing: those files were never meant to be here. Returns the notes and
    the manifests (or records) that could not be read, with the reason.
    """
    from nrlprof.manifest import MANIFEST_GLOB, read_records

    present = {p.name for p in directory.rglob("*") if not p.is_dir()}
    records: list[tuple[Path, dict[str, Any]]] = []
    unreadable: list[tuple[Path, str]] = []
    for manifest in sorted(p for p in directory.rglob(MANIFEST_GLOB) if p.is_file()):
        try:
            not_text = sum(1 for line in manifest.read_bytes().splitlines() if not _is_utf8(line))
            lines = read_records(manifest)  # skips lines that are not UTF-8 JSON objects
        except (OSError, RecursionError, ValueError) as exc:
            unreadable.append((manifest, f"manifest cannot be read ({type(exc).__name__}: {exc})"))
            continue
        if not_text:
            unreadable.append((manifest, f"{not_text} line(s) not UTF-8 text, skipped"))
        for record in lines:
            if not isinstance(record, dict):
                continue
            files = record.get("files")
            if files is not None and not (isinstance(files, list) and all(isinstance(f, str) for f in files)):
                worker = str(record.get("worker", "?"))[:80]
                reason = f"record of {worker}: files is {str(files)[:80]}, expected a list of paths"
                unreadable.append((manifest, reason))
                continue
            records.append((manifest, record))
    found_backends = {
        str(r.get("backend")) for _, r in records if any(Path(f).name in present for f in r.get("files") or [])
    }
    notes = []
    for manifest, record in records:
        where = f"{record.get('worker', '?')} rank {record.get('rank')} window {record.get('window', '?')}"
        where += f" ({record.get('backend', '?')}, {record.get('host', '?')} pid {record.get('pid', '?')})"
        if record.get("status", "ok") != "ok":
            message = f": {record['message']}" if record.get("message") else ""
            notes.append(f"{where}: {record.get('status')}{message}")
            continue
        missing = [Path(f).name for f in record.get("files") or [] if Path(f).name not in present]
        if missing and str(record.get("backend")) in found_backends:
            notes.append(f"{where}: listed in {manifest.name} but not found here: {', '.join(missing)}")
    return notes, unreadable


def _is_utf8(data: bytes) -> bool:
    try:
        data.decode("utf-8")
    except UnicodeDecodeError:
        return False
    return True


def read_trace_stats(header: TraceHeader, progress: Any = None) -> TraceStats:
    stats = TraceStats(header)
    base_us = header.base_time_ns / 1000
    threads: dict[tuple[Any, Any], list[tuple[float, float, str]]] = defaultdict(list)
    annotations: list[tuple[str, float, float]] = []
    bounds = [float("inf"), float("-inf")]
    for batch in iter_event_batches(header.path, progress):
        stats.events += len(batch)
        try:
            _read_batch(batch, threads, annotations, stats.kernels, bounds)
        except (TypeError, AttributeError):
            check_events(batch, header.path)
            raise
    start, end = bounds
    if start <= end:
        stats.start_us, stats.end_us = start + base_us, end + base_us
    _steps_and_ranges(stats, annotations, base_us, header.path)
    stats.ops = _operator_stats(threads)
    return stats


def _read_batch(
    batch: list[dict[str, Any]],
    threads: dict[tuple[Any, Any], list[tuple[float, float, str]]],
    annotations: list[tuple[str, float, float]],
    kernels: dict[str, OpStat],
    bounds: list[float],
) -> None:
    start, end = bounds
    for event in batch:
        if event.get("ph") != "X":
            continue
        ts, dur = event.get("ts"), event.get("dur")
        if ts.__class__ not in (int, float) or dur.__class__ not in (int, float):
            continue
        if not (-_TIME_LIMIT_US < ts < _TIME_LIMIT_US and 0 <= dur < _TIME_LIMIT_US):
            continue
        start, end = min(start, ts), max(end, ts + dur)
        cat, name = event.get("cat"), str(event.get("name", ""))
        if cat == "cpu_op":
            threads[(event.get("pid"), event.get("tid"))].append((ts, dur, name))
        elif cat == "user_annotation":
            annotations.append((name, ts, dur))
        elif cat == "kernel":
            stat = kernels.get(name) or kernels.setdefault(name, OpStat(name))
            stat.calls += 1
            stat.total_us += dur
            stat.self_us += dur
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


def run(args: argparse.Namespace) -> int:
    """0: everything summarised; 1: some traces skipped. Bad input raises ToolError (the CLI's exit code 2)."""
    with progress_bar("reading traces") as progress:
        summary = summarize(args.directory, progress=progress)
    if args.json:
        sys.stdout.write(json.dumps(summary.to_json(), indent=2) + "\n")
        for path, reason in summary.skipped:
            print(f"nrlprof summary: warning: skipped {path}: {reason}", file=sys.stderr)
    else:
        from nrlprof.tools.render.console import render_summary

        render_summary(summary)
    return 1 if summary.skipped else 0
