"""Reading the memory backend's files: the per-step model, growth, snapshots' top allocations, merge counters, diff.

The figures files are written here in the memory backend's format (its own output on a real cluster is
read in test_tools_memory_on_ray.py); allocator snapshots, which need a GPU to record, are built by hand in
the format `torch.cuda.memory._dump_snapshot` writes, and checked against torch's own reader.
"""

from __future__ import annotations

import json
import pickle
import re
import xml.etree.ElementTree as ElementTree
from pathlib import Path

import pytest
from helpers.memory import host_steps, write_figures
from helpers.traces import BASE_NS, events_of, gpu_trace, write_json

from nrlprof.tools.figures.memory import memory_diff, memory_findings, memory_summary
from nrlprof.tools.merge.timeline import merge_traces
from nrlprof.tools.read.inputs import find_inputs
from nrlprof.tools.read.memory_snapshot import snapshot_top_allocations
from nrlprof.tools.render.memory_svg import memory_lane_svg
from nrlprof.tools.render.memory_text import render_memory_text

MB = 1 << 20


def cuda_steps(allocated: list[float], first: int = 2) -> list[dict]:
    return [
        {
            "step": first + i,
            "wall_ms": 50.0,
            "host_rss_mb": 2000.0,
            "host_peak_mb": 2010.0,
            "cuda": {
                "0": {"allocated_mb": value, "reserved_mb": value + 512, "peak_mb": value + 256},
                "1": {"allocated_mb": 100.0, "reserved_mb": 200.0, "peak_mb": 150.0},
            },
        }
        for i, value in enumerate(allocated)
    ]


# --- growth -------------------------------------------------------------------------------------------------------


def test_a_worker_growing_40_mb_a_step_reads_as_growing_and_its_flat_sibling_does_not(tmp_path):
    write_figures(tmp_path, "leaky_policy_worker", 0, host_steps([1000.0, 1043.0, 1078.0, 1121.0, 1160.0]))
    write_figures(tmp_path, "steady_policy_worker", 0, host_steps([1000.0, 1002.5, 998.0, 1001.0, 999.5]), pid=7)
    model = memory_summary(find_inputs([tmp_path]))
    assert model["skipped"] == []
    assert memory_findings(model) == ["leaky_policy_worker rank 0 grows ~40 MB/step (steps 2-6), host RSS"]


@pytest.mark.parametrize(
    ("rss", "growing"),
    [
        ([500.0, 503.0, 506.0, 509.0], False),  # 3 MB/step: a slow creep within noise
        ([500.0, 540.0, 541.0, 600.0], False),  # one step adds ~nothing: not growing at every step
        ([500.0, 520.0, 510.0, 560.0], False),  # one step shrinks
        ([500.0, 512.0, 518.0, 530.0], True),  # 10 MB/step, uneven but every step adds
        ([500.0, 540.0], False),  # one step of change says nothing
    ],
)
def test_growth_tolerates_noise(tmp_path, rss, growing):
    write_figures(tmp_path, "worker", 3, host_steps(rss, first=10))
    findings = memory_findings(memory_summary(find_inputs([tmp_path])))
    assert bool(findings) == growing, findings


def test_cuda_allocated_growth_is_found_per_window_and_named(tmp_path):
    write_figures(tmp_path, "policy", 1, cuda_steps([1000.0, 1100.0, 1200.0], first=5), pid=11)
    write_figures(tmp_path, "policy", 1, cuda_steps([1300.0, 1300.0, 1300.0], first=20), pid=11)
    model = memory_summary(find_inputs([tmp_path]))
    assert memory_findings(model) == ["policy rank 1 grows ~100 MB/step (steps 5-7), CUDA allocated"]
    step = model["workers"]["policy"]["1"]["steps"]["6"]
    assert step["cuda_allocated_mb"] == 1100.0 + 100.0  # summed over the two devices
    assert step["cuda_reserved_mb"] == 1612.0 + 200.0
    assert step["cuda_peak_mb"] == 1356.0 + 150.0
    assert step["cuda_devices"]["0"] == {"allocated_mb": 1100.0, "reserved_mb": 1612.0, "peak_mb": 1356.0}
    assert step["host_rss_mb"] == 2000.0 and step["pid"] == 11
    assert [w["window"] for w in model["workers"]["policy"]["1"]["windows"]] == ["20-22", "5-7"]


