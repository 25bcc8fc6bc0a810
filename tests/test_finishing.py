"""A window's files finished beside the next step (nrlprof.process.finishing): the finisher's order, holds, settle
at exit and in a forked child; a torch stop that returns before its trace is checked, the controller's export
after its workers, the record written once the files are final, and a file that could not be finished kept."""

from __future__ import annotations

import gzip
import json
import os
import shutil
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
import torch
from helpers.torch_windows import torch_process, window

from nrlprof.backends import torch_profiler
from nrlprof.backends.base import ProcessRole
from nrlprof.config.plan import TORCH, BackendPlan, Plan, Target, TorchSettings
from nrlprof.config.steps import StepSelection, Window
from nrlprof.process import finishing
from nrlprof.process.finishing import FINISHER, Finisher
from nrlprof.process.lifecycle import Lifecycle
from nrlprof.process.state import OpenWindows
from nrlprof.runtime.windows.profiler import SETTLE, START, STOP, Action, ProcessProfiler
from nrlprof.workers.identity import WorkerIdentity


def test_jobs_run_in_the_order_handed_over_and_settle_waits_for_every_one():
    finisher, done = Finisher(), []
    for index in range(5):
        finisher.run(lambda index=index: (time.sleep(0.02), done.append(index)))
    assert finisher.settle(timeout=30)
    assert done == [0, 1, 2, 3, 4]
    assert not finisher.pending


def test_a_failing_job_is_logged_and_the_jobs_after_it_still_run(caplog):
    finisher, done = Finisher(), []
    finisher.run(lambda: 1 / 0)
    finisher.run(lambda: done.append("after"))
    assert finisher.settle(timeout=30)
    assert done == ["after"]
    assert "finishing a profiler file failed: division by zero" in caplog.text


def test_jobs_handed_over_while_holding_begin_when_the_hold_ends():
    finisher, done = Finisher(), []
    with finisher.holding():
        finisher.run(lambda: done.append("held"))
        time.sleep(0.2)
        assert done == [] and finisher.pending
    assert finisher.settle(timeout=30)
    assert done == ["held"]


def test_settle_inside_a_hold_runs_what_was_held_instead_of_waiting_forever():
    finisher, done = Finisher(), []
    with finisher.holding():
        finisher.run(lambda: done.append("held"))
        assert finisher.settle(timeout=30), "settle begins the held jobs"
        assert done == ["held"]
        finisher.run(lambda: done.append("held again"))
        time.sleep(0.1)
        assert done == ["held"], "the hold still holds what comes after"
    assert finisher.settle(timeout=30)
    assert done == ["held", "held again"]


def test_settle_says_when_its_timeout_ran_out():
    finisher, release = Finisher(), threading.Event()
    finisher.run(release.wait)
    assert not finisher.settle(timeout=0.1)
    release.set()
    assert finisher.settle(timeout=30)


def test_a_job_that_waits_for_the_next_call_begins_when_it_begins_or_a_while_after(monkeypatch):
    finisher, done = Finisher(), []
    finisher.run(lambda: done.append("after the call began"), wait_for_next_call=True)
    time.sleep(0.3)
    assert done == [], "nothing takes the GIL or a core from the stop's answer"
    finisher.begin()
    assert finisher.settle(timeout=30) and done == ["after the call began"]

    monkeypatch.setattr(finishing, "WAIT_FOR_NEXT_CALL_S", 0.2)
    began = time.monotonic()
    finisher.run(lambda: done.append("no call came"), wait_for_next_call=True)
    while not done[1:] and time.monotonic() - began < 30:
        time.sleep(0.02)
    assert done[1:] == ["no call came"] and time.monotonic() - began >= 0.2


def test_settle_begins_the_jobs_that_wait_for_the_next_call(monkeypatch):
    monkeypatch.setattr(finishing, "WAIT_FOR_NEXT_CALL_S", 600.0)
    finisher, done = Finisher(), []
    finisher.run(lambda: done.append("waited"), wait_for_next_call=True)
    began = time.monotonic()
    assert finisher.settle(timeout=60) and done == ["waited"]
    assert time.monotonic() - began < 60, "without waiting WAIT_FOR_NEXT_CALL_S"


def test_a_name_taken_by_a_file_not_written_yet_is_not_given_twice(tmp_path):
    finisher = Finisher()
    first = finisher.unused_path(tmp_path / "w.rank0.step3.train.1.pt.trace.json")
    second = finisher.unused_path(tmp_path / "w.rank0.step3.train.1.pt.trace.json")
    assert (first.name, second.name) == ("w.rank0.step3.train.1.pt.trace.json", "w.rank0.step3.train.1.1.pt.trace.json")
    finisher.written(first)
    assert finisher.unused_path(tmp_path / first.name) == first, "released, and never written: free again"


