"""Interval unions on numpy arrays: how long something was busy in each of a run's windows, never a sum of spans.

`covered(starts, ends)` merges spans sorted by start into disjoint intervals; `busy_in(intervals, begins, ends)`
measures, for each window, how much of it they cover. Two sets' overlap is `a + b - union(a, b)`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import numpy as np

Intervals = tuple["np.ndarray", "np.ndarray"]  # disjoint, sorted: starts, ends


def covered(starts: np.ndarray, ends: np.ndarray) -> Intervals:
    """The union of the spans (`starts` sorted ascending) as disjoint intervals."""
    import numpy as np

    if len(starts) == 0:
        return np.zeros(0, np.int64), np.zeros(0, np.int64)
    reach = np.maximum.accumulate(ends)
    opens = np.empty(len(starts), bool)
    opens[0] = True
    np.greater(starts[1:], reach[:-1], out=opens[1:])
    first = np.flatnonzero(opens)
    return starts[first], np.maximum.reduceat(ends, first)


def busy_in(intervals: Intervals, begins: np.ndarray, ends: np.ndarray) -> np.ndarray:
    """For each window [begins[i], ends[i]), the length the intervals cover in it."""
    return _covered_until(intervals, ends) - _covered_until(intervals, begins)


def _covered_until(intervals: Intervals, times: np.ndarray) -> np.ndarray:
    import numpy as np

    starts, ends = intervals
    if len(starts) == 0:
        return np.zeros(len(times), np.int64)
    lengths = ends - starts
    before = np.concatenate(([0], np.cumsum(lengths)))  # before[k]: the first k intervals' length
    k = np.searchsorted(starts, times, side="right")  # intervals that start at or before each time
    last = np.maximum(k - 1, 0)
    partial = np.clip(np.minimum(ends[last], times) - starts[last], 0, None)
    return np.where(k > 0, before[last] + partial, 0)
