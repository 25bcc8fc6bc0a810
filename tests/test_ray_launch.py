"""On a real local Ray cluster: matched actors start under the stand-in nsys with the right interpreter."""

from __future__ import annotations

import json
import os
import shlex
import subprocess
import sys
from pathlib import Path

import pytest
from helpers.clusters import joining_env
from helpers.environment import environment_without
from helpers.standins import SYSTEM_PATH, install_stand_ins, tool_records

PROGRAMS = Path(__file__).parent / "programs"


def test_matched_actor_runs_under_nsys_with_driver_interpreter(ray_cluster, activate, calls):
    from workload import DTensorPolicyWorker, RewardWorker

    activate(NRL_NSYS_WORKER_PATTERNS="*policy*", NRL_NSYS_PROFILE_STEP_RANGE="3:5")
    policy = DTensorPolicyWorker.remote()
    reward = RewardWorker.remote()
    policy_pid, reward_pid = ray_cluster.get([policy.pid.remote(), reward.pid.remote()], timeout=300)
    assert ray_cluster.get(policy.executable.remote()) == sys.executable

    records = calls()
    by_pid = {r["pid"]: r for r in records}
    assert policy_pid in by_pid, "the policy worker was not launched through nsys"
    assert reward_pid not in by_pid, "an unmatched worker was wrapped"
    record = by_pid[policy_pid]
    assert record["command"][0] == sys.executable
    options = record["options"]
    assert "--capture-range=cudaProfilerApi" in options and "--capture-range-end=stop" in options
    assert options[options.index("-t") + 1] == "cuda,nvtx"
    output = options[options.index("-o") + 1]
    assert output.endswith("/logs/nsight/dtensor_policy_worker_3-4_%p")


def test_hostile_option_values_are_one_argument_each(ray_cluster, activate, calls, tmp_path):
    from workload import DTensorPolicyWorker

    marker = tmp_path / "pwned"
    hostile = f'it\'s a "name"; touch {marker} #_%p'
    activate(
        NRL_NSYS_WORKER_PATTERNS="*policy*",
        NRL_NSYS_PROFILE_STEP_RANGE="2",
        NRL_NSYS_EXTRA_OPTIONS=json.dumps({"o": str(tmp_path / hostile), "stats": f"false $(touch {marker})"}),
    )
    worker = DTensorPolicyWorker.remote()
    pid = ray_cluster.get(worker.pid.remote(), timeout=300)
    record = next(r for r in calls() if r["pid"] == pid)
    assert str(tmp_path / hostile) in record["options"]
    assert f"--stats=false $(touch {marker})" in record["options"]
    assert not marker.exists()


def test_ranks_not_selected_are_not_launched_under_nsys(ray_cluster, activate, calls):
    from workload import DTensorPolicyWorker

    activate(NRL_NSYS_WORKER_PATTERNS="*policy*", NRL_NSYS_PROFILE_STEP_RANGE="2", NRL_NSYS_RANKS="1")
    workers = [DTensorPolicyWorker.options(runtime_env={"env_vars": {"RANK": str(r)}}).remote() for r in range(3)]
    pids = ray_cluster.get([w.pid.remote() for w in workers], timeout=300)
    wrapped = {r["pid"] for r in calls()}
    assert [pid in wrapped for pid in pids] == [False, True, False]


def test_rays_own_nsight_key_starts_a_worker_where_the_agent_has_the_fix(ray_cluster, tmp_path):
    """Ray's own plugin runs `nsys ... python`: with no `python` on the raylet's PATH the actor never starts (shown
    on an unfixed `ray start` cluster in test_rayfix_cluster.py). The shared cluster's agent has nrlprof's fix."""
    env = joining_env(ray_cluster.get_runtime_context().gcs_address)
    env["PYTHONPATH"] = os.path.dirname(__file__)
    result = subprocess.run([sys.executable, str(PROGRAMS / "rays_own_nsight_key_job.py"), "120"], env=env,
                            capture_output=True, text=True, timeout=240, check=False, cwd=tmp_path)  # fmt: skip
    assert "ANSWERED" in result.stdout, shlex.quote(result.stdout + result.stderr[-3000:])


def _child_profiling_env(actor_instance) -> list[dict]:
    import ray as ray_in_worker

    def read(_child) -> dict:
        return {k: os.environ.get(k, "") for k in ("NRLPROF_WORKER", "NRLPROF_PLAN")} | {"pid": os.getpid()}

    return ray_in_worker.get([c.__ray_call__.remote(read) for c in actor_instance.children])