def test_controller_has_no_rank(tmp_path):
    write_figures(tmp_path, "controller", None, host_steps([100.0, 200.0, 300.0]))
    model = memory_summary(find_inputs([tmp_path]))
    assert list(model["workers"]["controller"]) == ["-"]
    assert memory_findings(model) == ["controller grows ~100 MB/step (steps 2-4), host RSS"]


# --- snapshots ------------------------------------------------------------------------------------------------------

TORCH_LINEAR = {"filename": "/venv/lib/python3.11/site-packages/torch/nn/modules/linear.py", "line": 125,
                "name": "forward"}  # fmt: skip
CPP = {"filename": "??", "line": 0, "name": "c10::cuda::CUDACachingAllocator::malloc"}
SEGMENT_ADDRESS = 0x7F0000000000


def frame(filename: str, line: int, name: str) -> dict:
    return {"filename": filename, "line": line, "name": name}


def fixture_snapshot() -> dict:
    """Weights (100 MB) live throughout; activations (300 MB) and a loss buffer (200 MB) allocated and freed;
    an optimizer state (50 MB) allocated after them and still live: the peak is 600 MB, after the loss buffer."""
    weights = [CPP, TORCH_LINEAR, frame("/job/model.py", 10, "__init__"), frame("/job/train.py", 5, "<module>")]
    activations = [CPP, TORCH_LINEAR, frame("/job/train.py", 42, "forward"), frame("/job/train.py", 80, "main")]
    loss = [CPP, frame("/job/train.py", 50, "loss"), frame("/job/train.py", 81, "main")]
    optimizer = [CPP, frame("/job/optim.py", 60, "step"), frame("/job/train.py", 82, "main")]
    a_weights, a_act, a_loss, a_opt = (SEGMENT_ADDRESS + off * MB for off in (0, 100, 400, 100))
    trace = []
    for action, addr, size, frames in [
        ("alloc", a_act, 300 * MB, activations),
        ("alloc", a_loss, 200 * MB, loss),
        ("free_requested", a_act, 300 * MB, activations),
        ("free_completed", a_act, 300 * MB, activations),
        ("free_requested", a_loss, 200 * MB, loss),
        ("free_completed", a_loss, 200 * MB, loss),
        ("alloc", a_opt, 50 * MB, optimizer),
    ]:
        trace.append({"action": action, "addr": addr, "size": size, "stream": 0, "time_us": 1000 + len(trace),
                      "frames": frames})  # fmt: skip
    blocks = [
        {"address": a_weights, "size": 100 * MB, "requested_size": 100 * MB, "state": "active_allocated",
         "frames": weights},
        {"address": a_opt, "size": 50 * MB, "requested_size": 50 * MB, "state": "active_allocated",
         "frames": optimizer},
        {"address": a_opt + 50 * MB, "size": 450 * MB, "requested_size": 0, "state": "inactive", "frames": []},
    ]  # fmt: skip
    segment = {"device": 0, "address": SEGMENT_ADDRESS, "total_size": 600 * MB, "stream": 0,
               "segment_type": "large", "segment_pool_id": (0, 0), "allocated_size": 150 * MB,
               "active_size": 150 * MB, "requested_size": 150 * MB, "blocks": blocks}  # fmt: skip
    trace.insert(0, {"action": "segment_alloc", "addr": SEGMENT_ADDRESS, "size": 600 * MB, "stream": 0,
                     "time_us": 999, "frames": weights})  # fmt: skip
    return {"segments": [segment], "device_traces": [trace], "allocator_settings": {}}


