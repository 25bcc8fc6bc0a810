"""A torch window's files finished beside the next step, on a real cluster (CPU): the stop answers before its trace
is finished, the worker's next call returns once it is (plain, threaded and async actors), and whatever ends the
job or the worker right after the stop waits for the files first: `ray.kill`, `ray.shutdown()`.

The workers' traces take seconds more to finish here (helpers.finished), so a stop that waited for them, or an end
that did not, shows."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest
from helpers.environment import environment_without
from helpers.finished import AsyncSlowFinishingPolicyWorker, SlowFinishingPolicyWorker, finishing_pending
from helpers.job_end import manifest_records
from helpers.trace_reading import load_trace, marker_steps, traces_under

WORKER = "slow_finishing_policy_worker"
ASYNC_WORKER = "async_slow_finishing_policy_worker"
FINISH_S = 3.0


def torch_window(torch_dir: Path) -> dict[str, str]:
    return {
        "NRL_TORCH_PROFILE_WORKER_PATTERNS": "*policy*",
        "NRL_TORCH_PROFILE_STEP_RANGE": "2",
        "NRL_TORCH_PROFILE_DIR": str(torch_dir),
    }


def window_stopped(ray_module, nrlprof, worker) -> int:
    """Steps 1 and 2 of the worker's work, then step 3, the window's stop; the worker's pid."""
    pid = ray_module.get(worker.pid.remote())
    for step in (1, 2):
        nrlprof.step(step)
        ray_module.get(worker.train.remote(step))
    nrlprof.step(3)
    return pid


SHAPES = {
    "plain": (SlowFinishingPolicyWorker, {}, WORKER),
    "threaded": (SlowFinishingPolicyWorker, {"max_concurrency": 4}, WORKER),
    "async": (AsyncSlowFinishingPolicyWorker, {}, ASYNC_WORKER),
}


@pytest.mark.parametrize("shape", sorted(SHAPES))
def test_the_stop_answers_first_and_the_workers_next_call_returns_with_the_trace_final(
    ray_cluster, activate, tmp_path, shape
):
    actor_class, options, name = SHAPES[shape]
    torch_dir = tmp_path / "traces"
    nrlprof = activate(**torch_window(torch_dir))
    worker = actor_class.options(**options).remote(FINISH_S)
    pid = window_stopped(ray_cluster, nrlprof, worker)

    assert ray_cluster.get(worker.__ray_call__.remote(finishing_pending)), "the stop answered before the finishing"
    assert not traces_under(torch_dir / name), "the trace is not in place yet"
    ray_cluster.get(worker.train.remote(3))
    assert not ray_cluster.get(worker.__ray_call__.remote(finishing_pending))
    (trace,) = traces_under(torch_dir / name)
    assert marker_steps(load_trace(trace), "policy.train.") == {2}
    (record,) = [r for r in manifest_records(ray_cluster, pid) if r["backend"] == "torch"]
    assert (record["status"], record["files"], record["steps"]) == ("ok", [str(trace)], [2])
    assert record["finish_ms"] >= FINISH_S * 1000, "finished beside the step, as the record says"
    nrlprof.finish()
    ray_cluster.kill(worker)


def test_ray_kill_right_after_a_stop_waits_for_the_killed_workers_trace(ray_cluster, activate, tmp_path):
    torch_dir = tmp_path / "traces"
    nrlprof = activate(**torch_window(torch_dir))
    worker = SlowFinishingPolicyWorker.remote(FINISH_S)
    pid = window_stopped(ray_cluster, nrlprof, worker)
    ray_cluster.kill(worker)  # no call of the worker in between: only the kill's own settle waits for the file

    (trace,) = traces_under(torch_dir / WORKER)
    assert marker_steps(load_trace(trace), "policy.train.") == {2}
    (record,) = [r for r in manifest_records(ray_cluster, pid) if r["backend"] == "torch"]
    assert record["status"] == "ok" and record["files"] == [str(trace)]
    nrlprof.finish()


def test_a_worker_killed_before_its_trace_is_final_is_recorded_as_died_after_the_window(
    ray_cluster, activate, tmp_path, caplog
):
    torch_dir = tmp_path / "traces"
    nrlprof = activate(**torch_window(torch_dir))
    worker = SlowFinishingPolicyWorker.remote(FINISH_S)
    pid = window_stopped(ray_cluster, nrlprof, worker)
    os.kill(pid, signal.SIGKILL)  # the OOM killer's way: no hook of nrlprof's runs, the trace is not written yet
    nrlprof.finish()

    assert not traces_under(torch_dir / WORKER)
    # The driver's manifest: this test's record is the one for its worker's pid (earlier tests may have written others).
    (died,) = [r for r in manifest_records(ray_cluster, os.getpid()) if r["status"] == "died" and r["pid"] == pid]
    assert (died["worker"], died["window"], died["backend"], died["pid"]) == (WORKER, "2", "torch", pid)
    assert "died after window 2 stopped (found dead when the job ended)" in died["message"]
    assert "if it died before, they were not written" in died["message"]
    assert f"(pid {pid}) is dead after window 2 stopped, before its files were known to be final" in caplog.text


def test_a_job_that_shuts_ray_down_right_after_a_stop_keeps_the_trace_and_its_record(ray_cluster, tmp_path):
    torch_dir = tmp_path / "traces"
    env = environment_without("NRL_", "NRLPROF_", "RAY_ADDRESS")
    tests = str(Path(__file__).parent)
    env |= {**torch_window(torch_dir), "NRL_STEP_ANATOMY": "0",
            "PYTHONPATH": os.pathsep.join(filter(None, [tests, env.get("PYTHONPATH")])),
            "RAY_AUTH_MODE": os.environ.get("RAY_AUTH_MODE", "token")}  # fmt: skip
    address = ray_cluster.get_runtime_context().gcs_address
    program = str(Path(__file__).parent / "programs" / "shutdown_right_after_a_stop.py")
    done = subprocess.run([sys.executable, program, address, str(FINISH_S)], env=env,
                          cwd=tmp_path, capture_output=True, text=True, timeout=600)  # fmt: skip
    assert done.returncode == 0 and "DONE" in done.stdout, done.stderr[-4000:]
    pid = int(done.stdout.split("PID")[1].split()[0])

    (trace,) = traces_under(torch_dir / WORKER)
    assert marker_steps(load_trace(trace), "policy.train.") == {2}
    (record,) = [r for r in manifest_records(ray_cluster, pid) if r["backend"] == "torch"]
    assert record["status"] == "ok" and record["files"] == [str(trace)]
    (controller,) = torch_dir.glob("controller.steps2.*.pt.trace.json")
    assert json.loads(controller.read_text())["nrlprof"]["worker"] == "controller"
