"""`nrlprof.annotate`: a named range (NVTX, plus torch record_function while torch profiles) and timings."""

from __future__ import annotations

import functools
import time
from collections.abc import Callable

from nrlprof.process import state
from nrlprof.process.state import Total
from nrlprof.ranges import forwarding
from nrlprof.ranges.names import range_name
from nrlprof.ranges.nvtx import DOMAIN, nvtx_module

CO_COROUTINE = 0x80
_clock = time.perf_counter


def timings() -> dict[str, dict[str, float]]:
    """Per label: calls, total and mean seconds, like RLinf's Worker.timer metrics."""
    return state.timings.as_dict()


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
        session = state.session
        if session is None or not session.windows.any_open:
            self._stack.append((_clock(), None))
        else:
            self._stack.append((_clock(), _Ranges(self.name or "annotated", self.color, False)))
        return self

    def __exit__(self, exc_type: object, exc: object, traceback: object) -> None:
        began, ranges = self._stack.pop()
        total = self._total
        total.seconds += _clock() - began
        total.calls += 1
        if ranges is not None:
            ranges.close()

    def __call__(self, function: Callable) -> Callable:
        return wrap(function, self.name or function.__qualname__, self.color)


def wrap(function: Callable, label: str, color: str | None, exact: bool = True) -> Callable:
    """`function` in a range named `label` while a window is open, timed always; `exact=False`: the
    `*args, **kwargs` wrapper instead of one with the function's parameters (bench/bench_annotate.py)."""
    total = state.timings.total(label)
    names = {
        "_nrl_state": state, "_nrl_ranges_of": _Ranges, "_nrl_label": label, "_nrl_color": color, "_nrl_clock": _clock,
        "_nrl_total": total, "_nrl_in_window": functools.partial(_call_in_window, label, color, total),
    }  # fmt: skip
    is_coroutine = getattr(getattr(function, "__code__", None), "co_flags", 0) & CO_COROUTINE
    wrapper = forwarding.generate(function, ASYNC_WRAPPER if is_coroutine else WRAPPER, names, exact)
    return functools.wraps(function)(wrapper)


def _call_in_window(label: str, color: str | None, total: Total, function: Callable, /, *args, **kwargs) -> object:
    ranges = _Ranges(label, color, False)
    began = _clock()
    try:
        return function(*args, **kwargs)
    finally:
        total.seconds += _clock() - began
        total.calls += 1
        ranges.close()


# The wrappers `annotate` generates for each function (nrlprof.ranges.forwarding): the arguments pass as they came.
WRAPPER = """
def wrapper({parameters}):
    _nrl_session = _nrl_state.session
    if _nrl_session is None or not _nrl_session.windows.any_open:
        _nrl_began = _nrl_clock()
        try:
            return _nrl_function({arguments})
        finally:
            _nrl_total.seconds += _nrl_clock() - _nrl_began
            _nrl_total.calls += 1
    return _nrl_in_window(_nrl_function, {arguments})
"""
# A coroutine's range may end on another thread than it began: NVTX start/end, not push/pop.
ASYNC_WRAPPER = """
async def wrapper({parameters}):
    _nrl_ranges = _nrl_ranges_of(_nrl_label, _nrl_color, True) if _nrl_state.session is not None and \
        _nrl_state.session.windows.any_open else None
    _nrl_began = _nrl_clock()
    try:
        return await _nrl_function({arguments})
    finally:
        _nrl_total.seconds += _nrl_clock() - _nrl_began
        _nrl_total.calls += 1
        if _nrl_ranges is not None:
            _nrl_ranges.close()
"""
