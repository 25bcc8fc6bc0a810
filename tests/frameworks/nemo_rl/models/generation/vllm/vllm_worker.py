"""NeMo RL's vLLM generation worker: its worker-type name `vllm_generation_worker` decides its runtime_env in
its decorator, and again in `configure_worker` (tensor parallel size 1: the outer worker runs the engine)."""

import os

import ray

from nemo_rl.distributed.worker_group_utils import get_nsight_config_if_pattern_matches
from nemo_rl.models.policy.workers.dtensor_policy_worker import _own_profiling


class VllmGenerationWorkerImpl:
    @staticmethod
    def configure_worker(num_gpus, bundle_indices=None):
        runtime_env = get_nsight_config_if_pattern_matches("vllm_generation_worker")
        return {"num_gpus": num_gpus}, {"VLLM_ENABLE_V1_MULTIPROCESSING": "0"}, {}, runtime_env

    def __init__(self, config: dict) -> None:
        self.cfg = config

    def generate(self, step: int) -> int:
        import torch

        with torch.profiler.record_function(f"vllm.generate.{step}"):
            torch.ones(16, 16) @ torch.ones(16, 16)
        return os.getpid()

    def start_gpu_profiling(self) -> None:
        _own_profiling("start")

    def stop_gpu_profiling(self) -> None:
        _own_profiling("stop")


@ray.remote(runtime_env={**get_nsight_config_if_pattern_matches("vllm_generation_worker")})
class VllmGenerationWorker(VllmGenerationWorkerImpl):
    pass
