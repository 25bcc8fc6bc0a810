"""The torch backend in one process with the real torch profiler: metadata Kineto keeps valid, steps, threads."""

from __future__ import annotations

import json
import threading
from pathlib import Path

import torch

from nrlprof.backends.base import ProcessRole
from nrlprof.backends.torch_profiler import TorchBackend
from nrlprof.config.plan import TORCH, BackendPlan, Plan, Target, TorchSettings
from nrlprof.config.steps import StepSelection, Window
from nrlprof.workers.identity import WorkerIdentity


def backend_for(name: str, directory) -> TorchBackend:
    steps = StepSelection((Window(2, 3),))
    backend_plan = BackendPlan(TORCH, (Target("*"),), steps)
    plan = Plan(backends=(backend_plan,), torch=TorchSettings(directory=str(directory)))
    role = ProcessRole(WorkerIdentity("PolicyWorker", None, 0, explicit_name=name), plan, None)
    return TorchBackend(backend_plan, role, Target("*"))


def test_worker_names_with_quotes_backslashes_and_non_ascii_keep_the_trace_valid_json(tmp_path):
    backend = backend_for('pol"icy\\wörker\nx', tmp_path)
    backend.start_window(Window(2, 3), 2)
    torch.ones(8) + 1
    backend.mark_step(3)
    record = backend.stop_window()
    (path,) = record.files
    trace = json.loads(Path(path).read_text())
    assert trace["nrlprof"]["worker"] == "pol_icy_w_rker_x"
    assert trace["nrlprof"]["steps"] == [2, 3]


def test_a_window_records_ops_of_other_threads_and_only_its_steps(tmp_path):
    backend = backend_for("policy", tmp_path)
    backend.prepare_window(Window(2, 3))
    with torch.profiler.record_function("warm-up work"):
        torch.ones(8) + 1
    backend.start_window(Window(2, 3), 2)

    def other_thread_work() -> None:
        with torch.profiler.record_function("other thread"):
            torch.ones(8) + 1

    worker = threading.Thread(target=other_thread_work)
    with torch.profiler.record_function("step two work"):
        worker.start()
        worker.join()
    backend.mark_step(3)
    (path,) = backend.stop_window().files
    names = {e.get("name") for e in json.loads(Path(path).read_text())["traceEvents"]}
    assert {"ProfilerStep#2", "ProfilerStep#3", "step two work", "other thread"} <= names
    assert "warm-up work" not in names, "the warm-up step before the window is not recorded"


def test_each_lost_thread_warning_is_logged_once_and_neither_hides_the_other(monkeypatch):
    """Memory profiling turns profile_all_threads off; a torch without it cannot turn it on: two warnings."""
    import logging

    from torch._C import _profiler

    from nrlprof.backends import torch_profiler

    records: list[str] = []
    handler = logging.Handler()
    handler.emit = lambda record: records.append(record.getMessage())
    monkeypatch.setattr(torch_profiler, "_WARNED", set())
    torch_profiler.logger.addHandler(handler)
    try:
        assert torch_profiler._experimental_config(profile_memory=False) is not None  # torch 2.13 has it
        assert records == []
        for _ in range(2):
            assert torch_profiler._experimental_config(profile_memory=True).trace_only  # no all-threads; still a config

        def no_all_threads(**options):
            raise TypeError("unexpected keyword argument 'profile_all_threads'")

        monkeypatch.setattr(_profiler, "_ExperimentalConfig", no_all_threads)
        for _ in range(2):
            assert torch_profiler._experimental_config(profile_memory=False) is None
    finally:
        torch_profiler.logger.removeHandler(handler)
    assert [r.split(":")[0] for r in records] == [
        "NRL_TORCH_PROFILE_MEMORY is on",
        "this torch profiler records only the thread that starts a window (no profile_all_threads)",
    ]


def test_torch_builds_no_python_events_at_stop_unless_stacks_need_them(monkeypatch):
    """trace_only: a third of torch's stop is building events nrlprof never reads; with_stack needs them, and a
    torch without trace_only still records every thread."""
    from torch._C import _profiler

    from nrlprof.backends import torch_profiler

    real = _profiler._ExperimentalConfig
    asked: list[dict] = []
    knows_trace_only = True

    def recorded(**options):
        if "trace_only" in options and not knows_trace_only:
            raise TypeError("unexpected keyword argument 'trace_only'")
        asked.append(options)
        return real(**options)

    monkeypatch.setattr(torch_profiler, "_WARNED", set())
    monkeypatch.setattr(_profiler, "_ExperimentalConfig", recorded)

    def options(profile_memory: bool, with_stack: bool = False) -> dict | None:
        asked.clear()
        config = torch_profiler._experimental_config(profile_memory, with_stack)
        return None if config is None else asked[-1]

    assert options(False) == {"profile_all_threads": True, "trace_only": True}
    assert options(True) == {"trace_only": True}
    assert options(False, with_stack=True) == {"profile_all_threads": True}
    assert options(True, with_stack=True) is None
    knows_trace_only = False
    assert options(False) == {"profile_all_threads": True}
    assert options(True) is None
    assert real(trace_only=True).trace_only  # the option torch 2.13 reads at stop


STARTED_UP_AHEAD = """
import json, sys, torch
from nrlprof.backends import torch_profiler
from nrlprof.backends.base import ProcessRole
from nrlprof.backends.torch_profiler import TorchBackend
from nrlprof.config.plan import TORCH, BackendPlan, Plan, Target, TorchSettings
from nrlprof.config.steps import Window
from nrlprof.workers.identity import WorkerIdentity

plan = Plan(backends=(BackendPlan(TORCH, (Target("*"),), None),), torch=TorchSettings(directory=sys.argv[1]))
role = ProcessRole(WorkerIdentity("PolicyWorker", None, 0), plan, None)
backend = TorchBackend(plan.backends[0], role, Target("*"))
theirs = torch.profiler.profile()
theirs.start()
backend.ready_for_asked()
left_alone = not torch_profiler._kineto_started
theirs.stop()
backend.ready_for_asked()
started_up = torch_profiler._kineto_started and not torch_profiler.another_profiler_running()
with torch.profiler.record_function("before the window"):
    torch.ones(8) + 1
backend.start_window(Window(4, 5), 4)
with torch.profiler.record_function("in the window"):
    torch.ones(8) + 1
backend.mark_step(5)
(path,) = backend.stop_window().files
print(json.dumps({"left_alone": left_alone, "started_up": started_up, "trace": path}))
"""


def test_a_window_asked_for_finds_the_profiler_started_up_and_records_only_its_steps(tmp_path):
    """`ready_for_asked` (run before a window asked for is handed to the gate) pays Kineto's once-per-process
    start-up with an empty start and stop, so the window's first step does not; a profiler another party runs is left
    alone. A fresh process: this one's Kineto may have started already."""
    import subprocess
    import sys

    script = tmp_path / "asked.py"
    script.write_text(STARTED_UP_AHEAD)
    run = subprocess.run([sys.executable, str(script), str(tmp_path)], capture_output=True, text=True, timeout=300)
    assert run.returncode == 0, run.stderr[-3000:]
    result = json.loads(run.stdout.strip().splitlines()[-1])
    assert result["left_alone"] and result["started_up"], result
    names = {e.get("name") for e in json.loads(Path(result["trace"]).read_text())["traceEvents"]}
    assert {"ProfilerStep#4", "ProfilerStep#5", "in the window"} <= names
    assert "before the window" not in names
