"""A job that ends Ray, or one of its workers, while a window is open keeps every file, on a real cluster (CPU):
`ray.shutdown()`, `ray.kill`, a worker SIGKILLed in a memory window, a child process its worker ends."""

from __future__ import annotations

import json
import shutil
import time

import pytest
from helpers.job_end import ENGINE, WORKER, manifest_records, process_manifest, run_job
from helpers.trace_reading import load_trace, marker_steps, traces_under

pytestmark = pytest.mark.slow


def torch_variables(torch_dir, steps: str) -> dict[str, str]:
    return {
        "NRL_TORCH_PROFILE_WORKER_PATTERNS": "*policy*",
        "NRL_TORCH_PROFILE_STEP_RANGE": steps,
        "NRL_TORCH_PROFILE_DIR": str(torch_dir),
    }


def test_a_job_that_shuts_ray_down_in_a_window_keeps_every_workers_trace(ray_cluster, tmp_path):
    torch_dir = tmp_path / "traces"
    stderr, (driver, *_) = run_job(ray_cluster, tmp_path, "shutdown", 4, **torch_variables(torch_dir, "2:7"))

    for rank in (0, 1):
        (trace,) = traces_under(torch_dir / WORKER / str(rank))
        assert marker_steps(load_trace(trace), "policy.train.") == {2, 3, 4}
    assert len(list(torch_dir.glob(f"controller.steps2-6.{driver}.pt.trace.json"))) == 1
    assert "ray.shutdown() with a window open: nrlprof closes it first" in stderr
    assert "Started a local Ray instance" not in stderr, "nrlprof never starts a Ray instance of its own"
    assert "Can't find actor" not in stderr and "could not reach worker" not in stderr


def test_ray_kill_in_a_window_keeps_the_killed_workers_trace(ray_cluster, tmp_path):
    torch_dir = tmp_path / "traces"
    stderr, (driver, _, killed) = run_job(ray_cluster, tmp_path, "kill", 5, **torch_variables(torch_dir, "2:7"))

    (survivor,) = traces_under(torch_dir / WORKER / "0")
    assert marker_steps(load_trace(survivor), "policy.train.") == {2, 3, 4, 5}
    (trace,) = traces_under(torch_dir / WORKER / "1")
    assert marker_steps(load_trace(trace), "policy.train.") == {2, 3}
    assert f".{killed}." in trace.name
    assert "its window closed before the job ended it (ray.kill)" in stderr
    (record,) = [r for r in manifest_records(ray_cluster, killed) if r["backend"] == "torch"]
    assert (record["status"], record["steps"]) == ("ok", [2, 3])
    assert not [r for r in manifest_records(ray_cluster, driver) if r["status"] == "died"]


def test_a_worker_sigkilled_in_a_memory_window_keeps_its_figures_and_is_named_as_died(ray_cluster, tmp_path):
    memory_dir = tmp_path / "memory"
    variables = {
        "NRL_MEMORY_PROFILE_WORKER_PATTERNS": "*policy*",
        "NRL_MEMORY_PROFILE_STEP_RANGE": "2:8",
        "NRL_MEMORY_PROFILE_DIR": str(memory_dir),
    }
    stderr, (driver, _, dead) = run_job(ray_cluster, tmp_path, "sigkill", 8, **variables)

    (figures,) = (memory_dir / WORKER / "1").glob(f"*.{dead}.memory.json")
    assert [s["step"] for s in json.loads(figures.read_text())["steps"]] == [2, 3, 4]
    (survivor,) = (memory_dir / WORKER / "0").glob("*.memory.json")
    assert [s["step"] for s in json.loads(survivor.read_text())["steps"]] == [2, 3, 4, 5, 6, 7]
    (died,) = [r for r in manifest_records(ray_cluster, driver) if r["status"] == "died"]
    assert (died["worker"], died["rank"], died["window"], died["backend"], died["pid"]) == (
        WORKER, 1, "2-7", "memory", dead)  # fmt: skip
    assert died["steps"] == [2, 3, 4, 5] and "found dead at step 6" in died["message"]
    assert "worker process has died" in died["message"] or "SIGKILL" in died["message"], died["message"]
    assert f"worker '{WORKER}' rank 1 (pid {dead}) is dead during window 2-7" in stderr

    from nrlprof.tools.figures.summarize import summarize

    shutil.copy(process_manifest(ray_cluster, driver), memory_dir)  # as `nrlprof collect` brings it
    summary = summarize(memory_dir, nsys="")
    (note,) = [n for n in summary.notes if "died" in n]
    assert note.startswith(f"{WORKER} rank 1 window 2-7 (memory, ") and f"pid {dead}): died: " in note
    assert "memory" in summary.sections and summary.sections["memory"]["workers"][WORKER]["1"]["steps"]


def test_a_child_process_its_worker_ends_in_a_window_keeps_its_trace(ray_cluster, activate, tmp_path):
    from helpers.job_end import EndingGenerationWorker

    torch_dir = tmp_path / "traces"
    nrlprof = activate(
        NRL_TORCH_PROFILE_WORKER_PATTERNS="*generation*",
        NRL_TORCH_PROFILE_STEP_RANGE="2:5",
        NRL_TORCH_PROFILE_DIR=str(torch_dir),
    )
    worker = EndingGenerationWorker.remote()
    try:
        engine_pid = ray_cluster.get(worker.engine_pid.remote(), timeout=180)
        for step in (1, 2, 3):
            nrlprof.step(step)
            ray_cluster.get(worker.generate.remote(step), timeout=300)
        began = time.monotonic()
        assert ray_cluster.get(worker.end_engine.remote(), timeout=180) == -15, "ended by SIGTERM"
        assert time.monotonic() - began < 60
        nrlprof.step(4)
        nrlprof.finish()
    finally:
        ray_cluster.kill(worker)

    (trace,) = traces_under(torch_dir / ENGINE)
    assert load_trace(trace)["nrlprof"]["pid"] == engine_pid
    assert marker_steps(load_trace(trace), "engine.generate.") == {2, 3}
    (record,) = [r for r in manifest_records(ray_cluster, engine_pid) if r["backend"] == "torch"]
    assert (record["status"], record["steps"]) == ("ok", [2, 3])
