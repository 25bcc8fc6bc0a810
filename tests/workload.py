"""A tiny RL-shaped set of Ray actors for end-to-end tests (no profiling code in them)."""

from __future__ import annotations

import os
import time

import ray


@ray.remote(num_cpus=0)
class DTensorPolicyWorker:
    def __init__(self):
        self.calls = []

    def train(self, step: int) -> int:
        import torch

        with torch.profiler.record_function(f"policy.train.{step}"):
            x = torch.ones(64, 64)
            for _ in range(3):
                x = x @ x / 64
        self.calls.append(step)
        return os.getpid()

    def pid(self) -> int:
        return os.getpid()

    def executable(self) -> str:
        import sys

        return sys.executable


@ray.remote(num_cpus=0)
class TensorParallelWorker:
    def forward(self, step: int) -> int:
        import torch

        with torch.profiler.record_function(f"tp.forward.{step}"):
            torch.ones(32, 32) @ torch.ones(32, 32)
        return os.getpid()


@ray.remote(num_cpus=0)
class VllmGenerationWorker:
    def __init__(self, tensor_parallel: int = 0):
        self.children = [TensorParallelWorker.remote() for _ in range(tensor_parallel)]

    def generate(self, step: int) -> list[int]:
        import torch

        with torch.profiler.record_function(f"generate.{step}"):
            torch.ones(16, 16) @ torch.ones(16, 16)
        return ray.get([c.forward.remote(step) for c in self.children])

    def pid(self) -> int:
        return os.getpid()


@ray.remote(num_cpus=0)
class RewardWorker:
    def score(self, step: int) -> float:
        time.sleep(0.001)
        return float(step)

    def pid(self) -> int:
        return os.getpid()


@ray.remote(num_cpus=0)
class ActorRolloutRefWorker:
    """verl's hybrid worker shape; uses nrlprof.annotate like a framework would."""

    def update_actor(self, step: int) -> int:
        import torch

        import nrlprof

        with nrlprof.annotate("actor/compute_adv"):
            torch.ones(8, 8) @ torch.ones(8, 8)
        with torch.profiler.record_function(f"update.{step}"):
            torch.ones(8, 8) @ torch.ones(8, 8)
        return os.getpid()

    def generate_sequences(self, step: int) -> int:
        return os.getpid()

    def pid(self) -> int:
        return os.getpid()


@ray.remote(num_cpus=0)
class CriticWorker:
    def pid(self) -> int:
        return os.getpid()