def write_snapshot(path: Path, snapshot: dict) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "wb") as handle:
        pickle.dump(snapshot, handle)
    return path


def test_nrlprof_reads_what_is_live_in_a_snapshot_as_torch_does(tmp_path):
    """torch's own reader and nrlprof's agree on the live blocks at the end of the fixture's history (so the fixture
    is a snapshot torch writes, and nrlprof reads it right)."""
    from torch.cuda import _memory_viz

    snapshot = fixture_snapshot()
    torch_allocated = float(re.search(r"total_allocated: ([\d.]+)MiB", _memory_viz.segsum(snapshot)).group(1))
    snapshot["device_traces"] = [[]]  # no history: nrlprof gives the blocks live at the end
    top = snapshot_top_allocations(write_snapshot(tmp_path / "x.pickle", snapshot))
    assert sum(r["size_mb"] for r in top) == torch_allocated == 150.0


def test_top_allocations_at_the_peak_with_the_frame_that_made_them(tmp_path):
    path = write_snapshot(tmp_path / "policy.rank0.steps2-5.99.pickle", fixture_snapshot())
    top = snapshot_top_allocations(path, top=10)
    assert [(r["size_mb"], r["frame"]) for r in top] == [
        (300.0, "/job/train.py:42:forward"),  # the innermost frame outside torch, not linear.py
        (200.0, "/job/train.py:50:loss"),
        (100.0, "/job/model.py:10:__init__"),
    ]
    assert {r["peak_mb"] for r in top} == {600.0} and {r["device"] for r in top} == {0}
    assert top[0]["stack"][0].endswith("torch/nn/modules/linear.py:125:forward")
    assert snapshot_top_allocations(path, top=1) == top[:1]


def test_a_snapshot_with_no_history_gives_the_live_blocks(tmp_path):
    snapshot = fixture_snapshot()
    snapshot["device_traces"] = [[]]
    top = snapshot_top_allocations(write_snapshot(tmp_path / "x.pickle", snapshot))
    assert [(r["size_mb"], r["frame"]) for r in top] == [(100.0, "/job/model.py:10:__init__"),
                                                         (50.0, "/job/optim.py:60:step")]  # fmt: skip


def make_activations():
    import torch

    return torch.ones(4 << 20)  # 16 MB of float32


def profiled_step(kept: list) -> float:
    import torch

    activations = make_activations()
    scratch = torch.ones(1 << 20)  # 4 MB
    kept.append(torch.zeros(2 << 20))  # 8 MB, kept across steps
    return float(activations.sum() + scratch.sum())


def test_top_allocations_of_a_snapshot_torch_makes_from_a_real_cpu_profile(tmp_path):
    """torch's own _profile_to_snapshot (the snapshot format, from a real profile): two steps each allocating
    16 + 4 MB, freed, and 8 MB kept: the peak is in step 2, 8 (kept) + 16 + 4 + 8 MB = 36 MB."""
    from torch.cuda._memory_viz import _profile_to_snapshot
    from torch.profiler import ProfilerActivity, profile

    kept: list = []
    with profile(activities=[ProfilerActivity.CPU], profile_memory=True, record_shapes=True, with_stack=True) as prof:
        for _ in range(2):
            profiled_step(kept)
    path = write_snapshot(tmp_path / "cpu.pickle", _profile_to_snapshot(prof))
    top = snapshot_top_allocations(path, top=4)
    assert [r["size_mb"] for r in top] == [16.0, 8.0, 8.0, 4.0]
    assert 36.0 <= top[0]["peak_mb"] < 36.1
    assert top[0]["frame"].startswith("test_tools_memory.py:") and top[0]["frame"].endswith(":make_activations")
    assert {r["frame"].rsplit(":", 1)[1] for r in top[1:]} == {"profiled_step"}


