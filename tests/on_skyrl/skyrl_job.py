"""A SkyRL 0.4.0 job on CPU: SkyRL's own `PPORayActorGroup`s of policy and ref ranks, its `WorkerDispatch`, its
`RayPPOTrainer.train()` (synchronous) or the profiler hooks its `FullyAsyncRayPPOTrainer` calls, in a Ray task
shaped as `skyrl_entrypoint`, the controller. No profiling code of nrlprof's in it.

Stood in, because they need a GPU, a model or an inference engine: the workers' device mesh and model (`forward`,
`forward_backward` and `optim_step` run a matmul; the policy's `init_model` builds SkyRL's own profiler, as SkyRL's
FSDP and Megatron policy workers do), the trainer's dataset, generator and weight sync, and the batches between its
phases (generation, log-probs, advantages, training), whose worker calls keep SkyRL's method names. SkyRL's entry point
(`python -m skyrl.train.entrypoints.main_base`) builds vLLM servers and HF models before its first step.

Settings come from the environment: POLICY_RANKS, REF_RANKS, STEPS, TRAINER (`sync` or `async`), TORCH_PROFILER
(SkyRL's torch_profiler_config as JSON, `enable` set), CKPT_PATH.
"""

from __future__ import annotations

import asyncio
import json
import os
from types import SimpleNamespace

import ray
import torch
from skyrl.backends.skyrl_train.distributed.dispatch import MeshRank
from skyrl.backends.skyrl_train.utils.ppo_utils import sync_registries
from skyrl.backends.skyrl_train.utils.profiler import build_profiler_from_policy_cfg
from skyrl.backends.skyrl_train.workers.worker import PolicyWorkerBase, PPORayActorGroup, RefWorkerBase
from skyrl.backends.skyrl_train.workers.worker_dispatch import WorkerDispatch
from skyrl.train.config import SkyRLTrainConfig, TorchProfilerConfig
from skyrl.train.fully_async_trainer import FullyAsyncRayPPOTrainer
from skyrl.train.trainer import RayPPOTrainer


def matmuls(tag: str) -> None:
    with torch.profiler.record_function(tag):
        x = torch.ones(48, 48)
        for _ in range(3):
            x = x @ x / 48


class CpuRank:
    """What SkyRL's FSDP and Megatron workers do on a GPU, on CPU."""

    def init_worker_process_group(self):
        torch.distributed.init_process_group("gloo", rank=self._rank, world_size=self._world_size)
        self.mesh_rank = MeshRank(dp=self._rank, sp=0, tp=0, pp=0, world_size=self._world_size,
                                  dp_size=self._world_size, pp_size=1)  # fmt: skip

    def init_model(self, model_path, num_training_steps=None):
        pass

    def forward(self, step):
        matmuls(f"forward.{step}")
        return os.getpid()


class CpuPolicyWorkerBase(CpuRank, PolicyWorkerBase):
    def init_model(self, model_path, num_training_steps=None):
        self.profiler = build_profiler_from_policy_cfg(self.cfg)  # as SkyRL's FSDP and Megatron policy workers do

    def forward_backward(self, step):
        matmuls(f"forward_backward.{step}")
        return os.getpid()

    def optim_step(self):
        matmuls("optim_step")
        return 0.0


class CpuRefWorkerBase(CpuRank, RefWorkerBase):
    pass


# As SkyRL's fsdp_worker module makes its actor classes.
PolicyWorker = ray.remote(num_gpus=1)(CpuPolicyWorkerBase)
RefWorker = ray.remote(num_gpus=1)(CpuRefWorkerBase)


class Batch(dict):
    """The training batch between phases: a dict with SkyRL's `metadata`."""

    def __init__(self, step):
        super().__init__(rewards=None, attention_mask=None, step=step)
        self.metadata = {"uids": []}


class Prompts(list):
    """The train dataloader: one prompt per batch, with a StatefulDataLoader's state methods."""

    def state_dict(self):
        return {}

    def load_state_dict(self, state):
        pass


class Dispatch(WorkerDispatch):
    async def save_weights_for_sampler(self, model_id=None):  # no inference engine to sync
        return None


class Tracker:
    def log(self, *args, **kwargs):
        pass

    def finish(self):
        pass


