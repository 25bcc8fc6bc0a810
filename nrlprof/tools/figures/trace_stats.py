"""What one torch trace says: per step wall time, annotated ranges, operators, kernels and GPU time.

The trace is streamed batch by batch, each event decoded into the few fields read here
(read.trace_events; a slice with values of other types is read as dicts, then made Events by
`_as_events`). A step's wall time is the duration of its `ProfilerStep#<n>` user annotation; every other
user annotation (nrlprof.annotate, record_function, `<worker>.<method>` remote calls) is summed per label
into the step whose span contains its start ("-" when none does); the `[step n]` nrlprof adds to a range's
name is left out of its label (and gives its step when no step span holds it). Operators (`cpu_op`) get their self
time (duration less that of the operators directly inside them on the same thread); kernels
(`cat == "kernel"`) their total time. GPU time per step (figures.gpu_time): a kernel, memcpy or memset
belongs to the step in which the runtime call that launched it started (linked by `args.correlation`); in
a trace without correlation ids, to the step its own start falls in.
"""

from __future__ import annotations

import heapq
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from nrlprof import layout
from nrlprof.errors import ToolError
from nrlprof.tools.figures.gpu_time import (
    KERNEL,
    MEMCPY,
    MEMSET,
    StepAttribution,
    StepGpu,
    longest_spans,
    union_length,
)
from nrlprof.tools.figures.model import OpStat, Span
from nrlprof.tools.read.trace_events import Args, Event, decode_events
from nrlprof.tools.read.traces import ReadProgress, TraceHeader, check_events, iter_event_batches

STEP_PREFIX = layout.PROFILER_STEP_PREFIX
MAX_SPANS = 2000
_TIME_LIMIT_US = 1e18  # timestamps and durations beyond this (or not finite) are not a profiler's
GPU_CATEGORIES = {"kernel": KERNEL, "gpu_memcpy": MEMCPY, "gpu_memset": MEMSET}
LAUNCH_CATEGORIES = frozenset({"cuda_runtime", "cuda_driver"})
_NUMBERS = (int, float)
CPU_COLLECTIVE_PREFIX = "gloo:"  # gloo's ranges on its own thread: the collective, waiting for the peers included
_NOT_COMPUTE = ("c10d::", "record_param_comms", "gloo:")


def cpu_collectives(
    comm: list[tuple[float, float]], threads: dict[Any, list[tuple[float, float, str]]], steps: list[Span], base: float
) -> dict[int, tuple[float, float]]:
    """Per step (by its ProfilerStep span): the union of a CPU process's collective ranges, and the part of it
    during which no operator ran on any thread (the collective was waited for, not hidden under work)."""
    compute = [
        (ts, ts + dur, "") for spans in threads.values() for ts, dur, name in spans if not name.startswith(_NOT_COMPUTE)
    ]
    collectives = [(start, end, "") for start, end in comm]
    result = {}
    for span in steps:
        lo, hi = span.start_us - base, span.end_us - base
        union = union_length(collectives, lo, hi)
        if union > 0:
            inside = [c for c in compute if c[0] < hi and c[1] > lo]
            exposed = union_length(collectives + inside, lo, hi) - union_length(inside, lo, hi)
            result[int(span.label)] = (union, exposed)
    return result


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
    # GPU activity as read: (ts, dur, kind, name, correlation); launches: correlation -> start of the call
    gpu: list[tuple[float, float, int, str, Any]] = field(default_factory=list)
    launches: dict[Any, float] = field(default_factory=dict)
    names: dict[str, str] = field(default_factory=dict)  # while reading: each name kept once
    step_gpu: dict[int, StepGpu] = field(default_factory=dict)
    gpu_spans: list[Span] = field(default_factory=list)
    cuda_launches: int = 0  # CUDA runtime and driver calls that launched GPU work (correlated or not)
    # A CPU process's collectives (gloo's own ranges): per step, their union and the part no operator overlaps (µs)
    step_cpu_comm: dict[int, tuple[float, float]] = field(default_factory=dict)
    cpu_comm: list[tuple[float, float]] = field(default_factory=list)  # while reading: gloo ranges (ts, end)


def read_trace_stats(header: TraceHeader, progress: ReadProgress | None = None) -> TraceStats:
    """The trace's statistics.

    Raises ToolError for a trace that cannot be read, and TypeError or the like (trace_pool.CONTENT_ERRORS)
    for one whose values have types no profiler writes.
    """
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
    if stats.cpu_comm and not stats.gpu:
        stats.step_cpu_comm = cpu_collectives(stats.cpu_comm, threads, stats.steps, base_us)
    stats.cpu_comm = []
    stats.cuda_launches = len(stats.launches)
    stats.gpu, stats.launches, stats.names = [], {}, {}  # what was read: not sent back from a reader process
    stats.ranges_us = {label: dict(per_step) for label, per_step in stats.ranges_us.items()}  # picklable
    stats.range_calls = dict(stats.range_calls)
    return stats


def _step_gpu(stats: TraceStats, base_us: float) -> None:
    """Per-step GPU figures: by the launching call's correlation when the trace links them, else by time."""
    totals: dict[str, list[float]] = {}  # kernel name -> [calls, total µs]
    for _, dur, kind, name, _ in stats.gpu:
        if kind == KERNEL:
            total = totals.get(name) or totals.setdefault(name, [0, 0.0])
            total[0] += 1
            total[1] += dur
    stats.kernels = {name: OpStat(name, int(calls), us, us) for name, (calls, us) in totals.items()}
    if not stats.gpu:
        return
    attribution = StepAttribution([(s.start_us - base_us, s.end_us - base_us, int(s.label)) for s in stats.steps])
    attribution.add_all(stats.gpu, stats.launches)
    stats.step_gpu = attribution.finish()
    longest = longest_spans(attribution.attributed())
    stats.gpu_spans = [Span(name, start + base_us, end + base_us) for start, end, name in longest]


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
    """Operators, launches, GPU activities and annotations of `events`, and the trace's time bounds.

    Names of operators and GPU activities are kept once each (msgspec makes a new string per event; a kernel
    name can be kilobytes long).
    """
    gpu, launches, names = stats.gpu, stats.launches, stats.names.setdefault
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
            threads[(event.pid, event.tid)].append((ts, dur, names(event.name, event.name)))
        elif cat in LAUNCH_CATEGORIES:
            args = event.args
            if args is not None and (correlation := args.correlation) is not None:
                launches[correlation] = ts
        elif cat in GPU_CATEGORIES:
            args = event.args
            name = names(event.name, event.name)
            gpu.append((ts, dur, GPU_CATEGORIES[cat], name, None if args is None else args.correlation))
        elif cat == "user_annotation":
            annotations.append((event.name, ts, dur))
            if event.name.startswith(CPU_COLLECTIVE_PREFIX):
                stats.cpu_comm.append((ts, ts + dur))
    bounds[:] = start, end


def step_number(name: str) -> int | None:
    """n of `ProfilerStep#<n>`; None for other names. Raises ToolError for a step name with no number."""
    if not name.startswith(STEP_PREFIX):
        return None
    step = layout.step_number(name, STEP_PREFIX)
    if step is None:
        raise ToolError(f"a step annotation is named {name[:60]!r}, expected {STEP_PREFIX}<n>")
    return step


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
        label, named_step = layout.range_label(name)  # `<label> [step n]`: one label across steps
        step = next((s for lo, hi, s in windows if lo <= ts <= hi), named_step)
        stats.ranges_us[label][step] += dur
        stats.range_calls[label] += 1
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
