"""A driver that imports verl's trainer module, then calls `nrlprof.configure` with verl's profiler section (torch
at steps 2 and 3 for every rank of the actor), then builds a fused actor_rollout and critic worker group the way
verl's trainer does and steps it 4 times: `python late_configure_job.py <cluster address>`."""

from __future__ import annotations

import sys

import ray
import verl.trainer.ppo.ray_trainer as ray_trainer
from verl.single_controller.ray.base import RayClassWithInitArgs, RayResourcePool, RayWorkerGroup
from verl_workers import ActorRolloutRefWorker, CriticWorker, bare_trainer, train

import nrlprof

nrlprof.configure({
    "global_profiler": {"tool": "torch", "steps": [2, 3]},
    "actor_rollout_ref": {"actor": {"profiler": {"enable": True, "all_ranks": True, "tool": "torch"}}},
})  # fmt: skip
ray.init(address=sys.argv[1])
roles = {"actor_rollout": RayClassWithInitArgs(cls=ray.remote(ActorRolloutRefWorker)),
         "critic": RayClassWithInitArgs(cls=ray.remote(CriticWorker))}  # fmt: skip
pool = RayResourcePool(process_on_nodes=[2], use_gpu=False, max_colocate_count=1)
fused = RayWorkerGroup(resource_pool=pool, ray_cls_with_init=ray_trainer.create_colocated_worker_cls(class_dict=roles))
groups = fused.spawn(prefix_set=roles.keys())
train(bare_trainer(groups), groups, steps=4)
nrlprof.finish()
