"""Framework adapters on the frameworks' own loops, in programs that never import nrlprof.

RLinf's runner shapes from `tests/frameworks/` (see its README); NeMo RL's stand-in runs in tests/on_nemo_rl,
verl's, RLinf's and OpenRLHF's own code in tests/on_verl, tests/on_rlinf and tests/on_openrlhf.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from helpers.clusters import joining_env
from helpers.environment import environment_without
from helpers.trace_reading import load_trace, marker_steps, traces_under

TESTS = Path(__file__).parent
FRAMEWORKS = TESTS / "frameworks"


def framework_env(**variables: str) -> dict[str, str]:
    env = environment_without("NRL_", "NRLPROF_", "RAY_")
    env.update(PYTHONPATH=os.pathsep.join([str(FRAMEWORKS), str(TESTS)]), NRL_STEP_ANATOMY="0", **variables)
    return env


def run_program(ray, tmp_path: Path, program: str, env: dict[str, str]) -> subprocess.CompletedProcess:
    """`program` (a module of tests/programs) as a job joining the shared cluster; its workers import the stand-ins
    from the job's runtime_env."""
    env = joining_env(ray.get_runtime_context().gcs_address, env)
    return subprocess.run([sys.executable, str(TESTS / "programs" / program)], env=env, capture_output=True,
                          text=True, timeout=600, cwd=tmp_path)  # fmt: skip


def test_rlinf_runner_steps_count_as_rlinf_counts_them_and_its_own_windows_stand_down(ray_cluster, tmp_path):
    traces = tmp_path / "traces"
    env = framework_env(NRL_TORCH_PROFILE_WORKER_PATTERNS="*policy*", NRL_TORCH_PROFILE_STEP_RANGE="2:4",
                        NRL_TORCH_PROFILE_DIR=str(traces))  # fmt: skip
    result = run_program(ray_cluster, tmp_path, "rlinf_embodied_runner_job.py", env)
    assert result.returncode == 0, result.stderr[-3000:]
    assert "steps come from RLinf's embodied runner (global_step) (first step: 0)" in result.stderr
    assert "OWN_WINDOWS []" in result.stdout, "RLinf's own step-gated profiling did not also open"
    (trace,) = traces_under(traces / "dtensor_policy_worker")
    assert marker_steps(load_trace(trace), "policy.train.") == {2, 3}, "global steps 2 and 3, as RLinf numbers them"


def test_rlinf_reasoning_runner_steps_are_its_global_steps(ray_cluster, tmp_path):
    traces = tmp_path / "traces"
    env = framework_env(NRL_TORCH_PROFILE_WORKER_PATTERNS="*policy*", NRL_TORCH_PROFILE_STEP_RANGE="2:4",
                        NRL_TORCH_PROFILE_DIR=str(traces))  # fmt: skip
    result = run_program(ray_cluster, tmp_path, "rlinf_reasoning_runner_job.py", env)
    assert result.returncode == 0, result.stderr[-3000:]
    assert "steps come from RLinf's reasoning runner (global_steps) (first step: 0)" in result.stderr
    (trace,) = traces_under(traces / "dtensor_policy_worker")
    assert marker_steps(load_trace(trace), "policy.train.") == {2, 3}


def test_an_actors_own_nsight_options_stand_down_where_nrlprof_runs_nsys(ray_cluster, activate, calls, nrlprof_log):
    """verl's worker groups put their own `nsight` key in every worker's runtime_env: one nsys per process."""
    from workload import DTensorPolicyWorker, RewardWorker

    activate(NRL_NSYS_WORKER_PATTERNS="*policy*", NRL_NSYS_PROFILE_STEP_RANGE="2")
    own = {"nsight": {"t": "cuda", "o": "frameworks_own_%p"}}
    policy = DTensorPolicyWorker.options(runtime_env=own).remote()
    reward = RewardWorker.options(runtime_env=own).remote()
    pids = ray_cluster.get([policy.pid.remote(), reward.pid.remote()], timeout=180)
    launches = {r["pid"]: r["options"][-1] for r in calls() if r["pid"] in pids}
    assert launches[pids[0]].endswith("dtensor_policy_worker_2_%p"), "nrlprof's nsys, not the framework's"
    assert launches[pids[1]].endswith("/logs/nsight/frameworks_own_%p"), "no nsys of nrlprof's: its own stays"
    assert any("its runtime_env's own nsight options stand down" in m for m in nrlprof_log)
    for actor in (policy, reward):
        ray_cluster.kill(actor)
