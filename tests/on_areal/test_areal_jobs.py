"""nrlprof on AReaL 1.0.4's own code with `scheduler.type=ray` (from the package index, `--no-deps`, into
`.areal-site` by scripts/setup-venv): its `RayScheduler` creating `RayRPCServer` workers named `<role>/<index>`, a
role colocated in another role's actors, its train controllers calling them, and its `PPOTrainer.train()` loop in
the driver, whose global steps count from 0. What is stood in, and why: `areal_job.py`.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from helpers.framework_jobs import TESTS, job_env, readme_block_variables, readme_log_lines, run_job
from helpers.trace_reading import range_steps, traces_under

pytestmark = pytest.mark.framework

ROOT = TESTS.parent
AREAL_SITE = ROOT / ".areal-site"
HERE = Path(__file__).parent
if not (AREAL_SITE / "areal").is_dir():
    pytest.skip("AReaL is installed into .areal-site by scripts/setup-venv", allow_module_level=True)

DRIVER = HERE / "areal_driver.py"


def run_areal_job(ray_cluster, tmp_path: Path, steps: int = 4, **variables: str):
    env = job_env(**variables)
    env.update(STEPS=str(steps), FILEROOT=str(tmp_path / "fileroot"))
    env["PYTHONPATH"] = os.pathsep.join(map(str, (AREAL_SITE, HERE / "stubs", HERE, TESTS)))
    result = run_job(ray_cluster, tmp_path, DRIVER, env)
    assert result.returncode == 0 and "DONE" in result.stdout, result.stderr[-6000:]
    return result


def test_readme_recipe_profiles_the_workers_hosting_the_ref_role_at_arealss_global_steps(ray_cluster, tmp_path):
    recipe = readme_block_variables(ROOT / "README.md", "**AReaL**")
    assert recipe == {"NRL_TORCH_PROFILE_WORKER_PATTERNS": "ref", "NRL_TORCH_PROFILE_STEP_RANGE": "2:4"}
    result = run_areal_job(ray_cluster, tmp_path, **recipe)
    log = result.stderr + result.stdout
    printed = readme_log_lines(ROOT / "README.md", "**AReaL**")
    assert len(printed) == 4 and all(line.split(" files on ")[0] in log for line in printed), "the README's lines"
    traces = tmp_path / "torch_profiler_trace"
    assert sorted(p.name for p in traces.iterdir() if p.is_dir()) == ["actor-ref"], "the critic is left alone"
    for rank in ("0", "1"):
        (trace,) = traces_under(traces / "actor-ref" / rank)
        assert range_steps(trace, "actor-ref.call") == {2, 3}, rank


def test_areals_own_perf_tracer_and_memory_profiler_steps_count_from_zero_and_stand_down(ray_cluster, tmp_path):
    """AReaL's perf_tracer.profile_steps: the torch profiler in every traced role and the trainer, at AReaL's steps;
    its memory_profiler.profile_steps: the actor's workers. AReaL's own profilers stand down there."""
    result = run_areal_job(ray_cluster, tmp_path, NRL_PROFILE_FRAMEWORK_CONFIG="1", PERF_STEPS=json.dumps([0, 1]),
                           MEMORY_STEPS=json.dumps([2]))  # fmt: skip
    log = result.stderr + result.stdout
    assert "profiling settings read from AReaL's own config" in log
    assert "steps come from AReaL's PPOTrainer (global_step) (first step: 0)" in log
    assert "AReaL's own memory profiler stands down for role 'actor'" in log
    (run,) = (tmp_path / "fileroot" / "logs").glob("*/nrlprof/t0")
    traces = run / "perf_tracer"
    assert sorted(p.name for p in traces.iterdir() if p.is_dir() and (p / "0").is_dir()) == ["actor-ref", "critic"]
    for worker, label in (("actor-ref", "actor-ref.call"), ("critic", "critic.call")):
        (trace,) = traces_under(traces / worker / "0")
        assert range_steps(trace, label) == {0, 1}, worker
    assert len(list(traces.glob("controller.steps0-1.*.pt.trace.json"))) == 1, "and the trainer"
    own = [line for path in traces.rglob("traces-r*.jsonl") for line in path.read_text().splitlines()]
    assert any('"ppo_update"' in line for line in own), "AReaL's perf tracer still writes its spans"
    assert not any("[Profiler" in line for line in own), "its own torch profiler merged nothing into them"
    memory = run / "memory_snapshots" / "actor-ref"
    assert sorted(p.name for p in memory.iterdir()) == ["0", "1"]
    assert all(list((memory / rank).glob("*steps2*memory.json")) for rank in ("0", "1"))


def test_a_worker_is_matched_by_its_actor_name_and_a_pattern_that_selects_nothing_says_so(ray_cluster, tmp_path):
    traces = tmp_path / "traces"
    result = run_areal_job(ray_cluster, tmp_path, NRL_TORCH_PROFILE_WORKER_PATTERNS="actor/1,policy",
                           NRL_TORCH_PROFILE_STEP_RANGE="1", NRL_TORCH_PROFILE_DIR=str(traces))  # fmt: skip
    log = result.stderr + result.stdout
    assert sorted(p.name for p in (traces / "actor-ref").iterdir()) == ["1"], "rank 1 only"
    (warning,) = [line for line in log.splitlines() if "selects no worker" in line]
    assert "torch: pattern 'policy' selects no worker of this job" in warning
    listed = set(warning.split("can be matched by: ")[1].split(", "))
    assert {"actor", "ref", "actor-ref", "actor/0", "critic", "critic/0"} <= listed


def test_a_local_scheduler_is_said_to_start_processes_nrlprof_does_not_see(tmp_path):
    """`scheduler.type=local`: AReaL's own LocalScheduler, made as its trainer makes it; one line says so."""
    import subprocess
    import sys

    for folder in ("names", "logs"):
        (tmp_path / folder).mkdir()
    env = job_env(NRL_TORCH_PROFILE_WORKER_PATTERNS="actor", NRL_TORCH_PROFILE_STEP_RANGE="1")
    env["PYTHONPATH"] = os.pathsep.join(map(str, (AREAL_SITE, HERE / "stubs")))
    job = [sys.executable, str(HERE / "local_scheduler_job.py"), str(tmp_path)]
    result = subprocess.run(job, env=env, capture_output=True, text=True, timeout=300, cwd=tmp_path)
    assert result.returncode == 0, result.stderr[-3000:]
    said = [line for line in result.stderr.splitlines() if "does not see" in line]
    assert said == [
        "[nrlprof] WARNING AReaL's scheduler.type=local starts its workers as processes, which nrlprof does not see: "
        "it profiles none of them (scheduler.type=ray makes them Ray actors nrlprof profiles)"
    ]
