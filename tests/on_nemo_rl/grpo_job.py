"""NeMo RL's GRPO loop on the stand-in, 5 steps of a policy of 2 workers and a vLLM generation of 1, then one call
of each outside the loop: prints the session's directory and the pids of the workers that answered them
(`python grpo_job.py <cluster address>`)."""

from __future__ import annotations

import sys

import ray

ray.init(address=sys.argv[1], logging_level="ERROR")
from nemo_rl.algorithms.grpo import grpo_train  # noqa: E402  # the job's order: Ray up, then NeMo RL
from nemo_rl.distributed.virtual_cluster import RayVirtualCluster  # noqa: E402
from nemo_rl.models.generation.vllm.vllm_generation import VllmGeneration  # noqa: E402
from nemo_rl.models.policy.lm_policy import Policy  # noqa: E402

cluster = RayVirtualCluster([2])
policy = Policy(cluster, {"model": "tiny"})
generation = VllmGeneration(RayVirtualCluster([1]), {"model": "tiny"})
grpo_train(policy, generation, max_num_steps=5)
print("SESSION", ray._private.worker.global_worker.node.get_session_dir_path())
print("POLICY", *sorted(set(policy.train(6))))
print("VLLM", *generation.generate(6))
policy.shutdown()
generation.shutdown()
