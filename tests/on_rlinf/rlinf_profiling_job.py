"""RLinf's `Cluster` with its own `cluster.profiling` section (nsight, the ActorGroup, steps 0 and 1, the output
directory given), a group of ActorWorker launched by RLinf and stepped 4 times at the steps of RLinf's
`EmbodiedRunner._should_profile_step`: prints the pids of the group's workers
(`python rlinf_profiling_job.py <cluster address> <output dir>`)."""

from __future__ import annotations

import os
import sys

os.environ["RAY_ADDRESS"] = sys.argv[1]  # RLinf's Cluster calls ray.init(address="auto")
from omegaconf import OmegaConf
from rlinf.runners.embodied_runner import EmbodiedRunner
from rlinf.scheduler import Cluster, Worker


class ActorWorker(Worker):
    def train(self, step: int) -> int:
        import torch

        with torch.profiler.record_function(f"actor.train.{step}"):
            torch.ones(16, 16) @ torch.ones(16, 16)
        return os.getpid()


profiling = {"backend": "nsight", "worker_groups": ["ActorGroup"], "steps": [0, 1], "output_dir": sys.argv[2]}
placement = {"actor": {"node_group": "node", "placement": "0"}}
config = {"num_nodes": 1, "component_placement": placement, "profiling": profiling}
cluster = Cluster(cluster_cfg=OmegaConf.create(config))
actors = ActorWorker.create_group().launch(cluster, name="ActorGroup")
runner = EmbodiedRunner.__new__(EmbodiedRunner)
runner._profile_all_steps, runner._profile_steps = False, {0, 1}
for global_step in range(4):
    runner._should_profile_step(global_step)
    pids = actors.train(global_step).wait()
print("PIDS", *sorted(set(pids)))
