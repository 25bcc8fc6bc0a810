"""An AReaL 1.0.4 job on CPU with `scheduler.type=ray`: AReaL's own `RayScheduler` creating its `RayRPCServer`
workers (`actor/0`, `actor/1`, the ref colocated in them, `critic/0`), its `PPOActorController` and
`PPOCriticController` calling them, and its `PPOTrainer.train()` loop in the driver. No profiling code of nrlprof's.

Stood in, because they need a GPU, a model or an inference engine: the engines (`CpuActor`, `CpuCritic`: AReaL's
`TrainEngine` on gloo, whose `compute_logp`, `compute_advantages`, `ppo_update`, `compute_values` run a matmul and
whose methods inside a scope ask AReaL's perf tracer for its torch profiler, as a user's engine may), the rollout
(`prepare_batch` draws a batch of the dataloader; the inference servers and their weight sync), and the trainer's
`__init__` (which loads a tokenizer and datasets and starts inference servers), checkpoints, evaluation and stats.
AReaL's examples (`python examples/math/gsm8k_rl.py --config ... scheduler.type=ray`) need models and SGLang or vLLM.

Settings come from the environment: STEPS, FILEROOT, PERF_STEPS (perf_tracer.profile_steps as JSON; the perf tracer
on), MEMORY_STEPS (memory_profiler.profile_steps as JSON).
"""

from __future__ import annotations

import json
import os
import sys

import ray
import torch
import torch.distributed as dist
from areal.api import TrainEngine
from areal.api.cli_args import (
    ClusterSpecConfig,
    MemoryProfilerConfig,
    PerfTracerConfig,
    PPOActorConfig,
    PPOConfig,
    PPOCriticConfig,
    SchedulingSpec,
    SchedulingStrategy,
    StatsLoggerConfig,
)
from areal.api.io_struct import DeviceRuntimeInfo
from areal.infra.scheduler.ray import RayScheduler
from areal.trainer.ppo.actor import PPOActorController
from areal.trainer.ppo.critic import PPOCriticController
from areal.trainer.rl_trainer import PPOTrainer
from areal.utils import perf_tracer


def matmuls(tag: str, step: int | None = None) -> None:
    """A scope that asks AReaL's perf tracer for its torch profiler at `step` (as a user's engine may)."""
    scope = perf_tracer.trace_scope(tag, enable_profiler=True, args=None if step is None else {"global_step": step})
    with scope, torch.profiler.record_function(tag):
        x = torch.ones(48, 48)
        for _ in range(3):
            x = x @ x / 48


class CpuEngine(TrainEngine):
    """AReaL's TrainEngine on CPU: one gloo process group over the role's ranks. Its weight version is the step it
    trains (AReaL sets it to global_step + 1 after each step), which its scopes give AReaL's perf tracer."""

    def __init__(self, config=None, **kwargs):
        self.config, self.version, self.ready = config, 0, False

    def create_process_group(self, parallel_strategy=None):
        if not dist.is_initialized():
            dist.init_process_group("gloo")
        self.group = [dist.new_group([r], backend="gloo") for r in range(dist.get_world_size())][dist.get_rank()]

    def initialize(self, *args, **kwargs):
        self.ready = True

    data_parallel_group = context_and_model_parallel_group = cpu_group = property(lambda self: self.group)
    data_parallel_rank = property(lambda self: dist.get_rank())
    data_parallel_world_size = property(lambda self: dist.get_world_size())
    initialized = property(lambda self: self.ready)

    def current_data_parallel_head(self):
        return dist.get_rank()

    def is_data_parallel_head(self):
        return True

    def destroy(self):
        pass

    def train(self, mode=True):
        return self

    def update_weights(self, meta):
        matmuls("update_weights")

    def connect_engine(self, engine, meta):
        pass

    def rollout_batch(self, *args, **kwargs):
        raise NotImplementedError

    prepare_batch = rollout_batch

    def set_version(self, version):
        self.version = version

    def get_version(self):
        return self.version

    def save(self, meta):
        pass

    load = save

    def optimizer_zero_grad(self):
        pass

    def optimizer_step(self):
        pass

    def lr_scheduler_step(self):
        pass

    def forward_backward_batch(self, *args, **kwargs):
        raise NotImplementedError

    train_batch = eval_batch = forward_batch = forward_backward_batch

    def export_stats(self):
        return {}

    def get_device_stats(self):
        return DeviceRuntimeInfo.get_current()

    def onload(self):
        pass

    def offload(self):
        pass

    def clear_batches(self, shard_ids):
        pass

    def fetch_buffer_stats(self):
        return {"num_entries": 0}

    def save_perf_tracer(self, step=None, force=False):
        perf_tracer.save(step=step, force=force)

    def config_perf_tracer(self, config, rank, role):
        if not perf_tracer.is_configured():
            perf_tracer.configure(config, rank=rank, role=role)


