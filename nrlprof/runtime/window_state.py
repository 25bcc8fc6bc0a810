"""What is being profiled in this process right now: read on every annotated call, so plain globals."""

from __future__ import annotations

open_windows: dict[str, int] = {"nsys": 0, "torch": 0, "rocprof": 0}
current_step: int | None = None
any_open = False
# The process profiler whose discrete backends capture each annotated call, while one is open.
discrete_profiler = None


def window_opened(kind: str, step: int, discrete_owner: object = None) -> None:
    global any_open, current_step, discrete_profiler
    open_windows[kind] = open_windows.get(kind, 0) + 1
    current_step = step
    any_open = True
    if discrete_owner is not None:
        discrete_profiler = discrete_owner


def step_marked(step: int) -> None:
    global current_step
    current_step = step


def window_closed(kind: str) -> None:
    global any_open, current_step, discrete_profiler
    open_windows[kind] = max(0, open_windows.get(kind, 0) - 1)
    any_open = any(open_windows.values())
    if not any_open:
        current_step = None
        discrete_profiler = None
