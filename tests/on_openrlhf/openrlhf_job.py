"""An OpenRLHF PPO job on CPU (`python openrlhf_job.py <cluster address>`): OpenRLHF's `RayActorGroup`s of
POLICY_RANKS `PolicyModelActor` and REFERENCE_RANKS `ReferenceModelActor` ranks, and its `PPOTrainer` actor's `fit`
loop over six prompt batches (the second emptied by dynamic filtering). What is stood in: the module docstring of
test_openrlhf_jobs.py. ASK_FOR_WORKERS: the job is armed and asks for a window of 2 steps of those workers itself;
PLANTED_FIT_S: the policy's `fit` sleeps that long, and the trainer's own ppo_train and broadcast_to_vllm run in
each step; SLOW_FIT `<step>:<seconds>`: 14 steps, the fit of that step that much slower. Prints DONE at the end."""

from __future__ import annotations

import os
import sys
import time
from types import SimpleNamespace as Settings

import ray

ray.init(address=sys.argv[1], runtime_env={"env_vars": {"PYTHONPATH": os.environ["PYTHONPATH"]}})

from openrlhf.trainer.ppo_trainer import PPOTrainer  # noqa: E402  # the job's order: Ray up, then OpenRLHF
from openrlhf.trainer.ppo_utils.samples_generator import SamplesGenerator  # noqa: E402
from openrlhf.trainer.ray.launcher import RayActorGroup, ReferenceModelActor  # noqa: E402
from openrlhf.trainer.ray.ppo_actor import PolicyModelActor  # noqa: E402

# One prompt per batch; the second batch is emptied by dynamic filtering, so its draw is drawn again.
PROMPT_BATCHES = [["p1"], [], ["p2"], ["p3"], ["p4"], ["p5"]]
# An armed job asked for a window: steps of 0.3 s at least, drawn until the window asked for has closed.
ASKED = os.environ.get("ASK_FOR_WORKERS")
ASKED_DONE = os.path.abspath("asked.done")
if ASKED:
    PROMPT_BATCHES = [[f"p{n}"] for n in range(60)]
# A slow step planted in the policy's fit: `<global step>:<seconds more>`, over 14 steps.
SLOW_FIT = os.environ.get("SLOW_FIT")
if SLOW_FIT:
    PROMPT_BATCHES = [[f"p{n}"] for n in range(14)]


class Prompts:
    def __init__(self, batches):
        self.batches = batches

    def __len__(self):
        return len(self.batches)

    def __iter__(self):
        for batch in self.batches:
            if ASKED and os.path.exists(ASKED_DONE):
                return
            yield batch

    def state_dict(self):
        return {}


# `nrlprof explain`'s test: the policy's `fit` (DeepSpeed on a GPU) stood in by a planted sleep, and the trainer's
# own ppo_train and broadcast_to_vllm run in each step.
PLANTED_FIT_S = float(os.environ.get("PLANTED_FIT_S") or 0)
if PLANTED_FIT_S:

    class PolicyModelActor(PolicyModelActor.__ray_actor_class__):
        def fit(self, kl_ctl=0):
            self.fits = getattr(self, "fits", 0) + 1  # the trainer's global step: one fit a step, from 1
            slow_step, slow_s = map(float, (SLOW_FIT or "0:0").split(":"))
            time.sleep(PLANTED_FIT_S + (slow_s if self.fits == slow_step else 0.0))
            return {}

        def broadcast_to_vllm(self):
            time.sleep(0.02)

    PolicyModelActor = ray.remote(num_gpus=1)(PolicyModelActor)


class VllmEnginesStoodIn(SamplesGenerator):
    def _generate_vllm(self, dataloader_iter, num_prompts, dynamic_filtering, **generate_kwargs):
        batch = next(dataloader_iter, None)
        return ([], 0, True) if batch is None else (list(batch), 1, False)


@ray.remote(num_cpus=0)
class Trainer(PPOTrainer.__ray_actor_class__):
    def __init__(self, policy, reference):
        args = Settings(
            train=Settings(num_episodes=1, dynamic_batch_enable=False),
            ckpt=Settings(path=os.devnull, load_enable=False, save_steps=float("inf")),
            eval=Settings(steps=float("inf")),
            logger=Settings(logging_steps=1),
            rollout=Settings(batch_size=1, n_samples_per_prompt=1, vllm_generate_batch_size=None),
            vllm=Settings(enable_sleep=False),
            algo=Settings(dynamic_filtering_enable=True),
            ds=Settings(enable_sleep=False),
            critic=Settings(freezing_steps=0),
        )
        self.kl_ctl = Settings(value=0.0)
        self.args = args
        self.prompts_dataloader, self.eval_dataloader, self.generate_kwargs = Prompts(PROMPT_BATCHES), None, {}
        self.samples_generator = VllmEnginesStoodIn(Settings(args=args), self.prompts_dataloader, None, None, [])
        self.actor_model_group, self.reference_model_group, self.critic_model_group = policy, reference, None
        self.wandb_logger = self.tensorboard_logger = None
        self.best_eval_metric_value, self.best_eval_metric_key = float("-inf"), ""
        self._latest_eval_metric_value = None

    def train_step(self, rollout_samples, global_step):
        if ASKED:
            time.sleep(0.3)
        ray.get(self.reference_model_group.async_run_method(method_name="get_master_addr_port"))
        ray.get(self.actor_model_group.async_run_method(method_name="get_master_addr_port"))
        if PLANTED_FIT_S:
            self.ppo_train(global_step)  # OpenRLHF's own: the groups' fit
            self.vllm_engines = []
            self.broadcast_to_vllm()  # OpenRLHF's own: the policy's broadcast_to_vllm
        return {}, global_step + 1


# OpenRLHF asks one GPU per actor, which a CPU cluster has not: num_gpus_per_actor=0.
policy = RayActorGroup(int(os.environ["POLICY_RANKS"]), 1, PolicyModelActor, num_gpus_per_actor=0)
reference = RayActorGroup(int(os.environ["REFERENCE_RANKS"]), 1, ReferenceModelActor, num_gpus_per_actor=0)
fitted = Trainer.remote(policy, reference).fit.remote()
if ASKED:
    from helpers.on_demand import ask_in_background

    ask_in_background((ASKED,), steps=2).join()
    open(ASKED_DONE, "w").close()
ray.get(fitted)
print("DONE")
