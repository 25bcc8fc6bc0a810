"""A driver whose training loop raises in step 3, inside a torch window of steps 2-6 (the NRL_* variables and
RAY_ADDRESS come from its environment; tests/ on PYTHONPATH)."""

from __future__ import annotations

import ray
from workload import DTensorPolicyWorker

import nrlprof

ray.init(logging_level="ERROR")  # RAY_ADDRESS: the shared cluster
worker = DTensorPolicyWorker.remote()
for step in range(1, 10):
    nrlprof.step(step)
    ray.get(worker.train.remote(step))
    if step == 3:
        raise RuntimeError("training diverged")
