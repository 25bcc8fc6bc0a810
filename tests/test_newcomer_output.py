"""Output that reads well when saved (issue 24): full-width tables in a file or a pipe, a range across steps in one
row, one name per worker in every view, and `--hta` failures that say why."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from helpers.anatomy import DRIVER_NODE, DRIVER_TASK, JOB, MS, T0, actor_id, call
from helpers.traces import gpu_trace, record_cpu_trace, write_json

from nrlprof.anatomy.files import ACTORS_FILE, META_FILE, STEPS_FILE, TASKS_FILE, append_lines
from nrlprof.layout import range_label
from nrlprof.ranges.names import range_name
from nrlprof.tools.figures.summarize import summarize
from nrlprof.tools.merge.timeline import merge_traces
from nrlprof.tools.read.anatomy import profiled_names, worker_names

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
                              stderr=subprocess.PIPE, text=True, env=env, timeout=120)  # fmt: skip
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
