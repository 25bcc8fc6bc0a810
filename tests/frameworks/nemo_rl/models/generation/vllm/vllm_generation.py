"""NeMo RL's VllmGeneration: a RayWorkerGroup of `vllm_policy` actors."""

import ray

from nemo_rl.distributed.worker_groups import RayWorkerBuilder, RayWorkerGroup

VLLM_WORKER = "nemo_rl.models.generation.vllm.vllm_worker.VllmGenerationWorker"


class VllmGeneration:
    def __init__(self, cluster, config: dict, name_prefix: str = "vllm_policy") -> None:
        self.worker_group = RayWorkerGroup(cluster, RayWorkerBuilder(VLLM_WORKER, config), name_prefix=name_prefix)

    def generate(self, step: int) -> list[int]:
        return ray.get(self.worker_group.run_all_workers_single_data("generate", step=step))

    def start_gpu_profiling(self) -> None:
        ray.get(self.worker_group.run_all_workers_single_data("start_gpu_profiling"))

    def stop_gpu_profiling(self) -> None:
        ray.get(self.worker_group.run_all_workers_single_data("stop_gpu_profiling"))

    def shutdown(self) -> None:
        self.worker_group.shutdown()
