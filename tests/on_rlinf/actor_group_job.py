"""An ActorGroup launched by RLinf's `Cluster`, stepped 3 times at RLinf's `EmbodiedRunner._should_profile_step`
(`python actor_group_job.py <cluster address>`)."""

from __future__ import annotations

import os
import sys

os.environ["RAY_ADDRESS"] = sys.argv[1]  # RLinf's Cluster calls ray.init(address="auto")
from omegaconf import OmegaConf
from rlinf.runners.embodied_runner import EmbodiedRunner
from rlinf.scheduler import Cluster, Worker


class ActorWorker(Worker):
    def train(self, step: int) -> int:
        return os.getpid()


placement = {"actor": {"node_group": "node", "placement": "0"}}
cluster = Cluster(cluster_cfg=OmegaConf.create({"num_nodes": 1, "component_placement": placement}))
actors = ActorWorker.create_group().launch(cluster, name="ActorGroup")
runner = EmbodiedRunner.__new__(EmbodiedRunner)
runner._profile_all_steps, runner._profile_steps = False, set()
for global_step in range(3):
    runner._should_profile_step(global_step)
    actors.train(global_step).wait()
