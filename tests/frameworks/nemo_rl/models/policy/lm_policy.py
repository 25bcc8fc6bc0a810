"""NeMo RL's Policy: a RayWorkerGroup of the policy worker class named by its import path, `lm_policy` actors."""

import ray

from nemo_rl.distributed.worker_groups import RayWorkerBuilder, RayWorkerGroup

DTENSOR_WORKER = "nemo_rl.models.policy.workers.dtensor_policy_worker.DTensorPolicyWorker"


class Policy:
    def __init__(self, cluster, config: dict, name_prefix: str = "lm_policy") -> None:
        self.worker_group = RayWorkerGroup(cluster, RayWorkerBuilder(DTENSOR_WORKER, config), name_prefix=name_prefix)

    def train(self, step: int) -> list[int]:
        return ray.get(self.worker_group.run_all_workers_single_data("train", step=step))

    def start_gpu_profiling(self) -> None:
        ray.get(self.worker_group.run_all_workers_single_data("start_gpu_profiling"))

    def stop_gpu_profiling(self) -> None:
        ray.get(self.worker_group.run_all_workers_single_data("stop_gpu_profiling"))

    def shutdown(self) -> None:
        self.worker_group.shutdown()
