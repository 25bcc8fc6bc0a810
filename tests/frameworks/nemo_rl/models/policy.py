"""NeMo RL's policy worker (its nsight runtime_env decided at class definition) and the Policy driving it."""

import os

import ray

from nemo_rl.distributed.worker_group_utils import get_nsight_config_if_pattern_matches

OWN_PROFILING_LOG = "NEMO_OWN_PROFILING_LOG"


@ray.remote(num_cpus=0, runtime_env={**get_nsight_config_if_pattern_matches("dtensor_policy_worker")})
class DTensorPolicyWorker:
    def train(self, step: int) -> int:
        import torch

        with torch.profiler.record_function(f"policy.train.{step}"):
            torch.ones(32, 32) @ torch.ones(32, 32)
        return os.getpid()

    def start_gpu_profiling(self) -> None:
        with open(os.environ[OWN_PROFILING_LOG], "a") as log:
            log.write(f"start {os.getpid()}\n")

    def stop_gpu_profiling(self) -> None:
        with open(os.environ[OWN_PROFILING_LOG], "a") as log:
            log.write(f"stop {os.getpid()}\n")


class Policy:
    def __init__(self, workers: int) -> None:
        # As NeMo RL's worker builder does: the class's runtime_env, with the worker's env_vars merged in.
        class_env = DTensorPolicyWorker._default_options.get("runtime_env") or {}
        self.workers = []
        for rank in range(workers):
            env_vars = {OWN_PROFILING_LOG: os.environ[OWN_PROFILING_LOG], "RANK": str(rank)}
            runtime_env = {**class_env, "env_vars": env_vars}
            self.workers.append(DTensorPolicyWorker.options(runtime_env=runtime_env).remote())

    def train(self, step: int) -> list[int]:
        return ray.get([w.train.remote(step) for w in self.workers])

    def start_gpu_profiling(self) -> None:
        ray.get([w.start_gpu_profiling.remote() for w in self.workers])

    def stop_gpu_profiling(self) -> None:
        ray.get([w.stop_gpu_profiling.remote() for w in self.workers])
