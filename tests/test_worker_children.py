"""The processes a profiled worker starts join its windows, on a real Ray cluster with the real torch profiler:
a spawned EngineCore doing the generation, forked and forkserver children, a `subprocess` engine, a child killed
inside a window, an EngineCore that creates its own tensor-parallel actors, an engine with its own profiler
switch; children of unmatched workers and opted-out children stay untouched."""

from __future__ import annotations

import json
import os
import signal
import time
from pathlib import Path

import pytest
from helpers.trace_reading import load_trace, marker_steps, traces_under

WORKER = "vllm_generation_worker"
ENGINE = f"{WORKER}.engine_core_0"


def torch_env(torch_dir: Path, patterns: str, steps: str) -> dict[str, str]:
    return {
        "NRL_TORCH_PROFILE_WORKER_PATTERNS": patterns,
        "NRL_TORCH_PROFILE_STEP_RANGE": steps,
        "NRL_TORCH_PROFILE_DIR": str(torch_dir),
    }


def session_dir(ray) -> Path:
    return Path(ray._private.worker.global_worker.node.get_session_dir_path())


def records_of(ray, worker: str, since: float) -> list[dict]:
    """Manifest records of `worker` for windows that began after `since` (the Ray session is the module's)."""
    records = []
    for manifest in (session_dir(ray) / "logs" / "nrlprof").glob("manifest-*.jsonl"):
        records += [json.loads(line) for line in manifest.read_text().splitlines() if line.strip()]
    return [r for r in records if r["worker"] == worker and r["started_at"] >= since]


def event_names(trace: dict) -> set[str]:
    return {str(e.get("name", "")) for e in trace["traceEvents"]}


def drive(ray, nrlprof, call, steps) -> list:
    answers = []
    for step in steps:
        nrlprof.step(step)
        answers.append(ray.get(call(step), timeout=300))
    nrlprof.finish()
    return answers


def assert_engine_trace(torch_dir: Path, engine: str, engine_pid: int, steps: set[int]) -> dict:
    """The child's own trace: its generation of exactly the window's steps, named and ranked under its worker."""
    (trace_path,) = traces_under(torch_dir / engine)
    assert trace_path.parent.name == "0", "the worker's rank"
    trace = load_trace(trace_path)
    assert trace["nrlprof"]["worker"] == engine and trace["nrlprof"]["pid"] == engine_pid
    assert marker_steps(trace, "engine.generate.") == steps
    assert marker_steps(trace, "ProfilerStep#") == steps
    assert "aten::mm" in event_names(trace)
    return trace


def assert_worker_trace_has_no_generation(torch_dir: Path, worker: str, steps: set[int]) -> None:
    (trace_path,) = traces_under(torch_dir / worker)
    trace = load_trace(trace_path)
    assert marker_steps(trace, "ProfilerStep#") == steps
    assert marker_steps(trace, "engine.generate.") == set() and "aten::mm" not in event_names(trace)


def profiled_dirs(torch_dir: Path) -> list[str]:
    return sorted(p.name for p in torch_dir.iterdir() if p.is_dir())


def test_a_spawned_engine_core_records_the_generation_for_the_window_steps(ray_cluster, activate, tmp_path):
    from engine_shapes import VllmGenerationWorker

    torch_dir, began = tmp_path / "traces", time.time()
    nrlprof = activate(**torch_env(torch_dir, "*vllm*", "2:4"))
    worker = VllmGenerationWorker.remote("spawn")
    engine_pid = ray_cluster.get(worker.engine_pid.remote(), timeout=180)
    assert set(drive(ray_cluster, nrlprof, worker.generate.remote, range(1, 6))) == {engine_pid}

    assert profiled_dirs(torch_dir) == [WORKER, ENGINE], "the worker and its EngineCore, no other process"
    assert_engine_trace(torch_dir, ENGINE, engine_pid, {2, 3})
    assert_worker_trace_has_no_generation(torch_dir, WORKER, {2, 3})
    (record,) = records_of(ray_cluster, ENGINE, began)
    assert (record["pid"], record["rank"], record["steps"], record["status"]) == (engine_pid, 0, [2, 3], "ok")
    assert record["files"] == [str(p) for p in traces_under(torch_dir / ENGINE)]

    from nrlprof.tools.figures.summarize import summarize
    from nrlprof.tools.merge.timeline import merge_traces

    summary = summarize(torch_dir, nsys="")
    (engine,) = [w for w in summary.workers if w.worker == ENGINE]
    assert engine.rank == 0 and sorted(engine.step_wall_ms) == [2, 3]
    assert any(op.name == "aten::mm" for op in engine.ops)
    merged = tmp_path / "timeline.json"
    merge_traces([torch_dir], merged)
    names = {
        e["args"]["name"] for e in json.loads(merged.read_text())["traceEvents"] if e.get("name") == "process_name"
    }
    assert any(n.startswith(f"{ENGINE} rank 0") for n in names)
    from nrlprof.tools.commands.report import write_report

    write_report(torch_dir, tmp_path / "report.html", summary)
    assert ENGINE in (tmp_path / "report.html").read_text()


