"""nrlprof on OpenRLHF 0.11.2's own code (from the package index, `--no-deps`, into `.openrlhf-site` by
scripts/setup-venv; its wheel also installs a top-level `tests` package, so it stays out of .venv).

Real: OpenRLHF's `RayActorGroup` creating its `PolicyModelActor` and `ReferenceModelActor` ranks (each rank sets
`RANK` in its own `__init__`), its `PPOTrainer` actor's `fit` loop with its `global_step`, its
`SamplesGenerator.generate_samples` with dynamic filtering, and the actor groups' `async_run_method`.
Stood in: deepspeed, flash_attn and vllm are empty modules (`gpu_stubs/`: OpenRLHF imports them at module
level); the vLLM engine calls (`SamplesGenerator._generate_vllm`) draw one prompt batch each; `train_step`, whose
DeepSpeed models need a GPU, calls each group's real `get_master_addr_port`; the trainer's `__init__`, which loads
a tokenizer and datasets, sets only what `fit` reads. OpenRLHF's entry point (`openrlhf.cli.train_ppo_ray`) builds
DeepSpeed models and vLLM engines before its first step, so it cannot run on CPU.
"""

from __future__ import annotations

import os
import re
from pathlib import Path

import pytest
from helpers.framework_jobs import TESTS, job_env, readme_block_variables, readme_log_lines, run_job
from helpers.on_demand import asked_window_of
from helpers.trace_reading import load_trace, range_steps, traces_under

pytestmark = pytest.mark.framework

ROOT = TESTS.parent
OPENRLHF_SITE = ROOT / ".openrlhf-site"
GPU_STUBS = Path(__file__).parent / "gpu_stubs"
if not (OPENRLHF_SITE / "openrlhf").is_dir():
    pytest.skip("OpenRLHF is installed into .openrlhf-site by scripts/setup-venv", allow_module_level=True)

OPENRLHF_JOB = Path(__file__).parent / "openrlhf_job.py"


def run_openrlhf_job(ray_cluster, tmp_path: Path, selected: str, **variables: str):
    """The job with two ranks in the `selected` group ("policy" or "reference") and one in the other: two ranks test
    that each rank is profiled, one that a group not selected is left alone (each rank is a process importing
    OpenRLHF's trainer, 5-10 s of CPU)."""
    env = job_env(**variables)
    env["POLICY_RANKS"], env["REFERENCE_RANKS"] = ("2", "1") if selected == "policy" else ("1", "2")
    env["PYTHONPATH"] = os.pathsep.join(map(str, (OPENRLHF_SITE, GPU_STUBS, TESTS)))
    result = run_job(ray_cluster, tmp_path, OPENRLHF_JOB, env)
    assert result.returncode == 0 and "DONE" in result.stdout, result.stderr[-4000:]
    return result


def test_readme_recipe_profiles_each_policy_rank_at_the_trainers_global_steps(ray_cluster, tmp_path):
    recipe = readme_block_variables(ROOT / "README.md", "**OpenRLHF**")
    assert recipe == {"NRL_TORCH_PROFILE_WORKER_PATTERNS": "PolicyModelActor", "NRL_TORCH_PROFILE_STEP_RANGE": "2:4"}
    traces = tmp_path / "torch_profiler_trace"
    result = run_openrlhf_job(ray_cluster, tmp_path, "policy", **recipe)
    log = result.stderr
    said = [line for line in log.splitlines() if "[nrlprof]" in line]
    assert said.count("[nrlprof] INFO worker 'policy_model_actor' matched by its name 'PolicyModelActor'") == 2, said
    printed = readme_log_lines(ROOT / "README.md", "**OpenRLHF**")
    assert len(printed) == 4 and all(line in log for line in printed), "the README's log lines, as printed"
    assert "reference_model_actor" not in log, "the pattern names one actor class, not every model actor"
    assert "worker 'policy_model_actor' rank 1, created elsewhere and called by this controller" in log
    assert "steps come from OpenRLHF's PPO trainer (global_step) (first step: 1)" in log
    assert [p.name for p in traces.iterdir() if p.is_dir()] == ["policy_model_actor"]
    for rank in ("0", "1"):
        (trace,) = traces_under(traces / "policy_model_actor" / rank)
        ranges = range_steps(trace, "policy_model_actor.get_master_addr_port")
        # The emptied draw is drawn again within step 2: global steps 2 and 3, as OpenRLHF counts them.
        assert ranges == {2, 3}, (rank, ranges)


