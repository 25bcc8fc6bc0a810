"""Memory figures and the step anatomy in the summary's JSON, text and HTML report."""

from __future__ import annotations

import json
import xml.etree.ElementTree as ElementTree
from pathlib import Path

from nrlprof.tools.figures.model import Summary
from nrlprof.tools.figures.summarize import summarize
from nrlprof.tools.render.anatomy_svg import anatomy_svg
from nrlprof.tools.render.html import render_html

ANATOMY = {
    "steps": {
        "1": {
            "wall_ms": 100.0,
            "phases": [
                {"worker": "vllm_generation_worker", "method": "generate", "start_ms": 0.0, "dur_ms": 60.0,
                 "calls": 2, "ranks": [0, 1], "slowest_rank": 1, "spread_ms": 5.0},
                {"worker": "dtensor_policy_worker", "method": "train", "start_ms": 60.0, "dur_ms": 40.0,
                 "calls": 2, "ranks": [0, 1], "slowest_rank": 0, "spread_ms": 1.0},
            ],
            "idle_ms": {"vllm_generation_worker": 40.0, "dtensor_policy_worker": 60.0},
            "critical_path": [{"worker": "vllm_generation_worker", "method": "generate"}],
        },
        "2": {"wall_ms": 50.0, "phases": [], "idle_ms": {}, "critical_path": []},
    }
}  # fmt: skip


def test_anatomy_swimlanes_are_valid_svg_with_one_lane_per_group_and_hover_text():
    svg = anatomy_svg(ANATOMY)
    root = ElementTree.fromstring(svg)
    bars = [e for e in root.iter() if e.tag.endswith("rect")]
    assert len(bars) == 2
    titles = [e.text for e in root.iter() if e.tag.endswith("title")]
    assert any("vllm_generation_worker.generate 60.0 ms" in t for t in titles)
    widths = sorted(float(b.get("width")) for b in bars)
    assert abs(widths[1] / widths[0] - 60 / 40) < 0.01, "bar lengths are proportional to the phases"
    assert anatomy_svg({"steps": {}}) == ""


def test_report_has_the_anatomy_and_memory_sections(tmp_path):
    memory = {
        "workers": {},
        "snapshots": [],
        "skipped": [],
        "findings": ["policy rank 0 grows ~40 MB/step (steps 2-5)"],
    }
    html = render_html(Summary(tmp_path, sections={"anatomy": ANATOMY, "memory": memory}))
    assert "Step anatomy" in html and "Memory per step" in html
    assert "grows ~40 MB/step" in html


def test_a_directory_with_only_memory_figures_is_summarised(tmp_path):
    folder = tmp_path / "policy" / "0"
    folder.mkdir(parents=True)
    steps = [
        {"step": s, "wall_ms": 5.0, "t_us": 1e15 + s, "host_rss_mb": 100.0 + 40 * s, "host_peak_mb": 150.0 + 40 * s}
        for s in (2, 3, 4, 5)
    ]
    document = {"nrlprof": {"worker": "policy", "rank": 0, "window": "2-5", "pid": 7, "host": "h"}, "steps": steps}
    (folder / "policy.rank0.steps2-5.7.memory.json").write_text(json.dumps(document))
    summary = summarize(Path(tmp_path)).to_json()
    assert summary["memory"]["findings"] and "grows ~40 MB/step" in summary["memory"]["findings"][0]
    assert "anatomy" not in summary


def test_diff_compares_the_anatomy_phases_and_memory_of_two_runs(tmp_path, capsys):
    import copy

    from nrlprof.tools.figures.compare import compare
    from nrlprof.tools.render.console import render_diff

    slower = copy.deepcopy(ANATOMY)
    slower["steps"]["1"]["phases"][1]["dur_ms"] = 70.0
    slower["steps"]["1"]["wall_ms"] = 130.0
    memory = {"workers": {}, "snapshots": [], "skipped": []}
    a = {"workers": [], "anatomy": ANATOMY, "memory": memory}
    b = {"workers": [], "anatomy": slower, "memory": memory}
    result = compare(a, b, tmp_path / "a.json", tmp_path / "b.json")
    train = result["anatomy"]["steps"]["1"]["phases"]["dtensor_policy_worker.train"]
    assert (train["a"], train["b"], train["change"], train["change_pct"]) == (40.0, 70.0, 30.0, 75.0)
    assert result["anatomy"]["steps"]["1"]["wall_ms"]["change"] == 30.0
    render_diff(result)
    assert "most changed phase dtensor_policy_worker.train 40.0 -> 70.0 ms (+30.0)" in capsys.readouterr().out


def test_merge_and_summary_add_the_step_anatomy_of_unprofiled_workers(ray_cluster, activate, tmp_path):
    import gzip
    import time

    from workload import DTensorPolicyWorker, RewardWorker

    from nrlprof.tools.merge.timeline import merge_traces

    nrlprof = activate(
        NRL_TORCH_PROFILE_WORKER_PATTERNS="*policy*",
        NRL_TORCH_PROFILE_STEP_RANGE="2",
        NRL_TORCH_PROFILE_DIR=str(tmp_path / "traces"),
        NRL_STEP_ANATOMY_DIR=str(tmp_path / "step_anatomy"),
    )
    policy, reward = DTensorPolicyWorker.remote(), RewardWorker.remote()
    for step in (1, 2, 3):
        nrlprof.step(step)
        ray_cluster.get([policy.train.remote(step), reward.score.remote(step)], timeout=300)
    time.sleep(1.5)  # Ray workers report their task events every second
    nrlprof.finish()

    summary = summarize(tmp_path).to_json()
    groups = {p["worker"] for s in summary["anatomy"]["steps"].values() for p in s["phases"]}
    assert {"dtensor_policy_worker", "reward_worker"} <= groups, "the unprofiled reward worker is in the anatomy"
    output = tmp_path / "timeline.json.gz"
    result = merge_traces([tmp_path], output)
    assert result.anatomy_events > 0
    events = json.loads(gzip.decompress(output.read_bytes()))["traceEvents"]
    process_names = {e["args"]["name"] for e in events if e.get("name") == "process_name"}
    assert any(name.startswith("anatomy: reward_worker") for name in process_names)
