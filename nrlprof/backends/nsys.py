"""Nsight Systems: the worker runs under `nsys profile`; a window is one CUDA profiler capture range."""

from __future__ import annotations

import os
import time
from pathlib import Path

from nrlprof.backends import cuda_profiler_api
from nrlprof.backends.base import Backend
from nrlprof.identity import WorkerIdentity
from nrlprof.log import logger
from nrlprof.manifest import WindowRecord
from nrlprof.plan import NSYS, BackendPlan
from nrlprof.step_ranges import StepRanges
from nrlprof.steps import Window
from nrlprof.tool_options import nsys_output_name


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

    def __init__(self, backend_plan, role) -> None:
        super().__init__(backend_plan, role)
        self.ranges = StepRanges(self.role.worker_name)
        self.capture_problem: str | None = None

    def start_window(self, window: Window, step: int) -> None:
        self.window, self.steps_seen, self.started_at = window, [], time.time()
        self.capture_problem = cuda_profiler_api.start()
        if self.capture_problem:
            logger.warning(
                "nsys window %s for %s: %s; the window is recorded but nsys captures nothing",
                window.label,
                self.role.worker_name,
                self.capture_problem,
            )
        self.mark_step(step)

    def mark_step(self, step: int) -> None:
        self.steps_seen.append(step)
        self.ranges.begin_step(step)

    def stop_window(self) -> WindowRecord:
        self.ranges.end_step()
        problem = self.capture_problem or cuda_profiler_api.stop()
        record = self.record(self._expected_reports(), "no-cuda" if problem else "ok", problem or "")
        self.window = None
        return record

    def _expected_reports(self) -> list[str]:
        if self.role.identity is None or not self.role.session_dir:
            return []
        name = self.runtime_env_fragment(self.backend_plan, self.role.identity)["_nsight"]["o"]
        name = name.replace("%p", str(os.getpid())) + ".nsys-rep"
        return [str(Path(self.role.session_dir) / "logs" / "nsight" / name)]

