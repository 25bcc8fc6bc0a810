"""`nrlprof.annotate`: a named range (NVTX, plus torch record_function while torch profiles) and timings."""

from __future__ import annotations

import functools
import time
from collections.abc import Callable

from nrlprof.process import state
from nrlprof.ranges.names import range_name
from nrlprof.ranges.nvtx import DOMAIN, nvtx_module

CO_COROUTINE = 0x80


def timings() -> dict[str, dict[str, float]]:
    """Per label: calls, total and mean seconds, like RLinf's Worker.timer metrics."""
    return state.timings.as_dict()


def reset_timings() -> None:
    state.timings.clear()


def window_open() -> bool:
    """The hot-path test: is anything being profiled in this process right now?"""
    session = state.session
    return session is not None and session.windows.any_open


class _Ranges:
    """The profiler ranges (and, in discrete mode, the capture) of one annotated span while a window is open."""

    __slots__ = ("discrete_owner", "nvtx_id", "pushed", "torch_range")

    def __init__(self, label: str, color: str | None, cross_thread: bool, method: str | None = None) -> None:
        windows = state.session.windows
        name = range_name(label, windows.current_step)
        self.nvtx_id = None
        self.pushed = False
        self.torch_range = None
        owner = windows.discrete_owner
        self.discrete_owner = owner if owner is not None and owner.begin_call(label, method) else None
        nvtx = nvtx_module() if windows.is_open("nsys") else None  # a torch window needs no nvtx import
        if nvtx is not None:
            if cross_thread:
                self.nvtx_id = nvtx.start_range(message=name, color=color, domain=DOMAIN)
            else:
                nvtx.push_range(message=name, color=color, domain=DOMAIN)
                self.pushed = True
        if windows.is_open("torch"):
            from torch.profiler import record_function

            self.torch_range = record_function(name)
            self.torch_range.__enter__()

    def close(self) -> None:
        if self.torch_range is not None:
            self.torch_range.__exit__(None, None, None)
        if self.pushed:
            nvtx_module().pop_range(domain=DOMAIN)
        elif self.nvtx_id is not None:
            nvtx_module().end_range(self.nvtx_id)
        if self.discrete_owner is not None:
            self.discrete_owner.end_call()


class annotate:
    """Decorator (sync and async) and context manager; reusable and re-entrant."""

    __slots__ = ("_stack", "_total", "color", "name")

    def __init__(self, name: str | None = None, color: str | None = None) -> None:
        self.name = name
        self.color = color
        self._stack: list[tuple[float, _Ranges | None]] = []
        self._total = state.timings.total(name or "annotated")

    def __enter__(self) -> annotate:
        ranges = _Ranges(self.name or "annotated", self.color, False) if window_open() else None
        self._stack.append((time.perf_counter(), ranges))
        return self

    def __exit__(self, *exc_info: object) -> None:
        began, ranges = self._stack.pop()
        total = self._total
        total[1] += time.perf_counter() - began
        total[0] += 1
        if ranges is not None:
            ranges.close()

    def __call__(self, function: Callable) -> Callable:
        label = self.name or function.__qualname__
        color = self.color
        total = state.timings.total(label)
        clock = time.perf_counter
        if getattr(getattr(function, "__code__", None), "co_flags", 0) & CO_COROUTINE:

            @functools.wraps(function)
            async def async_wrapper(*args: object, **kwargs: object) -> object:
                ranges = _Ranges(label, color, True) if window_open() else None
                began = clock()
                try:
                    return await function(*args, **kwargs)
                finally:
                    total[1] += clock() - began
                    total[0] += 1
                    if ranges is not None:
                        ranges.close()

            return async_wrapper

        @functools.wraps(function)
        def wrapper(*args: object, **kwargs: object) -> object:
            session = state.session
            ranges = _Ranges(label, color, False) if session is not None and session.windows.any_open else None
            began = clock()
            try:
                return function(*args, **kwargs)
            finally:
                total[1] += clock() - began
                total[0] += 1
                if ranges is not None:
                    ranges.close()

        return wrapper
