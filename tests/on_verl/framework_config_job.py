"""verl's RayPPOTrainer built from verl's own generated config, its profiler set to torch at steps 2 and 3 for every
rank of the actor, stepping worker groups on the shared cluster (RAY_ADDRESS) 5 times."""

from __future__ import annotations

import os

import ray
import torch
import verl
from omegaconf import OmegaConf, open_dict
from verl.single_controller.ray import RayWorkerGroup
from verl.trainer.ppo.ray_trainer import RayPPOTrainer, Role
from verl_workers import job_runtime_env, train, worker_groups

config = OmegaConf.load(os.path.join(os.path.dirname(verl.__file__), "trainer/config/_generated_ppo_trainer.yaml"))
with open_dict(config):
    config.data.train_batch_size = config.data.val_batch_size = 1
    config.data.dataloader_num_workers = 0
    config.global_profiler.tool = "torch"
    config.global_profiler.steps = [2, 3]
    config.actor_rollout_ref.actor.profiler.enable = True
    config.actor_rollout_ref.actor.profiler.all_ranks = True
    config.actor_rollout_ref.actor.profiler.tool = "torch"
data = [{"x": i} for i in range(4)]
ray.init(runtime_env=job_runtime_env())
trainer = RayPPOTrainer(config, tokenizer=None, role_worker_mapping={Role.ActorRollout: object},
                        resource_pool_manager=None, ray_worker_group_cls=RayWorkerGroup, train_dataset=data,
                        val_dataset=data, collate_fn=lambda batch: batch,
                        train_sampler=torch.utils.data.SequentialSampler(data), device_name="cpu")  # fmt: skip
groups = worker_groups(colocated=False, critic_ranks=1)
trainer.use_reference_policy, trainer.use_critic = False, True
train(trainer, groups, steps=5, profile_steps=(2, 3))
