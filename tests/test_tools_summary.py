"""nrlprof summary (numbers match what was recorded), nsys stats parsing, and HTA on nrlprof's layout; output that
reads well when saved: full-width tables in a file or a pipe, a range across steps in one row, one name per worker
in every view, and `--hta` failures that say why."""

from __future__ import annotations

import io
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from helpers.anatomy import DRIVER_NODE, DRIVER_TASK, JOB, MS, T0, actor_id, call
from helpers.nsys import NVTX_CSV, fake_nsys, nsys_run
from helpers.traces import gpu_trace, record_cpu_trace, truncate, write_json

from nrlprof.anatomy.files import ACTORS_FILE, META_FILE, STEPS_FILE, TASKS_FILE, append_lines
from nrlprof.cli import main
from nrlprof.errors import ToolError
from nrlprof.layout import range_label
from nrlprof.ranges.names import range_name
from nrlprof.tools.figures.hta import hta_folder
from nrlprof.tools.figures.summarize import summarize
from nrlprof.tools.merge.timeline import merge_traces
from nrlprof.tools.read.anatomy import profiled_names, worker_names
from nrlprof.tools.read.nsys_stats import parse_nsys_csv
from nrlprof.tools.render.console import render_summary

OLD_KERNEL_CSV = """Time(%),Total Time (ns),Instances,Average,Minimum,Maximum,StdDev,Name
100.0,2000,4,500.0,400,600,81.6,ampere_sgemm_128x64_nn
"""
OLD_NVTX_CSV = """Time(%),Total Time (ns),Instances,Average,Minimum,Maximum,StdDev,Range
100.0,5000000,2,2500000.0,2000000,3000000,707106.8,policy.train
"""


@pytest.fixture(scope="session")
def recorded(tmp_path_factory) -> Path:
    """Policy ranks 0 and 1 (steps 3-4 and, for rank 0, a later window 7), the controller."""
    root = tmp_path_factory.mktemp("summary_run")
    pid = os.getpid()
    record_cpu_trace(root / "policy" / "0" / f"policy.rank0.steps3-4.{pid}.pt.trace.json", "policy", 0)
    record_cpu_trace(root / "policy" / "0" / f"policy.rank0.steps7.{pid}.pt.trace.json.gz", "policy", 0, steps=(7,))
    record_cpu_trace(root / "policy" / "1" / f"policy.rank1.steps3-4.{pid}.pt.trace.json", "policy", 1)
    record_cpu_trace(root / f"controller.steps3-4.{pid}.pt.trace.json", "controller", None, step_sleep_s=0.03)
    return root


def worker(summary, name, rank):
    return next(w for w in summary.workers if w.worker == name and w.rank == rank)


def test_step_wall_time_and_ranges_match_what_was_recorded(recorded):
    summary = summarize(recorded, nsys="")
    assert summary.steps == [3, 4, 7]
    policy0 = worker(summary, "policy", 0)
    assert set(policy0.step_wall_ms) == {3, 4, 7}
    for step in (3, 4, 7):
        # a 50 ms sleep inside ProfilerStep#n, 20 ms of it in policy.train; a loaded machine oversleeps only
        assert policy0.step_wall_ms[step] >= 49.5
        assert 19.5 <= policy0.ranges_ms["policy.train"][step] < policy0.step_wall_ms[step]
    assert policy0.range_calls["policy.train"] == 3
    assert len(policy0.files) == 2
    controller = worker(summary, "controller", None)
    assert controller.step_wall_ms[3] >= 29.5
    assert controller.label == "controller"
    names = {op.name for op in policy0.ops}
    assert "aten::mm" in names or "aten::matmul" in names
    matmul = next(op for op in policy0.ops if op.name in ("aten::matmul", "aten::mm"))
    assert matmul.calls == 3 and 0 < matmul.self_us <= matmul.total_us
    assert not policy0.kernels


