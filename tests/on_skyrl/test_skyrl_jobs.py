"""nrlprof on SkyRL 0.4.0's own code (from the package index, `--no-deps`, into `.skyrl-site` by scripts/setup-venv):
its `PPORayActorGroup`s creating unnamed policy and ref ranks, its worker bases, its `WorkerDispatch`, its
`RayPPOTrainer.train()` in a Ray task shaped as `skyrl_entrypoint`, its own torch profiler (`Profiler`, from
`trainer.policy.torch_profiler_config`) in the policy ranks. What is stood in, and why: `skyrl_job.py`.

SkyRL needs Python 3.12; the suite runs it on 3.11 (`py311/`: typing_extensions' TypedDict for pydantic, and
flash_attn and pybase64 stood in), in the same Ray cluster as the rest of the suite.
"""

from __future__ import annotations

import json
import os
import re
from pathlib import Path

import pytest
from helpers.framework_jobs import TESTS, job_env, readme_block_variables, readme_log_lines, run_job
from helpers.trace_reading import range_steps, traces_under

pytestmark = pytest.mark.framework

ROOT = TESTS.parent
SKYRL_SITE = ROOT / ".skyrl-site"
HERE = Path(__file__).parent
if not (SKYRL_SITE / "skyrl").is_dir():
    pytest.skip("SkyRL is installed into .skyrl-site by scripts/setup-venv", allow_module_level=True)

DRIVER = HERE / "skyrl_driver.py"


def run_skyrl_job(ray_cluster, tmp_path: Path, policy: int = 2, ref: int = 1, steps: int = 4, **variables: str):
    env = job_env(**variables)
    env.update(POLICY_RANKS=str(policy), REF_RANKS=str(ref), STEPS=str(steps))
    env["PYTHONPATH"] = os.pathsep.join(map(str, (SKYRL_SITE, HERE / "py311", HERE, TESTS)))
    result = run_job(ray_cluster, tmp_path, DRIVER, env)
    assert result.returncode == 0 and "DONE" in result.stdout, result.stderr[-4000:]
    return result


def test_readme_recipe_profiles_each_policy_rank_at_the_trainers_global_steps(ray_cluster, tmp_path):
    recipe = readme_block_variables(ROOT / "README.md", "**SkyRL**")
    assert recipe == {"NRL_TORCH_PROFILE_WORKER_PATTERNS": "policy", "NRL_TORCH_PROFILE_STEP_RANGE": "2:4"}
    result = run_skyrl_job(ray_cluster, tmp_path, **recipe)
    log = result.stderr + result.stdout
    printed = readme_log_lines(ROOT / "README.md", "**SkyRL**")
    assert len(printed) == 3 and all(line.split(" files on ")[0] in log for line in printed), "the README's lines"
    assert "this Ray task (skyrl_entrypoint) is the controller" in log
    traces = tmp_path / "torch_profiler_trace"
    assert sorted(p.name for p in traces.iterdir() if p.is_dir()) == ["policy"], "the ref ranks are left alone"
    for rank in ("0", "1"):
        (trace,) = traces_under(traces / "policy" / rank)
        assert range_steps(trace, "policy.forward_backward") == {2, 3}, rank
    assert len(list(traces.glob("controller.steps2-3.*.pt.trace.json"))) == 1, "the controller task, once"


def test_skyrls_own_torch_profiler_config_means_its_schedule_and_stands_down(ray_cluster, tmp_path):
    """SkyRL's schedule from global step 1: skip 1, then cycles of warmup 1 and active 1, twice: steps 3 and 5, each
    its own trace, on the ranks it names; SkyRL's own profiler writes nothing where nrlprof's runs."""
    save_path = tmp_path / "skyrl-traces"
    own = {"ranks": [1], "skip_first": 1, "warmup": 1, "active": 1, "repeat": 2, "save_path": str(save_path)}
    infra_log = tmp_path / "infra.log"
    result = run_skyrl_job(ray_cluster, tmp_path, steps=6, NRL_PROFILE_FRAMEWORK_CONFIG="1",
                           TORCH_PROFILER=json.dumps(own), SKYRL_LOG_FILE=str(infra_log))  # fmt: skip
    log = result.stderr + result.stdout
    assert "profiling settings read from SkyRL's own config" in log
    assert sorted(p.name for p in save_path.iterdir()) == ["policy"], "no trace of SkyRL's own (rank1_w0...)"
    assert not (save_path / "policy" / "0").exists(), "rank 0 is not among its ranks"
    traces = traces_under(save_path / "policy" / "1")
    assert [re.search(r"steps(\d+)", t.name).group(1) for t in traces] == ["3", "5"]
    for trace, step in zip(traces, (3, 5), strict=True):
        assert range_steps(trace, "policy.forward_backward") == {step}
    assert not list(tmp_path.glob("*.pt.trace.json")), "SkyRL's profiler profiles no controller"
    stood_down = "worker 'policy' rank 1: SkyRL's own torch profiler stands down; nrlprof's torch runs in this process"
    assert stood_down in infra_log.read_text(), "worker lines go to SKYRL_LOG_FILE"


def test_the_fully_async_trainers_profiler_hooks_give_its_steps_and_a_pattern_that_selects_nothing_says_so(
    ray_cluster, tmp_path
):
    traces = tmp_path / "traces"
    result = run_skyrl_job(ray_cluster, tmp_path, policy=1, ref=2, TRAINER="async", NRL_TORCH_PROFILE_DIR=str(traces),
                           NRL_TORCH_PROFILE_WORKER_PATTERNS="ref,actor", NRL_TORCH_PROFILE_STEP_RANGE="3")  # fmt: skip
    log = result.stderr + result.stdout
    assert "steps come from SkyRL's fully async trainer (global_step) (first step: 1)" in log
    assert sorted(p.name for p in traces.iterdir() if p.is_dir()) == ["ref"]
    for rank in ("0", "1"):
        (trace,) = traces_under(traces / "ref" / rank)
        assert range_steps(trace, "ref.forward") == {3}, rank
    (warning,) = [line for line in log.splitlines() if "selects no worker" in line]
    assert "torch: pattern 'actor' selects no worker of this job" in warning
    listed = set(warning.split("can be matched by: ")[1].split(", "))
    assert {"policy", "ref", "CpuPolicyWorkerBase", "CpuRefWorkerBase"} <= listed
