"""The memory backend on a real Ray cluster (CPU): per-step host figures, no CUDA initialised, bad values."""

from __future__ import annotations

import itertools
import json

import pytest
from helpers.environment import environment_without

from nrlprof.config.env import plan_from_env
from nrlprof.errors import ConfigError


def figures(directory, worker: str) -> list[dict]:
    (path,) = (directory / worker / "0").glob(f"{worker}.rank0.steps2-5.*.memory.json")
    document = json.loads(path.read_text())
    assert document["nrlprof"]["worker"] == worker and document["nrlprof"]["window"] == "2-5"
    return document["steps"]


def test_a_worker_that_keeps_memory_reads_as_growing_and_its_sibling_as_flat(ray_cluster, activate, tmp_path, capfd):
    from worker_shapes import LeakyPolicyWorker, SteadyPolicyWorker

    directory = tmp_path / "memory"
    nrlprof = activate(
        NRL_MEMORY_PROFILE_WORKER_PATTERNS="*policy*",
        NRL_MEMORY_PROFILE_STEP_RANGE="2:6",
        NRL_MEMORY_PROFILE_DIR=str(directory),
    )
    leaky, steady = LeakyPolicyWorker.remote(), SteadyPolicyWorker.remote()
    for step in range(1, 8):
        nrlprof.step(step)
        ray_cluster.get([leaky.train.remote(step), steady.train.remote(step)], timeout=300)
    nrlprof.finish()

    leaking = figures(directory, "leaky_policy_worker")
    assert [s["step"] for s in leaking] == [2, 3, 4, 5]
    growth = [b["host_rss_mb"] - a["host_rss_mb"] for a, b in itertools.pairwise(leaking)]
    assert all(35 <= g <= 45 for g in growth), growth
    flat = figures(directory, "steady_policy_worker")
    assert max(s["host_rss_mb"] for s in flat) - min(s["host_rss_mb"] for s in flat) < 10
    assert all(s["host_peak_mb"] >= s["host_rss_mb"] for s in flat)
    assert all(s["host_peak_mb"] - s["host_rss_mb"] >= 30 for s in flat), "the step's transient 40 MB is its peak"
    assert all("cuda" not in s for s in leaking + flat), "CUDA is never initialised by the memory backend"
    assert not list(directory.rglob("*.pickle"))
    assert "allocator snapshots are skipped" in capfd.readouterr().err

    from nrlprof.tools.figures.summarize import summarize

    summary = summarize(directory).to_json()
    findings = summary["memory"]["findings"]
    assert len(findings) == 1 and findings[0].startswith("leaky_policy_worker rank 0 grows ~4"), findings
    assert summary["memory"]["workers"]["steady_policy_worker"]["0"]["steps"]["3"]["host_peak_mb"] > 0


@pytest.mark.parametrize(
    ("variables", "named"),
    [
        ({"NRL_MEMORY_PROFILE_WORKER_PATTERNS": "*", "NRL_MEMORY_PROFILE_STEP_RANGE": "0:3"}, "STEP_RANGE"),
        ({"NRL_MEMORY_PROFILE_WORKER_PATTERNS": "*"}, "NRL_MEMORY_PROFILE_STEP_RANGE"),
        (
            {
                "NRL_MEMORY_PROFILE_WORKER_PATTERNS": "*",
                "NRL_MEMORY_PROFILE_STEP_RANGE": "2",
                "NRL_MEMORY_PROFILE_MAX_ENTRIES": "-5",
            },
            "NRL_MEMORY_PROFILE_MAX_ENTRIES",
        ),
        (
            {
                "NRL_MEMORY_PROFILE_WORKER_PATTERNS": "*",
                "NRL_MEMORY_PROFILE_STEP_RANGE": "2",
                "NRL_MEMORY_PROFILE_ON_OOM": "maybe",
            },
            "NRL_MEMORY_PROFILE_ON_OOM",
        ),
        ({"NRL_MEMORY_PROFILE_ON_OOM": "1"}, "NRL_MEMORY_PROFILE_WORKER_PATTERNS"),
        (
            {
                "NRL_MEMORY_PROFILE_WORKER_PATTERNS": "*",
                "NRL_MEMORY_PROFILE_STEP_RANGE": "2",
                "NRL_MEMORY_PROFILE_RANKS": "x",
            },
            "NRL_MEMORY_PROFILE_RANKS",
        ),
    ],
)
def test_bad_memory_values_are_one_config_error_naming_the_variable(variables, named):
    with pytest.raises(ConfigError) as caught:
        plan_from_env(variables)
    assert named in str(caught.value)