class CpuActor(CpuEngine):
    def compute_logp(self, batch):
        matmuls("compute_logp", self.version)
        return [0.0 for _ in batch]

    def compute_advantages(self, batch):
        matmuls("compute_advantages", self.version)
        return batch

    def ppo_update(self, batch):
        matmuls("ppo_update", self.version)


class CpuCritic(CpuEngine):
    def compute_values(self, batch):
        matmuls("compute_values", self.version)
        return [0.0 for _ in batch]

    def ppo_update(self, batch):
        matmuls("critic_ppo_update", self.version)


class Actor(PPOActorController):
    def prepare_batch(self, dataloader, **kwargs):  # the rollout's inference servers, stood in
        return next(self.batches)

    def update_weights(self, meta):  # no inference server to push the weights to
        self._custom_function_call("update_weights", meta=meta)


class Stand:
    """The trainer's parts that need inference servers, checkpoints or trackers: every call does nothing."""

    def __getattr__(self, name):
        return lambda *args, **kwargs: self


def config(fileroot: str) -> PPOConfig:
    run = {"experiment_name": "nrlprof", "trial_name": "t0"}
    names = {**run, "fileroot": fileroot}
    spec = [SchedulingSpec(cpu=1, gpu=0, mem=1, ray_placement_strategy="separate")]
    ref_on_actor = SchedulingStrategy(type="colocation", target="actor", fork=False)
    perf = os.environ.get("PERF_STEPS")
    memory = os.environ.get("MEMORY_STEPS")
    return PPOConfig(
        **run,
        cluster=ClusterSpecConfig(fileroot=fileroot, n_gpus_per_node=1),
        stats_logger=StatsLoggerConfig(**names),
        perf_tracer=PerfTracerConfig(**names, enabled=True, profile_steps=json.loads(perf)) if perf else None,
        memory_profiler=MemoryProfilerConfig(profile_steps=json.loads(memory)) if memory else None,
        actor=PPOActorConfig(**run, path="", backend="fsdp:d2", scheduling_spec=spec, kl_ctl=0.1),
        ref=PPOActorConfig(**run, path="", backend="fsdp:d2", scheduling_spec=spec, scheduling_strategy=ref_on_actor),
        critic=PPOCriticConfig(**run, path="", backend="fsdp:d1", scheduling_spec=spec),
    )


class Trainer(PPOTrainer):
    def __init__(self, config: PPOConfig):  # AReaL's loads a tokenizer and datasets and starts inference servers
        self.config = config
        self.scheduler = RayScheduler(exp_config=config)
        self.actor = Actor(CpuActor, config.actor, self.scheduler)
        self.ref = PPOActorController(CpuActor, config.ref, self.scheduler)
        self.critic = PPOCriticController(CpuCritic, config.critic, self.scheduler)
        for role in ("actor", "ref", "critic"):
            getattr(self, role).initialize(role=role, ft_spec=None)
        self.train_dataloader = [[{"prompt": n}] for n in range(int(os.environ["STEPS"]))]
        self.actor.batches = iter([dict(item) for item in batch] for batch in self.train_dataloader)
        self.rollout, self.saver, self.weight_update_meta = Stand(), Stand(), Stand()
        self.eval_rollout = self.teacher = self.data_controller = self.recover_info = None
        self._should_offload_rollout = self._should_offload_actor = False
        self._should_offload_critic = self._should_offload_ref = self._should_offload_teacher = False
        self._proxy_started = True  # the proxy workers of agent workflows: none here
        self._config_perf_tracer()

    def _save_hf(self, **kwargs):
        pass

    _save_recover_checkpoint = _evaluate = _export_and_commit_stats = _save_hf

    def close(self):
        for role in ("critic", "ref", "actor"):
            getattr(self, role).destroy()


def main(address: str) -> None:
    ray.init(address=address, runtime_env={"env_vars": {"PYTHONPATH": os.environ["PYTHONPATH"]}})
    trainer = Trainer(config(os.environ["FILEROOT"]))
    trainer.train(workflow=lambda *args: None)
    trainer.close()
    print("DONE")


if __name__ == "__main__":
    main(sys.argv[1])
