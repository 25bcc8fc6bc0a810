"""ROCm Systems Profiler: the worker runs under `rocprof-sys-python <args> -- <interpreter>` for its lifetime."""

from __future__ import annotations

import time
from pathlib import Path

from nrlprof.backends.base import Backend
from nrlprof.config.plan import ROCPROF, BackendPlan
from nrlprof.config.steps import Window
from nrlprof.manifest import Status, WindowRecord
from nrlprof.workers.identity import WorkerIdentity


class RocprofBackend(Backend):
    kind = ROCPROF

    @staticmethod
    def runtime_env_fragment(backend_plan: BackendPlan, identity: WorkerIdentity) -> dict:
        env = {"ROCPROFSYS_OUTPUT_PREFIX": f"{identity.file_name}_rank{identity.rank}_"}
        if backend_plan.output_dir:
            env["ROCPROFSYS_OUTPUT_PATH"] = str(Path(backend_plan.output_dir) / identity.file_name / str(identity.rank))
        env.update(dict(backend_plan.env))
        return {"_rocprof_sys": {"args": dict(backend_plan.options), "env": env}}

    def start_window(self, window: Window, step: int) -> None:
        self.window, self.steps_seen, self.started_at = window, [step], time.time()

    def mark_step(self, step: int) -> None:
        self.steps_seen.append(step)

    def stop_window(self) -> WindowRecord:
        lifetime = "rocprof-sys traces the whole worker lifetime; written at worker exit"
        record = self.record([], Status.LIFETIME, lifetime)
        self.window = None
        return record
