"""A driver with slow steps planted (tests/slow_jobs.py), its plan as JSON in argv[1]; the NRL_* variables and
RAY_ADDRESS come from its environment, tests/ from PYTHONPATH."""

from __future__ import annotations

import os
import sys

import ray
from slow_jobs import SlowPlan, run_job

import nrlprof  # noqa: F401  (activated from the environment, as the start-up hook would)

# The job's workers (a Trainer actor among them) import tests/ as the driver does.
ray.init(logging_level="ERROR", runtime_env={"env_vars": {"PYTHONPATH": os.environ["PYTHONPATH"]}})
run_job(SlowPlan.from_json(sys.argv[1]))
