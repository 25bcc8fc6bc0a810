"""An armed NeMo RL GRPO job on the stand-in (NRL_PROFILE_ON_DEMAND=1) that asks for a window of 2 steps of its vLLM
workers itself while its loop runs (up to 30 steps of 0.3 s at least), and waits for the answer
(`python armed_grpo_job.py <cluster address>`)."""

from __future__ import annotations

import sys
import time

import ray

ray.init(address=sys.argv[1], logging_level="ERROR")
from helpers.on_demand import ask_in_background  # noqa: E402
from nemo_rl.algorithms.grpo import grpo_train  # noqa: E402  # the job's order: Ray up, then NeMo RL
from nemo_rl.distributed.virtual_cluster import RayVirtualCluster  # noqa: E402
from nemo_rl.models.generation.vllm.vllm_generation import VllmGeneration  # noqa: E402
from nemo_rl.models.policy.lm_policy import Policy  # noqa: E402

policy = Policy(RayVirtualCluster([2]), {"model": "tiny"})
generation = VllmGeneration(RayVirtualCluster([1]), {"model": "tiny"})
train = policy.train
policy.train = lambda step: time.sleep(0.3) or train(step)  # steps long enough for a request to come meanwhile
asker = ask_in_background(("*vllm*",), steps=2)
grpo_train(policy, generation, max_num_steps=30)
asker.join()
policy.shutdown()
generation.shutdown()
