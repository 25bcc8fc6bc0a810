"""Where a driver's plan goes: a Trainer actor no pattern names (a possible controller) says whether the plan is in
its environment and in the job's runtime_env, and which session it has; prints `RESULT <json>` with whether the
driver kept the plan in its own environment (`python where_the_plan_goes.py <cluster address | own>`, `own`: the
driver starts its cluster)."""

from __future__ import annotations

import json
import os
import sys

import ray


@ray.remote(num_cpus=0)
class Trainer:
    def facts(self) -> dict:
        from nrlprof.process import state

        job_env = ray.get_runtime_context().runtime_env.get("env_vars") or {}
        return {"in_environment": "NRLPROF_JOB_PLAN" in os.environ, "in_runtime_env": "NRLPROF_JOB_PLAN" in job_env,
                "kind": state.session.kind if state.session else None}  # fmt: skip


if sys.argv[1] == "own":
    ray.init(address="local", num_cpus=1, include_dashboard=False, logging_level="ERROR")
else:
    ray.init(address=sys.argv[1], logging_level="ERROR")
facts = ray.get(Trainer.remote().facts.remote(), timeout=300)
facts["driver_keeps_it"] = "NRLPROF_JOB_PLAN" in os.environ
print("RESULT " + json.dumps(facts))
ray.shutdown()
