"""Summarise a run's profiles: per worker and step, wall time and annotated ranges; top operators and kernels.

Torch traces are streamed batch by batch. A step's wall time is the duration of its `ProfilerStep#<n>`
user annotation; every other user annotation (nrlprof.annotate, record_function, `<worker>.<method>`
remote calls) is summed per label into the step whose span contains its start ("-" when none does).
Operators (`cpu_op`) are ranked by self time (duration less that of the operators directly inside them on
the same thread); kernels (`cat == "kernel"`) by total time. Nsight Systems reports are summarised with
`nsys stats` when nsys is on PATH.
"""

from __future__ import annotations

import argparse
import csv
import heapq
import io
import json
import re
import shutil
import subprocess
import sys
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from nrlprof.errors import ToolError
from nrlprof.tools.traces import (
    TraceHeader,
    find_nsys_reports,
    find_traces,
    gc_paused,
    iter_event_batches,
    progress_bar,
)

STEP_PREFIX = "ProfilerStep#"
TOP = 10
MAX_SPANS = 2000
NSYS_REPORTS = (("cuda_gpu_kern_sum", "nvtx_sum"), ("gpukernsum", "nvtxppsum"))
NSYS_TIMEOUT_S = 600
_NSYS_NAME = re.compile(r"^(?P<worker>.+?)_(?P<window>\d+(?:-\d+)?(?:_\d+(?:-\d+)?)*)_(?P<pid>\d+)(?:[._-]\d+)*$")


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
        if self.worker == "controller" and self.rank is None:
            return "controller"
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
class NsysReport:
    path: Path
    worker: str
    window: str
    pid: int | None
    kernels: list[dict[str, str]] = field(default_factory=list)
    nvtx: list[dict[str, str]] = field(default_factory=list)
    error: str | None = None

    def to_json(self) -> dict[str, Any]:
        return {
            "path": str(self.path),
            "worker": self.worker,
            "window": self.window,
            "pid": self.pid,
            "kernels": self.kernels,
            "nvtx": self.nvtx,
            "error": self.error,
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
            done += header.path.stat().st_size
    summary.workers = combine(stats)
    summary.nsys_reports, notes = summarize_nsys(reports, nsys if nsys is not None else shutil.which("nsys"))
    summary.notes.extend(notes)
    summary.notes.extend(manifest_notes(directory))
    return summary


def manifest_notes(directory: Path) -> list[str]:
    """Windows the manifests under `directory` record as not ok, and listed files missing from it.

    A backend none of whose listed files is here (say nsys reports, when `directory` holds only the torch
    traces) is not reported as missing: those files were never meant to be here.
    """
    from nrlprof.manifest import MANIFEST_GLOB, read_records

    present = {p.name for p in directory.rglob("*") if not p.is_dir()}
    records = [
        (manifest, record)
        for manifest in sorted(directory.rglob(MANIFEST_GLOB))
        for record in read_records(manifest)
        if isinstance(record, dict)
    ]
    found_backends = {
        r.get("backend") for _, r in records if any(Path(f).name in present for f in r.get("files") or [])
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
        if missing and record.get("backend") in found_backends:
            notes.append(f"{where}: listed in {manifest.name} but not found here: {', '.join(missing)}")
    return notes


def read_trace_stats(header: TraceHeader, progress: Any = None) -> TraceStats:
    stats = TraceStats(header)
    base_us = header.base_time_ns / 1000
    threads: dict[tuple[Any, Any], list[tuple[float, float, str]]] = defaultdict(list)
    annotations: list[tuple[str, float, float]] = []
    kernels = stats.kernels
    start, end = float("inf"), float("-inf")
    for batch in iter_event_batches(header.path, progress):
        stats.events += len(batch)
        for event in batch:
            if event.get("ph") != "X":
                continue
            ts, dur = event.get("ts"), event.get("dur")
            if not isinstance(ts, (int, float)) or not isinstance(dur, (int, float)):
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
    if start <= end:
        stats.start_us, stats.end_us = start + base_us, end + base_us
    _steps_and_ranges(stats, annotations, base_us)
    stats.ops = _operator_stats(threads)
    return stats


def _steps_and_ranges(stats: TraceStats, annotations: list[tuple[str, float, float]], base_us: float) -> None:
    windows: list[tuple[float, float, int]] = []
    for name, ts, dur in annotations:
        if name.startswith(STEP_PREFIX) and name[len(STEP_PREFIX) :].isdigit():
            step = int(name[len(STEP_PREFIX) :])
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
        worker = "controller" if header.is_controller else header.worker
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


def summarize_nsys(reports: list[Path], nsys: str | None) -> tuple[list[NsysReport], list[str]]:
    """Kernel and NVTX summaries of each report via `nsys stats`; a note instead when nsys is missing."""
    parsed = []
    for path in reports:
        stem = path.name.rsplit(".", 1)[0]
        match = _NSYS_NAME.match(stem)
        parts = match.groupdict() if match else {"worker": stem, "window": "", "pid": None}
        parsed.append(NsysReport(path, parts["worker"], parts["window"], int(parts["pid"]) if parts["pid"] else None))
    if not reports:
        return [], []
    if nsys is None:
        return parsed, [f"nsys not found: install Nsight Systems to summarise {len(reports)} report(s)"]
    for report in parsed:
        try:
            report.kernels, report.nvtx = nsys_stats(nsys, report.path)
        except ToolError as exc:
            report.error = exc.reason
    return parsed, []


def nsys_stats(nsys: str, path: Path) -> tuple[list[dict[str, str]], list[dict[str, str]]]:
    """(kernel rows, NVTX rows): the current report names first, the pre-2023 ones if nsys rejects them."""
    errors = []
    for names in NSYS_REPORTS:
        command = [nsys, "stats", "--report", ",".join(names), "--format", "csv", "--output", "-", str(path)]
        try:
            run = subprocess.run(command, capture_output=True, text=True, timeout=NSYS_TIMEOUT_S)
        except (OSError, subprocess.TimeoutExpired) as exc:
            raise ToolError(f"nsys stats failed: {exc}", path) from exc
        kernels, nvtx = parse_nsys_csv(run.stdout)
        if run.returncode == 0 or kernels or nvtx:
            return kernels, nvtx
        detail = (run.stderr or run.stdout).strip().splitlines()
        errors.append(f"{','.join(names)}: {detail[-1] if detail else f'exit status {run.returncode}'}")
    raise ToolError("nsys stats failed: " + "; ".join(errors), path)


def parse_nsys_csv(text: str) -> tuple[list[dict[str, str]], list[dict[str, str]]]:
    """Rows of the kernel and NVTX tables in `nsys stats --format csv --output -` output.

    A table starts at a header row with `Instances` and a `Time...` column and runs while rows have as
    many fields; kernels have a `Name` column, NVTX ranges a `Range` column. Other lines (progress
    messages, "SKIPPED: ..." notices) are ignored.
    """
    kernels: list[dict[str, str]] = []
    nvtx: list[dict[str, str]] = []
    header: list[str] | None = None
    for fields in csv.reader(io.StringIO(text)):
        fields = [f.strip() for f in fields]
        if header is not None and len(fields) == len(header):
            (nvtx if "Range" in header else kernels).append(dict(zip(header, fields, strict=True)))
            continue
        header = None
        if "Instances" in fields and any(f.startswith("Time") for f in fields) and ({"Name", "Range"} & set(fields)):
            header = fields
    return kernels, nvtx


def render(summary: Summary, console: Any = None) -> None:
    """Rich tables on the terminal."""
    from rich.console import Console
    from rich.table import Table

    console = console or Console()
    steps = summary.steps
    if summary.workers:
        table = Table(title="Step wall time (ms)")
        table.add_column("worker")
        for step in steps:
            table.add_column(str(step), justify="right")
        for w in summary.workers:
            table.add_row(w.label, *[_ms(w.step_wall_ms.get(step)) for step in steps])
        console.print(table)
        outside = any(None in per for w in summary.workers for per in w.ranges_ms.values())
        columns: list[int | None] = [*steps, None] if outside else list(steps)
        title = "Annotated ranges (ms per step" + ("; '-' = outside any profiled step)" if outside else ")")
        table = Table(title=title)
        table.add_column("worker")
        table.add_column("range")
        table.add_column("calls", justify="right")
        for step in columns:
            table.add_column(str(step) if step is not None else "-", justify="right")
        for w in summary.workers:
            for label, per_step in sorted(w.ranges_ms.items()):
                table.add_row(
                    w.label, label, str(w.range_calls.get(label, 0)), *[_ms(per_step.get(s)) for s in columns]
                )
        if table.row_count:
            console.print(table)
        for title, attr in (("Top operators (by self time)", "ops"), ("Top kernels (by total time)", "kernels")):
            table = Table(title=title)
            for name, justify in (("worker", "left"), ("name", "left"), ("calls", "right"), ("self ms", "right"),
                                  ("total ms", "right")):  # fmt: skip
                table.add_column(name, justify=justify, overflow="fold")
            for w in summary.workers:
                for op in getattr(w, attr):
                    table.add_row(w.label, op.name, str(op.calls), _ms(op.self_us / 1000), _ms(op.total_us / 1000))
            if table.row_count:
                console.print(table)
    for report in summary.nsys_reports:
        _render_nsys(report, console)
    for path, reason in summary.skipped:
        console.print(f"[yellow]skipped[/] {path}: {reason}")
    for note in summary.notes:
        console.print(f"[yellow]note:[/] {note}")


def _render_nsys(report: NsysReport, console: Any) -> None:
    from rich.table import Table

    if report.error:
        console.print(f"[red]{report.path}[/]: {report.error}")
        return
    for title, rows, key in (("kernels", report.kernels, "Name"), ("NVTX ranges", report.nvtx, "Range")):
        if not rows:
            continue
        table = Table(title=f"{report.path.name}: {title}")
        columns = [c for c in rows[0] if c in (key, "Instances") or c.startswith(("Time", "Total Time"))]
        for column in columns:
            table.add_column(column, overflow="fold")
        for row in rows[:TOP]:
            table.add_row(*[row.get(c, "") for c in columns])
        console.print(table)


def _ms(value: float | None) -> str:
    return "" if value is None else f"{value:,.1f}"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("directory", type=Path, help="directory holding traces and reports (searched recursively)")
    parser.add_argument("--json", action="store_true", help="print the summary as JSON")


def run(args: argparse.Namespace) -> int:
    """0: everything summarised; 1: some traces skipped; 2: bad input."""
    try:
        with progress_bar("reading traces") as progress:
            summary = summarize(args.directory, progress=progress)
    except ToolError as exc:
        print(f"nrlprof summary: error: {exc}", file=sys.stderr)
        return 2
    if args.json:
        sys.stdout.write(json.dumps(summary.to_json(), indent=2) + "\n")
        for path, reason in summary.skipped:
            print(f"nrlprof summary: warning: skipped {path}: {reason}", file=sys.stderr)
    else:
        render(summary)
    return 1 if summary.skipped else 0
