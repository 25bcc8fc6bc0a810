"""NeMo RL's DTensor policy worker: the implementation, and the Ray actor class whose runtime_env is decided by
its worker-type name, `dtensor_policy_worker`, when the module is imported."""

import os

import ray

from nemo_rl.models.policy.utils import get_runtime_env_for_policy_worker


class DTensorPolicyWorkerImpl:
    def __init__(self, config: dict) -> None:
        self.cfg = config

    def train(self, step: int) -> int:
        import torch

        with torch.profiler.record_function(f"policy.train.{step}"):
            torch.ones(32, 32) @ torch.ones(32, 32)
        return os.getpid()

    def start_gpu_profiling(self) -> None:
        _own_profiling("start")

    def stop_gpu_profiling(self) -> None:
        _own_profiling("stop")


def _own_profiling(what: str) -> None:
    """Where NeMo RL calls torch.cuda.profiler.start/stop: written down, so a test sees whether it ran."""
    path = os.environ.get("NEMO_OWN_PROFILING_LOG")
    if path:
        with open(path, "a") as log:
            log.write(f"{what} {os.getpid()}\n")


@ray.remote(runtime_env=get_runtime_env_for_policy_worker("dtensor_policy_worker"))
class DTensorPolicyWorker(DTensorPolicyWorkerImpl):
    pass
