"""Framework adapters on the frameworks' own loops, in programs that never import nrlprof.

NeMo RL, RLinf and OpenRLHF are not on the package index: `tests/frameworks/` holds modules with their public
names and signatures (see its README). verl's adapter runs on verl's own code in tests/on_verl.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from helpers.standins import install_stand_ins, tool_records
from helpers.trace_reading import load_trace, marker_steps, traces_under

TESTS = Path(__file__).parent
FRAMEWORKS = TESTS / "frameworks"
pytestmark = pytest.mark.slow


def framework_env(tmp_path: Path, **variables: str) -> dict[str, str]:
    bin_dir = install_stand_ins(tmp_path / "bin")
    env = {k: v for k, v in os.environ.items() if not k.startswith(("NRL_", "NRLPROF_", "RAY_"))}
    env.update(
        PATH=f"{bin_dir}:{env['PATH']}",
        PYTHONPATH=os.pathsep.join([str(FRAMEWORKS), str(TESTS)]),
        NRLPROF_FAKE_TOOL_LOG=str(tmp_path / "calls"),
        NRL_STEP_ANATOMY="0",
        **variables,
    )
    return env


def run_program(tmp_path: Path, code: str, env: dict[str, str]) -> subprocess.CompletedProcess:
    script = tmp_path / "train.py"
    script.write_text(textwrap.dedent(code))
    return subprocess.run([sys.executable, str(script)], env=env, capture_output=True, text=True, timeout=600,
                          cwd=tmp_path)  # fmt: skip


NEMO_PROGRAM = """
    import ray
    from nemo_rl.algorithms.grpo import grpo_train
    from nemo_rl.distributed import worker_group_utils
    from nemo_rl.models.policy import Policy

    ray.init(address="local", num_cpus=4, include_dashboard=False)
    policy = Policy(workers=2)
    grpo_train(policy, policy, max_num_steps=6)
    print("NEMO_NSIGHT", worker_group_utils.get_nsight_config_if_pattern_matches("dtensor_policy_worker"))
    print("SESSION", ray._private.worker.global_worker.node.get_session_dir_path())
    print("PIDS", *sorted(set(policy.train(7))))
"""


def test_nemo_rl_helpers_are_taken_over_so_one_nsys_acts_on_nrlprofs_step_lists(tmp_path):
    own_log = tmp_path / "nemo-own-profiling.log"
    env = framework_env(
        tmp_path,
        NRL_NSYS_WORKER_PATTERNS="*policy*",
        NRL_NSYS_PROFILE_STEP_RANGE="2:3,5",  # NeMo RL's own `split(":")` cannot read this list
        NEMO_OWN_PROFILING_LOG=str(own_log),
    )
    result = run_program(tmp_path, NEMO_PROGRAM, env)
    assert result.returncode == 0, result.stderr[-3000:]
    assert "nrlprof took over NeMo RL's profiling helpers (nemo_rl.utils.nsys)" in result.stderr
    assert "steps come from NeMo RL's maybe_gpu_profile_step (first step: 1)" in result.stderr
    assert "NEMO_NSIGHT {}" in result.stdout, "NeMo RL's own nsight runtime_env is no longer given"
    assert not own_log.exists(), "NeMo RL's policy.start_gpu_profiling() was never called"
    pids = [int(p) for p in result.stdout.split("PIDS")[1].split()]
    launches = [r for r in tool_records(tmp_path / "calls") if r["pid"] in pids]
    assert sorted(r["pid"] for r in launches) == pids, "each worker runs under exactly one nsys"
    for launch in launches:
        assert launch["options"][-1].endswith("dtensor_policy_worker_2_5_%p"), "nrlprof's own options"
    session = Path(result.stdout.split("SESSION")[1].split()[0])
    nsight = session / "logs" / "nsight"
    records = [json.loads(line) for m in (session / "logs" / "nrlprof").glob("manifest-*.jsonl")
               for line in m.read_text().splitlines()]  # fmt: skip
    for pid in pids:
        reports = sorted(p.name for p in nsight.glob(f"dtensor_policy_worker_2_5_{pid}.*.nsys-rep"))
        assert reports == [f"dtensor_policy_worker_2_5_{pid}.1.nsys-rep", f"dtensor_policy_worker_2_5_{pid}.2.nsys-rep"]
        recorded = [(r["steps"], [Path(f).name for f in r["files"]]) for r in records if r["pid"] == pid]
        assert recorded == [([2], [reports[0]]), ([5], [reports[1]])], "the manifest on the worker's node names them"


RLINF_PROGRAM = """
    import ray
    from rlinf.runners.embodied_runner import EmbodiedRunner
    from workload import DTensorPolicyWorker

    ray.init(address="local", num_cpus=4, include_dashboard=False)
    runner = EmbodiedRunner(DTensorPolicyWorker.remote(), max_steps=6)
    runner.run()
    print("OWN_WINDOWS", runner.own_windows)
