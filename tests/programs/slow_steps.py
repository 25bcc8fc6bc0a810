"""A driver with slow steps planted (tests/slow_jobs.py), its plan as JSON in argv[1]; the NRL_* variables and
RAY_ADDRESS come from its environment, tests/ from PYTHONPATH."""

from __future__ import annotations

import sys

import ray
from slow_jobs import SlowPlan, run_job

import nrlprof  # noqa: F401  (activated from the environment, as the start-up hook would)

ray.init(logging_level="ERROR")  # RAY_ADDRESS: the cluster
run_job(SlowPlan.from_json(sys.argv[1]))
