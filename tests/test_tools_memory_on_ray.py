"""The memory backend's own output on a real Ray cluster (CPU), read back: growth found, counters merged."""

from __future__ import annotations

import itertools
import json

from nrlprof.tools.figures.memory import memory_findings, memory_summary
from nrlprof.tools.merge.timeline import merge_traces
from nrlprof.tools.read.inputs import find_inputs
from nrlprof.tools.render.memory_text import render_memory_text


def test_growing_worker_is_named_and_its_counters_sit_on_its_profiler_steps(ray_cluster, activate, tmp_path):
    from worker_shapes import LeakyPolicyWorker, SteadyPolicyWorker

    memory_dir, torch_dir = tmp_path / "memory", tmp_path / "torch"
    nrlprof = activate(
        NRL_MEMORY_PROFILE_WORKER_PATTERNS="*policy*",
        NRL_MEMORY_PROFILE_STEP_RANGE="2:6",
        NRL_MEMORY_PROFILE_DIR=str(memory_dir),
        NRL_TORCH_PROFILE_WORKER_PATTERNS="leaky*",
        NRL_TORCH_PROFILE_STEP_RANGE="2:6",
        NRL_TORCH_PROFILE_DIR=str(torch_dir),
        NRL_STEP_ANATOMY_DIR=str(tmp_path / "anatomy"),
    )
    leaky, steady = LeakyPolicyWorker.remote(), SteadyPolicyWorker.remote()
    for step in range(1, 8):
        nrlprof.step(step)
        ray_cluster.get([leaky.train.remote(step), steady.train.remote(step)], timeout=300)
    nrlprof.finish()

    model = memory_summary(find_inputs([memory_dir]))
    assert model["skipped"] == []
    # the driver runs the windows too: its figures are there, under no rank
    assert sorted(model["workers"]) == ["controller", "leaky_policy_worker", "steady_policy_worker"]
    assert list(model["workers"]["controller"]) == ["-"]
    assert sorted(model["workers"]["leaky_policy_worker"]["0"]["steps"], key=int) == ["2", "3", "4", "5"]
    findings = memory_findings(model)
    assert len(findings) == 1 and findings[0].startswith("leaky_policy_worker rank 0 grows ~"), findings
    slope = int(findings[0].split("~")[1].split(" ")[0])
    assert 35 <= slope <= 45 and findings[0].endswith("MB/step (steps 2-5), host RSS")
    assert "steady_policy_worker rank 0" in render_memory_text(model, findings)

    merged = tmp_path / "merged.json"
    result = merge_traces([torch_dir, memory_dir], merged)
    events = json.loads(merged.read_text())["traceEvents"]
    names = {e["pid"]: e["args"]["name"] for e in events if e.get("ph") == "M" and e["name"] == "process_name"}
    rss = [e for e in events if e.get("ph") == "C" and e["name"] == "host RSS"]
    leaky_rss = [e for e in rss if names[e["pid"]].startswith("leaky_policy_worker rank 0")]
    steps = {int(e["name"].split("#")[1]): e["ts"] + e["dur"] for e in events
             if e.get("ph") == "X" and str(e.get("name")).startswith("ProfilerStep#")}  # fmt: skip
    # the figures carry the wall clock of each step's end: the counters sit at the ends of the ProfilerSteps
    placed = sorted(e["ts"] for e in leaky_rss)
    assert len(placed) == 4
    assert all(abs(ts - steps[n]) < 100_000 for ts, n in zip(placed, (2, 3, 4, 5), strict=True)), (placed, steps)
    values = [e["args"]["MB"] for e in sorted(leaky_rss, key=lambda e: e["ts"])]
    assert all(35 <= b - a <= 45 for a, b in itertools.pairwise(values)), values
    # the untraced sibling has its own process in the timeline, placed by its own clock
    assert result.unplaced == [] and result.skipped == []
    assert len([e for e in rss if names[e["pid"]].startswith("steady")]) == 4