def test_operator_self_time_excludes_children_and_kernels_are_ranked(tmp_path):
    write_json(tmp_path / "policy.rank0.steps3-4.1000.pt.trace.json", gpu_trace())
    trace = gpu_trace(rank=1, pid=1001)
    trace["traceEvents"].append({"ph": "X", "cat": "cpu_op", "name": "aten::linear", "pid": 1001, "tid": 1001,
                                 "ts": 1_000_000.0, "dur": 300.0, "args": {}})  # fmt: skip
    write_json(tmp_path / "policy.rank1.steps3-4.1001.pt.trace.json", trace)
    summary = summarize(tmp_path, nsys="")
    rank0, rank1 = worker(summary, "policy", 0), worker(summary, "policy", 1)
    assert [(k.name, k.calls, k.total_us) for k in rank0.kernels] == [
        ("ampere_sgemm_128x64_nn", 4, 400.0),
        ("elementwise_kernel", 4, 400.0),
    ]
    linear = next(op for op in rank1.ops if op.name == "aten::linear")
    # aten::linear (300 us) holds the first two ops of step 3 (50 us each): 200 us of its own
    assert (linear.total_us, linear.self_us) == (300.0, 200.0)
    assert rank0.step_wall_ms == {3: 1.0, 4: 1.0}
    data = summary.to_json()
    assert data["workers"][0]["top_kernels"][0]["total_ms"] == 0.4
    json.dumps(data)


def test_json_and_rich_output(recorded, capsys):
    summary = summarize(recorded, nsys="")
    data = json.loads(json.dumps(summary.to_json()))
    policy0 = next(w for w in data["workers"] if w["worker"] == "policy" and w["rank"] == 0)
    assert policy0["steps"]["3"]["wall_ms"] >= 49.5
    assert "policy.train" in policy0["steps"]["3"]["ranges_ms"]
    from rich.console import Console

    console = Console(file=io.StringIO(), width=200)
    render_summary(summary, console)
    text = console.file.getvalue()
    assert "Time per step" in text and "policy rank 1" in text and "policy.train" in text


def test_unreadable_traces_are_listed_and_bad_directories_refused(recorded, tmp_path):
    source = next((recorded / "policy" / "1").glob("*.pt.trace.json"))
    truncate(source, tmp_path / "policy.rank1.steps3-4.9.pt.trace.json")
    write_json(tmp_path / "policy.rank0.steps3-4.1000.pt.trace.json", gpu_trace())
    summary = summarize(tmp_path, nsys="")
    assert [p.name for p, _ in summary.skipped] == ["policy.rank1.steps3-4.9.pt.trace.json"]
    assert len(summary.workers) == 1
    with pytest.raises(ToolError, match="no such file"):
        summarize(tmp_path / "missing")
    (tmp_path / "empty").mkdir()
    with pytest.raises(ToolError, match="no torch trace or Nsight Systems report"):
        summarize(tmp_path / "empty")


def test_nsys_reports_with_current_report_names(tmp_path):
    summary = summarize(nsys_run(tmp_path), nsys=fake_nsys(tmp_path))
    (report,) = summary.nsys_reports
    assert (report.worker, report.window, report.pid) == ("dtensor_policy_worker", "3-4_10", 4242)
    assert report.error is None
    assert report.kernels[0]["Name"] == "ampere_sgemm_128x64_nn"
    assert report.nvtx[0]["Range"] == ":policy.train" and report.nvtx[0]["Instances"] == "2"
    assert summary.to_json()["nsys_reports"][0]["kernels"][1]["Instances"] == "5"


def test_nsys_reports_of_repeated_capture_ranges(tmp_path):
    run_dir = tmp_path / "run"
    run_dir.mkdir()
    for k in (1, 2):  # --capture-range-end=repeat:2 names the report of each range <name>.<k>.nsys-rep
        (run_dir / f"policy_3-4_9_4242.{k}.nsys-rep").write_bytes(b"fake report")
    reports = summarize(run_dir, nsys=fake_nsys(tmp_path)).nsys_reports
    assert [(r.path.name, r.worker, r.window, r.pid) for r in reports] == [
        ("policy_3-4_9_4242.1.nsys-rep", "policy", "3-4_9", 4242),
        ("policy_3-4_9_4242.2.nsys-rep", "policy", "3-4_9", 4242),
    ]
    assert all(r.error is None and r.kernels for r in reports)


def test_nsys_falls_back_to_pre_2023_report_names(tmp_path):
    nsys = fake_nsys(tmp_path, reject="cuda_gpu_kern_sum", kernels=OLD_KERNEL_CSV, nvtx=OLD_NVTX_CSV)
    (report,) = summarize(nsys_run(tmp_path), nsys=nsys).nsys_reports
    assert report.error is None
    assert report.kernels[0]["Name"] == "ampere_sgemm_128x64_nn" and report.nvtx[0]["Range"] == "policy.train"