@pytest.mark.parametrize(
    "content", [b"not a pickle", pickle.dumps(Path("/etc")), pickle.dumps([1, 2]), pickle.dumps({"x": 1})]
)
def test_a_file_that_is_not_a_snapshot_is_refused_with_a_reason(tmp_path, content):
    path = tmp_path / "bad.pickle"
    path.write_bytes(content)
    with pytest.raises(ValueError, match="not an allocator snapshot"):
        snapshot_top_allocations(path)


def test_summary_text_names_growth_and_each_snapshots_top_allocations(tmp_path):
    write_figures(tmp_path, "policy", 0, cuda_steps([1000.0, 1040.0, 1080.0]), pid=99)
    write_snapshot(tmp_path / "policy" / "0" / "policy.rank0.steps2-4.99.pickle", fixture_snapshot())
    write_snapshot(tmp_path / "policy" / "0" / "policy.rank0.oom.99.pickle", fixture_snapshot())
    (tmp_path / "policy" / "0" / "policy.rank0.steps9-9.99.pickle").write_bytes(b"garbage")
    model = memory_summary(find_inputs([tmp_path]))
    snapshots = {Path(s["path"]).name: s for s in model["snapshots"]}
    good = snapshots["policy.rank0.steps2-4.99.pickle"]
    assert (good["worker"], good["rank"], good["window"], good["pid"], good["oom"]) == ("policy", 0, "2-4", 99, False)
    assert snapshots["policy.rank0.oom.99.pickle"]["oom"] is True
    assert "error" in snapshots["policy.rank0.steps9-9.99.pickle"]
    text = render_memory_text(model, memory_findings(model))
    assert "policy rank 0 grows ~40 MB/step (steps 2-4), CUDA allocated" in text
    assert "snapshot of steps 2-4, policy rank 0" in text and "out-of-memory snapshot, policy rank 0" in text
    assert "300.0 MB  device 0 (peak 600.0 MB)  /job/train.py:42:forward" in text
    assert "unreadable: not an allocator snapshot" in text
    assert json.loads(json.dumps(model)) == model


# --- bad figures files ----------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("content", "reason"),
    [
        (b"{not json", "not JSON"),
        (b"\xff\xfe", "not JSON"),
        (b"[1, 2]", "expected an object"),
        (json.dumps({"nrlprof": {"worker": "w", "rank": "0"}, "steps": []}).encode(), "nrlprof.rank"),
        (json.dumps({"nrlprof": {"worker": 5}, "steps": []}).encode(), "nrlprof.worker"),
        (json.dumps({"nrlprof": {"worker": "w"}, "steps": "x"}).encode(), "`steps` list"),
        (json.dumps({"nrlprof": {"worker": "w"}, "steps": [{"step": "2"}]}).encode(), "steps[0].step"),
        (json.dumps({"nrlprof": {"worker": "w"}, "steps": [{"step": 2, "host_rss_mb": "12"}]}).encode(), "host_rss"),
        (json.dumps({"nrlprof": {"worker": "w"}, "steps": [{"step": 2, "cuda": {"0": 5}}]}).encode(), "cuda"),
        (json.dumps({"nrlprof": {"worker": "w"}, "steps": [{"step": 2, "cuda": []}]}).encode(), "cuda"),
        (b"[" * 100_000, "not JSON"),
    ],
)
def test_a_bad_figures_file_is_skipped_with_its_reason(tmp_path, content, reason):
    good = write_figures(tmp_path, "policy", 0, host_steps([1.0, 2.0]))
    bad = good.with_name("policy.rank0.steps7-8.1.memory.json")
    bad.write_bytes(content)
    model = memory_summary(find_inputs([tmp_path]))
    assert [s["path"] for s in model["skipped"]] == [str(bad)]
    assert reason in model["skipped"][0]["reason"]
    assert list(model["workers"]["policy"]["0"]["steps"]) == ["2", "3"]


# --- diff and the report lane ---------------------------------------------------------------------------------------


