"""verl's main_ppo shape on a `ray start` cluster: the worker groups are created, and the trainer runs, inside a
TaskRunner actor; prints `RUNNER <its pid>`. tests/ and tests/on_verl on PYTHONPATH."""

from __future__ import annotations

import os

import ray


@ray.remote(num_cpus=0)
class TaskRunner:
    def run(self) -> int:
        from verl_workers import bare_trainer, train, worker_groups

        groups = worker_groups(colocated=True)
        train(bare_trainer(groups), groups, steps=4)
        return os.getpid()


# The job's own runtime_env (nrlprof adds its settings beside it): the workers import the test's modules.
ray.init(address="auto", runtime_env={"env_vars": {"PYTHONPATH": os.environ["PYTHONPATH"]}})
print("RUNNER", ray.get(TaskRunner.remote().run.remote()), flush=True)
