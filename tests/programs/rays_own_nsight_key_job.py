"""An actor created with Ray's own `_nsight` runtime_env key, on the shared cluster (RAY_ADDRESS): prints
`ANSWERED <its pid>`, or `HUNG` when it has not answered in `timeout` s (`python rays_own_nsight_key_job.py
<timeout>`)."""

from __future__ import annotations

import sys

import ray
from workload import DTensorPolicyWorker

ray.init(logging_level="ERROR")
actor = DTensorPolicyWorker.options(runtime_env={"_nsight": {"t": "cuda"}}).remote()
try:
    print("ANSWERED", ray.get(actor.pid.remote(), timeout=float(sys.argv[1])))
except ray.exceptions.GetTimeoutError:
    print("HUNG")
ray.shutdown()
