"""Steps with no driver code: NRL_STEP_METHOD, in programs that never import nrlprof (the start-up hook
activates them), joining the shared local cluster, and from a controller actor on a `ray start` cluster."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path

from helpers.clusters import joining_env
from helpers.trace_reading import load_trace, marker_steps, traces_under

from nrlprof.config.plan import StepMethod
from nrlprof.runtime.steps.marker import StepMarker

TESTS = str(Path(__file__).parent)


def test_a_step_is_each_run_of_matching_calls_after_another_method():
    marker = StepMarker(StepMethod("*policy*", "train"))
    policy, gen = ("dtensor_policy_worker",), ("vllm_generation_worker",)
    calls = [
        (gen, "generate"),
        (policy, "train"),  # step 1
        (policy, "train"),  # the fan-out to a second rank: still step 1
        (gen, "generate"),
        (policy, "train"),  # step 2
        (policy, "train"),
        (policy, "train"),  # repeated calls in a row: still step 2
        (policy, "checkpoint"),
        (policy, "train"),  # step 3: another method of the same worker came between
        (gen, "train"),  # a matching method on a worker the pattern does not select: no step, and ends the run
        (policy, "train"),  # step 4
    ]
    began = [marker.new_step(names, method) for names, method in calls]
    assert began == [None, 1, None, None, 2, None, None, None, 3, None, 4]


def test_a_run_that_reaches_a_worker_again_is_noted_not_counted():
    marker = StepMarker(StepMethod("*policy*", "train"))
    policy = ("dtensor_policy_worker",)
    assert [marker.new_step(policy, "train", rank) for rank in (0, 1)] == [1, None]
    assert not marker.repeated, "a fan-out reaches each worker once"
    assert marker.new_step(policy, "train", 0) is None and marker.repeated  # the contract: still step 1


ONE_METHOD_DRIVER = textwrap.dedent(
    """
    import sys, ray
    sys.path.insert(0, {tests!r})
    from workload import DTensorPolicyWorker

    ray.init()  # RAY_ADDRESS: the shared cluster
    policy = [DTensorPolicyWorker.remote() for _ in (0, 1)]
    for step in range(1, 5):
        ray.get([w.train.remote(step) for w in policy])
    """
)


def test_a_loop_that_calls_only_the_marked_method_is_told_why_it_stays_in_step_1(ray_cluster, tmp_path):
    script = tmp_path / "train.py"
    script.write_text(ONE_METHOD_DRIVER.format(tests=TESTS))
    env = joining_env(ray_cluster.get_runtime_context().gcs_address)
    env.update(NRL_STEP_ANATOMY="0", PYTHONPATH=TESTS, NRL_STEP_METHOD="*policy*.train",
               NRL_TORCH_PROFILE_WORKER_PATTERNS="*policy*", NRL_TORCH_PROFILE_STEP_RANGE="2:4",
               NRL_TORCH_PROFILE_DIR=str(tmp_path / "traces"))  # fmt: skip
    result = subprocess.run([sys.executable, str(script)], env=env, capture_output=True, text=True, timeout=600,
                            cwd=tmp_path)  # fmt: skip
    assert result.returncode == 0, result.stderr[-3000:]
    told = [line for line in result.stderr.splitlines() if "a worker got the marked method again" in line]
    assert len(told) == 1 and "NRL_STEP_METHOD=*policy*.train" in told[0] and "step 1 goes on" in told[0]
    assert "window 2-3 started" not in result.stderr and not (tmp_path / "traces").exists()


DRIVER = textwrap.dedent(
    """
    import sys, ray
    sys.path.insert(0, {tests!r})
    from workload import DTensorPolicyWorker, VllmGenerationWorker
    from worker_shapes import AsyncRewardWorker, ThreadedRolloutWorker

    ray.init(log_to_driver=True)  # RAY_ADDRESS: the shared cluster
    policy = [DTensorPolicyWorker.options(runtime_env={{"env_vars": {{"RANK": str(r)}}}}).remote() for r in (0, 1)]
    generation = VllmGenerationWorker.remote()
    rollout, reward = ThreadedRolloutWorker.remote(), AsyncRewardWorker.remote()
    for step in range(1, 6):
        ray.get(generation.generate.remote(step))
        ray.get([rollout.rollout.remote(step), reward.score.remote(step)])
        ray.get([w.train.remote(step) for w in policy])
        if step == 3:
            ray.get([w.train.remote(step) for w in policy])  # a second call in a row: the same step
    {explicit}
    print("DONE", flush=True)
    """
)


def run_driver(ray, tmp_path: Path, explicit: str = "", **variables: str) -> subprocess.CompletedProcess:
    script = tmp_path / "train.py"
    script.write_text(DRIVER.format(tests=TESTS, explicit=explicit))
    env = joining_env(ray.get_runtime_context().gcs_address)
    env.update(variables, NRL_STEP_ANATOMY="0", PYTHONPATH=TESTS)
    return subprocess.run([sys.executable, str(script)], env=env, capture_output=True, text=True, timeout=600,
                          cwd=tmp_path)  # fmt: skip


def test_the_marker_drives_the_windows_of_a_program_with_no_nrlprof_code(ray_cluster, tmp_path):
    traces = tmp_path / "traces"
    result = run_driver(
        ray_cluster,
        tmp_path,
        NRL_STEP_METHOD="*policy*.train",
        NRL_TORCH_PROFILE_WORKER_PATTERNS="*policy*,*rollout*,*reward*",
        NRL_TORCH_PROFILE_STEP_RANGE="2:4",
        NRL_TORCH_PROFILE_DIR=str(traces),
    )
    assert result.returncode == 0, result.stderr[-3000:]
    assert "steps come from the step marker NRL_STEP_METHOD=*policy*.train (first step: 1)" in result.stderr
    for rank in (0, 1):
        (trace,) = traces_under(traces / "dtensor_policy_worker" / str(rank))
        assert marker_steps(load_trace(trace), "policy.train.") == {2, 3}, "exactly the window's steps"
        assert json.loads(trace.read_text())["distributedInfo"]["rank"] == rank
    # A step begins at its train calls: the loop's rollout and scoring that follow them belong to it, so the
    # window of steps 2-3 runs from the train calls of loop iteration 2 to those of iteration 4.
    (threaded,) = traces_under(traces / "threaded_rollout_worker")
    assert marker_steps(load_trace(threaded), "threaded.rollout.") == {3, 4}
    (asynchronous,) = traces_under(traces / "async_reward_worker")
    assert marker_steps(load_trace(asynchronous), "async.score.") == {3, 4}


def test_an_explicit_step_wins_over_the_marker(ray_cluster, tmp_path):
    traces = tmp_path / "traces"
    explicit = "\n".join(
        ["import nrlprof", "nrlprof.step(10)", "ray.get([w.train.remote(10) for w in policy])", "nrlprof.step(11)"]
    )
    result = run_driver(
        ray_cluster,
        tmp_path,
        explicit=explicit,
        NRL_STEP_METHOD="*policy*.train",
        NRL_TORCH_PROFILE_WORKER_PATTERNS="*policy*",
        NRL_TORCH_PROFILE_STEP_RANGE="2,10",
        NRL_TORCH_PROFILE_DIR=str(traces),
    )
    assert result.returncode == 0, result.stderr[-3000:]
    assert "steps come from nrlprof.step() from step 10 on (before: the step marker" in result.stderr
    rank0 = traces_under(traces / "dtensor_policy_worker" / "0")
    assert sorted(marker_steps(load_trace(t), "policy.train.").pop() for t in rank0) == [2, 10]


CONTROLLER = textwrap.dedent(
    """
    import json, os, sys, ray
    sys.path.insert(0, {tests!r})

    @ray.remote(num_cpus=0)
    class Trainer:
        # verl's TaskRunner shape: it creates the worker groups and runs the training loop.
        def run(self, steps):
            from workload import DTensorPolicyWorker, RewardWorker

            policy = [DTensorPolicyWorker.options(runtime_env={{"env_vars": {{"RANK": str(r)}}}}).remote()
                      for r in (0, 1)]
            reward = RewardWorker.remote()
            for step in range(1, steps + 1):
                ray.get(reward.score.remote(step))
                ray.get([w.train.remote(step) for w in policy])
            import nrlprof
            nrlprof.finish()
            return os.getpid()

    ray.init(address="auto", log_to_driver=True)
    print("TRAINER", ray.get(Trainer.remote().run.remote(4)), flush=True)
    """
)


def test_a_controller_actor_on_a_ray_start_cluster_creates_and_steps_its_workers(ray_start_head, tmp_path):
    """The settings reach the actor from the driver's environment: the raylet was started without them."""
    traces = tmp_path / "traces"
    script = tmp_path / "train.py"
    script.write_text(CONTROLLER.format(tests=TESTS))
    env = {**ray_start_head["env"], "RAY_AUTH_MODE": "token", "NRL_STEP_ANATOMY": "0",
           "NRL_STEP_METHOD": "*policy*.train", "NRL_TORCH_PROFILE_WORKER_PATTERNS": "*policy*",
           "NRL_TORCH_PROFILE_STEP_RANGE": "2:4", "NRL_TORCH_PROFILE_DIR": str(traces)}  # fmt: skip
    result = subprocess.run([sys.executable, str(script)], env=env, capture_output=True, text=True, timeout=600,
                            cwd=tmp_path)  # fmt: skip
    assert result.returncode == 0, result.stderr[-3000:]
    trainer_pid = int(result.stdout.split("TRAINER")[1])
    assert "is the controller on" in result.stderr
    for rank in (0, 1):
        (trace,) = traces_under(traces / "dtensor_policy_worker" / str(rank))
        assert marker_steps(load_trace(trace), "policy.train.") == {2, 3}
    (controller,) = traces.glob("controller.steps2-3.*.pt.trace.json")
    assert controller.name.split(".")[2] == str(trainer_pid), "the controller's own trace is the trainer actor's"


