"""slime.backends.megatron_utils.actor.MegatronTrainRayActor: one class for the actor and critic roles; its
`TrainProfiler` made at `init`, started at its end, stepped after each `train_actor`. The model work is a matmul."""

from __future__ import annotations

import os

import torch

from slime.observability.profile_utils import TrainProfiler
from slime.ray.train_actor import TrainRayActor


def matmuls(tag: str) -> None:
    with torch.profiler.record_function(tag):
        x = torch.ones(48, 48)
        for _ in range(3):
            x = x @ x / 48


class MegatronTrainRayActor(TrainRayActor):
    def init(self, args, role, with_ref=False, with_opd_teacher=False):
        super().init(args, role, with_ref, with_opd_teacher)
        self.prof = TrainProfiler(args)
        self.prof.on_init_end()
        return 0 if args.start_rollout_id is None else args.start_rollout_id  # slime: its checkpoint's rollout + 1

    def compute_log_prob(self, rollout_id, model_tag):
        for _ in self.prof.iterate_train_log_probs(range(2)):
            matmuls(f"{self.role}.log_probs.{model_tag}.{rollout_id}")

    def train(self, rollout_id, rollout_data_ref, external_data=None):
        if self.role == "critic":
            return self.train_critic(rollout_id, rollout_data_ref)
        self.train_actor(rollout_id, rollout_data_ref, external_data=external_data)
        return None

    def train_critic(self, rollout_id, rollout_data):
        matmuls(f"critic.train.{rollout_id}")
        return {"values": [os.getpid()]}

    def train_actor(self, rollout_id, rollout_data, external_data=None):
        if self.with_ref:
            self.compute_log_prob(rollout_id, "ref")
        self.compute_log_prob(rollout_id, "actor")
        for _ in self.prof.iterate_train_actor(range(2)):
            matmuls(f"actor.train.{rollout_id}")
        self.prof.step(rollout_id=rollout_id)

    def save_model(self, rollout_id, force_sync=False):
        pass

    def update_weights(self):
        matmuls("actor.update_weights")

    def sleep(self):
        pass

    def wake_up(self):
        pass