"""

RLINF_REASONING_PROGRAM = """
    import ray
    from rlinf.runners.reasoning_runner import ReasoningRunner
    from workload import DTensorPolicyWorker

    ray.init(address="local", num_cpus=4, include_dashboard=False)
    ReasoningRunner(DTensorPolicyWorker.remote(), batches=range(6)).run()
"""

OPENRLHF_PROGRAM = """
    import ray
    from openrlhf.trainer.ppo_trainer import PPOTrainer
    from workload import DTensorPolicyWorker

    ray.init(address="local", num_cpus=4, include_dashboard=False)
    policy = [DTensorPolicyWorker.options(runtime_env={"env_vars": {"RANK": str(r)}}).remote() for r in (0, 1)]
    trainer = PPOTrainer.remote(policy, prompts=[[1], [], [2], [3], [4], [5]])
    ray.get(trainer.fit.remote())
"""


def test_rlinf_runner_steps_count_as_rlinf_counts_them_and_its_own_windows_stand_down(tmp_path):
    traces = tmp_path / "traces"
    env = framework_env(tmp_path, NRL_TORCH_PROFILE_WORKER_PATTERNS="*policy*", NRL_TORCH_PROFILE_STEP_RANGE="2:4",
                        NRL_TORCH_PROFILE_DIR=str(traces))  # fmt: skip
    result = run_program(tmp_path, RLINF_PROGRAM, env)
    assert result.returncode == 0, result.stderr[-3000:]
    assert "steps come from RLinf's embodied runner (global_step) (first step: 0)" in result.stderr
    assert "OWN_WINDOWS []" in result.stdout, "RLinf's own step-gated profiling did not also open"
    (trace,) = traces_under(traces / "dtensor_policy_worker")
    assert marker_steps(load_trace(trace), "policy.train.") == {2, 3}, "global steps 2 and 3, as RLinf numbers them"


def test_rlinf_reasoning_runner_steps_are_its_global_steps(tmp_path):
    traces = tmp_path / "traces"
    env = framework_env(tmp_path, NRL_TORCH_PROFILE_WORKER_PATTERNS="*policy*", NRL_TORCH_PROFILE_STEP_RANGE="2:4",
                        NRL_TORCH_PROFILE_DIR=str(traces))  # fmt: skip
    result = run_program(tmp_path, RLINF_REASONING_PROGRAM, env)
    assert result.returncode == 0, result.stderr[-3000:]
    assert "steps come from RLinf's reasoning runner (global_steps) (first step: 0)" in result.stderr
    (trace,) = traces_under(traces / "dtensor_policy_worker")
    assert marker_steps(load_trace(trace), "policy.train.") == {2, 3}


def test_openrlhf_trainer_actor_is_the_controller_of_workers_the_driver_created(tmp_path):
    """OpenRLHF's PPOTrainer is a Ray actor given actor groups the driver made: it steps them."""
    traces = tmp_path / "traces"
    env = framework_env(tmp_path, NRL_TORCH_PROFILE_WORKER_PATTERNS="*policy*", NRL_TORCH_PROFILE_STEP_RANGE="2:4",
                        NRL_TORCH_PROFILE_DIR=str(traces))  # fmt: skip
    result = run_program(tmp_path, OPENRLHF_PROGRAM, env)
    assert result.returncode == 0, result.stderr[-3000:]
    assert "steps come from OpenRLHF's PPO trainer (global_step) (first step: 1)" in result.stderr
    for rank in (0, 1):
        (trace,) = traces_under(traces / "dtensor_policy_worker" / str(rank))
        # The second draw found no samples (dynamic filtering drew again): still step 2.
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
