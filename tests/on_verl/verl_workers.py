"""Workers shaped as verl's are, on verl's own single controller (CPU), and a training loop stepping them
through verl's own trainer class. No profiling code of nrlprof's in them.

The workers carry verl's own profiler (`DistProfilerExtension`, as verl's FSDP workers do); with
VERL_OWN_PROFILER_DIR set, verl's torch profiler is enabled in them and would write there.
"""

from __future__ import annotations

import os

import ray
from verl.single_controller.base import Worker
from verl.single_controller.base.decorator import Dispatch, register
from verl.utils.profiler import DistProfiler, DistProfilerExtension
from verl.utils.profiler.config import ProfilerConfig, TorchProfilerToolConfig

OWN_PROFILER_DIR = "VERL_OWN_PROFILER_DIR"
PLANTED = "VERL_PLANTED_SECONDS"  # '{"update_actor": 0.4}': a method made that much slower, for `nrlprof explain`
PLANTED_STEP = "VERL_PLANTED_STEP"  # '9:1.5': update_actor that much slower at that step (a slow step)


def matmuls(tag: str, method: str = "", step: int = 0) -> None:
    import json
    import time

    import torch

    time.sleep(json.loads(os.environ.get(PLANTED) or "{}").get(method, 0.0))
    slow_step, slow_s = map(float, (os.environ.get(PLANTED_STEP) or "0:0").split(":"))
    if method == "update_actor" and step == slow_step:
        time.sleep(slow_s)
    with torch.profiler.record_function(tag):
        x = torch.ones(48, 48)
        for _ in range(3):
            x = x @ x / 48


def verls_own_profiler() -> DistProfiler:
    rank = int(os.environ.get("RANK", "0"))
    save_path = os.environ.get(OWN_PROFILER_DIR)
    if not save_path:
        return DistProfiler(rank=rank)
    config = ProfilerConfig(tool="torch", enable=True, all_ranks=True, save_path=save_path)
    return DistProfiler(rank=rank, config=config, tool_config=TorchProfilerToolConfig())


class ActorRolloutRefWorker(Worker, DistProfilerExtension):
    def __init__(self) -> None:
        Worker.__init__(self)
        DistProfilerExtension.__init__(self, verls_own_profiler())

    @register(dispatch_mode=Dispatch.ONE_TO_ALL)
    def generate_sequences(self, step: int) -> int:
        matmuls(f"rollout.generate.{step}", "generate_sequences")
        return os.getpid()

    @register(dispatch_mode=Dispatch.ONE_TO_ALL)
    def update_actor(self, step: int) -> int:
        matmuls(f"actor.update.{step}", "update_actor", step)
        return os.getpid()


class CriticWorker(Worker, DistProfilerExtension):
    def __init__(self) -> None:
        Worker.__init__(self)
        DistProfilerExtension.__init__(self, verls_own_profiler())

    @register(dispatch_mode=Dispatch.ONE_TO_ALL)
    def compute_values(self, step: int) -> int:
        matmuls(f"critic.values.{step}", "compute_values")
        return os.getpid()


def job_runtime_env() -> dict:
    """The runtime_env of a job on a running cluster: its workers get what they import and read from it."""
    names = ("PYTHONPATH", OWN_PROFILER_DIR, PLANTED, PLANTED_STEP)
    return {"env_vars": {name: os.environ[name] for name in names if name in os.environ}}


def worker_groups(colocated: bool, ranks: int = 2, critic_ranks: int | None = None) -> dict:
    """verl's own way: resource pools, `create_colocated_worker_cls`, a RayWorkerGroup, `spawn` per role. Not
    colocated, the critic's pool has `critic_ranks` (default `ranks`): a test that only checks the critic is left
    alone gives it one (each rank is a process importing verl, ~7 s of CPU on 2 busy cores)."""
    from verl.single_controller.ray.base import (
        RayClassWithInitArgs,
        RayResourcePool,
        RayWorkerGroup,
        create_colocated_worker_cls,
    )

    actor = RayClassWithInitArgs(cls=ray.remote(ActorRolloutRefWorker))
    critic = RayClassWithInitArgs(cls=ray.remote(CriticWorker))
    if colocated:
        pools = [{"actor_rollout": actor, "critic": critic}]
    else:
        pools = [{"actor_rollout": actor}, {"critic": critic}]
    groups = {}
    for roles in pools:
        size = critic_ranks if roles.keys() == {"critic"} and critic_ranks else ranks
        pool = RayResourcePool(process_on_nodes=[size], use_gpu=False, max_colocate_count=1)
        fused = RayWorkerGroup(resource_pool=pool, ray_cls_with_init=create_colocated_worker_cls(class_dict=roles))
        groups.update(fused.spawn(prefix_set=roles.keys()))
    return groups


def bare_trainer(groups: dict):
    """verl's RayPPOTrainer holding the worker groups, built without its data loading (no model, no dataset)."""
    from verl.trainer.ppo.ray_trainer import RayPPOTrainer

    trainer = object.__new__(RayPPOTrainer)
    trainer.use_reference_policy, trainer.use_critic = False, True
    return trainer


def train(trainer, groups: dict, steps: int, profile_steps: tuple[int, ...] = (), until=None) -> int:
    """verl's step loop as `RayPPOTrainer.fit` runs it: profiling switched at the top and bottom of each step. With
    `until`, the loop ends early once `until()` is true at the end of a step, and each step lasts at least 0.3 s
    (time for a window to be asked for meanwhile). The last step run."""
    import time

    trainer.actor_rollout_wg, trainer.critic_wg = groups["actor_rollout"], groups["critic"]
    step = 0
    for step in range(1, steps + 1):
        started = time.monotonic()
        trainer.global_steps = step
        trainer._start_profiling(step in profile_steps and step - 1 not in profile_steps)
        trainer.actor_rollout_wg.generate_sequences(step)
        trainer.critic_wg.compute_values(step)
        trainer.actor_rollout_wg.update_actor(step)
        trainer._stop_profiling(step in profile_steps and step + 1 not in profile_steps)
        if until is not None:
            time.sleep(max(0.0, 0.3 - (time.monotonic() - started)))
            if until():
                break
    return step
