"""Windows asked for in an armed job, in the worker shapes real RL frameworks use, on a real Ray cluster with the real
torch profiler: threaded and async actors, and a worker driven by a Ray compiled graph. Each selected worker's trace
holds the work of exactly the steps the window covered."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from helpers.on_demand import ask, asked_steps
from helpers.trace_reading import event_threads, load_trace, marker_steps, traces_under

from nrlprof.config.requests import CLOSED, Request


@pytest.fixture
def torch_dir(tmp_path):
    return tmp_path / "traces"


def armed(activate, torch_dir: Path, **variables: str):
    return activate(NRL_PROFILE_ON_DEMAND="1", NRL_TORCH_PROFILE_DIR=str(torch_dir), **variables)


def test_threaded_and_async_actors_in_a_window_asked_for(ray_cluster, activate, torch_dir):
    from worker_shapes import AsyncRewardWorker, ThreadedRolloutWorker

    anatomy = torch_dir.parent / "anatomy"
    nrlprof = armed(activate, torch_dir, NRL_STEP_ANATOMY="1", NRL_STEP_ANATOMY_DIR=str(anatomy))
    threaded, asynchronous = ThreadedRolloutWorker.remote(), AsyncRewardWorker.remote()

    def work(step: int) -> None:
        ray_cluster.get([threaded.rollout.remote(step), asynchronous.score.remote(step)], timeout=300)

    for step in (1, 2):
        nrlprof.step(step)
        work(step)
    job = ray_cluster.get_runtime_context().get_job_id()
    request = Request(job, "torch", ("*rollout*", "*reward*"), 2)
    reply, step = ask(nrlprof, work, request, 3)
    nrlprof.step(step)
    work(step)
    nrlprof.finish()

    assert (reply.state, reply.answered) == (CLOSED, 2), reply
    steps = asked_steps(reply)
    assert len(steps) == 2
    (threaded_trace,) = traces_under(torch_dir / "threaded_rollout_worker")
    (async_trace,) = traces_under(torch_dir / "async_reward_worker")
    trace = load_trace(threaded_trace)
    assert marker_steps(trace, "threaded.rollout.") == steps
    assert event_threads(trace, "threaded.rollout.").isdisjoint(event_threads(trace, "ProfilerStep#"))
    assert marker_steps(load_trace(async_trace), "async.score.") == steps
    (marks,) = anatomy.rglob("steps.jsonl")
    gate_work = [json.loads(line).get("profiler", "") for line in marks.read_text().splitlines()]
    started = f"start torch {min(steps)}-{max(steps)} (asked for: request {request.id})"
    assert [w for w in gate_work if w.startswith("start torch")] == [started], "the step anatomy marks it asked for"


def test_a_compiled_graph_worker_in_a_window_asked_for(ray_cluster, activate, torch_dir):
    from ray.dag import InputNode
    from worker_shapes import CompiledGraphWorker

    nrlprof = armed(activate, torch_dir)
    worker = CompiledGraphWorker.remote()
    ray_cluster.get(worker.pid.remote())
    with InputNode() as step_input:
        graph = worker.forward.bind(step_input)
    compiled = graph.experimental_compile()

    def work(step: int) -> None:
        assert ray_cluster.get(compiled.execute(step), timeout=300) == step

    try:
        for step in (1, 2):
            nrlprof.step(step)
            work(step)
        job = ray_cluster.get_runtime_context().get_job_id()
        reply, step = ask(nrlprof, work, Request(job, "torch", ("*compiled*",), 2), 3)
        nrlprof.step(step)
        work(step)
        nrlprof.finish()
    finally:
        compiled.teardown()
    assert reply.state == CLOSED, reply
    (trace,) = traces_under(torch_dir / "compiled_graph_worker")
    assert marker_steps(load_trace(trace), "compiled.forward.") == asked_steps(reply)


@pytest.mark.parametrize("job_settings", [True, False], ids=["job-settings", "no-job-settings"])
def test_nrlprofs_own_ranges_in_a_window_asked_for(ray_cluster, activate, torch_dir, job_settings):
    """A worker no pattern matched at its start: in the window asked for, its `nrlprof.annotate` ranges and its
    remote methods' ranges carry the window's steps, as in a planned window. A worker that had no nrlprof settings
    at its start (nothing ran at its start) has its annotate ranges; its methods were never wrapped."""
    import re

    from helpers.on_demand import armed_runtime_env
    from workload import ActorRolloutRefWorker

    nrlprof = armed(activate, torch_dir)
    runtime_env = armed_runtime_env(nrlprof) if job_settings else {}
    worker = ActorRolloutRefWorker.options(runtime_env=runtime_env).remote()

    def work(step: int) -> None:
        ray_cluster.get(worker.update_actor.remote(step), timeout=300)

    for step in (1, 2):
        nrlprof.step(step)
        work(step)
    job = ray_cluster.get_runtime_context().get_job_id()
    reply, step = ask(nrlprof, work, Request(job, "torch", ("*rollout*",), 2), 3)
    nrlprof.step(step)
    work(step)
    nrlprof.finish()

    assert reply.state == CLOSED, reply
    steps = sorted(asked_steps(reply))
    (trace,) = traces_under(torch_dir / "actor_rollout_ref_worker")
    names = [str(e.get("name")) for e in load_trace(trace)["traceEvents"]]

    def range_steps(label: str) -> list[int]:
        pattern = re.compile(re.escape(label) + r" \[step (\d+)\]$")
        return sorted(int(m.group(1)) for name in names if (m := pattern.match(name)))

    assert range_steps("actor/compute_adv") == steps, "nrlprof.annotate"
    assert range_steps("actor_rollout_ref_worker.update_actor") == (steps if job_settings else [])
    assert marker_steps(load_trace(trace), "update.") == set(steps)


def test_the_jobs_card_stays_fresh_while_the_controller_readies_workers(ray_cluster, activate, torch_dir, monkeypatch):
    """Readying workers for a window (their profiler's start-up: seconds, more on a GPU) holds the listener's thread;
    the card `nrlprof capture` reads to tell a live job from a gone one is rewritten all the same."""
    import time

    from nrlprof.config.requests import HEARTBEAT_S
    from nrlprof.process import state
    from nrlprof.runtime.on_demand.listener import Listener
    from nrlprof.tools.capture import client

    busy = {"until": 0.0}
    tick = Listener.tick

    def slow_tick(self):  # a request being readied: the thread is held
        while time.monotonic() < busy["until"]:
            time.sleep(0.05)
        tick(self)

    monkeypatch.setattr(Listener, "tick", slow_tick)
    nrlprof = armed(activate, torch_dir)
    nrlprof.step(1)
    job = ray_cluster.get_runtime_context().get_job_id()
    assert state.session.listener is not None
    busy["until"] = time.monotonic() + 5 * HEARTBEAT_S
    seen = set()
    while time.monotonic() < busy["until"]:
        seen |= {card.at for card in client.armed_jobs() if card.job == job}
        time.sleep(HEARTBEAT_S / 2)
    nrlprof.finish()
    assert len(seen) >= 3, f"the card was rewritten {len(seen)} time(s) in {5 * HEARTBEAT_S:.0f} s"
