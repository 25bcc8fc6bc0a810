"""RLinf's embodied runner shape (tests/frameworks/rlinf) stepping a DTensorPolicyWorker 6 times, on the shared
cluster (RAY_ADDRESS), its workers given the job's PYTHONPATH: prints `OWN_WINDOWS` and the windows RLinf's own
step-gated profiling opened."""

from __future__ import annotations

import os

import ray
from rlinf.runners.embodied_runner import EmbodiedRunner
from workload import DTensorPolicyWorker

ray.init(runtime_env={"env_vars": {"PYTHONPATH": os.environ["PYTHONPATH"]}})
runner = EmbodiedRunner(DTensorPolicyWorker.remote(), max_steps=6)
runner.run()
print("OWN_WINDOWS", runner.own_windows)