def test_nsys_failure_is_reported_per_report(tmp_path):
    nsys = tmp_path / "nsys"
    nsys.write_text("#!/bin/sh\necho 'ERROR: broken report' >&2\nexit 1\n")
    nsys.chmod(0o755)
    (report,) = summarize(nsys_run(tmp_path), nsys=str(nsys)).nsys_reports
    assert "broken report" in report.error


def test_missing_nsys_gives_a_note(tmp_path, monkeypatch):
    monkeypatch.setenv("PATH", str(tmp_path / "nowhere"))
    summary = summarize(nsys_run(tmp_path))
    assert summary.notes == ["nsys not found: install Nsight Systems to summarise 1 report(s)"]
    assert summary.nsys_reports[0].kernels == []


def test_parse_nsys_csv_ignores_notices():
    text = "SKIPPED: report.sqlite does not contain CUDA kernel data.\n\n" + NVTX_CSV
    kernels, nvtx = parse_nsys_csv(text)
    assert kernels == [] and nvtx[0]["Style"] == "PushPop"


def test_cli_exit_codes_and_json(recorded, tmp_path, capsys):
    assert main(["summary", str(recorded / "policy"), "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert {w["rank"] for w in data["workers"]} == {0, 1}
    assert main(["summary", str(tmp_path / "missing")]) == 2
    assert capsys.readouterr().err == f"nrlprof summary: {tmp_path / 'missing'}: no such file or directory\n"
    source = next((recorded / "policy" / "1").glob("*.pt.trace.json"))
    truncate(source, tmp_path / "t" / "policy.rank1.steps3-4.9.pt.trace.json")
    write_json(tmp_path / "t" / "policy.rank0.steps3-4.1000.pt.trace.json", gpu_trace())
    assert main(["summary", str(tmp_path / "t")]) == 1
    assert "policy.rank1.steps3-4.9.pt.trace.json" in capsys.readouterr().out


# Holistic Trace Analysis reads nrlprof's traces: a rank directory as is, a worker directory via hta_folder.
@pytest.fixture
def hta_analysis():
    return pytest.importorskip("hta.trace_analysis", reason="holistictraceanalysis is not installed")


hta_warnings = pytest.mark.filterwarnings("ignore:The inplace keyword", "ignore:Rounding down")


@hta_warnings
def test_hta_loads_a_rank_directory_as_is(recorded, hta_analysis):
    analysis = hta_analysis.TraceAnalysis(trace_dir=str(recorded / "policy" / "1"))
    assert analysis.t.get_ranks() == [1]


@hta_warnings
def test_hta_loads_a_worker_directory_through_hta_folder(recorded, tmp_path, hta_analysis):
    with pytest.raises(ToolError, match="several windows"):
        hta_folder(recorded / "policy")
    folder = hta_folder(recorded / "policy", window="3-4", dest=tmp_path / "hta")
    assert sorted(p.name for p in folder.iterdir()) == ["rank0.pt.trace.json", "rank1.pt.trace.json"]
    analysis = hta_analysis.TraceAnalysis(trace_dir=str(folder))
    assert sorted(analysis.t.get_ranks()) == [0, 1]
    assert len(analysis.t.get_trace(0)) > 10 and len(analysis.t.get_trace(1)) > 10


@hta_warnings
def test_hta_breakdowns_of_gpu_shaped_traces(tmp_path, hta_analysis):
    for rank in (0, 1):
        write_json(tmp_path / "policy" / str(rank) / f"policy.rank{rank}.steps3-4.{1000 + rank}.pt.trace.json",
                   gpu_trace(rank, 1000 + rank))  # fmt: skip
    analysis = hta_analysis.TraceAnalysis(trace_dir=str(hta_folder(tmp_path / "policy", dest=tmp_path / "hta")))
    temporal = analysis.get_temporal_breakdown(visualize=False)
    assert sorted(temporal["rank"].tolist()) == [0, 1]
    assert (temporal["compute_time(us)"] > 0).all()
    by_type, by_kernel = analysis.get_gpu_kernel_breakdown(visualize=False)
    assert "COMPUTATION" in by_type["kernel_type"].tolist()
    assert {"ampere_sgemm_128x64_nn", "elementwise_kernel"} <= set(by_kernel["name"])


def test_manifest_windows_not_ok_or_missing_become_notes(tmp_path):
    write_json(tmp_path / "policy" / "0" / "policy.rank0.steps3-4.1000.pt.trace.json", gpu_trace())
    records = [
        {"backend": "torch", "worker": "policy", "rank": 0, "window": "3-4", "status": "ok", "host": "h", "pid": 1000,
         "files": ["/remote/policy/0/policy.rank0.steps3-4.1000.pt.trace.json"]},
        {"backend": "torch", "worker": "policy", "rank": 1, "window": "3-4", "status": "error", "host": "h",
         "pid": 1001, "message": "export failed",
         "files": ["/remote/policy/1/policy.rank1.steps3-4.1001.pt.trace.json"]},
    ]  # fmt: skip
    manifest = tmp_path / ".nrlprof" / "manifest-h-1.jsonl"
    manifest.parent.mkdir()
    manifest.write_text("".join(json.dumps(r) + "\n" for r in records) + '{"torn')
    records += [
        {"backend": "torch", "worker": "policy", "rank": 2, "window": "3-4", "status": "ok", "host": "h", "pid": 1002,
         "files": ["/remote/policy/2/policy.rank2.steps3-4.1002.pt.trace.json"]},
        {"backend": "nsys", "worker": "policy", "rank": 0, "window": "3-4", "status": "ok", "host": "h", "pid": 1000,
         "files": ["/tmp/ray/session_1/logs/nsight/policy_3-4_1000.nsys-rep"]},
    ]  # fmt: skip
    manifest.write_text("".join(json.dumps(r) + "\n" for r in records) + '{"torn')
    summary = summarize(tmp_path, nsys="")
    assert summary.skipped == []  # a torn last line is a killed writer, not a bad manifest
    error, missing = summary.notes
    # the nsys report was never meant to be in a directory of torch traces: not reported missing
    assert all(word in error for word in ("policy rank 1", "3-4", "torch", "pid 1001", "error", "export failed"))
    assert all(word in missing for word in ("policy rank 2", "manifest-h-1.jsonl",
                                            "policy.rank2.steps3-4.1002.pt.trace.json"))  # fmt: skip
    assert "rank 0" not in error + missing and "nsys-rep" not in error + missing


# ---- output that reads well when saved ----

LONG_WORKER = "a_worker_whose_name_is_far_too_long_for_an_eighty_column_terminal"
PARENT_PID, CHILD_PIDS = 2000, (2001, 2002)


def annotated(trace: dict, pid: int, label: str) -> dict:
    """`trace` with nrlprof's range `label` in each of its steps, named as the runtime names it."""
    for event in [e for e in trace["traceEvents"] if str(e.get("name", "")).startswith("ProfilerStep#")]:
        step = int(event["name"].partition("#")[2])
        span = {
            "ph": "X",
            "cat": "user_annotation",
            "name": range_name(label, step),
            "pid": pid,
            "tid": pid,
            "ts": event["ts"] + 1,
            "dur": 5.0,
            "args": {},
        }
        trace["traceEvents"].append(span)
    return trace


def test_a_saved_summary_has_every_column_whatever_the_width(tmp_path):
    trace = annotated(gpu_trace(pid=1000, worker=LONG_WORKER), 1000, f"{LONG_WORKER}.train")
    write_json(tmp_path / "run" / f"{LONG_WORKER}.rank0.steps3-4.1000.pt.trace.json", trace)
    env = {k: v for k, v in os.environ.items() if k not in ("COLUMNS", "LINES")}
    with (tmp_path / "summary.txt").open("w") as saved:
        done = subprocess.run([sys.executable, "-m", "nrlprof", "summary", str(tmp_path / "run")], stdout=saved,
                              stderr=subprocess.PIPE, text=True, env=env, timeout=300)  # fmt: skip
    assert done.returncode == 0, done.stderr
    text = (tmp_path / "summary.txt").read_text()
    assert "…" not in text
    header = next(line for line in text.splitlines() if "┃ range" in line)
    assert [cell.strip() for cell in header.strip("┃").split("┃")] == ["range", "worker", "calls", "3", "4"]
    (row,) = [line for line in text.splitlines() if f"│ {LONG_WORKER}.train " in line]
    assert f"{LONG_WORKER} rank 0" in row and len(row) > 120
    assert [cell.strip() for cell in row.strip("│").split("│")][2:] == ["2", "0.005", "0.005"]


def test_a_range_is_one_label_across_steps(tmp_path):
    trace = annotated(gpu_trace(pid=1000), 1000, "policy.train")
    trace["traceEvents"].append({"ph": "X", "cat": "user_annotation", "name": range_name("policy.sync", 4),
                                 "pid": 1000, "tid": 1000, "ts": 9_000_000.0, "dur": 2.0, "args": {}})  # fmt: skip
    write_json(tmp_path / "policy.rank0.steps3-4.1000.pt.trace.json", trace)
    (worker,) = summarize(tmp_path, nsys="").to_json()["workers"]
    assert worker["steps"]["3"]["ranges_ms"] == {"policy.train": 0.005}
    # outside the step spans, the step its name carries
    assert worker["steps"]["4"]["ranges_ms"] == {"policy.train": 0.005, "policy.sync": 0.002}
    assert worker["range_calls"] == {"policy.train": 2, "policy.sync": 1}
    assert range_label("a.b [step 12]") == ("a.b", 12) and range_label("a [step x]") == ("a [step x]", None)


def child_run(directory: Path) -> Path:
    """A step anatomy where the generation worker (driver-made) created two children, whose own pattern matched."""
    run = directory / "run-20261124T100000Z-1"
    run.mkdir(parents=True)
    append_lines(run / META_FILE, [{"job_id": JOB, "driver_node_id": DRIVER_NODE}])
    append_lines(run / ACTORS_FILE, [{"actor_id": actor_id(1), "worker": "gen", "rank": 0, "class": "Gen"}])
    append_lines(run / STEPS_FILE, [{"step": 3, "t_ns": T0}, {"finish": True, "t_ns": T0 + 100 * MS}])
    creations = [{"kind": "create", "actor_id": actor_id(n), "class": "TpShard", "start_ns": T0 - 1000 + n,
                  "end_ns": T0, "parent_task_id": "00" * 8 + actor_id(1), "node_id": DRIVER_NODE}
                 for n in (2, 3)]  # fmt: skip
    calls = [{**call(1, "generate", 5, 60), "pid": PARENT_PID}]
    calls += [{**call(n, "generate", 10, 50), "pid": pid, "parent_task_id": DRIVER_TASK}
              for n, pid in zip((2, 3), CHILD_PIDS, strict=True)]  # fmt: skip
    append_lines(run / TASKS_FILE, creations + calls)
    return run


def test_the_step_anatomy_names_a_worker_as_its_profiler_files_do(tmp_path):
    run = child_run(tmp_path / "step_anatomy")
    actors = [{"actor_id": actor_id(1), "worker": "gen", "rank": 0, "class": "Gen"}]
    tasks = [json.loads(line) for line in (run / TASKS_FILE).read_text().splitlines()]
    assert sorted(set(worker_names(actors, tasks).values())) == [("gen", 0), ("gen.tp_shard", 0), ("gen.tp_shard", 1)]
    # the children matched a pattern of their own: their traces say `tp_shard`; one rank's files are enough
    profiled = profiled_names([("h", CHILD_PIDS[0], "tp_shard", 0), ("h", PARENT_PID, "gen", 0)])
    assert sorted(set(worker_names(actors, tasks, profiled).values())) == [("gen", 0), ("tp_shard", 0),
                                                                          ("tp_shard", 1)]  # fmt: skip
    # a pid two hosts claim is no evidence
    assert profiled_names([("a", 7, "x", 0), ("b", 7, "y", 0)]) == {}
    for n, pid in enumerate(CHILD_PIDS):
        write_json(tmp_path / "tp_shard" / str(n) / f"tp_shard.rank{n}.steps3.{pid}.pt.trace.json",
                   gpu_trace(rank=n, pid=pid, steps=(3,), worker="tp_shard"))  # fmt: skip
    summary = summarize(tmp_path, nsys="")
    groups = {p["worker"] for p in summary.sections["anatomy"]["steps"]["3"]["phases"]}
    assert groups == {"gen", "tp_shard"} and {w.worker for w in summary.workers} == {"tp_shard"}
    result = merge_traces([tmp_path], tmp_path / "timeline.json")
    events = json.loads((tmp_path / "timeline.json").read_text())["traceEvents"]
    processes = {e["args"]["name"] for e in events if e["name"] == "process_name"}
    assert {"anatomy: tp_shard", "tp_shard rank 0 (gpu-node)", "tp_shard rank 1 (gpu-node)"} <= processes
    assert "anatomy: gen.tp_shard" not in processes and result.anatomy_events


def test_hta_on_cpu_traces_says_why_it_has_no_figures(tmp_path, capsys):
    pytest.importorskip("hta")
    from nrlprof.cli import main

    for rank in (0, 1):
        record_cpu_trace(tmp_path / f"policy.rank{rank}.steps3-4.{100 + rank}.pt.trace.json", "policy", rank)
    assert main(["summary", "--hta", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    assert "no GPU kernels in these traces" in " ".join(out.split()) and "IndexError" not in out


def test_windows_asked_for_are_marked_in_the_profiler_overhead(tmp_path):
    """A window asked for while the job ran (`nrlprof capture`) shows as a planned one does, marked as asked for."""
    write_json(tmp_path / "policy" / "0" / "policy.rank0.steps3-4.1000.pt.trace.json", gpu_trace())
    write_json(tmp_path / "policy" / "0" / "policy.rank0.steps7-8.1000.pt.trace.json", gpu_trace())
    window = {"backend": "torch", "worker": "policy", "rank": 0, "status": "ok", "host": "h", "pid": 1000,
              "start_ms": 2.5, "stop_ms": 30.0}  # fmt: skip
    planned = {**window, "window": "3-4", "files": ["/remote/policy/0/policy.rank0.steps3-4.1000.pt.trace.json"]}
    asked = {**window, "window": "7-8", "files": ["/remote/policy/0/policy.rank0.steps7-8.1000.pt.trace.json"]}
    records = [planned, {**asked, "asked": "5f2c0ffee"}]
    manifest = tmp_path / ".nrlprof" / "manifest-h-1.jsonl"
    manifest.parent.mkdir()
    manifest.write_text("".join(json.dumps(r) + "\n" for r in records))
    summary = summarize(tmp_path, nsys="")
    rows = {row["window"]: row for row in summary.to_json()["profiler_overhead"]}
    assert rows["7-8"]["asked"] == "5f2c0ffee" and "asked" not in rows["3-4"]
    assert (rows["7-8"]["stop_ms"], rows["3-4"]["stop_ms"]) == (30.0, 30.0), "figures as a planned window's"
    from rich.console import Console

    console = Console(file=io.StringIO(), width=200)
    render_summary(summary, console)
    text = console.file.getvalue()
    assert "7-8 (asked for)" in text and "3-4 (asked for)" not in text


def test_the_time_a_window_finished_its_files_beside_the_next_step_is_in_the_profiler_overhead(tmp_path):
    write_json(tmp_path / "policy" / "0" / "policy.rank0.steps3-4.1000.pt.trace.json", gpu_trace())
    record = {"backend": "torch", "worker": "policy", "rank": 0, "status": "ok", "host": "h", "pid": 1000,
              "window": "3-4", "start_ms": 2.5, "stop_ms": 30.0, "finish_ms": 41.5,
              "files": ["/remote/policy/0/policy.rank0.steps3-4.1000.pt.trace.json"]}  # fmt: skip
    older = {**record, "window": "7-8", "finish_ms": None}  # a record from before finish_ms, or a broken one
    manifest = tmp_path / ".nrlprof" / "manifest-h-1.jsonl"
    manifest.parent.mkdir()
    manifest.write_text("".join(json.dumps(r) + "\n" for r in (record, older)))
    summary = summarize(tmp_path, nsys="")
    rows = {row["window"]: row for row in summary.to_json()["profiler_overhead"]}
    assert (rows["3-4"]["stop_ms"], rows["3-4"]["finish_ms"], rows["7-8"]["finish_ms"]) == (30.0, 41.5, 0.0)
    from rich.console import Console

    console = Console(file=io.StringIO(), width=200)
    render_summary(summary, console)
    text = console.file.getvalue()
    assert "finish ms" in text and "41.5" in text
