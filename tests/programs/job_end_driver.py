"""A zero-code driver (it never imports nrlprof: the start-up hook activates it) that joins a running cluster and
trains two ranks of `helpers.job_end.EndingPolicyWorker` for `last_step` steps, then ends as `ending` says:
`shutdown` (ray.shutdown), `kill` (rank 1 killed at step 3) or `sigkill` (rank 1 dies at step 5); anything else just
returns. Prints `PIDS <driver> <rank 0> <rank 1>`, and `DONE` at the end
(`python job_end_driver.py <address> <ending> <last step>`)."""

from __future__ import annotations

import os
import sys

import ray
from helpers.job_end import EndingPolicyWorker

address, ending, last_step = sys.argv[1], sys.argv[2], int(sys.argv[3])
ray.init(address=address, logging_level="WARNING")
die_at = {"sigkill": 5}.get(ending, 0)
policy = [EndingPolicyWorker.options(runtime_env={"env_vars": {"RANK": str(r)}}).remote(die_at if r else 0)
          for r in (0, 1)]  # fmt: skip
print("PIDS", os.getpid(), *ray.get([w.pid.remote() for w in policy]), flush=True)
for step in range(1, last_step + 1):
    ray.get([w.pid.remote() for w in policy])  # another method: the train calls that follow begin a step
    try:
        ray.get([w.train.remote(step) for w in policy])
    except ray.exceptions.RayActorError:
        policy = policy[:1]
    if ending == "kill" and step == 3:
        ray.kill(policy[1])
        policy = policy[:1]
if ending == "shutdown":
    ray.shutdown()
print("DONE", flush=True)
