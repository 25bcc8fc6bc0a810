"""Terminal output prints names as they are: `[...]` in a pattern, range or worker name is text, not markup."""

from __future__ import annotations

import io
import json
import subprocess
import sys
from pathlib import Path

from helpers.environment import environment_without
from helpers.traces import gpu_trace, write_json
from rich.console import Console

from nrlprof.cli import main
from nrlprof.tools.figures.summarize import summarize
from nrlprof.tools.render.console import render_summary

NAMES = ("policy.train [step 3]", "policy.train [step 4]", "[bold]loud[/bold]", "*[pP]olicy*", "odd :smile: \\")
LABELS = ("policy.train", *NAMES[2:])  # as the ranges table shows them: by label, the step in its own column


def plan(env: dict[str, str], *args: str) -> subprocess.CompletedProcess:
    env = environment_without("NRL_") | env | {"COLUMNS": "250"}
    return subprocess.run([sys.executable, "-m", "nrlprof", "plan", *args], capture_output=True, text=True,
                          env=env, timeout=300)  # fmt: skip


def test_plan_prints_patterns_that_look_like_markup():
    done = plan({"NRL_NSYS_WORKER_PATTERNS": "*[/]*,*[pP]olicy*", "NRL_NSYS_PROFILE_STEP_RANGE": "3:5"})
    assert done.returncode == 0, done.stderr
    assert "*[/]*" in done.stdout and "*[pP]olicy*" in done.stdout
    assert "MarkupError" not in done.stderr


def test_plan_names_the_reports_nsys_writes(tmp_path):
    one = plan({"NRL_NSYS_WORKER_PATTERNS": "*policy*", "NRL_NSYS_PROFILE_STEP_RANGE": "3:5"}, "--json")
    (view,) = json.loads(one.stdout)["backends"]
    # one window: capture-range-end=stop, a single report named after -o
    assert [f["path"] for f in view["files"]] == ["<ray session dir>/logs/nsight/<worker>_3-4_<pid>.nsys-rep"]
    two = plan({"NRL_NSYS_WORKER_PATTERNS": "*policy*", "NRL_NSYS_PROFILE_STEP_RANGE": "3:5,9"}, "--json")
    (view,) = json.loads(two.stdout)["backends"]
    # two windows: repeat:2, nsys numbers the report of each capture range
    assert [f["path"] for f in view["files"]] == [
        "<ray session dir>/logs/nsight/<worker>_3-4_9_<pid>.1.nsys-rep",
        "<ray session dir>/logs/nsight/<worker>_3-4_9_<pid>.2.nsys-rep",
    ]
    assert "--capture-range-end=repeat:2" in view["command"]


def test_plan_shows_a_long_repeat_as_first_reports_and_last():
    steps = ",".join(str(n) for n in range(1, 40, 2))  # 20 windows
    done = plan({"NRL_NSYS_WORKER_PATTERNS": "*policy*", "NRL_NSYS_PROFILE_STEP_RANGE": steps}, "--json")
    (view,) = json.loads(done.stdout)["backends"]
    suffixes = [f["path"].rpartition("_<pid>")[2] for f in view["files"]]
    assert suffixes == [".1.nsys-rep", ".2.nsys-rep", ".3.nsys-rep", "...", ".20.nsys-rep"]


def traces_with_odd_names(root: Path) -> Path:
    trace = gpu_trace(worker="pol[red]icy")
    ts = {3: 1_000_100.0, 4: 1_002_100.0}
    for name in NAMES:
        step = 4 if "step 4" in name else 3
        trace["traceEvents"].append({"ph": "X", "cat": "user_annotation", "name": name, "pid": 1000, "tid": 1000,
                                     "ts": ts[step], "dur": 10.0, "args": {}})  # fmt: skip
    write_json(root / "policy.rank0.steps3-4.1000.pt.trace.json", trace)
    return root


def test_summary_prints_range_and_worker_names_as_text(tmp_path):
    console = Console(file=io.StringIO(), width=250, emoji=False)
    render_summary(summarize(traces_with_odd_names(tmp_path), nsys=""), console)
    text = console.file.getvalue()
    for name in LABELS:
        assert name in text
    assert "pol[red]icy rank 0" in text
    # one range across steps: one row, its time in each step's column, the `[step n]` left out of its label
    (row,) = [line for line in text.splitlines() if "policy.train" in line]
    assert "[step" not in row and row.count("0.01") == 2, row


def test_summary_command_prints_names_as_text(tmp_path, capsys, monkeypatch):
    monkeypatch.setenv("COLUMNS", "250")
    assert main(["summary", str(traces_with_odd_names(tmp_path))]) == 0
    out = capsys.readouterr().out
    assert all(name in out for name in LABELS) and "😄" not in out


def test_summary_prints_skip_reasons_and_notes_as_text(tmp_path, capsys, monkeypatch):
    monkeypatch.setenv("COLUMNS", "250")
    root = traces_with_odd_names(tmp_path)
    bad = root / "x[bold]y.pt.trace.json"
    bad.write_text("[not json")
    assert main(["summary", str(root)]) == 1
    assert str(bad) in capsys.readouterr().out


def test_report_prints_its_output_path_as_text(tmp_path, capsys):
    output = tmp_path / "r[red]x.html"
    assert main(["report", str(traces_with_odd_names(tmp_path / "in")), "-o", str(output)]) == 0
    assert capsys.readouterr().out == f"report written to {output}\n"
    page = output.read_text()
    assert "policy.train [step 3]" in page and "pol[red]icy rank 0" in page
