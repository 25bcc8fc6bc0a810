"""An armed RLinf job (NRL_PROFILE_ON_DEMAND=1): an ActorGroup and a RolloutGroup launched by RLinf's `Cluster`,
stepped at RLinf's `EmbodiedRunner._should_profile_step` (steps of 0.3 s at least), that asks for a window of 2
steps of the ActorGroup itself and stops once the answer came: prints `LAST <step>`
(`python armed_rlinf_job.py <cluster address>`)."""

from __future__ import annotations

import os
import sys
import time

os.environ["RAY_ADDRESS"] = sys.argv[1]  # RLinf's Cluster calls ray.init(address="auto")
from helpers.on_demand import ask_in_background
from omegaconf import OmegaConf
from rlinf.runners.embodied_runner import EmbodiedRunner
from rlinf.scheduler import Cluster, Worker


class ActorWorker(Worker):
    def train(self, step: int) -> None:
        import torch

        with torch.profiler.record_function(f"actor.train.{step}"):
            torch.ones(16, 16) @ torch.ones(16, 16)


class RolloutWorker(ActorWorker):
    pass


placement = {"actor": {"node_group": "node", "placement": "0"}}
cluster = Cluster(cluster_cfg=OmegaConf.create({"num_nodes": 1, "component_placement": placement}))
actors = ActorWorker.create_group().launch(cluster, name="ActorGroup")
rollouts = RolloutWorker.create_group().launch(cluster, name="RolloutGroup")
runner = EmbodiedRunner.__new__(EmbodiedRunner)
runner._profile_all_steps, runner._profile_steps = False, set()
asker = ask_in_background(("ActorGroup",), steps=2)
for global_step in range(60):
    started = time.monotonic()
    runner._should_profile_step(global_step)
    actors.train(global_step).wait()
    rollouts.train(global_step).wait()
    time.sleep(max(0.0, 0.3 - (time.monotonic() - started)))
    if not asker.is_alive():
        break
print("LAST", global_step)
