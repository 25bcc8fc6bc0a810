"""An armed verl job (NRL_PROFILE_ON_DEMAND=1) on the shared cluster (RAY_ADDRESS) that asks for a window of 2
steps of its actor_rollout workers itself, while its trainer steps, and stops once the answer came: prints
`LAST <step>`, the last step it ran."""

from __future__ import annotations

import ray
from helpers.on_demand import ask_in_background
from verl_workers import bare_trainer, job_runtime_env, train, worker_groups

ray.init(runtime_env=job_runtime_env())
groups = worker_groups(colocated=False, critic_ranks=1)
asker = ask_in_background(("*actor_rollout*",), steps=2)
print("LAST", train(bare_trainer(groups), groups, steps=40, until=lambda: not asker.is_alive()), flush=True)
