"""nrlprof on verl's own code (verl 0.9.1 from the package index, its single controller on CPU): worker groups
built with `create_colocated_worker_cls` and `spawn`, fused `WorkerDict` actors, verl's trainer class stepping
them. The programs never import nrlprof: the start-up hook activates it."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from helpers.clusters import joining_env, short_temp_dir
from helpers.environment import environment_without
from helpers.on_demand import asked_window_of
from helpers.standins import install_stand_ins, tool_records
from helpers.trace_reading import load_trace, marker_steps, traces_under

HERE = Path(__file__).parent
TESTS = HERE.parent
pytestmark = pytest.mark.framework
FUSED = "worker_dict-actor_rollout-critic"


def verl_env(tmp_path: Path, ray=None, **variables: str) -> dict[str, str]:
    """A driver's environment; with `ray`, one that joins the shared cluster `ray` is connected to."""
    env = environment_without("NRL_", "NRLPROF_", "RAY_")
    if ray is not None:
        env = joining_env(ray.get_runtime_context().gcs_address, env)
    env.update({"PYTHONPATH": os.pathsep.join([str(HERE), str(TESTS)]), "NRL_STEP_ANATOMY": "0", **variables})
    return env


def run_job(tmp_path: Path, job: str, env: dict[str, str], *args: str) -> subprocess.CompletedProcess:
    """`job` (a module of tests/on_verl) run as a driver in `tmp_path`, with `args`."""
    return subprocess.run([sys.executable, str(HERE / job), *args], env=env, capture_output=True, text=True,
                          timeout=900, cwd=tmp_path)  # fmt: skip


def steps_in(trace: Path, prefix: str) -> set[int]:
    return marker_steps(load_trace(trace), prefix)


def test_variables_route_profiles_each_rank_of_a_fused_worker_and_verls_own_profiler_stands_down(ray_cluster, tmp_path):
    traces, own = tmp_path / "traces", tmp_path / "verl-own"
    env = verl_env(
        tmp_path,
        ray_cluster,
        NRL_TORCH_PROFILE_WORKER_PATTERNS="*WorkerDict*,reward_model",
        NRL_TORCH_PROFILE_STEP_RANGE="2:4",
        NRL_TORCH_PROFILE_DIR=str(traces),
        VERL_OWN_PROFILER_DIR=str(own),
    )
    result = run_job(tmp_path, "local_job.py", env, "--colocated", "--profile-steps", "2", "3")
    assert result.returncode == 0, result.stderr[-4000:]
    assert f"Torch profiling enabled for worker '{FUSED}' (matched pattern '*WorkerDict*')" in result.stderr
    assert "steps come from verl's RayPPOTrainer (global_steps) (first step: 1)" in result.stderr
    assert "verl's own torch profiler stands down; nrlprof's torch runs in this process" in result.stderr
    assert not any(own.rglob("*.json*")), "verl's own torch profiler wrote nothing: one profiler per process"
    (warning,) = [line for line in result.stderr.splitlines() if "selects no worker" in line]
    assert "torch: pattern 'reward_model' selects no worker of this job" in warning, "a role the job has not"
    assert {"actor_rollout", "critic", FUSED} <= set(warning.split("matched by: ")[1].split(", "))
    for rank in (0, 1):
        (trace,) = traces_under(traces / FUSED / str(rank))
        data = load_trace(trace)
        assert data["distributedInfo"]["rank"] == rank, "verl's RANK"
        for prefix in ("rollout.generate.", "critic.values.", "actor.update."):
            assert steps_in(trace, prefix) == {2, 3}, prefix
        names = {str(e.get("name")) for e in data["traceEvents"]}
        assert f"{FUSED}.actor_rollout_generate_sequences [step 2]" in names, "verl's fused methods as ranges"


VERL_YAML = """
global_profiler:
  tool: torch
  steps: [2, 3]
actor_rollout_ref:
  actor:
    profiler:
      enable: true
      all_ranks: true
      tool: torch
      discrete: true
      discrete_methods: [generate_sequences]
critic:
  profiler:
    enable: false
"""


def test_verl_yaml_route_selects_the_workers_hosting_a_role_and_its_role_prefixed_methods(ray_cluster, tmp_path):
    traces = tmp_path / "traces"
    config = tmp_path / "verl.yaml"
    config.write_text(VERL_YAML)
    env = verl_env(tmp_path, ray_cluster, NRL_PROFILE_CONFIG=str(config), NRL_TORCH_PROFILE_DIR=str(traces))
    result = run_job(tmp_path, "local_job.py", env)
    assert result.returncode == 0, result.stderr[-4000:]
    assert "Torch profiling enabled for worker 'worker_dict-actor_rollout'" in result.stderr
    assert not (traces / "worker_dict-critic").exists(), "the critic's pool hosts no profiled role"
    for rank in (0, 1):
        discrete = traces_under(traces / "worker_dict-actor_rollout" / str(rank))
        # discrete: one trace per call of the listed method, which verl calls as actor_rollout_generate_sequences
        assert sorted(steps_in(t, "rollout.generate.").pop() for t in discrete) == [2, 3]
        assert all(steps_in(t, "actor.update.") == set() for t in discrete), "only the listed method's calls"


