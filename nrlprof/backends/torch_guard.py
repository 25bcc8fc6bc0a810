"""Two torch profilers in one process crash it: detect one already running, and yield to one starting later."""

from __future__ import annotations

import contextlib
import sys
import threading
from collections.abc import Iterator
from typing import Any

from nrlprof.process import patches

PATCH_NAME = "torch.autograd.profiler.profile._prepare_trace"


def another_profiler_running() -> bool:
    """A torch profiler (the user's, verl's, vLLM's) is recording in this process right now."""
    autograd_profiler = sys.modules.get("torch.autograd.profiler")
    return bool(autograd_profiler is not None and getattr(autograd_profiler, "_is_profiler_enabled", False))


class OtherProfilerGuard:
    """Every torch profiler prepares its trace through one method: one that is not ours ends our window first."""

    def __init__(self, backend: Any) -> None:
        self.backend = backend
        # The thread starting or stopping nrlprof's own profiler (a window's warm-up runs on a thread of its own).
        self.own_thread: int | None = None

    @contextlib.contextmanager
    def own_start(self) -> Iterator[None]:
        self.own_thread = threading.get_ident()
        try:
            yield
        finally:
            self.own_thread = None

    def install(self) -> None:
        from torch.autograd.profiler import profile

        guard = self

        def wrap(original):
            def _prepare_trace(profiler_self, *args, **kwargs):
                if guard.own_thread != threading.get_ident() and guard.backend.holds_profiler():
                    guard.backend.interrupted_by_other_profiler()
                return original(profiler_self, *args, **kwargs)

            return _prepare_trace

        patches.install(PATCH_NAME, profile, "_prepare_trace", wrap)