def test_diff_compares_each_figure_of_the_steps_in_both(tmp_path):
    write_figures(tmp_path / "a", "policy", 0, cuda_steps([1000.0, 1100.0]))
    write_figures(tmp_path / "b", "policy", 0, cuda_steps([800.0, 1100.0, 1200.0]))
    diff = memory_diff(memory_summary(find_inputs([tmp_path / "a"])), memory_summary(find_inputs([tmp_path / "b"])))
    first = diff["rows"][0]
    assert (first["worker"], first["rank"], first["step"]) == ("policy", "0", 2)
    assert first["figures"]["cuda_allocated_mb"] == {"a": 1100.0, "b": 900.0, "change": -200.0, "change_pct": -18.2}
    assert first["figures"]["host_rss_mb"]["change"] == 0.0
    assert diff["rows"][1]["figures"]["cuda_allocated_mb"]["change"] == 0.0
    assert diff["only_in_a"] == [] and diff["only_in_b"] == [{"worker": "policy", "rank": "0", "step": 4}]


def test_memory_lane_is_one_svg_per_worker_rank_with_a_line_per_figure(tmp_path):
    write_figures(tmp_path, "policy", 0, cuda_steps([1000.0, 1100.0, 1200.0]))
    write_figures(tmp_path, "reward", 1, host_steps([10.0, 20.0, 30.0]), pid=5)
    html = memory_lane_svg(memory_summary(find_inputs([tmp_path])))
    root = ElementTree.fromstring(html)
    svgs = root.findall("{http://www.w3.org/2000/svg}svg")
    assert [s.get("aria-label") for s in svgs] == ["policy rank 0 memory per step", "reward rank 1 memory per step"]
    lines = [[p.find("{http://www.w3.org/2000/svg}title").text for p in s.iter("{http://www.w3.org/2000/svg}polyline")]
             for s in svgs]  # fmt: skip
    assert lines == [
        ["host RSS", "host peak", "CUDA allocated", "CUDA reserved", "CUDA peak"],
        ["host RSS", "host peak"],
    ]
    assert len(svgs[1].findall("{http://www.w3.org/2000/svg}polyline")[0].get("points").split()) == 3
    assert memory_lane_svg({"workers": {}}) == ""


# --- merge ----------------------------------------------------------------------------------------------------------


def counters(events: list[dict], pid: int, name: str) -> list[tuple[float, float]]:
    return [(e["ts"], e["args"]["MB"]) for e in events if e.get("ph") == "C" and e["pid"] == pid and e["name"] == name]


def process_pids(events: list[dict]) -> dict[str, int]:
    return {e["args"]["name"]: e["pid"] for e in events if e.get("ph") == "M" and e["name"] == "process_name"}