class Trainer(RayPPOTrainer):
    def _build_train_dataloader_and_compute_training_steps(self):
        prompt = {"prompt": [{"role": "user", "content": "1+1"}], "env_class": None, "env_extras": {}, "uid": "p"}
        self.train_dataloader = Prompts([dict(prompt, uid=f"p{n}")] for n in range(int(os.environ["STEPS"])))
        self.total_training_steps = len(self.train_dataloader)

    def init_weight_sync_state(self):
        pass

    async def generate(self, generator_input):
        return {"rewards": [1.0]}

    def postprocess_generator_output(self, generator_output, uids):
        return generator_output, uids

    def convert_to_training_input(self, generator_output, uids):
        return Batch(self.global_step)

    def fwd_logprobs_values_reward(self, training_input):
        step = training_input["step"]
        ray.get(self.ref_model.async_run_ray_method("pass_through", "forward", step))
        ray.get(self.policy_model.async_run_ray_method("pass_through", "forward", step))
        return training_input

    def compute_advantages_and_returns(self, training_input):
        return training_input

    def train_critic_and_policy(self, training_input):
        step = training_input["step"]
        pids = ray.get(self.policy_model.async_run_ray_method("pass_through", "forward_backward", step))
        ray.get(self.policy_model.async_run_ray_method("pass_through", "optim_step"))
        return {"pids": sorted(set(pids))}


class AsyncTrainer(Trainer, FullyAsyncRayPPOTrainer):
    """The hooks SkyRL's fully async loop calls, in its order: `_profiler_start`, then per global step the step's
    calls and `_profiler_step`, `global_step` counted on after it, and `_profiler_stop`."""

    async def train(self):
        self.global_step += 1
        self._profiler_start()
        try:
            for _ in self.train_dataloader:
                batch = Batch(self.global_step)
                self.fwd_logprobs_values_reward(batch)
                self.train_critic_and_policy(batch)
                self._profiler_step()
                self.global_step += 1
        finally:
            self._profiler_stop()


def config() -> SkyRLTrainConfig:
    cfg = SkyRLTrainConfig()
    trainer = cfg.trainer
    trainer.resume_mode, trainer.eval_interval, trainer.ckpt_interval = "none", -1, -1
    trainer.print_example_interval = 0
    trainer.placement.colocate_all = False
    trainer.ckpt_path = os.environ.get("CKPT_PATH", os.path.abspath("ckpts"))
    if os.environ.get("TRAINER") == "async":  # what SkyRL's fully async trainer asks of its config
        trainer.fully_async.enabled, trainer.train_batch_size, trainer.policy_mini_batch_size = True, 1, 1
        trainer.fully_async.num_parallel_generation_workers = 1
        trainer.algorithm.policy_loss_type = "rollout_is"
    own = json.loads(os.environ.get("TORCH_PROFILER", "{}"))
    if own:
        trainer.policy.torch_profiler_config = TorchProfilerConfig(enable=True, activities=["cpu"], **own)
    return cfg


def build(trainer: RayPPOTrainer, cfg: SkyRLTrainConfig) -> None:
    """`RayPPOTrainer.build_models` without GPUs: SkyRL's actor groups, a rank per node (no placement group), each
    asking no GPU."""
    ranks = {"policy": int(os.environ["POLICY_RANKS"]), "ref": int(os.environ["REF_RANKS"])}
    trainer.ref_model = PPORayActorGroup(cfg.trainer, ranks["ref"], 1, RefWorker, num_gpus_per_actor=0)
    trainer.policy_model = PPORayActorGroup(cfg.trainer, ranks["policy"], 1, PolicyWorker, num_gpus_per_actor=0)
    ray.get(trainer.ref_model.async_init_model("ref") + trainer.policy_model.async_init_model("policy"))
    trainer.dispatch = Dispatch(cfg, trainer.policy_model, ref_actor_group=trainer.ref_model)


@ray.remote(num_cpus=0)
def skyrl_entrypoint(cfg: SkyRLTrainConfig) -> None:
    kind = AsyncTrainer if os.environ.get("TRAINER") == "async" else Trainer
    trainer = kind(cfg=cfg, tracker=Tracker(), tokenizer=SimpleNamespace(pad_token_id=0), train_dataset=None,
                   inference_engine_client=None, generator=None)  # fmt: skip
    build(trainer, cfg)
    asyncio.run(trainer.train())


def main(address: str) -> None:
    ray.init(address=address, runtime_env={"env_vars": {k: v for k, v in os.environ.items() if k in RUNTIME_VARIABLES}})
    sync_registries()  # as SkyRL's initialize_ray does: its named registry actors, which every worker gets
    ray.get(skyrl_entrypoint.remote(config()))
    print("DONE")


RUNTIME_VARIABLES = ("PYTHONPATH", "POLICY_RANKS", "REF_RANKS", "STEPS", "TRAINER", "SKYRL_LOG_FILE")
