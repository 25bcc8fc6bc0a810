"""Windows asked for in an armed job reach the Python processes the selected workers started, on a real Ray cluster
with the real torch profiler: a spawned and a forked EngineCore and a `subprocess` engine of workers no pattern
matched (their processes joined with no plan of their own and learn it with the window), and the `subprocess` engine
of a worker matched for a planned window (it adds the backend asked for); a worker the request does not select
keeps its processes out."""

from __future__ import annotations

import json
from pathlib import Path

from helpers.on_demand import armed_runtime_env, ask, asked_records, asked_steps
from helpers.trace_reading import load_trace, marker_steps, traces_under

from nrlprof.config.requests import CLOSED, Request

VLLM = "vllm_generation_worker"
VLLM_ENGINE = f"{VLLM}.engine_core_0"
SGLANG = "sglang_generation_worker"
SGLANG_ENGINE = f"{SGLANG}.python"  # no multiprocessing name, no title: its executable


def engine_trace(torch_dir: Path, engine: str, rank: int, pid: int, steps: set[int]) -> None:
    """The engine's own trace of exactly those steps, under its worker's name and rank."""
    traces = [load_trace(p) for p in traces_under(torch_dir / engine / str(rank))]
    (trace,) = [t for t in traces if marker_steps(t, "ProfilerStep#") == steps]
    assert (trace["nrlprof"]["worker"], trace["nrlprof"]["pid"]) == (engine, pid)
    assert marker_steps(trace, "engine.generate.") == steps


def memory_steps(memory_dir: Path, name: str, rank: int) -> set[int]:
    (figures,) = (memory_dir / name / str(rank)).glob("*.memory.json")
    return {row["step"] for row in json.loads(figures.read_text())["steps"]}


def test_a_window_asked_for_reaches_the_processes_the_selected_workers_started(ray_cluster, activate, tmp_path):
    from engine_shapes import SglangGenerationWorker, VllmGenerationWorker

    torch_dir, memory_dir = tmp_path / "traces", tmp_path / "memory"
    nrlprof = activate(
        NRL_PROFILE_ON_DEMAND="1",
        NRL_MEMORY_PROFILE_DIR=str(memory_dir),
        NRL_TORCH_PROFILE_DIR=str(torch_dir),
        NRL_TORCH_PROFILE_WORKER_PATTERNS="*sglang*",
        NRL_TORCH_PROFILE_RANKS="0",
        NRL_TORCH_PROFILE_STEP_RANGE="2",
    )
    armed = armed_runtime_env(nrlprof)
    workers = [VllmGenerationWorker.options(runtime_env=armed).remote(method) for method in ("spawn", "fork")]
    workers += [SglangGenerationWorker.options(runtime_env=armed).remote() for _rank in (0, 1)]
    pids = ray_cluster.get([w.engine_pid.remote() for w in workers], timeout=180)
    vllm_pids, sglang_pids = pids[:2], pids[2:]

    def generate(step: int) -> None:
        assert ray_cluster.get([w.generate.remote(step) for w in workers], timeout=300) == pids

    for step in (1, 2, 3):
        nrlprof.step(step)
        generate(step)
    job = ray_cluster.get_runtime_context().get_job_id()
    torch_reply, step = ask(nrlprof, generate, Request(job, "torch", ("*vllm*", "*sglang*"), 2), 4)
    memory_reply, step = ask(nrlprof, generate, Request(job, "memory", ("*sglang*",), 1), step)
    nrlprof.step(step)
    generate(step)
    nrlprof.finish()

    assert (torch_reply.state, memory_reply.state) == (CLOSED, CLOSED), (torch_reply, memory_reply)
    steps = asked_steps(torch_reply)
    assert len(steps) == 2 and min(steps) >= 4
    for rank in (0, 1):
        engine_trace(torch_dir, VLLM_ENGINE, rank, vllm_pids[rank], steps)
        engine_trace(torch_dir, SGLANG_ENGINE, rank, sglang_pids[rank], steps)
        (vllm_trace,) = traces_under(torch_dir / VLLM / str(rank))
        assert marker_steps(load_trace(vllm_trace), "engine.generate.") == set(), "the work is the engine's"
    engine_trace(torch_dir, SGLANG_ENGINE, 0, sglang_pids[0], {2})
    assert len(traces_under(torch_dir / SGLANG_ENGINE / "0")) == 2, "its planned window, then the one asked for"

    children = {(VLLM_ENGINE, 0), (VLLM_ENGINE, 1), (SGLANG_ENGINE, 0), (SGLANG_ENGINE, 1)}
    records = asked_records(ray_cluster, torch_reply.records[0].asked)
    by_child = {(r["worker"], r["rank"]): r for r in records if (r["worker"], r["rank"]) in children}
    assert set(by_child) == children
    for (name, rank), record in by_child.items():
        assert record["pid"] == (vllm_pids if name == VLLM_ENGINE else sglang_pids)[rank]
        assert (record["status"], record["steps"], record["window"]) == ("ok", sorted(steps), torch_reply.window)
    answered = {(r.worker, r.rank) for r in torch_reply.records}
    assert children <= answered, "the command's answer names the children's files too"

    for rank in (0, 1):
        assert memory_steps(memory_dir, SGLANG_ENGINE, rank) == asked_steps(memory_reply)
    assert not (memory_dir / VLLM_ENGINE).exists(), "workers the request did not select keep their processes out"


