"""A window asked for while the job runs, from its acceptance (the listener's thread) to its close (the gate's)."""

from __future__ import annotations

from dataclasses import dataclass, field, replace

from nrlprof.config.plan import BackendPlan
from nrlprof.config.requests import ACCEPTED, CLOSED, OPENED, REFUSED, Request
from nrlprof.config.steps import StepSelection, Window
from nrlprof.manifest import WindowRecord
from nrlprof.workers.tracker import TrackedActor


@dataclass
class AskedWindow:
    request: Request
    # The backend as the request asks for it: its targets, the armed job's settings, no steps.
    backend_plan: BackendPlan
    # The workers ready for it (their backend is in place).
    actors: list[TrackedActor]
    state: str = ACCEPTED
    message: str = ""
    window: Window | None = None
    answered: int = 0
    # Records of its processes that came before it closed (a worker found dead during it).
    records_before_close: list[WindowRecord] = field(default_factory=list)
    records: list[WindowRecord] = field(default_factory=list)

    @property
    def kind(self) -> str:
        return self.backend_plan.kind

    @property
    def finished(self) -> bool:
        return self.state in (CLOSED, REFUSED)

    def refuse(self, message: str) -> None:
        self.message = message
        self.state = REFUSED

    def opened(self, answered: int) -> None:
        self.answered = answered
        self.state = OPENED

    def closed(self, records: list[WindowRecord]) -> None:
        self.records = records
        self.state = CLOSED


def asked_conflict(
    gated: tuple[BackendPlan, ...], open_windows: dict[str, Window], kind: str, window: Window
) -> str | None:
    """Why a window asked for cannot open now: one of the same backend is open or planned over the same steps."""
    if kind in open_windows:
        return f"a {kind} window (steps {open_windows[kind].label}) is open; ask again once it has closed"
    for backend in gated:
        if backend.kind != kind:
            continue
        for planned in backend.steps.windows:
            if planned.first <= window.last and window.first <= planned.last:
                return f"the {kind} window of steps {planned.label} overlaps steps {window.label}"
    return None


def with_asked_window(gated: tuple[BackendPlan, ...], asked: BackendPlan, window: Window) -> tuple[BackendPlan, ...]:
    """The gate's backends with the window asked for added to its backend's windows (kept apart, never merged)."""
    for index, backend in enumerate(gated):
        if backend.kind == asked.kind:
            windows = tuple(sorted((*backend.steps.windows, window)))
            return (*gated[:index], replace(backend, steps=StepSelection(windows)), *gated[index + 1 :])
    return (*gated, replace(asked, steps=StepSelection((window,))))
