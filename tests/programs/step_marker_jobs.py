"""Drivers with no nrlprof code, whose steps come from the step marker (NRL_STEP_METHOD), on the shared cluster
(RAY_ADDRESS): `python step_marker_jobs.py <job> [--explicit]`. The workers' classes come from tests/workload.py and
tests/worker_shapes.py, on the job's PYTHONPATH.

- `only_the_marked_method`: two policy ranks, 4 loop iterations of `train` alone.
- `worker_shapes`: 5 iterations of a generation, a threaded rollout and an async reward, then the two policy ranks'
  `train` (twice in a row in the third); `--explicit` then marks steps 10 and 11 with `nrlprof.step` around one more
  `train`. Prints DONE.
- `compiled_graph`: a compiled graph's `forward` run 5 times, each followed by a reward's `score`."""

from __future__ import annotations

import sys

import ray


def only_the_marked_method() -> None:
    from workload import DTensorPolicyWorker

    ray.init()
    policy = [DTensorPolicyWorker.remote() for _ in (0, 1)]
    for step in range(1, 5):
        ray.get([w.train.remote(step) for w in policy])


def worker_shapes(explicit: bool) -> None:
    from worker_shapes import AsyncRewardWorker, ThreadedRolloutWorker
    from workload import DTensorPolicyWorker, VllmGenerationWorker

    ray.init(log_to_driver=True)
    policy = [DTensorPolicyWorker.options(runtime_env={"env_vars": {"RANK": str(r)}}).remote() for r in (0, 1)]
    generation = VllmGenerationWorker.remote()
    rollout, reward = ThreadedRolloutWorker.remote(), AsyncRewardWorker.remote()
    for step in range(1, 6):
        ray.get(generation.generate.remote(step))
        ray.get([rollout.rollout.remote(step), reward.score.remote(step)])
        ray.get([w.train.remote(step) for w in policy])
        if step == 3:
            ray.get([w.train.remote(step) for w in policy])  # a second call in a row: the same step
    if explicit:
        import nrlprof

        nrlprof.step(10)
        ray.get([w.train.remote(10) for w in policy])
        nrlprof.step(11)
    print("DONE", flush=True)


def compiled_graph() -> None:
    from ray.dag import InputNode
    from worker_shapes import CompiledGraphWorker
    from workload import RewardWorker

    ray.init()
    worker, reward = CompiledGraphWorker.remote(), RewardWorker.remote()
    with InputNode() as step:
        graph = worker.forward.bind(step)
    compiled = graph.experimental_compile()
    try:
        for step in range(1, 6):
            assert ray.get(compiled.execute(step)) == step
            ray.get(reward.score.remote(step))
    finally:
        compiled.teardown()


if __name__ == "__main__":
    job = sys.argv[1]
    if job == "worker_shapes":
        worker_shapes(explicit="--explicit" in sys.argv[2:])
    else:
        {"only_the_marked_method": only_the_marked_method, "compiled_graph": compiled_graph}[job]()
