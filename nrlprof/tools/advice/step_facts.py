"""What the step anatomy says of each step, in RL terms: the critical path by phase, the controller's time, what
each phase and worker group kept busy, and how rollout and training overlapped.

The critical path (figures.anatomy_tables) goes back from the phase that ends last through the phase that ended
last before each one began; each phase holds the path from its start (or the previous one's end) to its end, and
the rest of the step, when the step waits on no worker call, is the controller's. Busy times are interval unions
of calls (never sums), so work that overlaps, as in async rollout, is not idle, and waits come from overlaps,
not from a framework's counters.
"""

from __future__ import annotations

import bisect
from collections import Counter
from dataclasses import dataclass, field
from functools import cached_property
from typing import TYPE_CHECKING

from nrlprof.tools.advice.phases import OTHER, PHASES, ROLLOUT, TRAINING, WEIGHT_SYNC, PhaseMap
from nrlprof.tools.figures.anatomy_tables import CHUNK, AnatomyTables

if TYPE_CHECKING:
    import numpy as np

CONTROLLER = "controller"
PROFILER = "profiler"  # nrlprof's own window work in the driver (the gate's marks), apart from the controller's
NS_PER_MS = 1_000_000


@dataclass
class StepFacts:
    """The anatomy's steps (those chosen), each in RL phases."""

    tables: AnatomyTables
    phases: PhaseMap
    windows: list[int]  # the windows (indices into the tables) of the steps read
    held: list[dict[str, int]] = field(default_factory=list)  # per window: phase or CONTROLLER -> ns on the path
    held_by_label: list[dict[str, int]] = field(default_factory=list)  # per window: "<worker>.<method>" -> ns
    path_rows: list[list[tuple[int, int]]] = field(default_factory=list)  # per window: (phase row, ns held)

    def __post_init__(self) -> None:
        for window in self.windows:
            path = self.tables.critical_path(window)
            by_phase: Counter[str] = Counter()
            by_label: Counter[str] = Counter()
            for row, ns in path:
                by_label[self.label(row)] += ns
                by_phase[self.phase_of_row(row)] += ns
            outside = max(0, int(self.tables.walls[window]) - sum(ns for _, ns in path))
            own = min(outside, self._profiler_ns(window))
            if own:
                by_phase[PROFILER] = own
            by_phase[CONTROLLER] = outside - own
            self.held.append(by_phase)
            self.held_by_label.append(by_label)
            self.path_rows.append(path)

    def _profiler_ns(self, window: int) -> int:
        """nrlprof's own window work in the driver that began in this step (it holds the controller's thread)."""
        starts, lengths = self._profiler_marks
        lo = bisect.bisect_left(starts, int(self.tables.begins[window]))
        hi = bisect.bisect_left(starts, int(self.tables.ends[window]))
        return sum(lengths[lo:hi])

    @cached_property
    def _profiler_marks(self) -> tuple[list[int], list[int]]:
        """The gate's own work, by start: (starts, lengths) in ns."""
        marks = sorted((int(m["start_ns"]), int(m["end_ns"])) for m in self.tables.calls.marks if "profiler" in m)
        return [start for start, _ in marks], [end - start for start, end in marks]

    def label(self, row: int) -> str:
        calls = self.tables.calls
        phases = self.tables.phases
        return f"{calls.workers[phases.worker[row]]}.{calls.methods[phases.method[row]]}"

    def phase_of_row(self, row: int) -> str:
        calls, phases = self.tables.calls, self.tables.phases
        return self.phases.phase_of(calls.workers[phases.worker[row]], calls.methods[phases.method[row]])

    @property
    def steps(self) -> list[int]:
        return [int(self.tables.steps[w]) for w in self.windows]

    @cached_property
    def walls(self) -> list[int]:
        return [int(self.tables.walls[w]) for w in self.windows]

    @property
    def total_wall(self) -> int:
        return sum(self.walls)

    def bound(self, index: int) -> str:
        held = self.held[index]
        return max(sorted(held), key=lambda phase: held[phase])

    @cached_property
    def method_phases(self) -> dict[str, str]:
        """ "<worker>.<method>" -> phase, for every method the steps called."""
        calls, phases = self.tables.calls, self.tables.phases
        pairs = sorted({(int(w), int(m)) for w, m in zip(phases.worker.tolist(), phases.method.tolist(), strict=True)})
        return {
            f"{calls.workers[w]}.{calls.methods[m]}": self.phases.phase_of(calls.workers[w], calls.methods[m])
            for w, m in pairs
        }

    @cached_property
    def call_phase(self) -> np.ndarray:
        """The phase index (into PHASES, OTHER last) of each call in a step, a chunk of calls at a time."""
        import numpy as np

        calls = self.tables.calls
        names = (*PHASES, OTHER)
        table = np.array(
            [[names.index(self.phases.phase_of(w, m)) for m in calls.methods] for w in calls.workers], dtype=np.int8
        ).reshape(len(calls.workers), max(1, len(calls.methods)))
        phase = np.empty(len(calls.actor), np.int8)
        for lo in range(0, len(phase), CHUNK):
            phase[lo : lo + CHUNK] = table[
                calls.actor_worker[calls.actor[lo : lo + CHUNK]], calls.method[lo : lo + CHUNK]
            ]
        return phase

    def busy(self, mask: np.ndarray | None) -> list[int]:
        """Per step read, how long the calls of `mask` kept it busy (ns)."""
        busy = self.tables.busy(mask)
        return [int(busy[w]) for w in self.windows]

    def phase_mask(self, phase: str) -> np.ndarray:
        return self.call_phase == (*PHASES, OTHER).index(phase)

    @cached_property
    def phase_busy(self) -> dict[str, list[int]]:
        return {phase: self.busy(self.phase_mask(phase)) for phase in PHASES if self.phase_mask(phase).any()}

    def group_busy(self, group: int) -> list[int]:
        return self.busy(self.tables.group_mask(group))

    def overlap(self) -> dict | None:
        """How rollout and training overlapped in each step, from the calls' busy times (never from counters).

        trainer_waits_on_rollout: rollout ran, training did not; rollout_waits_on_trainer: the reverse;
        overlap: both ran; weight_sync_bubble: weight sync ran and neither rollout nor training did."""
        if ROLLOUT not in self.phase_busy or TRAINING not in self.phase_busy:
            return None
        rollout, training = self.phase_mask(ROLLOUT), self.phase_mask(TRAINING)
        either = self.busy(rollout | training)
        with_sync = self.busy(rollout | training | self.phase_mask(WEIGHT_SYNC))
        r, t = self.phase_busy[ROLLOUT], self.phase_busy[TRAINING]
        steps = {}
        for i, step in enumerate(self.steps):
            steps[str(step)] = {
                "trainer_waits_on_rollout_ms": (either[i] - t[i]) / NS_PER_MS,
                "rollout_waits_on_trainer_ms": (either[i] - r[i]) / NS_PER_MS,
                "overlap_ms": (r[i] + t[i] - either[i]) / NS_PER_MS,
                "weight_sync_bubble_ms": (with_sync[i] - either[i]) / NS_PER_MS,
            }
        totals = {key: sum(s[key] for s in steps.values()) for key in next(iter(steps.values()), {})}
        return {"steps": steps, "total_ms": totals}

    def step_json(self) -> dict[str, dict]:
        """`{"<n>": {"wall_ms", "bound", "phases_ms"}}`: the critical path's time by phase and the controller's."""
        return {
            str(step): {
                "wall_ms": round(self.walls[i] / NS_PER_MS, 3),
                "bound": self.bound(i),
                "phases_ms": {phase: round(ns / NS_PER_MS, 3) for phase, ns in sorted(self.held[i].items())},
            }
            for i, step in enumerate(self.steps)
        }


def step_facts(tables: AnatomyTables, phases: PhaseMap, chosen: set[int] | None = None) -> StepFacts:
    """The facts of the steps in `chosen`; when None, of every step but the job's first (its warm-up: engines
    starting, compilation), where there are others."""
    steps = tables.steps.tolist()
    if chosen is None:
        windows = list(range(1 if len(steps) > 1 else 0, len(steps)))
    else:
        windows = [w for w, step in enumerate(steps) if step in chosen]
    return StepFacts(tables, phases, windows)
