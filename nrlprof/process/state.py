"""The process's part of nrlprof and the timings of annotated code. Read on every annotated call, so this module
imports nothing and its objects are plain. Where the rest of the process-wide state lives: docs/design.md,
"Process-wide state"."""

from __future__ import annotations


class OpenWindows:
    """What this process is profiling right now."""

    __slots__ = ("any_open", "current_step", "discrete_owner", "open")

    def __init__(self) -> None:
        self.open: dict[str, int] = {}
        self.current_step: int | None = None
        self.any_open = False
        # The process profiler whose discrete backends capture each annotated call, while one is open.
        self.discrete_owner: object | None = None

    def opened(self, kind: str, step: int, discrete_owner: object | None = None) -> None:
        self.open[kind] = self.open.get(kind, 0) + 1
        self.current_step = step
        self.any_open = True
        if discrete_owner is not None:
            self.discrete_owner = discrete_owner

    def step_marked(self, step: int) -> None:
        self.current_step = step

    def closed(self, kind: str) -> None:
        self.open[kind] = max(0, self.open.get(kind, 0) - 1)
        self.any_open = any(self.open.values())
        if not self.any_open:
            self.current_step = None
            self.discrete_owner = None

    def is_open(self, kind: str) -> bool:
        return self.open.get(kind, 0) > 0


class Timings:
    """Per label: calls and total seconds of annotated code, like RLinf's Worker.timer metrics.

    Each label's running Total is kept by a decorated function from its decoration on, so its call adds to it
    without a lookup; `clear` zeroes them in place for that reason.
    """

    __slots__ = ("_totals",)

    def __init__(self) -> None:
        self._totals: dict[str, Total] = {}

    def total(self, label: str) -> Total:
        """The running Total of `label`, created at zero."""
        entry = self._totals.get(label)
        if entry is None:
            entry = self._totals[label] = Total()
        return entry

    def as_dict(self) -> dict[str, dict[str, float]]:
        return {
            label: {"count": total.calls, "total_s": total.seconds, "mean_s": total.seconds / total.calls}
            for label, total in sorted(self._totals.items())
            if total.calls
        }

    def clear(self) -> None:
        for total in self._totals.values():
            total.calls = 0
            total.seconds = 0.0


class Total:
    """One label's calls and seconds (attributes of a slotted object: the cheapest update an inactive call makes)."""

    __slots__ = ("calls", "seconds")

    def __init__(self) -> None:
        self.calls = 0
        self.seconds = 0.0


# This process's part, as nrlprof.runtime.activation built it (nrlprof.runtime.controller.Controller in a driver or
# controller, nrlprof.runtime.profiled.ProfiledProcess in a worker or its child), or None while nrlprof is inactive.
session = None
timings = Timings()
