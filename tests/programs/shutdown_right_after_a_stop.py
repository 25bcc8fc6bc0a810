"""A driver that shuts Ray down right after a torch window's stop, with no call of the worker in between, whose trace
takes seconds to finish: `python shutdown_right_after_a_stop.py <address> <finish s>` (tests/ on PYTHONPATH)."""

from __future__ import annotations

import sys

import ray
from helpers.finished import SlowFinishingPolicyWorker

ray.init(address=sys.argv[1], logging_level="WARNING")
worker = SlowFinishingPolicyWorker.remote(float(sys.argv[2]))
print("PID", ray.get(worker.pid.remote()), flush=True)
import nrlprof  # noqa: E402  # after the worker started: the driver's own activation is not what is measured

for step in (1, 2):
    nrlprof.step(step)
    ray.get(worker.train.remote(step))
nrlprof.step(3)
ray.shutdown()  # the job ends right after the stop, with no call of the worker in between
print("DONE", flush=True)