def test_a_child_calling_configure_stays_its_workers_child(ray_cluster, activate, tmp_path):
    """`nrlprof.configure` in an engine process (its own code reading verl's settings) leaves the process its worker's
    child: it records the driver's window, not the steps that configuration names, and becomes no driver."""
    from engine_shapes import VllmGenerationWorker

    torch_dir = tmp_path / "traces"
    nrlprof = activate(**torch_env(torch_dir, "*vllm*", "2:4"))
    worker = VllmGenerationWorker.remote("spawn")
    engine_pid = ray_cluster.get(worker.engine_pid.remote(), timeout=180)
    assert ray_cluster.get(worker.probe.remote("configure"), timeout=60) == {"kind": "child", "same": True}
    drive(ray_cluster, nrlprof, worker.generate.remote, range(1, 5))

    assert profiled_dirs(torch_dir) == [WORKER, ENGINE]
    assert_engine_trace(torch_dir, ENGINE, engine_pid, {2, 3})


@pytest.mark.parametrize("start_method", ["fork", "forkserver"])
def test_forked_and_forkserver_children_join(ray_cluster, activate, tmp_path, start_method):
    from engine_shapes import VllmGenerationWorker

    torch_dir = tmp_path / "traces"
    nrlprof = activate(**torch_env(torch_dir, "*vllm*", "3:5"))
    worker = VllmGenerationWorker.remote(start_method)
    engine_pid = ray_cluster.get(worker.engine_pid.remote(), timeout=180)
    drive(ray_cluster, nrlprof, worker.generate.remote, range(1, 7))

    assert profiled_dirs(torch_dir) == [WORKER, ENGINE], "the forkserver itself joins no window"
    assert_engine_trace(torch_dir, ENGINE, engine_pid, {3, 4})
    assert_worker_trace_has_no_generation(torch_dir, WORKER, {3, 4})


def test_a_subprocess_python_child_joins(ray_cluster, activate, tmp_path):
    from engine_shapes import SglangGenerationWorker

    torch_dir = tmp_path / "traces"
    nrlprof = activate(**torch_env(torch_dir, "*sglang*", "2"))
    worker = SglangGenerationWorker.remote()
    engine_pid = ray_cluster.get(worker.engine_pid.remote(), timeout=180)
    drive(ray_cluster, nrlprof, worker.generate.remote, range(1, 4))

    engine = "sglang_generation_worker.python"  # no multiprocessing name, no title: its executable
    assert profiled_dirs(torch_dir) == ["sglang_generation_worker", engine]
    assert_engine_trace(torch_dir, engine, engine_pid, {2})
    assert_worker_trace_has_no_generation(torch_dir, "sglang_generation_worker", {2})


def wait_until_gone(pid: int) -> None:
    deadline = time.monotonic() + 60
    while Path(f"/proc/{pid}").exists() and "Z" not in Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1][:3]:
        if time.monotonic() > deadline:
            raise AssertionError(f"process {pid} still runs")
        time.sleep(0.05)


def test_a_child_killed_inside_a_window_costs_only_its_own_file(ray_cluster, activate, tmp_path):
    from engine_shapes import VllmGenerationWorker

    torch_dir, began = tmp_path / "traces", time.time()
    nrlprof = activate(**torch_env(torch_dir, "*vllm*", "2:4"))
    worker = VllmGenerationWorker.remote("spawn")
    engine_pid = ray_cluster.get(worker.engine_pid.remote(), timeout=180)
    for step in (1, 2):
        nrlprof.step(step)
        ray_cluster.get(worker.generate.remote(step), timeout=300)
    os.kill(engine_pid, signal.SIGKILL)
    wait_until_gone(engine_pid)
    waited = time.monotonic()
    for step in (3, 4):
        nrlprof.step(step)
        ray_cluster.get(worker.pid.remote(), timeout=300)
    nrlprof.finish()
    assert time.monotonic() - waited < 60, "a dead child is not waited for"

    assert profiled_dirs(torch_dir) == [WORKER]
    (trace_path,) = traces_under(torch_dir / WORKER)
    assert marker_steps(load_trace(trace_path), "ProfilerStep#") == {2, 3}
    (record,) = records_of(ray_cluster, ENGINE, began)
    assert (record["status"], record["pid"], record["files"]) == ("exited", engine_pid, [])
    assert record["steps"][0] == 2 and "killed" in record["message"]
    (worker_record,) = records_of(ray_cluster, WORKER, began)
    assert worker_record["status"] == "ok"


