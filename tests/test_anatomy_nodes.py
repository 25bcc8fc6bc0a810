"""Step anatomy on a Ray cluster of two nodes: both nodes' workers, their node ids, and the clock alignment.

All nodes of `ray.cluster_utils.Cluster` share this machine's clock, so the true offset is 0; a skewed
clock is then made by shifting what the other node's processes stamped (the worker's RUNNING and its
spans) while the driver's own stamps (SUBMITTED_TO_WORKER and FINISHED, recorded by the calls' owner)
stay, and the model must find the shift again within its own bound.
"""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest
import ray

from nrlprof.anatomy.files import ACTORS_FILE, META_FILE, STEPS_FILE, TASKS_FILE, append_lines, latest_run, read_lines
from nrlprof.tools.figures.anatomy import anatomy_summary

STEPS = 5
SAMPLE_S = 0.1
LEARN_S = 0.1
SKEW_MS = 3000
# Stamped by the worker that ran the call, on its node's clock; the rest by the driver.
WORKER_STAMPS = ("start_ns", "end_ns", "task_start_ns", "task_end_ns", "running_ns")


@pytest.fixture(scope="module")
def two_nodes(on_multi_node):
    """The shared multi-node cluster's head (resource `head`) and the worker node with resource `other`."""
    return {"head": on_multi_node.head, "other": on_multi_node.workers[0]}


@ray.remote(num_cpus=0)
class Sampler:
    def sample(self, seconds: float) -> str:
        time.sleep(seconds)
        return ray.get_runtime_context().get_node_id()


@ray.remote(num_cpus=0)
class Learner:
    def learn(self, seconds: float) -> str:
        time.sleep(seconds)
        return ray.get_runtime_context().get_node_id()


@pytest.fixture(scope="module")
def recorded(two_nodes, tmp_path_factory):
    """One job: samplers on the head node, learners on the other; the anatomy directory and the nodes."""
    import nrlprof

    directory = tmp_path_factory.mktemp("anatomy")
    saved = dict(os.environ)
    os.environ.update(NRL_STEP_ANATOMY="1", NRL_STEP_ANATOMY_DIR=str(directory))
    nrlprof.disable()
    try:
        nrlprof.activate_from_env()
        samplers = [Sampler.options(resources={"head": 1}).remote() for _ in range(2)]
        learners = [Learner.options(resources={"other": 1}).remote() for _ in range(2)]
        ray.get([a.__ray_ready__.remote() for a in samplers + learners])
        ran_on: dict[str, set[str]] = {"sample": set(), "learn": set()}
        for step in range(1, STEPS + 1):
            nrlprof.step(step)
            ran_on["sample"] |= set(ray.get([s.sample.remote(SAMPLE_S) for s in samplers]))
            ran_on["learn"] |= set(ray.get([learner.learn.remote(LEARN_S) for learner in learners]))
        nrlprof.finish()
    finally:
        nrlprof.disable()
        os.environ.clear()
        os.environ.update(saved)
    return {"dir": directory, "ran_on": ran_on, **two_nodes}


def test_both_nodes_workers_with_their_node_ids_and_offsets_within_the_bound(recorded):
    head, other = recorded["head"], recorded["other"]
    assert head != other
    # Ray says where each call ran; the records must say the same.
    assert recorded["ran_on"] == {"sample": {head}, "learn": {other}}
    model = anatomy_summary(recorded["dir"])
    assert sorted(model["steps"], key=int) == [str(s) for s in range(1, STEPS + 1)]
    for label, step in model["steps"].items():
        phases = {(p["worker"], p["method"]): p for p in step["phases"]}
        assert set(phases) == {("sampler", "sample"), ("learner", "learn")}, label
        assert phases[("sampler", "sample")]["ranks"] == [0, 1]
        assert phases[("learner", "learn")]["ranks"] == [0, 1]
        assert phases[("learner", "learn")]["start_ms"] >= phases[("sampler", "sample")]["start_ms"]
    tasks = read_lines(latest_run(recorded["dir"]) / TASKS_FILE)
    nodes = {t["method"]: set() for t in tasks if t["kind"] == "call"}
    for task in tasks:
        if task["kind"] == "call":
            nodes[task["method"]].add(task["node_id"])
    assert nodes["sample"] == {head} and nodes["learn"] == {other}
    offsets, bounds = model["clock_offsets_ms"], model["clock_offset_bounds_ms"]
    assert set(offsets) == {head, other} and set(bounds) == {head, other}
    assert offsets[head] == 0 and bounds[head] == 0  # the driver's own node
    # One clock: the true offset is 0, and must lie within the stated bound (a bound of a few ms at most).
    assert abs(offsets[other]) <= bounds[other] < 50


def shifted_copy(run: Path, target: Path, node: str, shift_ns: int) -> Path:
    """The run as a clock `shift_ns` ahead on `node` would have recorded it."""
    target.mkdir(parents=True)
    for name in (META_FILE, STEPS_FILE, ACTORS_FILE):
        append_lines(target / name, read_lines(run / name))
    tasks = []
    for task in read_lines(run / TASKS_FILE):
        if task.get("node_id") == node:
            task = {**task, **{key: task[key] + shift_ns for key in WORKER_STAMPS if task.get(key)}}
        tasks.append(task)
    append_lines(target / TASKS_FILE, tasks)
    return target


def test_a_skewed_clock_on_one_node_is_found_within_the_bound(recorded, tmp_path):
    other = recorded["other"]
    truth = anatomy_summary(recorded["dir"])
    skewed_run = shifted_copy(
        latest_run(recorded["dir"]), tmp_path / "run-20300101T000000Z-1", other, SKEW_MS * 1_000_000
    )
    skewed = anatomy_summary(skewed_run)
    bound = skewed["clock_offset_bounds_ms"][other]
    assert bound == pytest.approx(truth["clock_offset_bounds_ms"][other], abs=1e-6)
    assert abs(skewed["clock_offsets_ms"][other] - SKEW_MS) <= bound
    # Aligned, the other node's phases land where they did on the shared clock (within the bound).
    for label, step in truth["steps"].items():
        before = {(p["worker"], p["method"]): p for p in step["phases"]}
        after = {(p["worker"], p["method"]): p for p in skewed["steps"][label]["phases"]}
        assert set(after) == set(before), label
        for key, phase in before.items():
            assert after[key]["start_ms"] == pytest.approx(phase["start_ms"], abs=bound + 1e-6), (label, key)
            assert after[key]["dur_ms"] == pytest.approx(phase["dur_ms"], abs=1e-6), (label, key)
