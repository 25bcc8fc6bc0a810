"""One NVTX range per training step in a process's timeline, named with the step number."""

from __future__ import annotations

from nrlprof.ranges.nvtx import DOMAIN, nvtx_module

__all__ = ["DOMAIN", "StepRanges"]


class StepRanges:
    def __init__(self) -> None:
        self._open: object | None = None

    def begin_step(self, step: int) -> None:
        self.end_step()
        nvtx = nvtx_module()
        if nvtx is not None:
            self._open = nvtx.start_range(message=f"step {step}", color="green", domain=DOMAIN)

    def end_step(self) -> None:
        if self._open is not None:
            nvtx = nvtx_module()
            if nvtx is not None:
                nvtx.end_range(self._open)
            self._open = None
