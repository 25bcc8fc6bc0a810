"""The step anatomy as tables: per step, each worker group's phases (one row per worker x method) with their ranks,
the critical path through them, and how long any set of calls kept the step busy (an interval union).

Built with numpy from read.anatomy_calls' columns, so that a run of millions of calls is read in seconds: the
summary's anatomy (figures.anatomy) and `explain` (tools.advice) both read these tables.
"""

from __future__ import annotations

from dataclasses import dataclass, fields
from typing import TYPE_CHECKING

from nrlprof.tools.figures.intervals import busy_in, covered
from nrlprof.tools.read.anatomy import step_marks
from nrlprof.tools.read.anatomy_calls import RunCalls

CHUNK = 1 << 21  # calls at a time in a union: its copies stay tens of MB, whatever the run's size
WINDOWS_PER_BLOCK = 256  # steps whose phases are built at once

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

    def __len__(self) -> int:
        return len(self.window)


@dataclass
class AnatomyTables:
    """The calls in a step (`calls`, filtered to them and sorted by start), the steps, and their phases."""

    calls: RunCalls
    steps: np.ndarray  # the step number of each window
    begins: np.ndarray  # ns, the driver's clock
    ends: np.ndarray
    phases: PhaseRows
    phase_offsets: np.ndarray  # phases of window w: rows phase_offsets[w]:phase_offsets[w + 1]

    @property
    def walls(self) -> np.ndarray:
        return self.ends - self.begins

    def busy(self, mask: np.ndarray | None = None) -> np.ndarray:
        """Per window, how long the calls of `mask` (every one when None) kept it busy.

        In chunks of the calls (sorted by start), so that no copy of every call is made: each chunk's union, then
        the union of those (a call of one chunk can reach into the next)."""
        import numpy as np

        starts, ends = self.calls.start, self.calls.end
        parts: list[tuple[np.ndarray, np.ndarray]] = []
        for lo in range(0, len(starts), CHUNK):
            hi = lo + CHUNK
            chosen = slice(None) if mask is None else mask[lo:hi]
            parts.append(covered(starts[lo:hi][chosen], ends[lo:hi][chosen]))
        if not parts:
            return np.zeros(len(self.begins), np.int64)
        union = covered(np.concatenate([p[0] for p in parts]), np.concatenate([p[1] for p in parts]))
        return busy_in(union, self.begins, self.ends)

    def group_mask(self, group: int) -> np.ndarray:
        """The calls of one worker group: its actors' mask, taken by each call's actor (no per-call group array)."""
        return (self.calls.actor_worker == group)[self.calls.actor]

    def group_busy(self, group: int) -> np.ndarray:
        return self.busy(self.group_mask(group))

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
    distinct, finish = step_marks(marks)
    steps = [step for step, _ in distinct]
    begins = [start for _, start in distinct]
    ends = begins[1:]
    if distinct:
        if finish is not None:
            ends.append(finish)
        else:
            later = calls.end[calls.start >= begins[-1]]
            ends.append(int(later.max()) if len(later) else begins[-1])
    return steps, begins, ends


def anatomy_tables(calls: RunCalls) -> AnatomyTables:
    """The tables of `calls`, which keeps only the calls that began in a step (read.anatomy_calls sorts them)."""
    import numpy as np

    steps, begins, ends = (np.asarray(v, np.int64) for v in step_windows(calls.marks, calls))
    window = np.empty(len(calls.start), np.int32)
    inside = np.empty(len(calls.start), bool)
    for lo in range(0, len(window), CHUNK):  # a chunk at a time: searchsorted gives int64, masks copy
        starts = calls.start[lo : lo + CHUNK]
        found = np.searchsorted(begins, starts, side="right") - 1
        window[lo : lo + CHUNK] = found
        inside[lo : lo + CHUNK] = (found >= 0) & (starts < ends[np.maximum(found, 0)]) if len(ends) else False
    if not inside.all():
        calls.keep(inside)
        window = window[inside]
    del inside
    phases, offsets = _phase_rows(calls, window, len(steps))
    return AnatomyTables(calls, steps, begins, ends, phases, offsets)


def _phase_rows(calls: RunCalls, window: np.ndarray, windows: int) -> tuple[PhaseRows, np.ndarray]:
    """Phase rows a block of windows at a time (the calls are sorted by start, so a block's calls are a slice)."""
    import numpy as np

    blocks = []
    bounds = np.searchsorted(window, np.arange(0, windows + WINDOWS_PER_BLOCK, WINDOWS_PER_BLOCK), side="left")
    for lo, hi in zip(bounds[:-1].tolist(), bounds[1:].tolist(), strict=True):
        if hi > lo:
            actors = calls.actor[lo:hi]
            blocks.append(_block_rows(window[lo:hi], calls.actor_worker[actors], calls.method[lo:hi],
                                      calls.actor_rank[actors], calls.start[lo:hi], calls.end[lo:hi],
                                      calls.methods))  # fmt: skip
    if not blocks:
        empty = np.zeros(0, np.int64)
        return PhaseRows(*(empty,) * 12, np.zeros(1, np.int64)), np.zeros(windows + 1, np.int64)
    names = [f.name for f in fields(PhaseRows) if f.name != "rank_offsets"]
    joined = {name: np.concatenate([getattr(b, name) for b in blocks]) for name in names}
    counts = np.concatenate([np.diff(b.rank_offsets) for b in blocks])
    rows = PhaseRows(**joined, rank_offsets=np.concatenate(([0], np.cumsum(counts))))
    return rows, np.searchsorted(rows.window, np.arange(windows + 1), side="left")


def _block_rows(w, g, m, r, start, end, methods: list[str]) -> PhaseRows:
    import numpy as np

    order = np.lexsort((r, m, g, w))
    w, g, m, r, start, end = w[order], g[order], m[order], r[order], start[order], end[order]
    del order
    count = len(w)
    same_phase = (w[1:] == w[:-1]) & (g[1:] == g[:-1]) & (m[1:] == m[:-1])
    rank_open = np.flatnonzero(np.concatenate(([True], ~(same_phase & (r[1:] == r[:-1])))))
    rank_first = np.minimum.reduceat(start, rank_open)
    rank_last = np.maximum.reduceat(end, rank_open)
    rank_calls = np.diff(np.append(rank_open, count))
    rank_of = r[rank_open]
    phase_open = np.flatnonzero(np.concatenate(([True], ~same_phase))[rank_open])  # rank rows where a phase begins
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
    method_order = np.argsort(np.argsort(np.array(methods, dtype=object)))  # a method's place by name
    sort = np.lexsort((method_order[phase_method], phase_worker, first, phase_window))
    starts_of = phase_open[sort]
    rank_rows = np.repeat(starts_of - np.concatenate(([0], np.cumsum(n_ranks[sort])[:-1])), n_ranks[sort])
    rank_rows += np.arange(len(rank_rows))
    return PhaseRows(
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
        rank_values=rank_of[rank_rows].astype(np.int32),
        rank_offsets=np.concatenate(([0], np.cumsum(n_ranks[sort]))),
    )