def test_merge_adds_memory_counter_tracks_per_process(tmp_path):
    run = tmp_path / "run"
    write_json(run / "torch" / "policy" / "0" / "policy.rank0.steps3-4.1000.pt.trace.json", gpu_trace(pid=1000))
    # the traced process: no step times in the figures, placed at the ends of ProfilerStep#3 and #4
    write_figures(run / "memory", "policy", 0, cuda_steps([1000.0, 1040.0], first=3), pid=1000, host="gpu-node")
    # an untraced process whose figures carry their step-end times (epoch microseconds)
    reference = host_steps([300.0, 310.0], first=7)
    for i, step in enumerate(reference):
        step["t_us"] = BASE_NS / 1000 + 5_000_000 + i * 1_000_000
    write_figures(run / "memory", "reference", 1, reference, pid=2000, host="gpu-node")
    no_times = write_figures(run / "memory", "critic", 0, host_steps([1.0, 2.0]), pid=3000)
    not_json = no_times.with_name("critic.rank0.steps9-10.3000.memory.json")
    not_json.write_text("{")

    result = merge_traces([run], tmp_path / "merged.json")
    ((skipped, reason),) = result.skipped
    assert skipped == not_json and "not JSON" in reason
    ((unplaced, reason),) = result.unplaced  # not an error: the figures hold no times yet
    assert unplaced == no_times and "no step times" in reason
    events = events_of(tmp_path / "merged.json")
    pids = process_pids(events)
    policy, reference_pid = pids["policy rank 0 (gpu-node)"], pids["reference rank 1 (gpu-node)"]
    assert "critic rank 0 (node-a)" not in pids
    # gpu_trace: ProfilerStep#3 at 1_000_000 us for 1000 us, #4 at 1_002_000; the trace's base is the origin
    assert counters(events, policy, "host RSS") == [(1_001_000.0, 2000.0), (1_003_000.0, 2000.0)]
    assert counters(events, policy, "cuda:0 allocated") == [(1_001_000.0, 1000.0), (1_003_000.0, 1040.0)]
    assert counters(events, policy, "cuda:1 reserved") == [(1_001_000.0, 200.0), (1_003_000.0, 200.0)]
    assert counters(events, policy, "cuda:0 peak") == [(1_000_000.0, 1256.0), (1_002_000.0, 1296.0)]  # step start
    assert counters(events, reference_pid, "host RSS") == [(5_000_000.0, 300.0), (6_000_000.0, 310.0)]
    assert counters(events, reference_pid, "host peak") == [(4_900_000.0, 340.0), (5_900_000.0, 350.0)]
    assert result.memory_files == 2 and result.counter_events == 2 * 8 + 2 * 2
    assert result.events_out == len(events)


def test_merge_of_memory_figures_alone(tmp_path):
    steps = host_steps([300.0, 310.0], first=7)
    for i, step in enumerate(steps):
        step["t_us"] = 1_800_000_000_000_000 + i * 1_000_000
    write_figures(tmp_path / "run", "controller", None, steps)
    result = merge_traces([tmp_path / "run"], tmp_path / "merged.json")
    document = json.loads((tmp_path / "merged.json").read_text())
    assert document["baseTimeNanoseconds"] == (1_800_000_000_000_000 - 100_000) * 1000
    pid = process_pids(document["traceEvents"])["controller (node-a)"]
    assert counters(document["traceEvents"], pid, "host RSS") == [(100_000.0, 300.0), (1_100_000.0, 310.0)]
    assert result.merged == []


def test_merge_of_nothing_it_can_place_exits_1_not_2(tmp_path, capsys):
    from nrlprof.cli import main

    unplaced = write_figures(tmp_path / "run", "critic", 0, host_steps([1.0, 2.0]), pid=3000)
    assert main(["merge", str(tmp_path / "run"), "-o", str(tmp_path / "m.json"), "--json"]) == 1
    out = capsys.readouterr().out
    assert json.loads(out[out.index("{") :])["unplaced"][0]["path"] == str(unplaced)
    assert json.loads((tmp_path / "m.json").read_text())["traceEvents"] == []


def test_merge_command_notes_figures_it_cannot_place_and_exits_0(tmp_path, capsys):
    from nrlprof.cli import main

    write_json(tmp_path / "run" / "policy.rank0.steps3-4.1000.pt.trace.json", gpu_trace(pid=1000))
    unplaced = write_figures(tmp_path / "run", "critic", 0, host_steps([1.0, 2.0]), pid=3000)
    assert main(["merge", str(tmp_path / "run"), "-o", str(tmp_path / "m.json"), "--json"]) == 0
    out, err = capsys.readouterr()
    document = json.loads(out[out.index("{") :])
    assert document["unplaced"][0]["path"] == str(unplaced) and document["counter_events"] == 0
    assert f"nrlprof merge: note: {unplaced}: memory figures have no step times" in err
    unplaced.write_text("[]")
    assert main(["merge", str(tmp_path / "run"), "-o", str(tmp_path / "m.json")]) == 1
    assert f"warning: skipped {unplaced}" in capsys.readouterr().err
