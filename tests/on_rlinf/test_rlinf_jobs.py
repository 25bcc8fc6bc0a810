"""nrlprof on RLinf 0.3.0's own code (from the package index, `--no-deps`; its scheduler imports nothing that
needs a GPU): RLinf's `Cluster` with its own `cluster.profiling`, a worker group launched by RLinf, and the steps
of RLinf's `EmbodiedRunner._should_profile_step` (the runner's method itself, on a runner made without its
`__init__`, which needs a whole embodied-RL config), counted from 0 as RLinf counts them.

RLinf's Cluster calls `ray.init(address="auto")`: RAY_ADDRESS points it at the test session's cluster.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from helpers.framework_jobs import TESTS, job_env, readme_log_lines, run_job
from helpers.on_demand import asked_window_of
from helpers.trace_reading import load_trace, marker_steps, traces_under

HERE = Path(__file__).parent
pytestmark = pytest.mark.framework
pytest.importorskip("rlinf.scheduler", reason="RLinf is installed by scripts/setup-venv")


def test_rlinfs_own_profiling_section_runs_one_nsys_per_process_with_nrlprofs_windows(ray_cluster, tmp_path, calls):
    output = tmp_path / "rlinf-profiles"
    env = job_env(NRL_PROFILE_FRAMEWORK_CONFIG="1")
    env["PYTHONPATH"] = str(TESTS)  # the real rlinf, not tests/frameworks' runner shapes
    result = run_job(ray_cluster, tmp_path, HERE / "rlinf_profiling_job.py", env, str(output))
    assert result.returncode == 0, result.stderr[-4000:]
    log = result.stderr
    printed = readme_log_lines(TESTS.parent / "README.md", "**RLinf**")
    assert len(printed) == 4 and all(line in log for line in printed), "the README's log lines, as printed"
    pids = [int(p) for p in result.stdout.split("PIDS")[1].split()]
    launches = [r for r in calls() if r["pid"] in pids]
    assert sorted(r["pid"] for r in launches) == pids, "one nsys per process: nrlprof's"
    for launch in launches:
        assert launch["options"][-1] == str(output / "ActorGroup_0-1_%p"), "RLinf's output_dir, nrlprof's name"
        assert not any("rlinf_profile_" in option for option in launch["command"])
    for pid in pids:
        assert len(list(output.glob(f"ActorGroup_0-1_{pid}*.nsys-rep"))) == 1, "one report per process, in output_dir"


def test_an_armed_rlinf_job_takes_a_window_asked_for_at_its_runners_steps(ray_cluster, tmp_path):
    """RLinf counts steps from 0; the window asked for is in its numbers. A group is named as a variable names it."""
    traces = tmp_path / "traces"
    env = job_env(NRL_PROFILE_ON_DEMAND="1", NRL_TORCH_PROFILE_DIR=str(traces))
    env["PYTHONPATH"] = str(TESTS)
    result = run_job(ray_cluster, tmp_path, HERE / "armed_rlinf_job.py", env)
    assert result.returncode == 0, result.stderr[-4000:]
    steps = asked_window_of(result)
    assert "steps come from RLinf's embodied runner (global_step) (first step: 0)" in result.stderr
    (group,) = [p for p in traces.iterdir() if p.is_dir()]
    assert group.name == "ActorGroup", "the rollout group untouched"
    (trace,) = traces_under(group)
    assert marker_steps(load_trace(trace), "actor.train.") == steps, "RLinf's step numbers, as the answer printed them"


def test_a_pattern_of_the_ray_actor_name_selects_nothing_and_the_log_says_what_rlinfs_patterns_match(
    ray_cluster, tmp_path
):
    """Ray's dashboard shows `ActorGroup:0`; RLinf's patterns match its group names: one warning says both."""
    env = job_env(NRL_TORCH_PROFILE_WORKER_PATTERNS="ActorGroup:*", NRL_TORCH_PROFILE_STEP_RANGE="1:3")
    env["PYTHONPATH"] = str(TESTS)
    result = run_job(ray_cluster, tmp_path, HERE / "actor_group_job.py", env)
    assert result.returncode == 0, result.stderr[-4000:]
    (warning,) = [line for line in result.stderr.splitlines() if "selects no worker" in line]
    assert "WARNING torch: pattern 'ActorGroup:*' selects no worker of this job; its workers can be matched by: " in (
        warning
    )
    assert "ActorGroup" in warning.split("matched by: ")[1].split(" (")[0].split(", ")
    assert "('ActorGroup:0' is the Ray actor name of worker 'ActorGroup'; under RLinf a pattern matches its " in warning