def test_children_of_unmatched_workers_and_opted_out_children_are_untouched(ray_cluster, activate, tmp_path):
    from engine_shapes import VllmGenerationWorker

    torch_dir = tmp_path / "traces"
    nrlprof = activate(**torch_env(torch_dir, "*vllm*", "2"))
    unmatched = VllmGenerationWorker.options(runtime_env={"env_vars": {"NRL_PROFILE_DISABLE": "1"}}).remote("spawn")
    opted_out = VllmGenerationWorker.remote("spawn", {"NRL_PROFILE_DISABLE": "1"})
    probes = ray_cluster.get([unmatched.probe.remote(), opted_out.probe.remote()], timeout=180)
    drive(ray_cluster, nrlprof, lambda s: [unmatched.generate.remote(s), opted_out.generate.remote(s)], range(1, 4))

    assert (probes[0]["joined"], probes[0]["channel"]) == (False, False), "nothing of nrlprof reaches it"
    assert probes[1]["channel"] and not probes[1]["joined"]
    assert profiled_dirs(torch_dir) == [WORKER], "only the matched worker itself"


def test_actors_created_by_a_child_are_engine_children_of_the_worker(ray_cluster, activate, tmp_path):
    from engine_shapes import VllmRayGenerationWorker

    torch_dir, began = tmp_path / "traces", time.time()
    nrlprof = activate(**torch_env(torch_dir, "*vllm*", "2:4"))
    worker = VllmRayGenerationWorker.remote(2)
    tp_pids = set(ray_cluster.get(worker.tensor_parallel_pids.remote(), timeout=300))
    drive(ray_cluster, nrlprof, worker.generate.remote, range(1, 6))

    tp = "vllm_ray_generation_worker.ray_worker_proc"
    assert profiled_dirs(torch_dir) == ["vllm_ray_generation_worker", tp]
    (engine,) = records_of(ray_cluster, "vllm_ray_generation_worker.engine_core_0", began)
    assert engine["status"] == "skipped" and "not imported torch" in engine["message"], "it does no torch work"
    for record in records_of(ray_cluster, tp, began):
        assert record["node_ip"] and record["pid"] in tp_pids, "recorded in the Ray session's manifests"
    assert sorted(p.name for p in (torch_dir / tp).iterdir()) == ["0", "1"], "ranked by creation order"
    traces = [load_trace(p) for p in traces_under(torch_dir / tp)]
    assert {t["nrlprof"]["pid"] for t in traces} == tp_pids
    for trace in traces:
        assert trace["nrlprof"]["worker"] == tp
        assert marker_steps(trace, "tp.execute.") == {2, 3}
        assert marker_steps(trace, "ProfilerStep#") == {2, 3}


def test_an_engines_own_profiler_switch_records_its_process_and_nrlprof_stands_down(ray_cluster, activate, tmp_path):
    from engine_shapes import ProfiledVllmWorker

    torch_dir, engine_dir, began = tmp_path / "traces", tmp_path / "vllm", time.time()
    nrlprof = activate(**torch_env(torch_dir, "*vllm*", "2:4"))
    worker = ProfiledVllmWorker.options(runtime_env={"env_vars": {"VLLM_TORCH_PROFILER_DIR": str(engine_dir)}}).remote()
    engine_pid = ray_cluster.get(worker.engine_pid.remote(), timeout=180)
    drive(ray_cluster, nrlprof, worker.generate.remote, range(1, 6))

    assert profiled_dirs(torch_dir) == ["profiled_vllm_worker"], "no second torch profiler in the engine's process"
    (record,) = records_of(ray_cluster, "profiled_vllm_worker.llm", began)
    assert (record["backend"], record["steps"], record["status"]) == ("torch", [2, 3], "ok")
    assert "VLLM_TORCH_PROFILER_DIR" in record["message"]
    (engine_trace,) = [Path(f) for f in record["files"]]
    assert engine_trace.parent == engine_dir and str(engine_pid) in engine_trace.name
    assert marker_steps(load_trace(engine_trace), "engine.generate.") == {2, 3}
