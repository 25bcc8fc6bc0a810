"""The bundled RL-shaped Ray job of `nrlprof demo`, written as a user would: no profiling code in any worker.

One training step: the generation worker asks its two tensor-parallel children for tokens, the reward
worker scores the samples, and both policy ranks take an optimiser step on them. The actors ask for no
CPU (`num_cpus=0`) so the job runs on a two-core machine; each keeps torch to one thread for the same
reason. `run_steps` is the controller's loop, with the per-step hook passed in (`nrlprof.step`, or a
no-op to measure the job without nrlprof).
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from dataclasses import dataclass

import ray

HIDDEN = 256
BATCH = 64
VOCAB = 64
POLICY_MICRO_BATCHES = 4
DECODE_TOKENS = 256  # generation holds most of a step, as in RL jobs


def _torch():
    import torch

    torch.set_num_threads(1)
    return torch


@ray.remote(num_cpus=0)
class DTensorPolicyWorker:
    """One data-parallel rank of the policy: a small MLP trained with Adam."""

    def __init__(self, seed: int = 0) -> None:
        torch = _torch()
        torch.manual_seed(seed)
        self.rank = int(os.environ.get("RANK", "0"))
        self.model = torch.nn.Sequential(
            torch.nn.Linear(VOCAB, HIDDEN), torch.nn.ReLU(), torch.nn.Linear(HIDDEN, VOCAB)
        )
        self.optimizer = torch.optim.Adam(self.model.parameters(), lr=1e-3)

    def train(self, step: int, rewards: list[float]) -> float:
        torch = _torch()
        generator = torch.Generator().manual_seed(step * 100 + self.rank)
        advantages = torch.tensor(rewards) - sum(rewards) / len(rewards)
        total = 0.0
        for _ in range(POLICY_MICRO_BATCHES):
            inputs = torch.randn(len(rewards), VOCAB, generator=generator)
            log_probs = torch.log_softmax(self.model(inputs), dim=-1).mean(dim=-1)
            loss = -(log_probs * advantages).mean()
            self.optimizer.zero_grad()
            loss.backward()
            self.optimizer.step()
            total += float(loss.detach())
        return total / POLICY_MICRO_BATCHES


@ray.remote(num_cpus=0)
class VllmTensorParallelWorker:
    """One tensor-parallel shard of the generation engine: its slice of every decode matmul."""

    def __init__(self, shard: int, shards: int) -> None:
        torch = _torch()
        torch.manual_seed(1000 + shard)
        self.weight = torch.randn(HIDDEN, HIDDEN // shards) / HIDDEN**0.5

    def generate(self, step: int, tokens: int) -> list[float]:
        torch = _torch()
        hidden = torch.randn(BATCH, HIDDEN, generator=torch.Generator().manual_seed(step))
        for _ in range(tokens):
            partial = hidden[:, : self.weight.shape[1]] @ self.weight.T
            hidden = torch.tanh(hidden + partial.sum(dim=-1, keepdim=True) / HIDDEN)
        return hidden.mean(dim=-1).tolist()


@ray.remote(num_cpus=0)
class VllmGenerationWorker:
    """The generation engine: it creates its tensor-parallel workers itself, as vLLM does."""

    def __init__(self, tensor_parallel_size: int = 2) -> None:
        self.shards = [VllmTensorParallelWorker.remote(i, tensor_parallel_size) for i in range(tensor_parallel_size)]

    def generate(self, step: int) -> list[float]:
        torch = _torch()
        parts = ray.get([shard.generate.remote(step, DECODE_TOKENS) for shard in self.shards])
        return torch.tensor(parts).sum(dim=0).tolist()


@ray.remote(num_cpus=0)
class RewardWorker:
    """A rule-based reward: not matched by the demo's patterns, so never profiled."""

    def score(self, samples: list[float]) -> list[float]:
        return [1.0 if value > 0 else -abs(value) for value in samples]


@dataclass
class DemoWorkers:
    policy: list
    generation: object
    reward: object

    def handles(self) -> list:
        return [*self.policy, self.generation, self.reward]


@dataclass(frozen=True)
class StepResult:
    step: int
    reward: float
    loss: float
    seconds: float


def create_workers(policy_ranks: int = 2, tensor_parallel_size: int = 2) -> DemoWorkers:
    """The job's actors, ready to work (their constructors have run)."""
    policy = [
        DTensorPolicyWorker.options(
            runtime_env={"env_vars": {"RANK": str(rank), "WORLD_SIZE": str(policy_ranks)}}
        ).remote(seed=0)
        for rank in range(policy_ranks)
    ]
    workers = DemoWorkers(policy, VllmGenerationWorker.remote(tensor_parallel_size), RewardWorker.remote())
    ray.get([handle.__ray_ready__.remote() for handle in workers.handles()])
    return workers


def training_step(workers: DemoWorkers, step: int) -> tuple[float, float]:
    """Rollout, reward, policy update; the mean reward and mean loss."""
    samples = ray.get(workers.generation.generate.remote(step))
    rewards = ray.get(workers.reward.score.remote(samples))
    losses = ray.get([rank.train.remote(step, rewards) for rank in workers.policy])
    return sum(rewards) / len(rewards), sum(losses) / len(losses)


def run_steps(
    workers: DemoWorkers,
    steps: int,
    step_hook: Callable[[int], None],
    report: Callable[[StepResult], None] | None = None,
) -> list[StepResult]:
    """The controller's loop over steps 1..steps, calling `step_hook(n)` at the top of each."""
    results = []
    for step in range(1, steps + 1):
        began = time.perf_counter()
        step_hook(step)
        reward, loss = training_step(workers, step)
        result = StepResult(step, reward, loss, time.perf_counter() - began)
        results.append(result)
        if report is not None:
            report(result)
    return results
