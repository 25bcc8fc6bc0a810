"""verl's worker groups on the shared cluster (RAY_ADDRESS) called 4 times in a loop of its own, with no trainer
(generate, the critic's values, update): the steps come from NRL_STEP_METHOD alone."""

from __future__ import annotations

import ray
from verl_workers import job_runtime_env, worker_groups

ray.init(runtime_env=job_runtime_env())
groups = worker_groups(colocated=False, critic_ranks=1)
for step in range(1, 5):
    groups["actor_rollout"].generate_sequences(step)
    groups["critic"].compute_values(step)
    groups["actor_rollout"].update_actor(step)