def test_the_interpreter_exits_only_once_its_jobs_are_done(tmp_path):
    target = tmp_path / "finished.txt"
    program = Path(__file__).parent / "programs" / "exit_with_a_job_left.py"
    done = subprocess.run([sys.executable, str(program), str(target)], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert target.read_text() == "finished", "a daemon thread's job would be cut off at exit without the settle"


@pytest.mark.skipif(not hasattr(os, "fork"), reason="fork")
def test_a_forked_child_does_not_wait_for_its_parents_jobs():
    finisher, release = Finisher(lifecycle=Lifecycle()), threading.Event()
    finisher.run(release.wait)
    pid = os.fork()
    if pid == 0:  # the child: no job of its own, so nothing to wait for
        os._exit(0 if finisher.settle(timeout=10) and not finisher.pending else 1)
    try:
        _, status = os.waitpid(pid, 0)
    finally:
        release.set()
    assert os.waitstatus_to_exitcode(status) == 0
    assert finisher.settle(timeout=30)


# --- a torch window's stop -------------------------------------------------------------------------------------


def manifest_lines(directory: Path) -> list[dict]:
    return [json.loads(line) for path in (directory / ".nrlprof").glob("manifest-*.jsonl")
            for line in path.read_text().splitlines()]  # fmt: skip


@pytest.fixture
def finisher_held():
    """The process's finisher busy with a job that waits for the test: what is handed over after it waits too."""
    release = threading.Event()
    FINISHER.run(release.wait)
    yield release
    release.set()
    assert FINISHER.settle(timeout=60)


def test_a_workers_stop_answers_before_its_trace_is_written_and_the_record_follows_the_file(tmp_path, finisher_held):
    process = torch_process(tmp_path)
    (answered,) = window(process)
    (path,) = answered["files"]
    trace = Path(path)
    assert answered["status"] == "ok" and answered["steps"] == [2, 3]
    assert not [p for p in tmp_path.rglob("*") if p.is_file()], "the stop in the step is the profiler's stop only"

    finisher_held.set()
    assert FINISHER.settle(timeout=60)
    names = {e.get("name") for e in json.loads(trace.read_text())["traceEvents"]}
    assert {"policy.train.2", "policy.train.3", "ProfilerStep#2", "ProfilerStep#3"} <= names
    (record,) = manifest_lines(tmp_path)
    assert (record["status"], record["files"], record["steps"]) == ("ok", [path], [2, 3])
    assert record["finish_ms"] > 0 and record["stop_ms"] > 0
    assert not list(trace.parent.glob(".*.partial"))


def test_the_controllers_export_too_waits_for_the_step_after(tmp_path, finisher_held):
    process = torch_process(tmp_path, controller=True)
    (answered,) = window(process)
    (path,) = answered["files"]
    assert not list(Path(path).parent.glob(".*")), "the controller's stop in the step is the profiler's stop only"
    finisher_held.set()
    assert FINISHER.settle(timeout=60)
    assert "policy.train.3" in {e.get("name") for e in json.loads(Path(path).read_text())["traceEvents"]}
    (record,) = manifest_lines(tmp_path)
    assert record["worker"] == "controller" and record["status"] == "ok"


def test_a_trace_directory_removed_since_the_last_window_is_made_again(tmp_path):
    process = torch_process(tmp_path)
    (first,) = window(process)
    assert FINISHER.settle(timeout=60)
    shutil.rmtree(Path(first["files"][0]).parent)
    (second,) = window(process)
    assert FINISHER.settle(timeout=60)
    (path,) = second["files"]
    assert "policy.train.3" in {e.get("name") for e in json.loads(Path(path).read_text())["traceEvents"]}
    assert [r["status"] for r in manifest_lines(tmp_path)] == ["ok", "ok"]


def test_a_settle_action_waits_for_the_files_of_the_windows_stopped_before(tmp_path):
    process = torch_process(tmp_path, gzip_traces=True)
    (answered,) = window(process)
    process.apply((Action(TORCH, SETTLE),))
    (path,) = answered["files"]
    assert path.endswith(".pt.trace.json.gz")
    with gzip.open(path) as compressed:
        assert "policy.train.2" in {e.get("name") for e in json.load(compressed)["traceEvents"]}
    assert [r["files"] for r in manifest_lines(tmp_path)] == [[path]]


def test_a_trace_that_cannot_be_finished_is_kept_as_torch_wrote_it_and_the_record_says_error(
    tmp_path, monkeypatch, caplog
):
    def disk_full(exported: Path, target: Path, compress: bool) -> int:
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(torch_profiler, "_write_valid", disk_full)
    process = torch_process(tmp_path, gzip_traces=True)
    (answered,) = window(process)
    assert FINISHER.settle(timeout=60)
    (record,) = manifest_lines(tmp_path)
    (kept,) = record["files"]
    assert record["status"] == "error" and "No space left on device" in record["message"]
    assert kept == answered["files"][0].removesuffix(".gz") and f"kept as {kept}" in record["message"]
    assert "policy.train.3" in {e.get("name") for e in json.loads(Path(kept).read_text())["traceEvents"]}
    assert "could not be written" in caplog.text


def test_two_captures_of_one_call_name_in_one_step_get_two_files(tmp_path, finisher_held):
    steps = StepSelection((Window(2, 3),))
    backend_plan = BackendPlan(TORCH, (Target("*", discrete=True),), steps)
    plan = Plan(backends=(backend_plan,), torch=TorchSettings(directory=str(tmp_path)))
    identity = WorkerIdentity("PolicyWorker", None, 0, explicit_name="policy")
    process = ProcessProfiler(ProcessRole(identity, plan, None), {TORCH: Target("*", discrete=True)}, OpenWindows())
    process.apply((Action(TORCH, START, 2, 3, 2),))
    for _ in range(2):
        assert process.begin_call("train", None)
        torch.ones(8) + 1
        process.end_call()
    (answered,) = [record.as_dict() for record in process.apply((Action(TORCH, STOP),)).records]
    finisher_held.set()
    assert FINISHER.settle(timeout=60)
    assert len(set(answered["files"])) == 2 and all(Path(f).exists() for f in answered["files"])


def test_a_process_that_exits_right_after_a_stop_leaves_the_trace_and_its_record(tmp_path):
    program = str(Path(__file__).parent / "programs" / "exit_after_a_stop.py")
    done = subprocess.run([sys.executable, program, str(tmp_path)], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    path = done.stdout.split()[-1]
    assert "policy.train.2" in {e.get("name") for e in json.loads(Path(path).read_text())["traceEvents"]}
    assert [r["files"] for r in manifest_lines(tmp_path)] == [[path]]
