"""Profiles of the worker shapes real RL frameworks use, on a real Ray cluster with the real torch profiler:
threaded and async actors, a compiled graph, engine children, a busy worker, a second profiler."""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest
from helpers.environment import environment_without
from helpers.timing import CLOCK_SLACK_S
from helpers.trace_reading import event_threads, load_trace, marker_steps, traces_under

PROGRAMS = Path(__file__).parent / "programs"


@pytest.fixture
def torch_dir(tmp_path):
    return tmp_path / "traces"


@contextlib.contextmanager
def compiled_forward(worker):
    """A Ray compiled graph of `worker.forward` (vLLM's Ray executor runs its workers so), torn down at the end."""
    from ray.dag import InputNode

    with InputNode() as step_input:
        graph = worker.forward.bind(step_input)
    compiled = graph.experimental_compile()
    try:
        yield compiled
    finally:
        compiled.teardown()


def torch_env(torch_dir: Path, patterns: str, steps: str) -> dict[str, str]:
    return {
        "NRL_TORCH_PROFILE_WORKER_PATTERNS": patterns,
        "NRL_TORCH_PROFILE_STEP_RANGE": steps,
        "NRL_TORCH_PROFILE_DIR": str(torch_dir),
    }


def test_threaded_and_async_actors_record_the_work_of_every_thread(ray_cluster, activate, torch_dir):
    from worker_shapes import AsyncRewardWorker, ThreadedRolloutWorker

    nrlprof = activate(**torch_env(torch_dir, "*rollout*,*reward*", "2:4"))
    threaded, asynchronous = ThreadedRolloutWorker.remote(), AsyncRewardWorker.remote()
    for step in range(1, 6):
        nrlprof.step(step)
        ray_cluster.get([threaded.rollout.remote(step), asynchronous.score.remote(step)], timeout=300)
    nrlprof.finish()

    (threaded_trace,) = traces_under(torch_dir / "threaded_rollout_worker")
    (async_trace,) = traces_under(torch_dir / "async_reward_worker")
    assert marker_steps(load_trace(threaded_trace), "threaded.rollout.") == {2, 3}
    assert marker_steps(load_trace(async_trace), "async.score.") == {2, 3}
    trace = load_trace(threaded_trace)
    assert event_threads(trace, "threaded.rollout.").isdisjoint(event_threads(trace, "ProfilerStep#"))


def test_compiled_graph_work_is_in_the_trace(ray_cluster, activate, torch_dir):
    from worker_shapes import CompiledGraphWorker

    nrlprof = activate(**torch_env(torch_dir, "*compiled*", "3:5"))
    worker = CompiledGraphWorker.remote()
    ray_cluster.get(worker.pid.remote())
    with compiled_forward(worker) as compiled:
        for step in range(1, 7):
            nrlprof.step(step)
            assert ray_cluster.get(compiled.execute(step), timeout=300) == step
        nrlprof.finish()
    (trace,) = traces_under(torch_dir / "compiled_graph_worker")
    assert marker_steps(load_trace(trace), "compiled.forward.") == {3, 4}


def test_engine_children_are_profiled_with_their_parent(ray_cluster, activate, torch_dir, capfd):
    from worker_shapes import VllmGenerationWorker

    nrlprof = activate(**torch_env(torch_dir, "*vllm*", "2:4"))
    engine = VllmGenerationWorker.remote(2)
    child_pids = set()
    for step in range(1, 6):
        nrlprof.step(step)
        child_pids |= set(ray_cluster.get(engine.generate.remote(step), timeout=300))
    nrlprof.finish()

    child_dir = torch_dir / "vllm_generation_worker.ray_worker_wrapper"
    assert sorted(p.name for p in child_dir.iterdir()) == ["0", "1"], "ranked by creation order in the parent"
    children = traces_under(child_dir)
    assert len(children) == 2
    for trace_path in children:
        trace = load_trace(trace_path)
        assert marker_steps(trace, "tp.execute.") == {2, 3}
        assert trace["nrlprof"]["worker"] == "vllm_generation_worker.ray_worker_wrapper"
        assert trace["nrlprof"]["pid"] in child_pids
    (engine_trace,) = traces_under(torch_dir / "vllm_generation_worker")
    assert marker_steps(load_trace(engine_trace), "engine.generate.") == {2, 3}
    said = "Torch profiling enabled for worker 'vllm_generation_worker.ray_worker_wrapper'"
    logged, deadline = "", time.monotonic() + 60
    while said not in logged and time.monotonic() < deadline:  # Ray forwards the engine's log lines a moment later
        time.sleep(0.2)
        logged += capfd.readouterr().err
    assert said in logged