def test_children_of_a_profiled_worker_run_under_nsys_as_themselves(ray_cluster, activate, calls):
    """Engine children (vLLM's tensor-parallel workers) run under nsys too, each as itself, not as the parent."""
    from workload import VllmGenerationWorker

    activate(NRL_NSYS_WORKER_PATTERNS="*generation*", NRL_NSYS_PROFILE_STEP_RANGE="2")
    generator = VllmGenerationWorker.remote(2)
    parent_pid = ray_cluster.get(generator.pid.remote(), timeout=300)
    parent_env = ray_cluster.get(generator.__ray_call__.remote(lambda _self: os.environ.get("NRLPROF_WORKER")))
    children = ray_cluster.get(generator.__ray_call__.remote(_child_profiling_env), timeout=300)
    by_pid = {r["pid"]: r for r in calls()}
    assert parent_pid in by_pid
    assert [child["pid"] in by_pid for child in children] == [True, True]
    assert all("tensor_parallel_worker" in child["NRLPROF_WORKER"] for child in children)
    assert all(child["NRLPROF_WORKER"] != parent_env for child in children)
    outputs = [by_pid[child["pid"]]["options"] for child in children]
    assert all("tensor_parallel_worker" in options[options.index("-o") + 1] for options in outputs)


@pytest.mark.fresh_cluster  # what the runtime-env agent loads when a driver starts a cluster
def test_import_nrlprof_alone_gives_a_new_cluster_the_fixed_agent(tmp_path):
    """A driver that only imports nrlprof (NRL_* set) and then starts Ray: the agent runs the fixed plugin."""
    from nrlprof.rayfix.names import HOOK_CLASS_PATH

    bin_dir = install_stand_ins(tmp_path / "bin")
    env = environment_without("NRL_", "NRLPROF_", "RAY_")
    env.update(PATH=f"{bin_dir}:{SYSTEM_PATH}", PYTHONPATH=os.path.dirname(__file__))
    env.update(NRL_NSYS_WORKER_PATTERNS="*policy*", NRL_NSYS_PROFILE_STEP_RANGE="2")
    env["NRLPROF_FAKE_TOOL_LOG"] = str(tmp_path / "calls")
    driver = [sys.executable, str(PROGRAMS / "import_nrlprof_then_start_ray.py"), "300"]

    done = subprocess.run(driver, env=env, capture_output=True, text=True, timeout=600, cwd=tmp_path)

    lines = [line for line in done.stdout.splitlines() if line.startswith("RESULT ")]
    assert lines, shlex.quote(done.stdout + done.stderr[-3000:])
    result = json.loads(lines[-1][len("RESULT ") :])
    assert json.loads(result["plugins"]) == [{"class": HOOK_CLASS_PATH}]
    assert result["pid"] != "HUNG"
    assert result["agent_has_fix"] is True
    [record] = [r for r in tool_records(tmp_path / "calls") if r["pid"] == result["pid"]]
    assert record["command"][0] == sys.executable


def where_the_plan_goes(tmp_path, address: str) -> dict:
    env = environment_without("NRL_", "NRLPROF_", "RAY_")
    env.update(
        NRL_TORCH_PROFILE_WORKER_PATTERNS="*policy*",
        NRL_TORCH_PROFILE_STEP_RANGE="2",
        NRL_TORCH_PROFILE_DIR=str(tmp_path / "traces"),
        RAY_AUTH_MODE=os.environ.get("RAY_AUTH_MODE", "token"),
    )
    driver = [sys.executable, str(PROGRAMS / "where_the_plan_goes.py"), address]
    done = subprocess.run(driver, env=env, capture_output=True, text=True, timeout=600, cwd=tmp_path)
    lines = [line for line in done.stdout.splitlines() if line.startswith("RESULT ")]
    assert lines, done.stdout[-2000:] + done.stderr[-3000:]
    return json.loads(lines[-1].removeprefix("RESULT "))


@pytest.mark.fresh_cluster  # what a cluster's raylet inherits from the driver that starts it
def test_a_driver_that_starts_its_cluster_hands_the_plan_down_its_environment_not_the_jobs_runtime_env(tmp_path):
    """Ray starts every worker of a job with a runtime_env through `setup_worker.py` (Ray imported twice)."""
    facts = where_the_plan_goes(tmp_path, "own")
    assert facts == {"in_environment": True, "in_runtime_env": False, "kind": "controller", "driver_keeps_it": False}


def test_a_driver_that_joins_a_cluster_sends_the_plan_in_the_jobs_runtime_env(ray_cluster, tmp_path):
    facts = where_the_plan_goes(tmp_path, ray_cluster.get_runtime_context().gcs_address)
    assert facts == {"in_environment": True, "in_runtime_env": True, "kind": "controller", "driver_keeps_it": False}