GRAPH_DRIVER = textwrap.dedent(
    """
    import sys, ray
    sys.path.insert(0, {tests!r})
    from ray.dag import InputNode
    from worker_shapes import CompiledGraphWorker
    from workload import RewardWorker

    ray.init()  # RAY_ADDRESS: the shared cluster
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
    """
)


def test_a_compiled_graph_run_counts_as_a_call_of_its_methods(ray_cluster, tmp_path):
    """vLLM's Ray executor drives its workers with a compiled graph: no `.remote()` call per step."""
    traces = tmp_path / "traces"
    script = tmp_path / "train.py"
    script.write_text(GRAPH_DRIVER.format(tests=TESTS))
    env = joining_env(ray_cluster.get_runtime_context().gcs_address)
    env["RAY_CGRAPH_get_timeout"] = "300"  # Ray's 10 s is too short for a loaded machine's first execution
    env.update(NRL_STEP_ANATOMY="0", PYTHONPATH=TESTS, NRL_STEP_METHOD="*compiled*.forward",
               NRL_TORCH_PROFILE_WORKER_PATTERNS="*compiled*", NRL_TORCH_PROFILE_STEP_RANGE="3:5",
               NRL_TORCH_PROFILE_DIR=str(traces))  # fmt: skip
    result = subprocess.run([sys.executable, str(script)], env=env, capture_output=True, text=True, timeout=600,
                            cwd=tmp_path)  # fmt: skip
    assert result.returncode == 0, result.stderr[-3000:]
    (trace,) = traces_under(traces / "compiled_graph_worker")
    assert marker_steps(load_trace(trace), "compiled.forward.") == {3, 4}