def test_engine_children_opt_out_and_unmatched_parents_leave_children_alone(ray_cluster, activate, torch_dir):
    from worker_shapes import RayWorkerWrapper, VllmGenerationWorker

    nrlprof = activate(**torch_env(torch_dir, "*vllm*", "2"))
    opted_out = VllmGenerationWorker.options(runtime_env={"env_vars": {"NRL_PROFILE_DISABLE": "1"}}).remote(1)
    lone_child = RayWorkerWrapper.remote()
    for step in range(1, 4):
        nrlprof.step(step)
        ray_cluster.get([opted_out.generate.remote(step), lone_child.execute.remote(step)], timeout=300)
    nrlprof.finish()
    assert not (torch_dir / "vllm_generation_worker").exists()
    assert not (torch_dir / "vllm_generation_worker.ray_worker_wrapper").exists()
    assert not (torch_dir / "ray_worker_wrapper").exists()


def test_a_worker_busy_across_the_window_is_waited_on_once_and_recorded_late(ray_cluster, activate, torch_dir):
    from worker_shapes import BusyWorker

    nrlprof = activate(**torch_env(torch_dir, "*busy*", "2:5"), NRL_PROFILE_TIMEOUT_S="1")
    worker = BusyWorker.remote()
    pid = ray_cluster.get(worker.pid.remote())
    nrlprof.step(1)
    ray_cluster.get(worker.pid.remote())  # the warm-up before the window is done: the worker is not late yet
    released = torch_dir.parent / "released"  # the test's tmp_path
    long_call = worker.busy_until.remote(str(released), limit_s=120)  # released once the window's steps are done
    waited = []
    for step in range(2, 7):
        began = time.monotonic()
        nrlprof.step(step)
        waited.append(time.monotonic() - began)
    released.touch()
    ray_cluster.get(long_call)
    nrlprof.finish()
    assert waited[0] >= 1 - CLOCK_SLACK_S, "the window start waits once for the busy worker"
    assert sum(waited[1:]) < waited[0], "later actions of the window do not wait for it again"
    session = Path(ray_cluster._private.worker.global_worker.node.get_session_dir_path())
    manifest = session / "logs" / "nrlprof" / f"manifest-{os.uname().nodename}-{pid}.jsonl"
    (record,) = [json.loads(line) for line in manifest.read_text().splitlines()]
    assert record["status"] == "late" and "late" in record["message"]


def test_a_matched_actor_whose_runtime_env_rejects_the_fragment_is_created_unprofiled(
    ray_cluster, activate, nrlprof_log
):
    from workload import DTensorPolicyWorker

    activate(NRL_NSYS_WORKER_PATTERNS="*policy*", NRL_NSYS_PROFILE_STEP_RANGE="2")
    # Ray refuses `image_uri` next to other runtime_env fields: nrlprof's must not make creation raise.
    handle = DTensorPolicyWorker.options(runtime_env={"image_uri": "example.invalid/rl:latest"})
    worker = handle.remote()
    assert worker is not None
    assert any("runs unprofiled" in m for m in nrlprof_log)
    ray_cluster.kill(worker)


def test_second_activation_behaves_like_a_first_and_keeps_the_open_windows_files(ray_cluster, activate, torch_dir):
    from workload import DTensorPolicyWorker

    nrlprof = activate(NRL_NSYS_WORKER_PATTERNS="*nothing*", NRL_NSYS_PROFILE_STEP_RANGE="1")
    first = activate(**torch_env(torch_dir, "*policy*", "2:4"))
    assert first is nrlprof
    worker = DTensorPolicyWorker.remote()
    for step in (1, 2):
        nrlprof.step(step)
        ray_cluster.get(worker.train.remote(step))
    # Re-activating in the middle of the window closes it; its files are kept.
    os.environ.update(torch_env(torch_dir, "*policy*", "5"))
    try:
        nrlprof.activate_from_env()
    finally:
        for name in torch_env(torch_dir, "", ""):
            os.environ.pop(name, None)
    closed = traces_under(torch_dir / "dtensor_policy_worker")
    assert [marker_steps(load_trace(f), "policy.train.") for f in closed] == [{2}]
    assert len(list(torch_dir.glob("controller.steps2-3.*"))) == 1
    for step in range(3, 7):
        nrlprof.step(step)
        ray_cluster.get(worker.train.remote(step))
    nrlprof.finish()
    controller = sorted(p.name.split(".")[1] for p in torch_dir.glob("controller.*.pt.trace.json"))
    assert controller == ["steps2-3", "steps5"], "the driver profiles the new torch window as a first activation does"
    worker_traces = traces_under(torch_dir / "dtensor_policy_worker")
    assert [marker_steps(load_trace(f), "policy.train.") for f in worker_traces] == [{2}, {5}]


