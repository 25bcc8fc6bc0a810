"""Step-gated windows on a real local Ray cluster with the real torch profiler."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest
from helpers.clusters import joining_env
from helpers.trace_reading import load_trace, marker_steps, traces_under


def run_steps(ray, nrlprof, steps, policies=(), generators=(), rewards=()):
    for step in steps:
        nrlprof.step(step)
        ray.get(
            [p.train.remote(step) for p in policies]
            + [g.generate.remote(step) for g in generators]
            + [r.score.remote(step) for r in rewards],
            timeout=300,
        )


@pytest.fixture
def torch_dir(tmp_path):
    return tmp_path / "traces"


def test_torch_traces_hold_exactly_the_selected_steps(ray_cluster, activate, torch_dir):
    from workload import DTensorPolicyWorker, RewardWorker, VllmGenerationWorker

    nrlprof = activate(
        NRL_TORCH_PROFILE_WORKER_PATTERNS="*policy*,*generation*,*tensor_parallel*",
        NRL_TORCH_PROFILE_STEP_RANGE="2:4,6",
        NRL_TORCH_PROFILE_DIR=str(torch_dir),
    )
    policies = [DTensorPolicyWorker.options(runtime_env={"env_vars": {"RANK": str(r)}}).remote() for r in (0, 1)]
    generator = VllmGenerationWorker.remote(2)
    reward = RewardWorker.remote()
    run_steps(ray_cluster, nrlprof, range(1, 8), policies, [generator], [reward])

    for rank in (0, 1):
        files = traces_under(torch_dir / "dtensor_policy_worker" / str(rank))
        assert [f.name.split(".")[2] for f in files] == ["steps2-3", "steps6"]
        windows = [load_trace(f) for f in files]
        assert [marker_steps(t, "policy.train.") for t in windows] == [{2, 3}, {6}]
        assert [marker_steps(t, "ProfilerStep#") for t in windows] == [{2, 3}, {6}]
        meta = windows[0]
        assert meta["distributedInfo"]["rank"] == rank
        assert meta["nrlprof"]["worker"] == "dtensor_policy_worker" and meta["nrlprof"]["steps"] == [2, 3]
        assert meta["nrlprof"]["rank"] == rank and meta["nrlprof"]["pid"] > 0 and meta["nrlprof"]["host"]

    generator_traces = traces_under(torch_dir / "vllm_generation_worker")
    assert [marker_steps(load_trace(f), "generate.") for f in generator_traces] == [{2, 3}, {6}]
    children = traces_under(torch_dir / "tensor_parallel_worker")
    assert len(children) == 4, "both tensor-parallel children of the generation worker are profiled"
    assert sorted({f.parent.name for f in children}) == ["0", "1"]
    assert all(marker_steps(load_trace(f), "tp.forward.") in ({2, 3}, {6}) for f in children)

    assert not (torch_dir / "reward_worker").exists()
    controller = sorted(p.name for p in torch_dir.glob("controller.*.pt.trace.json"))
    assert [name.split(".")[1] for name in controller] == ["steps2-3", "steps6"]


def test_gate_state_machine_outside_windows_does_no_ray_call(ray_cluster, activate, torch_dir, monkeypatch):
    from workload import DTensorPolicyWorker

    nrlprof = activate(
        NRL_TORCH_PROFILE_WORKER_PATTERNS="*policy*",
        NRL_TORCH_PROFILE_STEP_RANGE="3",
        NRL_TORCH_PROFILE_DIR=str(torch_dir),
    )
    worker = DTensorPolicyWorker.remote()
    ray_cluster.get(worker.pid.remote())
    from nrlprof.process import state

    channel = state.session.channel
    dispatched = []
    real_post = channel.post
    monkeypatch.setattr(channel, "post", lambda actions: dispatched.append(actions) or real_post(actions))
    for step in (1, 2, 2, 3, 3, 4, 5, 3, 2, 3):
        nrlprof.step(step)
    ops = [[a.op for a in actions] for actions in dispatched]
    expected = [["prepare"], ["start"], ["stop"]]
    assert ops == expected, "warm-up at 2, start at 3, stop at 4; the repeated and backward steps do nothing"
    nrlprof.finish()  # the files of the window stopped at 4 are final (finished beside the steps after)
    assert len(traces_under(torch_dir)) == 2  # worker + controller, once each


def test_dead_worker_is_skipped_and_a_killed_worker_keeps_its_closed_windows(ray_cluster, activate, torch_dir):
    from workload import DTensorPolicyWorker

    nrlprof = activate(
        NRL_TORCH_PROFILE_WORKER_PATTERNS="*policy*",
        NRL_TORCH_PROFILE_STEP_RANGE="1,3",
        NRL_TORCH_PROFILE_DIR=str(torch_dir),
    )
    survivor, victim = DTensorPolicyWorker.remote(), DTensorPolicyWorker.remote()
    run_steps(ray_cluster, nrlprof, [1, 2], [survivor, victim])
    ray_cluster.kill(victim)
    time.sleep(1)
    run_steps(ray_cluster, nrlprof, [3, 4], [survivor])
    victim_traces = traces_under(torch_dir / "dtensor_policy_worker" / "1")
    assert [marker_steps(load_trace(f), "policy.train.") for f in victim_traces] == [{1}]
    survivor_traces = traces_under(torch_dir / "dtensor_policy_worker" / "0")
    assert [marker_steps(load_trace(f), "policy.train.") for f in survivor_traces] == [{1}, {3}]


def test_nsys_window_report_is_written_at_window_end_and_recorded(ray_cluster, activate, torch_dir):
    """The stand-in nsys writes the report when the worker's capture range ends; the record names that file."""
    from workload import DTensorPolicyWorker

    nrlprof = activate(NRL_NSYS_WORKER_PATTERNS="*policy*", NRL_NSYS_PROFILE_STEP_RANGE="2:4")
    worker = DTensorPolicyWorker.remote()
    pid = ray_cluster.get(worker.pid.remote())
    run_steps(ray_cluster, nrlprof, range(1, 6), [worker])
    session = Path(ray_cluster._private.worker.global_worker.node.get_session_dir_path())
    report = session / "logs" / "nsight" / f"dtensor_policy_worker_2-3_{pid}.nsys-rep"
    assert report.is_file(), "written at the window's end, while the worker still runs"
    assert ray_cluster.get(worker.pid.remote()) == pid
    manifest = session / "logs" / "nrlprof" / f"manifest-{os.uname().nodename}-{pid}.jsonl"
    records = [json.loads(line) for line in manifest.read_text().splitlines()]
    (record,) = [r for r in records if r["backend"] == "nsys"]
    assert record["steps"] == [2, 3] and record["status"] == "ok", record
    assert record["files"] == [str(report)]
    assert record["start_ms"] > 0 and record["stop_ms"] > 0


def test_exception_in_driver_loop_still_flushes_the_open_window(ray_cluster, tmp_path):
    torch_dir = tmp_path / "traces"
    script = Path(__file__).parent / "programs" / "driver_raises.py"
    env = {
        **joining_env(ray_cluster.get_runtime_context().gcs_address),
        "NRL_TORCH_PROFILE_WORKER_PATTERNS": "*policy*",
        "NRL_TORCH_PROFILE_STEP_RANGE": "2:6",
        "NRL_TORCH_PROFILE_DIR": str(torch_dir),
        "PYTHONPATH": os.path.dirname(__file__),
    }
    result = subprocess.run([sys.executable, str(script)], env=env, capture_output=True, text=True, timeout=300)
    assert result.returncode != 0 and "training diverged" in result.stderr
    worker_traces = traces_under(torch_dir / "dtensor_policy_worker")
    assert [marker_steps(load_trace(f), "policy.train.") for f in worker_traces] == [{2, 3}]
    assert len(list(torch_dir.glob("controller.*"))) == 1
    assert "torch window stopped" in result.stderr