def test_an_armed_verl_job_takes_a_window_asked_for_at_its_trainers_global_steps(ray_cluster, tmp_path):
    traces = tmp_path / "traces"
    env = verl_env(tmp_path, ray_cluster, NRL_PROFILE_ON_DEMAND="1", NRL_TORCH_PROFILE_DIR=str(traces))
    result = run_job(tmp_path, "armed_job.py", env)
    assert result.returncode == 0, result.stderr[-4000:]
    steps = asked_window_of(result)
    assert "steps come from verl's RayPPOTrainer (global_steps) (first step: 1)" in result.stderr
    assert sorted(p.name for p in traces.iterdir() if p.is_dir()) == ["worker_dict-actor_rollout"], "critic untouched"
    for rank in (0, 1):
        (trace,) = traces_under(traces / "worker_dict-actor_rollout" / str(rank))
        for prefix in ("rollout.generate.", "actor.update."):
            assert steps_in(trace, prefix) == steps, (prefix, "verl's global_steps, as the answer printed them")
    first, last = min(steps), max(steps)
    assert len(list(traces.glob(f"controller.steps{first}-{last}.*.pt.trace.json"))) == 1, "and in the controller"


def test_verls_own_config_object_is_read_when_its_trainer_starts(ray_cluster, tmp_path):
    """NRL_PROFILE_FRAMEWORK_CONFIG=1: verl's global_profiler and role blocks, from verl's config object."""
    traces = tmp_path / "traces"
    env = verl_env(tmp_path, ray_cluster, NRL_PROFILE_FRAMEWORK_CONFIG="1", NRL_TORCH_PROFILE_DIR=str(traces))
    result = run_job(tmp_path, "framework_config_job.py", env)
    assert result.returncode == 0, result.stderr[-4000:]
    assert "profiling settings read from verl's own config (NRL_PROFILE_FRAMEWORK_CONFIG=1)" in result.stderr
    for rank in (0, 1):
        # verl's generated config has profile_continuous_steps: false, so each listed step is a window of its own.
        windows = traces_under(traces / "worker_dict-actor_rollout" / str(rank))
        assert sorted(steps_in(t, "actor.update.").pop() for t in windows) == [2, 3]
    assert not (traces / "worker_dict-critic").exists()


def test_the_step_marker_needs_no_trainer_and_the_anatomy_names_every_phase(ray_cluster, tmp_path):
    traces, anatomy = tmp_path / "traces", tmp_path / "anatomy"
    env = verl_env(
        tmp_path,
        ray_cluster,
        NRL_STEP_METHOD="*WorkerDict*.actor_rollout_generate_sequences",
        NRL_TORCH_PROFILE_WORKER_PATTERNS="*actor_rollout*",
        NRL_TORCH_PROFILE_STEP_RANGE="3",
        NRL_TORCH_PROFILE_DIR=str(traces),
        NRL_STEP_ANATOMY="1",
        NRL_STEP_ANATOMY_DIR=str(anatomy),
    )
    result = run_job(tmp_path, "step_marker_job.py", env)
    assert result.returncode == 0, result.stderr[-4000:]
    for rank in (0, 1):
        (trace,) = traces_under(traces / "worker_dict-actor_rollout" / str(rank))
        assert steps_in(trace, "rollout.generate.") == {3}
        assert steps_in(trace, "critic.values.") == set(), "the critic's pool is not profiled"
    summary = subprocess.run([sys.executable, "-m", "nrlprof", "summary", str(anatomy), "--json"],
                             capture_output=True, text=True, timeout=300, env=verl_env(tmp_path))  # fmt: skip
    assert summary.returncode == 0, summary.stderr
    steps = json.loads(summary.stdout)["anatomy"]["steps"]
    assert sorted(steps, key=int)[-3:] == ["2", "3", "4"]
    for step in ("2", "3", "4"):
        assert [(p["worker"], p["method"], p["ranks"]) for p in steps[step]["phases"]] == [
            ("worker_dict-actor_rollout", "actor_rollout_generate_sequences", [0, 1]),
            ("worker_dict-critic", "critic_compute_values", [0]),
            ("worker_dict-actor_rollout", "actor_rollout_update_actor", [0, 1]),
        ], f"every phase of step {step}, named as nrlprof names the workers"


def test_explain_names_verls_slow_update_actor_as_training_bound(ray_cluster, tmp_path):
    anatomy = tmp_path / "step_anatomy"
    env = verl_env(tmp_path, ray_cluster, NRL_STEP_ANATOMY="1", NRL_STEP_ANATOMY_DIR=str(anatomy),
                   VERL_PLANTED_SECONDS=json.dumps({"update_actor": 0.4}))  # fmt: skip
    result = run_job(tmp_path, "local_job.py", env, "--colocated")
    assert result.returncode == 0, result.stderr[-4000:]
    explained = subprocess.run([sys.executable, "-m", "nrlprof", "explain", str(tmp_path), "--json"],
                               capture_output=True, text=True, timeout=300, env=verl_env(tmp_path))  # fmt: skip
    assert explained.returncode == 0, explained.stderr
    found = json.loads(explained.stdout)
    top = found["findings"][0]
    assert top["kind"] == "training_bound", found["findings"]
    assert top["evidence"]["figures"]["method"] == f"{FUSED}.actor_rollout_update_actor"
    assert top["impact_pct"] >= 50
    assert found["phases"][f"{FUSED}.actor_rollout_generate_sequences"] == "rollout"
    assert found["phases"][f"{FUSED}.critic_compute_values"] == "logprob"
    assert sorted(found["steps"], key=int) == ["2", "3", "4", "5"]  # verl's global_steps; step 1 is its warm-up


