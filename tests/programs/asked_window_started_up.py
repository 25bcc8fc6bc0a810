"""A worker's torch backend readied for a window asked for, in a fresh process (whose Kineto has not started): the
readying leaves a profiler another party runs alone, then pays Kineto's start-up; the window records steps 4 and 5.
Prints `{"left_alone", "started_up", "trace"}` as JSON (`python asked_window_started_up.py <trace folder>`)."""

from __future__ import annotations

import json
import sys

import torch

from nrlprof.backends import torch_profiler
from nrlprof.backends.base import ProcessRole
from nrlprof.backends.torch_profiler import TorchBackend
from nrlprof.config.plan import TORCH, BackendPlan, Plan, Target, TorchSettings
from nrlprof.config.steps import Window
from nrlprof.process.finishing import FINISHER
from nrlprof.workers.identity import WorkerIdentity

plan = Plan(backends=(BackendPlan(TORCH, (Target("*"),), None),), torch=TorchSettings(directory=sys.argv[1]))
role = ProcessRole(WorkerIdentity("PolicyWorker", None, 0), plan, None)
backend = TorchBackend(plan.backends[0], role, Target("*"))
theirs = torch.profiler.profile()
theirs.start()
backend.ready_for_asked()
left_alone = not torch_profiler._kineto_started
theirs.stop()
backend.ready_for_asked()
started_up = torch_profiler._kineto_started and not torch_profiler.another_profiler_running()
with torch.profiler.record_function("before the window"):
    torch.ones(8) + 1
backend.start_window(Window(4, 5), 4)
with torch.profiler.record_function("in the window"):
    torch.ones(8) + 1
backend.mark_step(5)
(path,) = backend.stop_window().files
FINISHER.settle()
print(json.dumps({"left_alone": left_alone, "started_up": started_up, "trace": path}))
