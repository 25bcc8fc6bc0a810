"""RL-shaped Ray jobs whose bottleneck is planted: sleeps and torch ops of known lengths in the methods RL frameworks
call (verl's names: generate_sequences, compute_log_prob, compute_ref_log_prob, update_actor, compute_rm_score,
update_weights), so that `nrlprof explain` can be checked against a cause that is known.

A `Plan` says how long each phase takes, on which rank, in which step, and what the controller does between
calls; `run_job(nrlprof, plan)` runs it on the cluster the test joined. Importable by Ray's workers (tests/ is on
their path).
"""

from __future__ import annotations

import os
import time
from dataclasses import dataclass, field

import ray


@dataclass
class Plan:
    steps: int = 6
    rollout_replicas: int = 2
    trainers: int = 2
    generate_s: float = 0.04
    logprob_s: float = 0.04
    ref_logprob_s: float = 0.04
    train_s: float = 0.04
    sync_s: float = 0.02
    reward_s: float = 0.02
    controller_s: float = 0.0  # the controller's own work in every step, between the calls
    extra: dict[tuple[str, int | None, int | None], float] = field(default_factory=dict)  # (phase, rank, step) -> s
    collective_mb: float = 0.0  # trainers all-reduce this much with gloo at the end of update_actor
    async_rollout: bool = False  # the next step's generation runs beside this step's training
    grow_mb: int = 0  # update_actor keeps this much more host memory every step
    slower_under_profiler_s: float = 0.0  # update_actor's extra time while a torch profiler runs in it

    def seconds(self, phase: str, rank: int, step: int) -> float:
        base = {"generate": self.generate_s, "logprob": self.logprob_s, "ref": self.ref_logprob_s,
                "train": self.train_s, "sync": self.sync_s, "reward": self.reward_s}[phase]  # fmt: skip
        extra = 0.0
        for (name, which_rank, which_step), seconds in self.extra.items():
            if name == phase and which_rank in (None, rank) and which_step in (None, step):
                extra += seconds
        return base + extra


def _busy(seconds: float) -> None:
    """Torch work for about `seconds`: ops in the trace, time on the CPU (no GIL-free sleep)."""
    import torch

    a = torch.ones(64, 64)
    end = time.perf_counter() + seconds
    while time.perf_counter() < end:
        a = torch.tanh(a @ a * 0.01)


@ray.remote(num_cpus=0)
class RolloutWorker:
    def generate_sequences(self, seconds: float) -> int:
        time.sleep(seconds * 0.8)
        _busy(seconds * 0.2)
        return 1

    def update_weights(self, seconds: float) -> int:
        time.sleep(seconds)
        return 1


@ray.remote(num_cpus=0)
class PolicyWorker:
    def __init__(self, world_size: int = 1, port: int = 0) -> None:
        self.kept: list[bytearray] = []
        self.world_size, self.port = world_size, port
        self.group = False

    def init_group(self) -> int:
        import torch.distributed as dist

        rank = int(os.environ.get("RANK", "0"))
        dist.init_process_group(
            "gloo", init_method=f"tcp://127.0.0.1:{self.port}", rank=rank, world_size=self.world_size
        )
        self.group = True
        return rank

    def compute_log_prob(self, seconds: float) -> int:
        time.sleep(seconds * 0.8)
        _busy(seconds * 0.2)
        return 1

    def compute_ref_log_prob(self, seconds: float) -> int:
        time.sleep(seconds)
        return 1

    def update_actor(self, seconds: float, collective_mb: float, grow_mb: int, under_profiler_s: float) -> int:
        import torch

        _busy(seconds * 0.3)
        time.sleep(seconds * 0.7)
        if under_profiler_s and torch.autograd.profiler._is_profiler_enabled:  # a module global, any thread
            time.sleep(under_profiler_s)
        if collective_mb and self.group:
            import torch.distributed as dist

            dist.all_reduce(torch.ones(int(collective_mb * (1 << 20) / 4)))
        if grow_mb:
            self.kept.append(bytearray(os.urandom(1024)) * (grow_mb * 1024))
        return 1

    def close(self) -> int:
        if self.group:
            import torch.distributed as dist

            dist.destroy_process_group()
        return 1


@ray.remote(num_cpus=0)
class RewardWorker:
    def compute_rm_score(self, seconds: float) -> int:
        time.sleep(seconds)
        return 1


def free_port() -> int:
    import socket

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def run_job(nrlprof, plan: Plan) -> None:
    """`plan.steps` steps of generate, rewards and log-probs, training, weight sync; nrlprof.step(n) at each top."""
    rollout = [RolloutWorker.remote() for _ in range(plan.rollout_replicas)]
    port = free_port()
    world = plan.trainers if plan.collective_mb else 1
    trainers = [
        PolicyWorker.options(runtime_env={"env_vars": {"RANK": str(r)}}).remote(world, port)
        for r in range(plan.trainers)
    ]
    reward = RewardWorker.remote()
    ray.get([a.__ray_ready__.remote() for a in [*rollout, *trainers, reward]])
    if plan.collective_mb:
        ray.get([t.init_group.remote() for t in trainers])
    pending = None
    for step in range(1, plan.steps + 1):
        nrlprof.step(step)
        if plan.controller_s:
            time.sleep(plan.controller_s)  # the controller's own work: data loading, Python between calls
        generated = pending or [
            r.generate_sequences.remote(plan.seconds("generate", i, step)) for i, r in enumerate(rollout)
        ]
        ray.get(generated)
        ray.get([reward.compute_rm_score.remote(plan.seconds("reward", 0, step))])
        ray.get([t.compute_log_prob.remote(plan.seconds("logprob", i, step)) for i, t in enumerate(trainers)])
        ray.get([t.compute_ref_log_prob.remote(plan.seconds("ref", i, step)) for i, t in enumerate(trainers)])
        pending = None
        if plan.async_rollout and step < plan.steps:
            pending = [
                r.generate_sequences.remote(plan.seconds("generate", i, step + 1)) for i, r in enumerate(rollout)
            ]
        ray.get([
            t.update_actor.remote(plan.seconds("train", i, step), plan.collective_mb, plan.grow_mb,
                                  plan.slower_under_profiler_s)
            for i, t in enumerate(trainers)
        ])  # fmt: skip
        ray.get([r.update_weights.remote(plan.seconds("sync", i, step)) for i, r in enumerate(rollout)])
    ray.get(pending or [])
    nrlprof.finish()
    ray.get([t.close.remote() for t in trainers])
    for actor in [*rollout, *trainers, reward]:
        ray.kill(actor)