def test_worker_groups_created_and_stepped_inside_an_actor_on_a_ray_start_cluster(ray_start_head, tmp_path):
    traces = tmp_path / "traces"
    env = {**ray_start_head["env"], "RAY_AUTH_MODE": "token", "NRL_STEP_ANATOMY": "0",
           "PYTHONPATH": os.pathsep.join([str(HERE), str(TESTS)]),
           "NRL_TORCH_PROFILE_WORKER_PATTERNS": "*actor_rollout*", "NRL_TORCH_PROFILE_STEP_RANGE": "2:4",
           "NRL_TORCH_PROFILE_DIR": str(traces)}  # fmt: skip
    result = run_job(tmp_path, "main_ppo_job.py", env)
    assert result.returncode == 0, result.stderr[-4000:]
    runner = int(result.stdout.split("RUNNER")[1])
    assert f"is the controller on {os.uname().nodename} pid {runner}" in result.stderr
    for rank in (0, 1):
        (trace,) = traces_under(traces / FUSED / str(rank))
        assert steps_in(trace, "actor.update.") == {2, 3}
    (controller,) = traces.glob("controller.steps2-3.*.pt.trace.json")
    assert controller.name.split(".")[2] == str(runner)


@pytest.mark.fresh_cluster  # verl's run_ppo starts its own local cluster, whose raylet sees this test's nsys
def test_verls_controller_nsight_options_launch_its_task_runner_under_nsys(tmp_path):
    """verl gives its TaskRunner `nsight` options only where CUDA is; nrlprof launches it under nsys with them."""
    bin_dir = install_stand_ins(tmp_path / "bin")
    pid_file = tmp_path / "runner.pid"
    env = verl_env(tmp_path, NRL_PROFILE_FRAMEWORK_CONFIG="1", RUNNER_PID_FILE=str(pid_file),
                   NRLPROF_FAKE_TOOL_LOG=str(tmp_path / "calls"))  # fmt: skip
    # A Ray temp dir of its own: `ray.init()` with no address would join the cluster whose address file is in /tmp/ray.
    env["RAY_TMPDIR"] = str(short_temp_dir("nrlv"))
    env["PATH"] = f"{bin_dir}:{env['PATH']}"
    result = run_job(tmp_path, "controller_nsight_job.py", env)
    assert result.returncode == 0, result.stderr[-4000:]
    assert "controller actor 'task_runner' runs under nsys with the controller's options" in result.stderr
    runner = int(pid_file.read_text())
    (launch,) = [r for r in tool_records(tmp_path / "calls") if r["pid"] == runner]
    options = " ".join(launch["options"])
    assert "cuda,nvtx,cublas,ucx" in options and "cuda-memory-usage" in options, options
    assert "capture-range" not in options, "the controller runs under nsys for its whole lifetime"


def test_a_slow_step_of_verls_trainer_opens_a_window_at_its_next_global_step(ray_cluster, tmp_path):
    """Steps from verl's RayPPOTrainer (`global_steps`); its update_actor at step 9 is slow: a window opens at step 10
    in both ranks of the fused actor_rollout worker and in the controller, the critic untouched."""
    traces = tmp_path / "traces"
    env = verl_env(tmp_path, ray_cluster, NRL_TORCH_PROFILE_WORKER_PATTERNS="*actor_rollout*",
                   NRL_TORCH_PROFILE_STEP_RANGE="slow", NRL_PROFILE_SLOW_FACTOR="3", NRL_TORCH_PROFILE_DIR=str(traces),
                   VERL_PLANTED_SECONDS='{"update_actor": 0.15}', VERL_PLANTED_STEP="9:2.0")  # fmt: skip
    result = run_job(tmp_path, "local_job.py", env, "--steps", "14")
    assert result.returncode == 0, result.stderr[-4000:]
    assert "steps come from verl's RayPPOTrainer (global_steps) (first step: 1)" in result.stderr
    assert (
        "slow step 9: " in result.stderr and "torch window 10 opens in 2 worker(s) and the controller" in result.stderr
    )
    assert sorted(p.name for p in traces.iterdir() if p.is_dir()) == ["worker_dict-actor_rollout"], "critic untouched"
    for rank in (0, 1):
        (trace,) = traces_under(traces / "worker_dict-actor_rollout" / str(rank))
        assert steps_in(trace, "actor.update.") == {10} and load_trace(trace)["nrlprof"]["trigger"]["step"] == 9
    assert len(list(traces.glob("controller.steps10.*.pt.trace.json"))) == 1
