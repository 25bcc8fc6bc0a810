"""RLinf's reasoning runner shape (tests/frameworks/rlinf) stepping a DTensorPolicyWorker over 6 batches, on the
shared cluster (RAY_ADDRESS), its workers given the job's PYTHONPATH."""

from __future__ import annotations

import os

import ray
from rlinf.runners.reasoning_runner import ReasoningRunner
from workload import DTensorPolicyWorker

ray.init(runtime_env={"env_vars": {"PYTHONPATH": os.environ["PYTHONPATH"]}})
ReasoningRunner(DTensorPolicyWorker.remote(), batches=range(6)).run()
