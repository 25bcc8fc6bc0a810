"""GPU time per step: kernels, communication, copies and how much of the step the GPU was busy.

Each GPU activity (kernel, memcpy, memset) is attributed to one step by an anchor time: the start of the
CPU call that launched it when the source links the two (a correlation id), else the activity's own start.
The anchor falls in at most one step window; an activity whose anchor is in none is left out.
"""

from __future__ import annotations

import bisect
import heapq
import operator
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, fields
from typing import Any

Activity = tuple[float, float, str]  # start, end, name

KERNEL, MEMCPY, MEMSET = 0, 1, 2
COMM_PREFIX = "nccl"  # ncclKernel_*, ncclDevKernel_* (NCCL >= 2.19) and friends
MAX_GPU_SPANS = 2000  # the longest activities kept per trace for the timeline
_START = operator.itemgetter(0)


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
    comm_union_us: float = 0.0  # the union of the collective kernels' intervals
    exposed_comm_us: float = 0.0  # the part of that union no compute kernel overlaps

    def add(self, other: StepGpu) -> None:
        for name in _STEP_GPU_FIELDS:
            setattr(self, name, getattr(self, name) + getattr(other, name))

    def to_json(self) -> dict[str, Any]:
        busy_pct = 100.0 * self.busy_us / self.wall_us if self.wall_us > 0 else 0.0
        return {
            "gpu_kernel_ms": round(self.kernel_us / 1000, 3),
            "gpu_busy_pct": round(min(busy_pct, 100.0), 2),
            "gpu_idle_ms": round(max(self.wall_us - self.busy_us, 0.0) / 1000, 3),
            "comm_ms": round(self.comm_us / 1000, 3),
            "memcpy_ms": round(self.memcpy_us / 1000, 3),
            "gpu_kernels": self.kernels,
            "comm_union_ms": round(self.comm_union_us / 1000, 3),
            "exposed_comm_ms": round(self.exposed_comm_us / 1000, 3),
        }


_STEP_GPU_FIELDS = tuple(f.name for f in fields(StepGpu))


@dataclass
class StepAttribution:
    """Activities grouped into step windows (torch traces; nsys exports are grouped in SQL), all times in µs."""

    windows: list[tuple[float, float, int]]

    def __post_init__(self) -> None:
        self.windows = sorted(self.windows)
        count = len(self.windows)
        self._compute: list[list[float]] = [[] for _ in range(count)]  # kernel durations per window
        self._comm: list[list[float]] = [[] for _ in range(count)]
        self._copies: list[list[float]] = [[] for _ in range(count)]
        self._kernel_spans: list[list[tuple[float, float, bool]]] = [[] for _ in range(count)]  # (s, e, collective)
        self._by_step: dict[int, list[Activity]] = {step: [] for _, _, step in self.windows}
        self._spans = [self._by_step[step] for _, _, step in self.windows]  # a window's step's list
        self._is_comm: dict[str, bool] = {}

    def add_all(self, activities: Iterable[tuple[float, float, int, str, Any]], anchors: dict[Any, float]) -> None:
        """Attribute each (start, duration, kind, name, link).

        `anchors[link]` is the start of the call that launched the activity; without one, its own start counts.
        """
        starts = [start for start, _, _ in self.windows]
        ends = [end for _, end, _ in self.windows]
        compute, comm, copies, spans, kernel_spans = (
            self._compute, self._comm, self._copies, self._spans, self._kernel_spans,
        )  # fmt: skip
        is_comm_cache = self._is_comm
        anchor_of, window_after = anchors.get, bisect.bisect_right
        for start, duration, kind, name, link in activities:
            at = anchor_of(link, start)
            i = window_after(starts, at) - 1
            if i < 0 or at > ends[i]:
                continue
            if kind == KERNEL:
                collective = is_comm_cache.get(name)
                if collective is None:
                    collective = is_comm_cache[name] = is_comm(name)
                (comm if collective else compute)[i].append(duration)
                kernel_spans[i].append((start, start + duration, collective))
            else:
                copies[i].append(duration)
            spans[i].append((start, start + duration, name))

    def attributed(self) -> Iterator[Activity]:
        """(start, end, name) of every activity in a step."""
        for spans in self._by_step.values():
            yield from spans

    def finish(self) -> dict[int, StepGpu]:
        """Per step figures with busy time: the union of the step's activities inside its windows."""
        result = {step: StepGpu() for step in self._by_step}
        for i, (start, end, step) in enumerate(self.windows):
            compute, comm = self._compute[i], self._comm[i]
            comm_us = sum(comm)
            kernels = len(compute) + len(comm)
            result[step].add(StepGpu(end - start, sum(compute) + comm_us, 0.0, comm_us, sum(self._copies[i]), kernels))
            result[step].busy_us += union_length(self._by_step[step], start, end)
            if comm:
                union, exposed = exposed_collectives(self._kernel_spans[i], start, end)
                result[step].comm_union_us += union
                result[step].exposed_comm_us += exposed
        return result


def exposed_collectives(spans: list[tuple[float, float, bool]], lo: float, hi: float) -> tuple[float, float]:
    """(union of the collective spans, the part of it no other span overlaps) within [lo, hi].

    `spans`: (start, end, collective). Interval unions, not sums: a collective hidden under compute is not exposed.
    """
    comm = [(s, e, "") for s, e, collective in spans if collective]
    every = [(s, e, "") for s, e, _ in spans]
    compute = [(s, e, "") for s, e, collective in spans if not collective]
    union = union_length(comm, lo, hi)
    return union, union_length(every, lo, hi) - union_length(compute, lo, hi)


def union_length(spans: list[Activity], lo: float, hi: float) -> float:
    """Length of the union of `spans` clipped to [lo, hi]."""
    total = 0.0
    reach = lo
    for start, end, _ in sorted(spans, key=_START):
        if start >= hi:
            break
        if start < reach:
            start = reach
        if end > hi:
            end = hi
        if end > start:
            total += end - start
            reach = end
    return total


def _length(span: Activity) -> float:
    return span[1] - span[0]


def longest_spans(spans: Iterable[Activity], limit: int = MAX_GPU_SPANS) -> list[Activity]:
    """The `limit` longest (start, end, name) spans, earliest first: a bounded GPU lane to draw.

    Among spans of equal length at the cut, the first given are kept.
    """
    return sorted(heapq.nlargest(limit, spans, key=_length))
