"""The step anatomy as tables: per step, each worker group's phases (one row per worker x method) with their ranks,
the critical path through them, and how long any set of calls kept the step busy (an interval union).

Built with numpy from read.anatomy_calls' columns, so that a run of millions of calls is read in seconds: the
summary's anatomy (figures.anatomy) and `explain` (tools.advice) both read these tables.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property
from typing import TYPE_CHECKING

from nrlprof.tools.figures.intervals import busy_in, covered
from nrlprof.tools.read.anatomy_calls import RunCalls

if TYPE_CHECKING:
    import numpy as np


@dataclass
class PhaseRows:
    """One row per step x worker group x method: its first start and last end over every rank, and the ranks.

    Rows are in step order, and within a step by start (then worker and method names). `late` is how much later
    the last rank ended than the mean end of the others (0 with one rank); `spread` the slowest rank's time less
    the quickest's (each rank's time: its first start to its last end in the phase).
    """

    window: np.ndarray
    worker: np.ndarray
    method: np.ndarray
    start: np.ndarray
    end: np.ndarray
    calls: np.ndarray
    ranks: np.ndarray  # how many ranks
    slowest_rank: np.ndarray
    spread: np.ndarray
    last_rank: np.ndarray
    late: np.ndarray
    rank_values: np.ndarray  # the ranks of row i: rank_values[rank_offsets[i]:rank_offsets[i + 1]], ascending
    rank_offsets: np.ndarray
    rank_end: np.ndarray  # per rank value above: when that rank ended in the phase

    def __len__(self) -> int:
        return len(self.window)


@dataclass
class AnatomyTables:
    calls: RunCalls
    steps: np.ndarray  # the step number of each window
    begins: np.ndarray  # ns, the driver's clock
    ends: np.ndarray
    phases: PhaseRows
    phase_offsets: np.ndarray  # phases of window w: rows phase_offsets[w]:phase_offsets[w + 1]
    in_step: np.ndarray  # the calls in a window, as indices into calls' columns, by start

    @property
    def walls(self) -> np.ndarray:
        return self.ends - self.begins

    def busy(self, mask: np.ndarray | None = None) -> np.ndarray:
        """Per window, how long the calls of `mask` (over `in_step`; every one when None) kept it busy."""
        starts, ends = self._sorted_spans
        if mask is not None:
            starts, ends = starts[mask], ends[mask]
        return busy_in(covered(starts, ends), self.begins, self.ends)

    @cached_property
    def _sorted_spans(self) -> tuple[np.ndarray, np.ndarray]:
        return self.calls.start[self.in_step], self.calls.end[self.in_step]

    @cached_property
    def call_worker(self) -> np.ndarray:
        """The worker group of each call of `in_step`."""
        return self.calls.worker[self.in_step]

    @cached_property
    def call_method(self) -> np.ndarray:
        return self.calls.method[self.in_step]

    def group_busy(self, group: int) -> np.ndarray:
        return self.busy(self.call_worker == group)

    def critical_path(self, window: int) -> list[tuple[int, int]]:
        """(phase row, ns it holds the path) from the step's start: the phase that ends last, back through the phase
        that ended last before each one began; the time between them is nobody's phase (the controller's)."""
        lo, hi = int(self.phase_offsets[window]), int(self.phase_offsets[window + 1])
        if lo == hi:
            return []
        starts = self.phases.start[lo:hi].tolist()
        ends = self.phases.end[lo:hi].tolist()
        rows = range(hi - lo)
        current = max(rows, key=lambda i: (ends[i], -starts[i]))
        path = [current]
        while True:
            before = [i for i in rows if ends[i] <= starts[current]]
            if not before:
                break
            current = max(before, key=lambda i: (ends[i], -starts[i]))
            path.append(current)
        path.reverse()
        held = []
        reached = int(self.begins[window])
        for i in path:
            held.append((lo + i, max(0, ends[i] - max(starts[i], reached))))
            reached = max(reached, ends[i])
        return held


def step_windows(marks: list[dict], calls: RunCalls) -> tuple[list[int], list[int], list[int]]:
    """Steps, begins and ends (ns): from one `nrlprof.step(n)` to the next; the last to `finish()` or its last call."""
    ordered = sorted((m for m in marks if "step" in m), key=lambda m: m["t_ns"])
    finish = next((m["t_ns"] for m in marks if m.get("finish")), None)
    distinct: list[tuple[int, int]] = []
    for mark in ordered:
        if not distinct or distinct[-1][0] != mark["step"]:
            distinct.append((int(mark["step"]), int(mark["t_ns"])))
    steps = [step for step, _ in distinct]
    begins = [start for _, start in distinct]
    ends = begins[1:]
    if distinct:
        if finish is not None:
            ends.append(int(finish))
        else:
            later = calls.end[calls.start >= begins[-1]]
            ends.append(int(later.max()) if len(later) else begins[-1])
    return steps, begins, ends


def anatomy_tables(calls: RunCalls) -> AnatomyTables:
    import numpy as np

    steps, begins, ends = (np.asarray(v, np.int64) for v in step_windows(calls.marks, calls))
    window = np.searchsorted(begins, calls.start, side="right") - 1
    inside = window >= 0
    inside[inside] = calls.start[inside] < ends[window[inside]]
    in_step = np.flatnonzero(inside)
    in_step = in_step[np.argsort(calls.start[in_step], kind="stable")]
    phases, offsets = _phase_rows(calls, window, inside, len(steps))
    return AnatomyTables(calls, steps, begins, ends, phases, offsets, in_step)


def _phase_rows(calls: RunCalls, window: np.ndarray, inside: np.ndarray, windows: int) -> tuple[PhaseRows, np.ndarray]:
    import numpy as np

    chosen = np.flatnonzero(inside)
    w, g = window[chosen], calls.worker[chosen]
    m, r = calls.method[chosen], calls.rank[chosen]
    order = np.lexsort((r, m, g, w))
    chosen, w, g, m, r = chosen[order], w[order], g[order], m[order], r[order]
    start, end = calls.start[chosen], calls.end[chosen]
    if len(chosen) == 0:
        empty = np.zeros(0, np.int64)
        rows = PhaseRows(*(empty,) * 11, empty, np.zeros(1, np.int64), empty)
        return rows, np.zeros(windows + 1, np.int64)
    same_phase = (w[1:] == w[:-1]) & (g[1:] == g[:-1]) & (m[1:] == m[:-1])
    rank_open = np.flatnonzero(np.concatenate(([True], ~(same_phase & (r[1:] == r[:-1])))))
    rank_first = np.minimum.reduceat(start, rank_open)
    rank_last = np.maximum.reduceat(end, rank_open)
    rank_calls = np.diff(np.append(rank_open, len(chosen)))
    rank_of = r[rank_open]
    phase_open_calls = np.concatenate(([True], ~same_phase))
    phase_open = np.flatnonzero(phase_open_calls[rank_open])  # rank rows at which a phase begins
    n_ranks = np.diff(np.append(phase_open, len(rank_open)))
    row_of_rank = np.repeat(np.arange(len(phase_open)), n_ranks)
    first = np.minimum.reduceat(rank_first, phase_open)
    last = np.maximum.reduceat(rank_last, phase_open)
    took = rank_last - rank_first
    slowest = np.maximum.reduceat(took, phase_open)
    quickest = np.minimum.reduceat(took, phase_open)
    positions = np.arange(len(rank_open))
    far = len(rank_open)
    slowest_at = np.minimum.reduceat(np.where(took == slowest[row_of_rank], positions, far), phase_open)
    last_at = np.minimum.reduceat(np.where(rank_last == last[row_of_rank], positions, far), phase_open)
    waited = np.add.reduceat(last[row_of_rank] - rank_last, phase_open)
    late = np.where(n_ranks > 1, waited // np.maximum(n_ranks - 1, 1), 0)
    opened = rank_open[phase_open]
    phase_window, phase_worker, phase_method = w[opened], g[opened], m[opened]
    method_order = np.argsort(np.argsort(np.array(calls.methods, dtype=object)))  # a method's place by name
    sort = np.lexsort((method_order[phase_method], phase_worker, first, phase_window))
    rank_offsets = np.concatenate(([0], np.cumsum(n_ranks[sort])))
    rank_rows = np.concatenate([np.arange(phase_open[i], phase_open[i] + n_ranks[i]) for i in sort])
    rows = PhaseRows(
        window=phase_window[sort],
        worker=phase_worker[sort],
        method=phase_method[sort],
        start=first[sort],
        end=last[sort],
        calls=np.add.reduceat(rank_calls, phase_open)[sort],
        ranks=n_ranks[sort],
        slowest_rank=rank_of[slowest_at][sort],
        spread=(slowest - quickest)[sort],
        last_rank=rank_of[last_at][sort],
        late=late[sort],
        rank_values=rank_of[rank_rows],
        rank_offsets=rank_offsets,
        rank_end=rank_last[rank_rows],
    )
    offsets = np.searchsorted(rows.window, np.arange(windows + 1), side="left")
    return rows, offsets
