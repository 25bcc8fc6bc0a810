"""slime.backends.sglang_utils.sglang_engine.SGLangEngine: a Ray actor in front of an SGLang server. slime sends
its generation requests to the server over HTTP; here `generate` is a Ray call that runs a matmul."""

from __future__ import annotations

import os

import torch

from slime.ray.ray_actor import RayActor


class SGLangEngine(RayActor):
    def __init__(self, args, rank: int, worker_type: str = "regular", base_gpu_id: int | None = None, **kwargs):
        self.args, self.rank, self.worker_type = args, rank, worker_type

    def init(self, **kwargs):
        return os.getpid()

    def generate(self, rollout_id):
        with torch.profiler.record_function(f"sglang.generate.{rollout_id}"):
            torch.ones(48, 48) @ torch.ones(48, 48)
        return os.getpid()

    def release_memory_occupation(self):
        pass

    def resume_memory_occupation(self, tags=None):
        pass
