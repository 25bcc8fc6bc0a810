"""A matched worker whose interpreter (a per-worker venv, as NeMo RL uses) has no nrlprof installed."""

from __future__ import annotations

import subprocess
import sys
import sysconfig
import time
from pathlib import Path

import pytest
from helpers.trace_reading import load_trace, marker_steps, traces_under

# What a worker venv of an RL framework has: Ray (with what Ray needs) and torch; not nrlprof or its own dependencies.
LEFT_OUT = (
    "nrlprof",
    "__editable__",
    "__editable___nrlprof",
    "_editable_impl_nrlprof",
    "nvtx",
    "orjson",
    "ijson",
    "msgspec",
    "rich",
)

# nrlprof's own dependencies a worker's code could reach for: none is there (the wire codec is the standard library's).
PROBE = (
    "import importlib.util, ray, torch;"
    "print([m for m in ('msgspec', 'rich', 'orjson', 'ijson', 'nvtx') if importlib.util.find_spec(m)]);"
    "import nrlprof"
)


@pytest.fixture(scope="module")
def bare_worker_venv(tmp_path_factory) -> Path:
    """A venv whose site-packages links every package of this one except nrlprof and its dependencies."""
    root = tmp_path_factory.mktemp("worker-venv")
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(root)], check=True, timeout=300)
    ours = Path(sysconfig.get_paths()["purelib"])
    theirs = root / ours.relative_to(Path(sys.prefix))
    for entry in ours.iterdir():
        if not entry.name.lower().startswith(LEFT_OUT):
            (theirs / entry.name).symlink_to(entry)
    python = root / "bin" / "python"
    probe = subprocess.run([python, "-c", PROBE], capture_output=True, text=True, cwd=root, timeout=300)
    assert probe.stdout == "[]\n" and "No module named 'nrlprof'" in probe.stderr, (probe.stdout, probe.stderr)
    return python


def torch_profiling(torch_dir: Path, patterns: str, steps: str) -> dict[str, str]:
    return {
        "NRL_TORCH_PROFILE_WORKER_PATTERNS": patterns,
        "NRL_TORCH_PROFILE_STEP_RANGE": steps,
        "NRL_TORCH_PROFILE_DIR": str(torch_dir),
    }


def test_matched_worker_in_a_venv_without_nrlprof_runs_and_is_profiled(
    ray_cluster, activate, tmp_path, bare_worker_venv
):
    from workload import DTensorPolicyWorker

    torch_dir = tmp_path / "traces"
    nrlprof = activate(**torch_profiling(torch_dir, "*policy*", "2"))
    worker = DTensorPolicyWorker.options(runtime_env={"py_executable": str(bare_worker_venv)}).remote()
    assert ray_cluster.get(worker.executable.remote(), timeout=180) == str(bare_worker_venv)
    shipped = ray_cluster.get(worker.__ray_call__.remote(lambda _: sys.modules["nrlprof"].__file__))
    assert "runtime_resources" in shipped, f"nrlprof came from Ray's py_modules, not an install: {shipped}"
    for step in (1, 2, 3):
        nrlprof.step(step)
        ray_cluster.get(worker.train.remote(step), timeout=300)
    nrlprof.finish()
    (trace,) = traces_under(torch_dir / "dtensor_policy_worker")
    assert marker_steps(load_trace(trace), "policy.train.") == {2}
    assert trace.name.startswith("dtensor_policy_worker.rank0.steps2."), "named as the worker's own trace"


def test_the_child_process_of_a_worker_in_a_venv_without_nrlprof_joins_its_windows(
    ray_cluster, activate, tmp_path, bare_worker_venv
):
    from engine_shapes import VllmGenerationWorker

    torch_dir = tmp_path / "traces"
    nrlprof = activate(**torch_profiling(torch_dir, "*vllm*", "2:4"))
    worker = VllmGenerationWorker.options(runtime_env={"py_executable": str(bare_worker_venv)}).remote("spawn")
    engine_pid = ray_cluster.get(worker.engine_pid.remote(), timeout=180)
    probe = ray_cluster.get(worker.probe.remote(), timeout=300)
    assert probe["joined"] and "runtime_resources" in probe["nrlprof"], f"nrlprof from Ray's py_modules: {probe}"
    for step in range(1, 6):
        nrlprof.step(step)
        ray_cluster.get(worker.generate.remote(step), timeout=300)
    nrlprof.finish()

    engine = "vllm_generation_worker.engine_core_0"
    (trace_path,) = traces_under(torch_dir / engine)
    trace = load_trace(trace_path)
    assert trace["nrlprof"]["pid"] == engine_pid
    assert marker_steps(trace, "engine.generate.") == {2, 3}
    (worker_trace,) = traces_under(torch_dir / "vllm_generation_worker")
    assert marker_steps(load_trace(worker_trace), "engine.generate.") == set()


def test_a_slow_step_opens_its_window_in_a_worker_of_a_venv_without_nrlprof(
    ray_cluster, activate, tmp_path, bare_worker_venv
):
    """NRL_TORCH_PROFILE_STEP_RANGE=slow: the window of the step after the slow one, in the venv's worker."""
    from workload import DTensorPolicyWorker

    torch_dir = tmp_path / "traces"
    nrlprof = activate(**torch_profiling(torch_dir, "*policy*", "slow"), NRL_PROFILE_SLOW_FACTOR="3")
    worker = DTensorPolicyWorker.options(runtime_env={"py_executable": str(bare_worker_venv)}).remote()
    assert ray_cluster.get(worker.executable.remote(), timeout=180) == str(bare_worker_venv)
    for step in range(1, 12):
        nrlprof.step(step)
        time.sleep(0.1 + (1.2 if step == 8 else 0.0))
        ray_cluster.get(worker.train.remote(step), timeout=300)
    nrlprof.finish()
    (trace_path,) = traces_under(torch_dir / "dtensor_policy_worker")
    trace = load_trace(trace_path)
    assert marker_steps(trace, "policy.train.") == {9}
    assert trace["nrlprof"]["trigger"]["step"] == 8