def test_a_window_asked_for_reaches_the_actors_a_selected_workers_process_created(ray_cluster, activate, tmp_path):
    """vLLM V2's shape, armed: the EngineCore process the worker spawned joined Ray itself and created the
    tensor-parallel actors before anything was asked; the window reaches them, named as a planned window names them."""
    from engine_shapes import VllmRayGenerationWorker

    torch_dir = tmp_path / "traces"
    nrlprof = activate(NRL_PROFILE_ON_DEMAND="1", NRL_TORCH_PROFILE_DIR=str(torch_dir))
    worker = VllmRayGenerationWorker.options(runtime_env=armed_runtime_env(nrlprof)).remote(2)
    tp_pids = set(ray_cluster.get(worker.tensor_parallel_pids.remote(), timeout=300))

    def generate(step: int) -> None:
        assert set(ray_cluster.get(worker.generate.remote(step), timeout=300)) == tp_pids

    for step in (1, 2):
        nrlprof.step(step)
        generate(step)
    job = ray_cluster.get_runtime_context().get_job_id()
    reply, step = ask(nrlprof, generate, Request(job, "torch", ("*vllm*",), 2), 3)
    reply_again, step = ask(nrlprof, generate, Request(job, "torch", ("*vllm*",), 1), step)
    nrlprof.step(step)
    generate(step)
    nrlprof.finish()

    assert (reply.state, reply_again.state) == (CLOSED, CLOSED), (reply, reply_again)
    tp = "vllm_ray_generation_worker.ray_worker_proc"
    assert sorted(p.name for p in (torch_dir / tp).iterdir()) == ["0", "1"], "ranked by creation order"
    for rank in (0, 1):
        traces = [load_trace(p) for p in traces_under(torch_dir / tp / str(rank))]
        assert sorted(len(marker_steps(t, "tp.execute.")) for t in traces) == [1, 2], "both windows, no other"
        for trace in traces:
            assert trace["nrlprof"]["worker"] == tp and trace["nrlprof"]["pid"] in tp_pids
            (asked,) = [r for r in (reply, reply_again) if marker_steps(trace, "tp.execute.") == asked_steps(r)]
            assert marker_steps(trace, "ProfilerStep#") == asked_steps(asked)
    records = asked_records(ray_cluster, reply.records[0].asked)
    tp_records = sorted((r["rank"], r["status"], r["pid"] in tp_pids) for r in records if r["worker"] == tp)
    assert tp_records == [(0, "ok", True), (1, "ok", True)]
    assert {(r.worker, r.rank) for r in reply.records} >= {(tp, 0), (tp, 1)}, "the answer names their files"
