"""The quick start's `train.py` (README, "Quick start"), a job that never imports nrlprof: it starts its own cluster
and trains two policy workers for six steps, each a `get_logprobs` call and a `train` call. The test copies it into
the job's folder as `train.py` and runs the README's commands there."""

from __future__ import annotations

import ray


@ray.remote(num_cpus=0)
class DTensorPolicyWorker:
    def get_logprobs(self, step):
        return step

    def train(self, step):
        import torch

        with torch.profiler.record_function(f"policy.train.{step}"):
            return float((torch.ones(64, 64) @ torch.ones(64, 64)).sum())


ray.init(address="local", num_cpus=2, include_dashboard=False)
workers = [DTensorPolicyWorker.remote() for _ in range(2)]
for step in range(1, 7):
    ray.get([worker.get_logprobs.remote(step) for worker in workers])
    ray.get([worker.train.remote(step) for worker in workers])