def test_a_snake_case_pattern_selects_the_reference_actors_only(ray_cluster, tmp_path):
    traces = tmp_path / "traces"
    result = run_openrlhf_job(ray_cluster, tmp_path, "reference",
                              NRL_TORCH_PROFILE_WORKER_PATTERNS="reference_model_actor,CriticModelActor",
                              NRL_TORCH_PROFILE_STEP_RANGE="3", NRL_TORCH_PROFILE_DIR=str(traces))  # fmt: skip
    enabled = "Torch profiling enabled for worker 'reference_model_actor' (matched pattern 'reference_model_actor')"
    assert result.stderr.count(enabled) == 2
    (warning,) = [line for line in result.stderr.splitlines() if "selects no worker" in line]
    assert "torch: pattern 'CriticModelActor' selects no worker of this job" in warning, "the job has no critic"
    assert {"PolicyModelActor", "ReferenceModelActor"} <= set(warning.split("matched by: ")[1].split(", "))
    assert "policy_model_actor" not in result.stderr.replace(warning, "")
    assert [p.name for p in traces.iterdir() if p.is_dir()] == ["reference_model_actor"]
    for rank in ("0", "1"):
        (trace,) = traces_under(traces / "reference_model_actor" / rank)
        assert range_steps(trace, "reference_model_actor.get_master_addr_port") == {3}


def test_explain_names_the_policys_slow_fit_in_openrlhfs_own_trainer_as_training_bound(ray_cluster, tmp_path):
    import json
    import subprocess
    import sys

    from helpers.framework_jobs import job_env as plain_env

    run_openrlhf_job(ray_cluster, tmp_path, "policy", NRL_STEP_ANATOMY="1",
                     NRL_STEP_ANATOMY_DIR=str(tmp_path / "step_anatomy"), PLANTED_FIT_S="0.4")  # fmt: skip
    explained = subprocess.run([sys.executable, "-m", "nrlprof", "explain", str(tmp_path), "--json"],
                               capture_output=True, text=True, timeout=300, env=plain_env())  # fmt: skip
    assert explained.returncode == 0, explained.stderr
    found = json.loads(explained.stdout)
    top = found["findings"][0]
    assert top["kind"] == "training_bound", found["findings"]
    assert top["evidence"]["figures"]["method"] == "policy_model_actor.fit"
    assert found["phases"]["policy_model_actor.broadcast_to_vllm"] == "weight_sync"
    assert top["impact_pct"] >= 50


def test_an_armed_job_takes_a_window_asked_for_at_the_trainers_global_steps(ray_cluster, tmp_path):
    """The controller is OpenRLHF's PPOTrainer actor; the window asked for opens at its global steps."""
    traces = tmp_path / "traces"
    result = run_openrlhf_job(ray_cluster, tmp_path, "policy", NRL_PROFILE_ON_DEMAND="1",
                              NRL_TORCH_PROFILE_DIR=str(traces), ASK_FOR_WORKERS="PolicyModelActor")  # fmt: skip
    steps = asked_window_of(result)
    assert "steps come from OpenRLHF's PPO trainer (global_step) (first step: 1)" in result.stderr
    assert [p.name for p in traces.iterdir() if p.is_dir()] == ["policy_model_actor"], "the reference untouched"
    for rank in ("0", "1"):
        (trace,) = traces_under(traces / "policy_model_actor" / rank)
        assert range_steps(trace, "policy_model_actor.get_master_addr_port") == steps, rank
    first, last = min(steps), max(steps)
    assert len(list(traces.glob(f"controller.steps{first}-{last}.*.pt.trace.json"))) == 1, "and in the trainer"


def test_slow_keep_keeps_the_slow_step_of_openrlhfs_own_trainer_actor(ray_cluster, tmp_path):
    """The controller is OpenRLHF's PPOTrainer actor, its steps its `global_step`; the policy's 9th fit is slow."""
    traces = tmp_path / "traces"
    result = run_openrlhf_job(ray_cluster, tmp_path, "policy", NRL_TORCH_PROFILE_WORKER_PATTERNS="PolicyModelActor",
                              NRL_TORCH_PROFILE_STEP_RANGE="slow:keep", NRL_PROFILE_SLOW_FACTOR="3",
                              NRL_TORCH_PROFILE_DIR=str(traces), PLANTED_FIT_S="0.15", SLOW_FIT="9:2.0")  # fmt: skip
    assert "steps come from OpenRLHF's PPO trainer (global_step) (first step: 1)" in result.stderr
    said = re.search(r"slow step (\d+): \d+ ms, [\d.]+x the median .*policy_model_actor rank [01]'s fit \d+ ms.*"
                     r"torch trace of step \d+ kept in 2 worker\(s\) and the controller", result.stderr)  # fmt: skip
    assert said, result.stderr[-4000:]
    step = int(said.group(1))  # OpenRLHF's own number for the step of the 9th fit
    for rank in ("0", "1"):
        (trace,) = traces_under(traces / "policy_model_actor" / rank)
        assert range_steps(trace, "policy_model_actor.fit") == {step}, rank
        assert load_trace(trace)["nrlprof"]["trigger"]["step"] == step
    assert len(list(traces.glob(f"controller.steps{step}.*.pt.trace.json"))) == 1, "and the trainer actor's own"
