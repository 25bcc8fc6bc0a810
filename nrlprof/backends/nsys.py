"""Nsight Systems: the worker runs under `nsys profile`; a window is one CUDA profiler capture range."""

from __future__ import annotations

import os
import time
from pathlib import Path

from nrlprof.backends import cuda_profiler_api
from nrlprof.backends.base import Backend
from nrlprof.config.nsys_options import nsys_output_name
from nrlprof.config.plan import NSYS, BackendPlan
from nrlprof.config.steps import Window
from nrlprof.log import logger
from nrlprof.manifest import WindowRecord
from nrlprof.ranges.step_ranges import StepRanges
from nrlprof.workers.identity import WorkerIdentity


class NsysBackend(Backend):
    kind = NSYS

    @staticmethod
    def runtime_env_fragment(backend_plan: BackendPlan, identity: WorkerIdentity) -> dict:
        config: dict = dict(backend_plan.options)
        config.setdefault("o", nsys_output_name(identity.file_name, backend_plan.steps))
        if backend_plan.output_dir and not Path(config["o"]).is_absolute():
            config["o"] = str(Path(backend_plan.output_dir) / config["o"])
        if backend_plan.flags:
            config["flags"] = list(backend_plan.flags)
        return {"_nsight": config}

    def __init__(self, backend_plan, role, target=None) -> None:
        super().__init__(backend_plan, role, target)
        self.ranges = StepRanges(self.role.worker_name)
        self.capture_problem: str | None = None
        self.captures = 0
        self.call_range = None

    def start_window(self, window: Window, step: int) -> None:
        self.window, self.steps_seen, self.started_at, self.captures = window, [], time.time(), 0
        self.capture_problem = None if self.discrete else self._start_capture(f"window {window.label}")
        self.mark_step(step)

    def _start_capture(self, what: str) -> str | None:
        problem = cuda_profiler_api.start()
        if problem:
            log = logger.info if self.role.is_controller else logger.warning
            log("nsys %s for %s: %s; recorded, but nsys captures nothing", what, self.role.worker_name, problem)
        else:
            self.captures += 1
        return problem

    def begin_call(self, label: str) -> None:
        from nrlprof.ranges.nvtx import nvtx_module

        self.capture_problem = self._start_capture(f"capture of {label}") or self.capture_problem
        nvtx = nvtx_module()
        if nvtx is not None:
            self.call_range = nvtx.start_range(message=f"{label} [step {self.steps_seen[-1]}]", domain="nrlprof")

    def end_call(self) -> None:
        from nrlprof.ranges.nvtx import nvtx_module

        if self.call_range is not None:
            nvtx_module().end_range(self.call_range)
            self.call_range = None
        if not self.capture_problem:
            cuda_profiler_api.stop()

    def mark_step(self, step: int) -> None:
        self.steps_seen.append(step)
        self.ranges.begin_step(step)

    def stop_window(self) -> WindowRecord:
        self.ranges.end_step()
        problem = self.capture_problem
        if not self.discrete and not problem:
            problem = cuda_profiler_api.stop()
        message = problem or (f"{self.captures} discrete capture(s)" if self.discrete else "")
        record = self.record(self._expected_reports(), "no-cuda" if problem else "ok", message)
        self.window = None
        return record

    def _expected_reports(self) -> list[str]:
        if self.role.identity is None or not self.role.session_dir:
            return []
        name = self.runtime_env_fragment(self.backend_plan, self.role.identity)["_nsight"]["o"]
        name = name.replace("%p", str(os.getpid())) + ".nsys-rep"
        return [str(Path(self.role.session_dir) / "logs" / "nsight" / name)]
