"""Which step is slow, and when the next verdict may come: pure arithmetic on step wall times and call spans.

A step is slow when its wall time is at least `factor` times the median of the steps before it: up to HISTORY of them,
and no verdict before MIN_HISTORY. Only steps with no window in them count (a profiled step is slower by the profiler),
and after a trigger the next QUIET_STEPS steps enter the median with no verdict: by then more than half of the median's
steps came after the trigger, so a run of slow steps, or a machine that stays busy, has become the median and triggers
no more, while a one-off slow step has left it again (docs/design.md, "Windows that open themselves").
A rank straggles when its call takes `factor` times the median of its peers' calls of the same method in the same step;
it triggers when it starts to straggle, not at every step it goes on straggling.
"""

from __future__ import annotations

import statistics
from collections import deque
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from nrlprof.config.slow import HISTORY, MIN_HISTORY, QUIET_STEPS
from nrlprof.manifest import Slowest


class StepHistory:
    """The wall times of the steps that count, and whether the next one may be judged."""

    def __init__(self, factor: float) -> None:
        self.factor = factor
        self.walls: deque[float] = deque(maxlen=HISTORY)
        self.quiet = 0

    def median(self) -> float | None:
        return statistics.median(self.walls) if len(self.walls) >= MIN_HISTORY else None

    @property
    def judging(self) -> bool:
        return self.quiet == 0 and len(self.walls) >= MIN_HISTORY

    def slow_factor(self, wall: float) -> float | None:
        """`wall` over the median when it is slow and a verdict may come now; None otherwise."""
        if not self.judging:
            return None
        median = self.median()
        if median is None or median <= 0:
            return None
        factor = wall / median
        return factor if factor >= self.factor else None

    def add(self, wall: float) -> None:
        """A step that counts (the slow one too) enters the median; one step less of quiet."""
        self.walls.append(wall)
        if self.quiet:
            self.quiet -= 1

    def triggered(self) -> None:
        """No verdict until QUIET_STEPS more steps have entered the median."""
        self.quiet = QUIET_STEPS


@dataclass(frozen=True)
class CallSpan:
    """One worker rank's calls of one method in one step: from the first submitted to the last completed."""

    worker: str
    rank: int
    method: str
    ms: float


def spans(calls: Iterable[Sequence]) -> list[CallSpan]:
    """(worker, rank, method, submitted s, completed s or None, ...) -> one span per worker rank and method (calls not
    completed yet are left out)."""
    bounds: dict[tuple[str, int, str], list[float]] = {}
    for worker, rank, method, submitted, completed, *_ in calls:
        if completed is None:
            continue
        found = bounds.setdefault((worker, rank, method), [submitted, completed])
        found[0], found[1] = min(found[0], submitted), max(found[1], completed)
    return [CallSpan(w, r, m, (end - begin) * 1000) for (w, r, m), (begin, end) in bounds.items()]


def _without(values: list[float], index: int, position: int) -> float:
    """`values[position]` once `values[index]` is taken out (values sorted)."""
    return values[position] if position < index else values[position + 1]


def peers_medians(all_spans: list[CallSpan]) -> dict[CallSpan, float]:
    """Each span's peers' median: that of the same method's spans of its group's other ranks (spans with no peer are
    left out). Linear in the spans once each group is sorted."""
    groups: dict[tuple[str, str], list[CallSpan]] = {}
    for span in all_spans:
        groups.setdefault((span.worker, span.method), []).append(span)
    medians = {}
    for group in groups.values():
        if len(group) < 2:
            continue
        group.sort(key=lambda s: s.ms)
        values = [s.ms for s in group]
        left = len(values) - 1
        for index, span in enumerate(group):
            low, high = _without(values, index, (left - 1) // 2), _without(values, index, left // 2)
            medians[span] = (low + high) / 2
    return medians


def slowest(all_spans: list[CallSpan], medians: dict[CallSpan, float]) -> Slowest | None:
    """The worker rank whose call took longest in the step, with its peers' median."""
    if not all_spans:
        return None
    top = max(all_spans, key=lambda s: s.ms)
    peers = medians.get(top)
    return Slowest(top.worker, top.rank, top.method, round(top.ms, 1), None if peers is None else round(peers, 1))


def stragglers(
    all_spans: list[CallSpan], medians: dict[CallSpan, float], factor: float, seen_late_ms: float = 0.0
) -> list[Slowest]:
    """The ranks whose call took `factor` times their peers' median or more, slowest against its peers first.

    `seen_late_ms`: how late a call's end may be seen (nrlprof.runtime.slow.calls.WAIT_S); a call is judged on its
    span less that much, so a short call seen late is never taken for a straggler."""
    found = [
        Slowest(span.worker, span.rank, span.method, round(span.ms, 1), round(peers, 1))
        for span, peers in medians.items()
        if peers > 0 and span.ms - seen_late_ms >= factor * peers
    ]
    return sorted(found, key=lambda s: s.ms / (s.peers_ms or 1), reverse=True)
