"""nrlprof on slime's shapes (slime is not on the package index): a stand-in written from slime's source
(`tests/frameworks/slime/`, its commit in `COMMIT`), whose `train.py` (`tests/frameworks/slime_train.py`) runs as
slime's driver does: `RayTrainGroup`s of one actor class for the actor and critic roles, the `RolloutManager` actor
creating the SGLang engines, the loop over `rollout_id` from 0, slime's own profiling switches in the train actors.
"""

from __future__ import annotations

import shlex
import subprocess
import sys
from pathlib import Path

import pytest
from helpers.framework_jobs import FRAMEWORKS, TESTS, job_env, readme_block_variables, readme_log_lines
from helpers.trace_reading import range_steps, traces_under

pytestmark = pytest.mark.framework

ROOT = TESTS.parent
DRIVER = Path(__file__).parent / "slime_driver.py"


def run_slime(ray_cluster, tmp_path: Path, arguments: list[str], **variables: str) -> subprocess.CompletedProcess:
    """slime's `python train.py <arguments>` on the stand-in, with the job's variables, on the session's cluster."""
    env = job_env(**variables)
    env.update(
        JOB_ADDRESS=ray_cluster.get_runtime_context().gcs_address, SLIME_TRAIN=str(FRAMEWORKS / "slime_train.py")
    )
    result = subprocess.run([sys.executable, str(DRIVER), *arguments], env=env, capture_output=True, text=True,
                            timeout=600, cwd=tmp_path)  # fmt: skip
    assert result.returncode == 0 and "DONE" in result.stdout, result.stderr[-6000:]
    return result


def recipe_arguments(heading: str) -> list[str]:
    """The arguments of the recipe's `python train.py ...` line, before its `...`."""
    text = (ROOT / "README.md").read_text()
    block = text[text.index("```bash", text.index(heading)) :].split("```")[1]
    (line,) = [line for line in block.splitlines() if line.startswith("python train.py")]
    words = shlex.split(line)[2:]
    return words[: words.index("...")]


def test_readme_recipe_profiles_each_actor_rank_at_the_loops_rollout_ids(ray_cluster, tmp_path):
    recipe = readme_block_variables(ROOT / "README.md", "**slime**")
    assert recipe == {"NRL_TORCH_PROFILE_WORKER_PATTERNS": "actor", "NRL_TORCH_PROFILE_STEP_RANGE": "2:4"}
    arguments = recipe_arguments("**slime**")
    assert arguments == ["--use-critic"]
    result = run_slime(ray_cluster, tmp_path, [*arguments, "--num-rollout", "5"], **recipe)
    log = result.stderr
    printed = readme_log_lines(ROOT / "README.md", "**slime**")
    assert len(printed) == 3 and all(line.split(" files on ")[0] in log for line in printed), "the README's lines"
    traces = tmp_path / "torch_profiler_trace"
    assert sorted(p.name for p in traces.iterdir() if p.is_dir()) == ["actor"], "the critic, one class, is not"
    for rank in ("0", "1"):
        (trace,) = traces_under(traces / "actor" / rank)
        assert range_steps(trace, "actor.train") == {2, 3}, rank
    assert len(list(traces.glob("controller.steps2-3.*.pt.trace.json"))) == 1, "the driver"


def test_slimes_own_switches_count_rollouts_from_0_and_stand_down_in_the_actor_role(ray_cluster, tmp_path):
    """--use-pytorch-profiler with --profile-step-start 0: rollouts 0 and 1 of the actor role, into
    --tensorboard-dir; --record-memory-history to rollout --memory-snapshot-num-steps - 1, into --memory-snapshot-dir.
    slime's own profiler and memory recorder write nothing there."""
    board, memory = tmp_path / "tb", tmp_path / "mem"
    arguments = ["--use-critic", "--num-rollout", "4", "--use-pytorch-profiler", "--profile-step-start", "0",
                 "--profile-step-end", "2", "--tensorboard-dir", str(board), "--record-memory-history",
                 "--memory-snapshot-dir", str(memory), "--memory-snapshot-num-steps", "3"]  # fmt: skip
    result = run_slime(ray_cluster, tmp_path, arguments, NRL_PROFILE_FRAMEWORK_CONFIG="1")
    log = result.stderr
    assert "profiling settings read from slime's own switches" in log
    assert "steps come from slime's train loop (rollout_id) (first step: 0)" in log
    assert sorted(p.name for p in board.iterdir()) == ["actor"], "no trace of slime's own (train_overall_rank_*)"
    for rank in ("0", "1"):
        (trace,) = traces_under(board / "actor" / rank)
        assert range_steps(trace, "actor.train") == {0, 1}, rank
    assert sorted(p.name for p in memory.iterdir()) == ["actor"], "no snapshot of slime's own (memory_snapshot_*)"
    for rank in ("0", "1"):
        (figures,) = (memory / "actor" / rank).glob("*memory.json")
        assert "steps0-2" in figures.name
    stood_down = "worker 'actor' rank 0: slime's own torch profiler stands down; nrlprof's torch runs in this process"
    assert stood_down in log


def test_the_rollout_managers_engines_are_stepped_at_its_rollout_ids_and_a_pattern_that_selects_nothing_says_so(
    ray_cluster, tmp_path
):
    traces = tmp_path / "traces"
    result = run_slime(ray_cluster, tmp_path, ["--num-rollout", "4", "--rollout-num-gpus", "2"],
                       NRL_TORCH_PROFILE_WORKER_PATTERNS="sglang_engine,MegatronTrainRayActor",
                       NRL_TORCH_PROFILE_STEP_RANGE="1:3", NRL_TORCH_PROFILE_DIR=str(traces))  # fmt: skip
    log = result.stderr
    assert "steps come from slime's RolloutManager (rollout_id) (first step: 0)" in log
    assert sorted(p.name for p in traces.iterdir() if p.is_dir()) == ["sglang_engine"]
    for rank in ("0", "1"):
        (trace,) = traces_under(traces / "sglang_engine" / rank)
        assert range_steps(trace, "sglang_engine.generate") == {1, 2}, rank
    warnings = [line for line in log.splitlines() if "selects no worker" in line]
    assert len(warnings) == 1, "told once, by the driver"
    (warning,) = warnings
    assert "torch: pattern 'MegatronTrainRayActor' selects no worker of this job" in warning
    assert {"actor", "rollout_manager", "sglang_engine"} <= set(
        warning.split("matched by: ")[1].split(" (")[0].split(", ")
    )
    assert "under slime a pattern matches its train actors' roles (actor, critic)" in warning
