"""A driver that imports nrlprof (the NRL_* variables alone: no activate call, no agent-hook call) and then starts
a cluster of its own: prints `RESULT <json>`, the runtime-env plugins its environment names once nrlprof is
imported, the pid of a matched actor (or `HUNG` after `timeout` s), whether the agent has nrlprof's fix and the
driver's own pid (`python import_nrlprof_then_start_ray.py <timeout>`)."""

from __future__ import annotations

import json
import os
import sys

import nrlprof  # noqa: F401  # imported first, as the program's own first line

plugins = os.environ.get("RAY_RUNTIME_ENV_PLUGINS")
import ray  # noqa: E402
from workload import DTensorPolicyWorker  # noqa: E402

from nrlprof.rayfix.cluster_fix import agent_has_fix  # noqa: E402

ray.init(address="local", num_cpus=2, include_dashboard=False, logging_level="ERROR")
worker = DTensorPolicyWorker.remote()
try:
    pid = ray.get(worker.pid.remote(), timeout=float(sys.argv[1]))
except ray.exceptions.GetTimeoutError:
    pid = "HUNG"
print("RESULT " + json.dumps({"plugins": plugins, "pid": pid, "agent_has_fix": agent_has_fix(), "driver": os.getpid()}))
ray.shutdown()
