"""A process's torch backend driven by window actions, with no Ray: one window of real torch work (steps 2 and 3)."""

from __future__ import annotations

from pathlib import Path

import torch

from nrlprof.backends.base import ProcessRole
from nrlprof.backends.torch_profiler import TorchBackend
from nrlprof.config.plan import TORCH, BackendPlan, Plan, Target, TorchSettings
from nrlprof.config.steps import StepSelection, Window
from nrlprof.process.state import OpenWindows
from nrlprof.runtime.windows.profiler import START, STEP, STOP, Action, ProcessProfiler
from nrlprof.workers.identity import WorkerIdentity


def torch_backend(directory: Path, **switches: bool) -> TorchBackend:
    """A policy worker's torch backend alone, for a window of steps 2 and 3; `switches`: TorchSettings'."""
    backend_plan = BackendPlan(TORCH, (Target("*"),), StepSelection((Window(2, 3),)))
    plan = Plan(backends=(backend_plan,), torch=TorchSettings(directory=str(directory), **switches))
    role = ProcessRole(WorkerIdentity("PolicyWorker", None, 0, explicit_name="policy"), plan, None)
    return TorchBackend(backend_plan, role, Target("*"))


def torch_process(directory: Path, controller: bool = False, gzip_traces: bool = False) -> ProcessProfiler:
    steps = StepSelection((Window(2, 3),))
    backend_plan = BackendPlan(TORCH, (Target("*"),), steps)
    plan = Plan(backends=(backend_plan,), torch=TorchSettings(directory=str(directory), gzip=gzip_traces))
    identity = None if controller else WorkerIdentity("PolicyWorker", None, 0, explicit_name="policy")
    return ProcessProfiler(ProcessRole(identity, plan, None), {TORCH: Target("*")}, OpenWindows())


def window(process: ProcessProfiler) -> list[dict]:
    """Steps 2 and 3 of real torch work, and the stop at step 4: the records the stop answers with."""
    process.apply((Action(TORCH, START, 2, 3, 2),))
    with torch.profiler.record_function("policy.train.2"):
        torch.ones(32, 32) @ torch.ones(32, 32)
    process.apply((Action(TORCH, STEP, step=3),))
    with torch.profiler.record_function("policy.train.3"):
        torch.ones(32, 32) @ torch.ones(32, 32)
    return [record.as_dict() for record in process.apply((Action(TORCH, STOP),)).records]