@pytest.mark.parametrize("order", ["user-first", "nrlprof-first"])
def test_a_second_torch_profiler_in_the_process_is_survived(tmp_path, order):
    env = {
        **environment_without("NRL"),
        **torch_env(tmp_path / "traces", "*policy*", "1"),
    }
    program = PROGRAMS / "second_torch_profiler.py"
    result = subprocess.run([sys.executable, str(program), order], env=env, capture_output=True, text=True,
                            timeout=300, cwd=tmp_path)  # fmt: skip
    assert result.returncode == 0, result.stderr
    assert "survived" in result.stdout
    assert "another torch profiler" in result.stderr
    (manifest,) = (tmp_path / "traces" / ".nrlprof").glob("manifest-*.jsonl")
    (record,) = [json.loads(line) for line in manifest.read_text().splitlines()]
    assert "another torch profiler" in record["message"]
    assert record["status"] == ("skipped" if order == "user-first" else "ok")


def test_python_dash_m_of_a_package_that_imports_nrlprof_activates(tmp_path):
    """tests/programs/trainer_pkg, run as `python -m trainer_pkg.main`."""
    env = {
        **environment_without("NRL"),
        **torch_env(tmp_path / "traces", "*policy*", "1"),
        "PYTHONPATH": str(PROGRAMS),
    }
    result = subprocess.run(
        [sys.executable, "-m", "trainer_pkg.main"], env=env, capture_output=True, text=True, timeout=300
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "active True"
    as_cli = subprocess.run(
        [sys.executable, "-m", "nrlprof", "--version"], env=env, capture_output=True, text=True, timeout=300
    )
    assert as_cli.returncode == 0 and "planned" not in as_cli.stderr


def test_discrete_captures_survive_overlapping_calls(ray_cluster, activate, torch_dir):
    from worker_shapes import OverlappingGenerationWorker

    nrlprof = activate(
        **torch_env(torch_dir, "*overlapping*", "2"), NRL_TORCH_PROFILE_DISCRETE_METHODS="generate_sequences"
    )
    worker = OverlappingGenerationWorker.remote()
    nrlprof.step(1)
    ray_cluster.get(worker.generate_sequences.remote(1, 0))
    nrlprof.step(2)
    ray_cluster.get([worker.generate_sequences.remote(2, 0.5) for _ in range(3)], timeout=300)
    ray_cluster.get(worker.generate_sequences.remote(2, 0), timeout=300)
    ray_cluster.get(worker.generate_sequences.remote(2, 0), timeout=300)
    nrlprof.step(3)
    nrlprof.finish()
    captures = traces_under(torch_dir / "overlapping_generation_worker")
    assert len(captures) == 3, "one capture for the overlapping calls, then one per later call"
    assert all(marker_steps(load_trace(f), "overlap.generate.") == {2} for f in captures)


def test_a_slow_step_opens_its_window_in_threaded_async_and_compiled_graph_workers(ray_cluster, activate, torch_dir):
    """NRL_TORCH_PROFILE_STEP_RANGE=slow on the shapes above: step 8 is slow (the controller's own time), and the
    window of step 9 is in the traces of the threaded, the async and the compiled graph's worker."""
    from worker_shapes import AsyncRewardWorker, CompiledGraphWorker, ThreadedRolloutWorker

    nrlprof = activate(**torch_env(torch_dir, "*rollout*,*reward*,*compiled*", "slow"), NRL_PROFILE_SLOW_FACTOR="3")
    threaded, asynchronous, compiled_worker = (ThreadedRolloutWorker.remote(), AsyncRewardWorker.remote(),
                                               CompiledGraphWorker.remote())  # fmt: skip
    ray_cluster.get([threaded.pid.remote(), asynchronous.pid.remote(), compiled_worker.pid.remote()])
    with compiled_forward(compiled_worker) as compiled:
        for step in range(1, 13):
            nrlprof.step(step)
            time.sleep(0.1 + (1.2 if step == 8 else 0.0))
            ray_cluster.get([threaded.rollout.remote(step), asynchronous.score.remote(step)], timeout=300)
            assert ray_cluster.get(compiled.execute(step), timeout=300) == step
        nrlprof.finish()
    for worker, marker in (("threaded_rollout_worker", "threaded.rollout."), ("async_reward_worker", "async.score."),
                           ("compiled_graph_worker", "compiled.forward.")):  # fmt: skip
        (trace,) = traces_under(torch_dir / worker)
        assert marker_steps(load_trace(trace), marker) == {9}, worker
        assert load_trace(trace)["nrlprof"]["trigger"]["step"] == 8, worker
