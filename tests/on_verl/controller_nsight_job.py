"""verl's `run_ppo` on verl's generated config, nsys its profiler at step 2 for every rank of the actor, on a local
cluster it starts itself; its TaskRunner only writes its pid to the file RUNNER_PID_FILE names."""

from __future__ import annotations

import os

import ray
import verl
from omegaconf import OmegaConf, open_dict
from verl.trainer.main_ppo import run_ppo

config = OmegaConf.load(os.path.join(os.path.dirname(verl.__file__), "trainer/config/_generated_ppo_trainer.yaml"))
with open_dict(config):
    config.global_profiler.tool = "nsys"
    config.global_profiler.steps = [2]
    config.actor_rollout_ref.actor.profiler.enable = True
    config.actor_rollout_ref.actor.profiler.all_ranks = True
    config.actor_rollout_ref.actor.profiler.tool = "nsys"
    config.ray_kwargs.ray_init.num_cpus = 4


@ray.remote(num_cpus=0)
class TaskRunner:
    def run(self, config) -> None:
        with open(os.environ["RUNNER_PID_FILE"], "w") as out:
            out.write(str(os.getpid()))


run_ppo(config, task_runner_class=TaskRunner)
