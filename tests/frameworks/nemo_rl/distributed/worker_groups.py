"""NeMo RL's worker builder and worker group: every worker is created by a pooled `IsolatedWorkerInitializer`
actor (one per node) from its class's import path, with the driver's environment plus RANK/WORLD_SIZE as
env_vars, merged over the class's own `@ray.remote` options and its `configure_worker` overrides, and named
`<name_prefix>-<pg>-<bundle>`."""

import importlib
import os
import sys
from copy import deepcopy
from typing import Any

import ray


def recursive_merge_options(default: dict[str, Any], extra: dict[str, Any]) -> dict[str, Any]:
    merged = deepcopy(default)
    for key, value in extra.items():
        if isinstance(value, dict) and isinstance(merged.get(key), dict):
            merged[key] = recursive_merge_options(merged[key], value)
        else:
            merged[key] = deepcopy(value)
    return merged


class RayWorkerBuilder:
    @ray.remote
    class IsolatedWorkerInitializer:
        def __init__(self, ray_actor_class_fqn: str, *init_args, **init_kwargs):
            self.ray_actor_class_fqn = ray_actor_class_fqn
            self.init_args = init_args
            self.init_kwargs = init_kwargs

        def create_worker(self, placement_group, placement_group_bundle_index, num_gpus, bundle_indices=None,
                          **extra_options):  # fmt: skip
            module_name, class_name = self.ray_actor_class_fqn.rsplit(".", 1)
            worker_class = getattr(importlib.import_module(module_name), class_name)
            worker_kwargs = dict(self.init_kwargs)
            options = recursive_merge_options(getattr(worker_class, "_default_options", {}), extra_options)
            if hasattr(worker_class, "configure_worker"):
                _resources, env_vars, init_kwargs, runtime_env_overrides = worker_class.configure_worker(
                    num_gpus=num_gpus, bundle_indices=bundle_indices
                )
                options.setdefault("runtime_env", {}).setdefault("env_vars", {}).update(env_vars or {})
                if runtime_env_overrides:
                    options["runtime_env"] = recursive_merge_options(options["runtime_env"], runtime_env_overrides)
                worker_kwargs.update(init_kwargs or {})
            options["num_gpus"] = num_gpus
            options["num_cpus"] = 0
            return worker_class.options(**options).remote(*self.init_args, **worker_kwargs)

    def __init__(self, ray_actor_class_fqn: str, *args, **kwargs):
        self.ray_actor_class_fqn = ray_actor_class_fqn
        self.args = args
        self.kwargs = kwargs


class RayWorkerGroup:
    def __init__(self, cluster, remote_worker_builder: RayWorkerBuilder, name_prefix: str = "",
                 env_vars: dict[str, str] | None = None):  # fmt: skip
        self.cluster = cluster
        self.name_prefix = name_prefix
        self._workers: list = []
        bundle_indices_list = [(pg, list(range(count))) for pg, count in enumerate(cluster._bundle_ct_per_node_list)]
        self._create_workers_from_bundle_indices(remote_worker_builder, bundle_indices_list, dict(env_vars or {}))

    def _create_workers_from_bundle_indices(self, builder: RayWorkerBuilder, bundle_indices_list, env_vars) -> None:
        for key, value in os.environ.items():
            env_vars.setdefault(key, value)
        world_size = sum(len(indices) for _, indices in bundle_indices_list)
        initializer_env = {k: env_vars[k] for k in ("HF_HOME", "HF_MODULES_CACHE", "PYTHONPATH") if k in env_vars}
        self._initializer_pool = {
            pg: RayWorkerBuilder.IsolatedWorkerInitializer.options(
                num_cpus=0, runtime_env={"env_vars": initializer_env}
            ).remote(builder.ray_actor_class_fqn, *builder.args, **builder.kwargs)
            for pg in sorted({pg for pg, _ in bundle_indices_list})
        }
        futures = []
        global_rank = 0
        for pg, bundles in bundle_indices_list:
            for local_rank, bundle in enumerate(bundles):
                worker_env = deepcopy(env_vars)
                worker_env.update(RANK=str(global_rank), LOCAL_RANK=str(bundle), WORLD_SIZE=str(world_size))
                for name in ("RAY_CLIENT_MODE", "RAY_JOB_ID", "RAY_LD_PRELOAD", "RAY_RAYLET_PID"):
                    worker_env.pop(name, None)
                runtime_env = {"env_vars": worker_env, "py_executable": sys.executable}
                futures.append(
                    self._initializer_pool[pg].create_worker.remote(
                        None,
                        bundle,
                        0,
                        (pg, bundles) if local_rank == 0 else None,
                        runtime_env=runtime_env,
                        name=f"{self.name_prefix}-{pg}-{bundle}",
                    )
                )
                global_rank += 1
        self._workers = ray.get(futures)

    @property
    def workers(self) -> list:
        return self._workers

    def run_all_workers_single_data(self, method_name: str, **kwargs) -> list:
        return [getattr(worker, method_name).remote(**kwargs) for worker in self._workers]

    def shutdown(self) -> None:
        for actor in [*self._workers, *self._initializer_pool.values()]:
            ray.kill(actor)
