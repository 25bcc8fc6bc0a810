"""A driver that joins a cluster, steps a DTensorPolicyWorker through steps 1 to 3 and finishes; prints the worker's
pid last (`python policy_worker_three_steps.py <cluster address>`)."""

from __future__ import annotations

import sys

import ray
from workload import DTensorPolicyWorker

import nrlprof

ray.init(address=sys.argv[1], logging_level="WARNING")
worker = DTensorPolicyWorker.remote()
for step in range(1, 4):
    nrlprof.step(step)
    ray.get(worker.train.remote(step), timeout=180)
nrlprof.finish()
print(ray.get(worker.pid.remote()))