def test_memory_settings_reach_the_plan():
    plan = plan_from_env(
        {
            "NRL_MEMORY_PROFILE_WORKER_PATTERNS": "*policy*",
            "NRL_MEMORY_PROFILE_STEP_RANGE": "3:5,9",
            "NRL_MEMORY_PROFILE_MAX_ENTRIES": "5000",
            "NRL_MEMORY_PROFILE_ON_OOM": "yes",
        }
    )
    backend = plan.backend("memory")
    assert [w.label for w in backend.steps.windows] == ["3-4", "9"]
    assert backend.options_dict == {"max_entries": "5000", "on_oom": "1"}
    assert backend.output_dir == "memory_profile"


def test_verl_torch_memory_tool_becomes_the_memory_backend():
    import yaml

    from nrlprof.config.yaml_config import plan_from_mapping

    config = yaml.safe_load(
        """
        global_profiler: {steps: [2, 3, 7], save_path: outputs/memory}
        actor_rollout_ref:
          actor:
            profiler:
              tool: torch_memory
              ranks: [0, 1]
              patterns: ["*policy*"]
              tool_config:
                torch_memory: {trace_alloc_max_entries: 20000, stack_depth: 32}
        """
    )
    memory = plan_from_mapping(config).backend("memory")
    assert [t.pattern for t in memory.targets] == ["*policy*"]
    assert memory.targets[0].ranks == frozenset({0, 1})
    assert [w.label for w in memory.steps.windows] == ["2-3", "7"]
    assert memory.options_dict == {"max_entries": "20000", "on_oom": "0"}
    assert memory.output_dir == "outputs/memory"


def test_verl_torch_memory_bad_entries_name_the_key():
    from nrlprof.config.yaml_config import plan_from_mapping

    config = {
        "global_profiler": {"steps": [2]},
        "actor_rollout_ref": {
            "actor": {
                "profiler": {
                    "tool": "torch_memory",
                    "ranks": [0],
                    "tool_config": {"torch_memory": {"trace_alloc_max_entries": "lots"}},
                }
            }
        },
    }
    with pytest.raises(ConfigError) as caught:
        plan_from_mapping(config)
    assert "actor_rollout_ref.actor.profiler.tool_config.torch_memory.trace_alloc_max_entries" in str(caught.value)


def test_plan_shows_the_memory_backend_and_its_files(tmp_path):
    import subprocess
    import sys

    env = environment_without("NRL_")
    env.update(
        NRL_MEMORY_PROFILE_WORKER_PATTERNS="*policy*",
        NRL_MEMORY_PROFILE_STEP_RANGE="2:4",
        NRL_MEMORY_PROFILE_DIR=str(tmp_path / "mem"),
    )
    result = subprocess.run(
        [sys.executable, "-m", "nrlprof", "plan", "--json"], env=env, capture_output=True, text=True, timeout=300
    )
    assert result.returncode == 0, result.stderr
    (memory,) = [b for b in json.loads(result.stdout)["backends"] if b["kind"] == "memory"]
    paths = [f["path"] for f in memory["files"]]
    folder = f"{tmp_path / 'mem'}/<worker>/<rank>/"
    assert folder + "<worker>.rank<rank>.steps2-3.<pid>.memory.json" in paths
