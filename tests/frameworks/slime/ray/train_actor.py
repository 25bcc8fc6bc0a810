"""slime.ray.train_actor.TrainRayActor: the rank's environment at creation, its process group at `init` (gloo here,
NCCL in slime), with the role given then."""

from __future__ import annotations

import os
import random

import torch.distributed as dist

from slime.ray.ray_actor import RayActor


class TrainRayActor(RayActor):
    def __init__(self, world_size, rank, master_addr, master_port):
        self._world_size = world_size
        self._rank = rank
        if master_addr:
            self.master_addr, self.master_port = master_addr, master_port
        else:
            self.master_addr, self.master_port = self._get_current_node_ip_and_free_port(
                start_port=random.randint(20000, 21000)
            )
        os.environ["MASTER_ADDR"] = self.master_addr
        os.environ["MASTER_PORT"] = str(self.master_port)
        os.environ["WORLD_SIZE"] = str(self._world_size)
        os.environ["RANK"] = str(self._rank)
        os.environ["LOCAL_RANK"] = "0"

    def init(self, args, role, with_ref=False, with_opd_teacher=False):
        self.args = args
        self.role = role
        self.with_ref = with_ref
        dist.init_process_group(backend="gloo")
        args.rank = dist.get_rank()
        args.world_size = dist.get_world_size()

    def clear_memory(self):
        pass

    def set_rollout_manager(self, rollout_manager):
        self.rollout_manager = rollout_manager
