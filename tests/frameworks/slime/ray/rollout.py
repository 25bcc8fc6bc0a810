"""slime.ray.rollout.RolloutManager: a Ray actor that creates the SGLang engines (`ray.remote(SGLangEngine)`,
unnamed, one per engine rank) and runs each rollout's generation and evaluation, setting the rollout id first."""

from __future__ import annotations

import ray

from slime.backends.sglang_utils.sglang_engine import SGLangEngine
from slime.rollout.sample_hooks import set_current_rollout_id


@ray.remote
class RolloutManager:
    def __init__(self, args, pg):
        self.args, self.pg = args, pg
        RolloutRayActor = ray.remote(SGLangEngine)
        count = max(1, args.rollout_num_gpus // args.rollout_num_gpus_per_engine)
        self.engines = [RolloutRayActor.options(num_cpus=0, num_gpus=0).remote(args, rank=rank)
                        for rank in range(count)]  # fmt: skip
        ray.get([engine.init.remote() for engine in self.engines])

    def generate(self, rollout_id):
        self.rollout_id = rollout_id
        set_current_rollout_id(rollout_id)
        return ray.get([engine.generate.remote(rollout_id) for engine in self.engines])

    def eval(self, rollout_id):
        set_current_rollout_id(rollout_id)
        ray.get([engine.generate.remote(rollout_id) for engine in self.engines])

    def offload(self):
        return ray.get([engine.release_memory_occupation.remote() for engine in self.engines])

    def onload_weights(self):
        return ray.get([engine.resume_memory_occupation.remote(tags=["weights"]) for engine in self.engines])

    def onload_kv(self):
        return ray.get([engine.resume_memory_occupation.remote(tags=["kv_cache"]) for engine in self.engines])

    def save(self, rollout_id):
        pass

    def dispose(self):
        pass
