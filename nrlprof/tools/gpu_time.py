"""GPU time per step: kernels, communication, copies and how much of the step the GPU was busy.

Each GPU activity (kernel, memcpy, memset) is attributed to one step by an anchor time: the start of the
CPU call that launched it when the source links the two (a correlation id), else the activity's own start.
The anchor falls in at most one step window; an activity whose anchor is in none is left out.
"""

from __future__ import annotations

import bisect
import heapq
from dataclasses import dataclass, field
from typing import Any

KERNEL, MEMCPY, MEMSET = 0, 1, 2
COMM_PREFIX = "nccl"  # ncclKernel_*, ncclDevKernel_* (NCCL >= 2.19) and friends
MAX_GPU_SPANS = 2000  # the longest activities kept per trace for the timeline


def is_comm(name: str) -> bool:
    """A collective / point-to-point communication kernel (NCCL)."""
    return name.startswith(COMM_PREFIX)


@dataclass
class StepGpu:
    """GPU figures of one step; times in microseconds."""

    wall_us: float = 0.0
    kernel_us: float = 0.0
    busy_us: float = 0.0
    comm_us: float = 0.0
    memcpy_us: float = 0.0
    kernels: int = 0

    def add(self, other: StepGpu) -> None:
        self.wall_us += other.wall_us
        self.kernel_us += other.kernel_us
        self.busy_us += other.busy_us
        self.comm_us += other.comm_us
        self.memcpy_us += other.memcpy_us
        self.kernels += other.kernels

    def to_json(self) -> dict[str, Any]:
        busy_pct = 100.0 * self.busy_us / self.wall_us if self.wall_us > 0 else 0.0
        return {
            "gpu_kernel_ms": round(self.kernel_us / 1000, 3),
            "gpu_busy_pct": round(min(busy_pct, 100.0), 2),
            "gpu_idle_ms": round(max(self.wall_us - self.busy_us, 0.0) / 1000, 3),
            "comm_ms": round(self.comm_us / 1000, 3),
            "memcpy_ms": round(self.memcpy_us / 1000, 3),
            "gpu_kernels": self.kernels,
        }


@dataclass
class GpuActivity:
    """One activity as read; `anchor` is the launching call's start, or None to use `start`."""

    start: float
    end: float
    kind: int
    name: str
    anchor: float | None = None


@dataclass
class StepAttribution:
    """Activities grouped into step windows; every time in one unit (µs for torch, ns for nsys)."""

    windows: list[tuple[float, float, int]]
    per_step: dict[int, StepGpu] = field(default_factory=dict)
    intervals: dict[int, list[tuple[float, float]]] = field(default_factory=dict)
    outside: int = 0

    def __post_init__(self) -> None:
        self.windows = sorted(self.windows)
        self._starts = [w[0] for w in self.windows]
        for start, end, step in self.windows:
            self.per_step.setdefault(step, StepGpu()).wall_us += end - start
            self.intervals.setdefault(step, [])

    def step_of(self, at: float) -> int | None:
        i = bisect.bisect_right(self._starts, at) - 1
        if i >= 0 and at <= self.windows[i][1]:
            return self.windows[i][2]
        return None

    def add(self, start: float, end: float, kind: int, name: str, anchor: float | None) -> int | None:
        step = self.step_of(start if anchor is None else anchor)
        if step is None:
            self.outside += 1
            return None
        figures = self.per_step[step]
        duration = end - start
        if kind == KERNEL:
            figures.kernel_us += duration
            figures.kernels += 1
            if is_comm(name):
                figures.comm_us += duration
        else:
            figures.memcpy_us += duration
        self.intervals[step].append((start, end))
        return step

    def finish(self, scale: float = 1.0) -> dict[int, StepGpu]:
        """Per step figures with busy time (the union of the step's activities inside its windows), times * scale."""
        bounds: dict[int, list[tuple[float, float]]] = {}
        for start, end, step in self.windows:
            bounds.setdefault(step, []).append((start, end))
        result = {}
        for step, figures in self.per_step.items():
            busy = sum(union_length(self.intervals[step], lo, hi) for lo, hi in bounds[step])
            result[step] = StepGpu(figures.wall_us * scale, figures.kernel_us * scale, busy * scale,
                                   figures.comm_us * scale, figures.memcpy_us * scale, figures.kernels)  # fmt: skip
        return result


def union_length(intervals: list[tuple[float, float]], lo: float, hi: float) -> float:
    """Length of the union of `intervals` clipped to [lo, hi]."""
    total = 0.0
    reach = lo
    for start, end in sorted(intervals):
        if start >= hi:
            break
        start, end = max(start, reach), min(end, hi)
        if end > start:
            total += end - start
            reach = end
    return total


class LongestSpans:
    """The `limit` longest (start, end, name) spans seen, for drawing a bounded GPU lane."""

    def __init__(self, limit: int = MAX_GPU_SPANS) -> None:
        self.limit = limit
        self._heap: list[tuple[float, int, tuple[float, float, str]]] = []
        self._count = 0

    def add(self, start: float, end: float, name: str) -> None:
        self._count += 1
        item = (end - start, self._count, (start, end, name))
        if len(self._heap) < self.limit:
            heapq.heappush(self._heap, item)
        elif item[0] > self._heap[0][0]:
            heapq.heapreplace(self._heap, item)

    def spans(self) -> list[tuple[float, float, str]]:
        return sorted(span for _, _, span in self._heap)
