"""`import nrlprof` with nothing configured is inert; annotate records timings and runs a raising function once."""

from __future__ import annotations

import asyncio
import subprocess
import sys
from pathlib import Path

import pytest
from helpers.environment import environment_without

import nrlprof
from nrlprof.process import state

PROBES = Path(__file__).parent / "programs" / "import_probes.py"


def clean_env() -> dict[str, str]:
    return environment_without("NRL_", "NRLPROF_")


def probe(name: str, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    """tests/programs/import_probes.py's probe `name`, in a fresh interpreter."""
    return subprocess.run([sys.executable, str(PROBES), name], env=env, capture_output=True, text=True, check=True)


def test_import_with_nothing_configured_patches_nothing_prints_nothing_imports_no_ray_or_torch():
    result = probe("inert", clean_env())
    assert result.stdout.strip() == "[] () False []"
    assert result.stderr == ""


# What `import nrlprof` may load with nothing set (bench/bench_import.py times it: < 5 ms over a bare interpreter).
# A heavy module here is a regression to find before the benchmark does: `re`, `dataclasses`, `pathlib`,
# `inspect`, `logging`, `socket` or `subprocess` each cost milliseconds.
LIGHT_IMPORT = {"nrlprof", "nrlprof.errors", "nrlprof.ranges", "nrlprof.ranges.annotate", "nrlprof.ranges.forwarding",
                "nrlprof.ranges.names", "nrlprof.ranges.nvtx", "nrlprof.process", "nrlprof.process.state"}  # fmt: skip
HEAVY_STDLIB = ("re", "dataclasses", "pathlib", "inspect", "logging", "socket", "subprocess", "json", "threading")


def test_import_with_nothing_configured_loads_only_the_light_modules():
    result = probe("loaded", clean_env())
    loaded = set(result.stdout.split())
    assert {m for m in loaded if m.startswith("nrlprof")} == LIGHT_IMPORT
    assert loaded.isdisjoint(HEAVY_STDLIB), sorted(loaded.intersection(HEAVY_STDLIB))


def test_import_with_variables_activates_and_its_ray_hooks_wait_for_ray():
    env = {**clean_env(), "NRL_NSYS_WORKER_PATTERNS": "*policy*", "NRL_NSYS_PROFILE_STEP_RANGE": "2:3"}
    result = probe("hooks_wait_for_ray", env)
    before, after = result.stdout.splitlines()
    assert before == "() True False", "activated, but nothing patched and ray not imported before `import ray`"
    assert "'ray.actor.ActorClass._remote'" in after
    assert "[nrlprof] INFO nsys profiling planned for workers matching '*policy*', steps 2" in result.stderr
    assert "RAY_RUNTIME_ENV_PLUGINS" not in result.stderr


@pytest.fixture
def timings():
    state.timings.clear()
    yield nrlprof.timings
    state.timings.clear()


def test_decorator_context_manager_and_async_record_timings(timings):
    @nrlprof.annotate("actor/run_training")
    def train(x):
        return x + 1

    @nrlprof.annotate()
    async def rollout():
        await asyncio.sleep(0)
        return "done"

    assert train(1) == 2 and train(2) == 3
    assert asyncio.run(rollout()) == "done"
    with nrlprof.annotate("ad-hoc"):
        pass
    recorded = timings()
    assert recorded["actor/run_training"]["count"] == 2
    assert recorded["test_decorator_context_manager_and_async_record_timings.<locals>.rollout"]["count"] == 1
    assert recorded["ad-hoc"]["count"] == 1
    assert recorded["ad-hoc"]["mean_s"] == recorded["ad-hoc"]["total_s"] > 0


def test_a_reset_empties_the_timings_and_functions_decorated_before_it_count_again(timings):
    @nrlprof.annotate("before the reset")
    def work():
        return None

    ranged = nrlprof.annotate("a range")
    work()
    with ranged:
        pass
    state.timings.clear()
    assert timings() == {}
    work()
    work()
    with ranged:
        pass
    recorded = timings()
    assert recorded["before the reset"]["count"] == 2
    assert recorded["a range"]["count"] == 1
    assert set(recorded) == {"before the reset", "a range"}


@pytest.mark.parametrize("active", [False, True])
def test_a_function_that_raises_runs_once(timings, active, activate):
    calls = []

    @nrlprof.annotate("fails")
    def fails():
        calls.append(1)
        raise KeyError("boom")

    if active:
        activate(NRL_NSYS_WORKER_PATTERNS="*policy*", NRL_NSYS_PROFILE_STEP_RANGE="1:3").step(1)
        assert state.session.windows.is_open("nsys")
    with pytest.raises(KeyError):
        fails()
    assert calls == [1]
    assert timings()["fails"]["count"] == 1


def test_active_ranges_carry_the_step_number_and_use_real_nvtx(timings, monkeypatch, activate):
    import nvtx

    pushed = []
    activate(NRL_NSYS_WORKER_PATTERNS="*policy*", NRL_NSYS_PROFILE_STEP_RANGE="6:9").step(7)
    real_push = nvtx.push_range
    monkeypatch.setattr(nvtx, "push_range", lambda **kw: pushed.append(kw["message"]) or real_push(**kw))

    @nrlprof.annotate("rollout/generate", color="blue")
    def generate():
        return 1

    assert generate() == 1
    assert pushed == ["rollout/generate [step 7]"]


def test_torch_record_function_while_torch_profiles(timings, activate, tmp_path):
    import json

    import torch

    profiler = activate(
        NRL_TORCH_PROFILE_WORKER_PATTERNS="*policy*",
        NRL_TORCH_PROFILE_STEP_RANGE="3",
        NRL_TORCH_PROFILE_DIR=str(tmp_path),
    )
    profiler.step(3)
    with nrlprof.annotate("actor/compute_adv"):
        torch.ones(4) + 1
    profiler.finish()
    (trace,) = tmp_path.glob("controller.steps3.*.pt.trace.json")
    names = {e.get("name") for e in json.loads(trace.read_text())["traceEvents"]}
    assert "actor/compute_adv [step 3]" in names
