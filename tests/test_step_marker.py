"""Steps with no driver code: NRL_STEP_METHOD, in programs that never import nrlprof (the start-up hook
activates them), joining the shared local cluster, and from a controller actor on a `ray start` cluster."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from helpers.clusters import joining_env
from helpers.trace_reading import load_trace, marker_steps, traces_under

from nrlprof.config.plan import StepMethod
from nrlprof.runtime.steps.marker import StepMarker

TESTS = str(Path(__file__).parent)
PROGRAMS = Path(TESTS) / "programs"


def run_job(tmp_path: Path, env: dict[str, str], job: str, *args: str) -> subprocess.CompletedProcess:
    """One of tests/programs/step_marker_jobs.py's drivers, run to its end."""
    command = [sys.executable, str(PROGRAMS / "step_marker_jobs.py"), job, *args]
    return subprocess.run(command, env=env, capture_output=True, text=True, timeout=600, cwd=tmp_path)


def new_step(marker: StepMarker, names: tuple[str, ...], method: str, worker: object = None) -> int | None:
    """The step a call of `method` on a worker named `names` begins, as the call hook asks the marker."""
    return marker.call(marker.method_matches(names, method), () if worker is None else (worker,))


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
    began = [new_step(marker, names, method) for names, method in calls]
    assert began == [None, 1, None, None, 2, None, None, None, 3, None, 4]


def test_a_run_that_reaches_a_worker_again_is_noted_not_counted():
    marker = StepMarker(StepMethod("*policy*", "train"))
    policy = ("dtensor_policy_worker",)
    assert [new_step(marker, policy, "train", rank) for rank in (0, 1)] == [1, None]
    assert not marker.repeated, "a fan-out reaches each worker once"
    assert new_step(marker, policy, "train", 0) is None and marker.repeated  # the contract: still step 1


def test_a_loop_that_calls_only_the_marked_method_is_told_why_it_stays_in_step_1(ray_cluster, tmp_path):
    env = joining_env(ray_cluster.get_runtime_context().gcs_address)
    env.update(NRL_STEP_ANATOMY="0", PYTHONPATH=TESTS, NRL_STEP_METHOD="*policy*.train",
               NRL_TORCH_PROFILE_WORKER_PATTERNS="*policy*", NRL_TORCH_PROFILE_STEP_RANGE="2:4",
               NRL_TORCH_PROFILE_DIR=str(tmp_path / "traces"))  # fmt: skip
    result = run_job(tmp_path, env, "only_the_marked_method")
    assert result.returncode == 0, result.stderr[-3000:]
    told = [line for line in result.stderr.splitlines() if "a worker got the marked method again" in line]
    assert len(told) == 1 and "NRL_STEP_METHOD=*policy*.train" in told[0] and "step 1 goes on" in told[0]
    assert "window 2-3 started" not in result.stderr and not (tmp_path / "traces").exists()


def run_driver(ray, tmp_path: Path, explicit: bool = False, **variables: str) -> subprocess.CompletedProcess:
    env = joining_env(ray.get_runtime_context().gcs_address)
    env.update(variables, NRL_STEP_ANATOMY="0", PYTHONPATH=TESTS)
    return run_job(tmp_path, env, "worker_shapes", *(["--explicit"] if explicit else []))


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
    result = run_driver(
        ray_cluster,
        tmp_path,
        explicit=True,
        NRL_STEP_METHOD="*policy*.train",
        NRL_TORCH_PROFILE_WORKER_PATTERNS="*policy*",
        NRL_TORCH_PROFILE_STEP_RANGE="2,10",
        NRL_TORCH_PROFILE_DIR=str(traces),
    )
    assert result.returncode == 0, result.stderr[-3000:]
    assert "steps come from nrlprof.step() from step 10 on (before: the step marker" in result.stderr
    rank0 = traces_under(traces / "dtensor_policy_worker" / "0")
    assert sorted(marker_steps(load_trace(t), "policy.train.").pop() for t in rank0) == [2, 10]


def test_a_controller_actor_on_a_ray_start_cluster_creates_and_steps_its_workers(ray_start_head, tmp_path):
    """The settings reach the actor from the driver's environment: the raylet was started without them."""
    traces = tmp_path / "traces"
    env = {**ray_start_head["env"], "RAY_AUTH_MODE": "token", "NRL_STEP_ANATOMY": "0",
           "NRL_STEP_METHOD": "*policy*.train", "NRL_TORCH_PROFILE_WORKER_PATTERNS": "*policy*",
           "NRL_TORCH_PROFILE_STEP_RANGE": "2:4", "NRL_TORCH_PROFILE_DIR": str(traces)}  # fmt: skip
    controller = [sys.executable, str(PROGRAMS / "controller_trainer_job.py"), "4", "marker"]
    result = subprocess.run(controller, env=env, capture_output=True, text=True, timeout=600, cwd=tmp_path)
    assert result.returncode == 0, result.stderr[-3000:]
    (trained,) = [line.split()[1:] for line in result.stdout.splitlines() if line.startswith("TRAINER ")]
    steps, trainer_pid = map(int, trained)
    assert steps == 4
    assert "is the controller on" in result.stderr
    for rank in (0, 1):
        (trace,) = traces_under(traces / "dtensor_policy_worker" / str(rank))
        assert marker_steps(load_trace(trace), "policy.train.") == {2, 3}
    (controller,) = traces.glob("controller.steps2-3.*.pt.trace.json")
    assert controller.name.split(".")[2] == str(trainer_pid), "the controller's own trace is the trainer actor's"


def test_a_compiled_graph_run_counts_as_a_call_of_its_methods(ray_cluster, tmp_path):
    """vLLM's Ray executor drives its workers with a compiled graph: no `.remote()` call per step."""
    traces = tmp_path / "traces"
    env = joining_env(ray_cluster.get_runtime_context().gcs_address)
    env["RAY_CGRAPH_get_timeout"] = "300"  # Ray's 10 s is too short for a loaded machine's first execution
    env.update(NRL_STEP_ANATOMY="0", PYTHONPATH=TESTS, NRL_STEP_METHOD="*compiled*.forward",
               NRL_TORCH_PROFILE_WORKER_PATTERNS="*compiled*", NRL_TORCH_PROFILE_STEP_RANGE="3:5",
               NRL_TORCH_PROFILE_DIR=str(traces))  # fmt: skip
    result = run_job(tmp_path, env, "compiled_graph")
    assert result.returncode == 0, result.stderr[-3000:]
    (trace,) = traces_under(traces / "compiled_graph_worker")
    assert marker_steps(load_trace(trace), "compiled.forward.") == {3, 4}
